"""One process of test_runtime.py's runs: a small float64 Llama (train_llama.py's) trained a few steps, each step on
its own batch and strategy, by sluice.runtime across torchrun's processes or, with --one-process, by plain PyTorch in
one process on every sequence alone. Writes the losses and the final parameters to --out (rank 0); with --sharded,
the runtime is the optimizer and every process keeps its share of Adam's states."""
import argparse
import os
import pathlib
import sys
from datetime import timedelta

# Appended: the built sluice package on PYTHONPATH must win over the source directory examples/python/sluice.
sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sluice  # noqa: E402
import sluice.torch as st  # noqa: E402
from sluice import runtime  # noqa: E402
from train_llama import Llama, LlamaStage, synthetic_sequence  # noqa: E402

VOCAB, DIM, LAYERS, HEADS = 64, 32, 4, 4
ADAM = runtime.Adam(lr=1e-3, weight_decay=0.1, max_grad_norm=0.33)


def step_batch(step, world, count=None):
    """Step `step`'s sequences: lengths drawn from its own seed, several micro-batches' worth per pipeline (or
    `count` of them)."""
    generator = torch.Generator().manual_seed(1000 + step)
    lengths = torch.randint(50, 300, (count or 6 * world,), generator=generator).tolist()
    ids = [100 * step + i for i in range(len(lengths))]
    return ids, lengths


def plan_step(strategy, ids, lengths, profile):
    plan = sluice.plan_iteration(lengths, [strategy], profile, ids=ids)
    schedule = sluice.schedule_iteration(plan, profile, problem=sluice.ProblemOptions(hidden=DIM))
    return plan, schedule


def flex_domain(domain, lengths):
    """A flex CP domain of `domain`'s units (replicas of one ⟨TP, PP⟩ scheme) with groups of 1, 2, 4, … units:
    Ulysses at 2, the ring above; a group's compute shrinks and its overhead grows with its size, tiny against the
    profile's candidates, so that the plan runs the domain."""
    part = sluice.Strategy.parse(domain).parts[0]
    base, degrees = part.scheme, [d for d in (1, 2, 4, 8) if part.pipelines % d == 0]
    schemes = [sluice.Scheme.parse(f"tp{base.tp}" + ("" if d == 1 else f"cp{d}" + ("ulysses" if d == 2 else "ring"))
                                   + f"pp{base.pp}") for d in degrees]
    pool = [sluice.FlexCpDegree(d, sluice.QuadraticLatency(1e-12 / d, 1e-9 / d, 1e-10 * d), 150 * d)
            for d in degrees]
    return sluice.FlexDomain(schemes, sluice.FlexCpProblem(lengths, part.pipelines, base.pp, pool))


def plan_flex_step(domain, ids, lengths, profile, options):
    """The Planner's item for a batch its flex CP domain runs, and the groups of each of its micro-batches."""
    with sluice.Planner(profile, ["1*tp1pp2"], [(ids, lengths)], options, flex=domain) as planner:
        planned = next(planner)
    assert planned.simulated.runs_flex
    flex = planned.simulated.flex
    layout = [[flex.schemes[group.degree_index].cp for group in micro_batch.groups]
              for micro_batch in flex.plan.micro_batches]
    return planned, layout


def one_process_step(model, normaliser, sequences):
    """Every sequence alone through the whole model: the per-token losses summed over the iteration's targets."""
    total = 0.0
    for sequence_id, tokens in sequences.items():
        positions = torch.arange(len(tokens))
        bounds = torch.tensor([0, len(tokens)], dtype=torch.int32)

        def attend(q, k, v):
            return st.varlen_attention(q, k, v, bounds, len(tokens))

        logits = model(tokens, positions, attend)
        loss = F.cross_entropy(logits[:-1], tokens[1:], reduction="sum") / normaliser
        loss.backward()
        total += loss.item()
    return total


def die_mid_step():
    """This process ends abruptly at its second micro-batch's forward, as a crashed or killed worker would."""
    forward = runtime._Runner.forward

    def dying(self, micro_batch, *slots):
        if micro_batch == 1:
            os._exit(3)
        return forward(self, micro_batch, *slots)

    runtime._Runner.forward = dying


def record_sends():
    """Every tensor this process sends between stages: (its rows, its micro-batch's tokens here, TP rank, TP)."""
    sent = []
    post = runtime._Runner.post

    def recording(self, transfer):
        if transfer.send:
            tp = self.spec.tp
            sent.append((len(self.slots[transfer.slot]), len(self.batches[transfer.micro_batch].tokens), tp.rank,
                         tp.size))
        return post(self, transfer)

    runtime._Runner.post = recording
    return sent


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategies", required=True,
                        help="comma-separated, one per step; STRATEGY:N gives that step a batch of N sequences")
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--one-process", action="store_true")
    parser.add_argument("--sharded", action="store_true",
                        help="the runtime steps Adam on sharded states; else AdamW on the model's summed .grad")
    parser.add_argument("--die", metavar="RANK:STEP", help="that rank exits with status 3 in that step's forward")
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    try:
        train(args)
    except RuntimeError as error:
        sys.exit(f"runtime_worker: {error}")


def train(args):
    torch.manual_seed(0)
    model = Llama(VOCAB, DIM, LAYERS, HEADS).double()
    optimizer = torch.optim.AdamW(model.parameters(), lr=ADAM.lr, weight_decay=ADAM.weight_decay)
    # The bundled ⟨TP, PP⟩ schemes and those derived with CP 2 and 4 (ring, Ulysses, hybrid) and recomputation.
    profile = sluice.with_scheme_space(sluice.Profile.bundled("llama2-7b", gpus=args.world), cp=[2, 4],
                                       cp_kinds=["ring", "ulysses", "hybrid"], recompute=True)
    engine, sent = None, []
    if not args.one_process:
        sent = record_sends()
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
        engine = runtime.Runtime(model, LlamaStage, layers=LAYERS, hidden=DIM, profile=profile,
                                 adam=ADAM if args.sharded else None)
    losses, strategies, micro_batches, norms, layouts = [], [], [], [], []
    options = sluice.PlanOptions(schedule=sluice.ScheduleOptions(seed=1))
    for step, entry in enumerate(args.strategies.split(",")):
        strategy, _, count = entry.partition(":")  # STRATEGY:N: a batch of N sequences; flex=DOMAIN: a flex domain
        flex = strategy.startswith("flex=")
        ids, lengths = step_batch(step, args.world, int(count) if count else None)
        sequences = {i: synthetic_sequence(i, n, VOCAB, seed=3) for i, n in zip(ids, lengths)}
        if flex:
            domain = flex_domain(strategy[len("flex="):], lengths)
            plan, layout = plan_flex_step(domain, ids, lengths, profile, options)
            normaliser, name = sum(lengths) - len(lengths), f"{domain.strategy.name} flex"
            micro_batches.append([len(layout)])
            layouts.append(layout)
        else:
            plan, schedule = plan_step(strategy, ids, lengths, profile)
            normaliser, name = st.loss_normaliser(plan), plan.strategy.name
            micro_batches.append([len(p.micro_batches) for p in plan.pipelines])
        optimizer.zero_grad(set_to_none=True)
        if engine is not None and args.die == f"{dist.get_rank()}:{step}":
            die_mid_step()
        if engine is None:
            losses.append(one_process_step(model, normaliser, sequences))
        else:
            if flex:
                engine.flex = sluice.FlexDomains([domain])  # what this step's Planner was given
                result = engine.step(plan, sequences)
            else:
                result = engine.step(plan, sequences, schedule)
            assert result.strategy == name, (result.strategy, name)
            losses.append(result.loss)
        strategies.append(name)
        if not args.sharded:
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), ADAM.max_grad_norm)))
            optimizer.step()
    owned = []
    if args.sharded:
        engine.gather_parameters()
        owned = [None] * args.world
        dist.all_gather_object(owned, engine.optimizer_elements)
    if args.one_process or dist.get_rank() == 0:
        torch.save({"losses": losses, "strategies": strategies, "micro_batches": micro_batches, "sent": sent,
                    "norms": norms, "max_norm": ADAM.max_grad_norm, "owned": owned, "layouts": layouts,
                    "parameters": {name: p.detach() for name, p in model.named_parameters()}}, args.out)
    if not args.one_process:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
