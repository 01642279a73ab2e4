"""Trains a tiny LLaMA-style model on micro-batches planned by sluice, as a data-parallel trainer would.

Each step takes one batch of the bundled length data (sluice.BatchSampler), which a sluice.Planner plans ahead on
a worker thread for a simulated cluster (--profile, --gpus): the plan dispatches the batch across the chosen
strategy's pipelines, one per data-parallel rank, and packs each pipeline's sequences into micro-batches. This
script emulates every rank on one device: it runs each pipeline's packed micro-batches (sluice.torch) with
gradient accumulation, the per-token losses summed and divided by the iteration's normaliser, which is what the
ranks' gradients summed by an all-reduce give. --check also computes the loss of the unpacked batch (padded,
plain causal attention, no sluice) on the same weights and requires the two to agree.

Started by torchrun, the processes share the work: WORLD_SIZE = data-parallel groups × --cp. Data-parallel group g
runs the pipelines j with j mod groups = g, and its --cp processes share each micro-batch's sequences
(sluice.context_parallel: each process its CP shard of the tokens, attention by ring or Ulysses); the gradients
and the loss are then summed over every process, so each step equals the one-process run on the same plan. With
--flex-cp the processes are instead the units of one flex CP domain (FlexSP's groups per micro-batch): each step's
batch is solved by sluice.solve_flex_cp into micro-batches of CP groups of 1, 2, 4, … processes, where a group of
d holds d × --flex-capacity tokens, and each process runs its group's shard of every micro-batch it is part of. With
--pipelines the processes are the GPUs of each step's plan (sluice.runtime): every pipeline runs as planned, its
stages' layers split over its PP ranks and sharded over its TP ranks (LlamaStage below), heterogeneous pipelines side
by side and a new strategy whenever the Planner picks one; the runtime is then the optimizer, AdamW's states sharded
over the processes as Hydraulis shards them (sluice.sharded).

    PYTHONPATH=build/release/python python3 examples/python/train_llama.py --steps 4 --check
    PYTHONPATH=build/release/python python3 examples/python/train_llama.py --device cuda --dtype bfloat16 --check
    PYTHONPATH=build/release/python torchrun --nproc_per_node 4 examples/python/train_llama.py --cp 2 --check
    PYTHONPATH=build/release/python torchrun --nproc_per_node 4 examples/python/train_llama.py --flex-cp --check
    PYTHONPATH=build/release/python torchrun --nproc_per_node 4 examples/python/train_llama.py --pipelines --layers 4 --check
"""  # noqa: E501 (commands kept whole)
import os
import sys

# Run from examples/python, this directory would shadow the built sluice package with its source sluice/.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _here]

import argparse  # noqa: E402
import contextlib  # noqa: E402
import itertools  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import timedelta  # noqa: E402
from typing import Optional  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import sluice  # noqa: E402
import sluice.torch as st  # noqa: E402
from sluice import runtime  # noqa: E402
from sluice.context_parallel import (  # noqa: E402
    FlexCPGroups,
    cp_shard,
    flex_cp_work,
    ring_attention,
    ulysses_attention,
)

TOLERANCE = {"float32": 1e-5, "bfloat16": 2e-2}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # In float32 at least, whatever autocast does to the matmuls around it.
        y = x.to(torch.promote_types(x.dtype, torch.float32))
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).type_as(x)


def rotary(x, positions, theta=10000.0):
    """RoPE on x (..., T, heads, head_dim) at the given positions (..., T): packed ids restart at every sequence."""
    half = x.shape[-1] // 2
    precision = torch.promote_types(x.dtype, torch.float32)
    frequencies = theta ** (-torch.arange(half, device=x.device, dtype=precision) / half)
    angles = positions.to(precision)[..., None] * frequencies  # (..., T, half)
    cos, sin = angles.cos()[..., None, :], angles.sin()[..., None, :]
    x1, x2 = x.to(precision)[..., :half], x.to(precision)[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).type_as(x)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.attention_norm = RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        hidden = 32 * math.ceil(8 * dim / 3 / 32)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, positions, attend):
        q, k, v = self.qkv(self.attention_norm(x)).unflatten(-1, (3, self.heads, -1)).unbind(-3)
        attended = attend(rotary(q, positions), rotary(k, positions), v)
        x = x + self.out(attended.flatten(-2))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """tokens and positions (T,) packed or (B, T) padded; attend(q, k, v) is the causal attention of that layout."""

    def __init__(self, vocab, dim, layers, heads):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, positions, attend):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, positions, attend)
        return self.head(self.norm(x))


class ParallelBlock(nn.Module):
    """A Block's TP lane (sluice.runtime): the same forward on this lane's heads and FFN columns."""

    forward = Block.forward

    def __init__(self, block, tp):
        super().__init__()
        self.heads = tp.share(block.heads, "the heads")
        self.attention_norm = runtime.replicated(block.attention_norm)
        self.mlp_norm = runtime.replicated(block.mlp_norm)
        self.qkv = runtime.ColumnParallelLinear(block.qkv.weight, tp, blocks=3)
        self.out = runtime.RowParallelLinear(block.out.weight, tp)
        self.gate = runtime.ColumnParallelLinear(block.gate.weight, tp)
        self.up = runtime.ColumnParallelLinear(block.up.weight, tp)
        self.down = runtime.RowParallelLinear(block.down.weight, tp)


class LlamaStage(nn.Module):
    """One lane of one pipeline stage of a Llama (sluice.runtime's build_stage): its layers, the embedding when first,
    the final norm and the LM head when last."""

    def __init__(self, model: Llama, spec: runtime.StageSpec):
        super().__init__()
        self.embed = runtime.VocabParallelEmbedding(model.embed.weight, spec.tp) if spec.first else None
        blocks = model.blocks[spec.layer_begin : spec.layer_end]
        self.blocks = nn.ModuleList(ParallelBlock(block, spec.tp) for block in blocks)
        self.norm = runtime.replicated(model.norm) if spec.last else None
        self.head = runtime.ColumnParallelLinear(model.head.weight, spec.tp) if spec.last else None
        self.recompute = spec.recompute

    def forward(self, x, batch):
        x = self.embed(x) if self.embed is not None else x
        for block in self.blocks:
            if self.recompute:  # only the layer's input kept; its forward runs again in the backward
                x = checkpoint(block, x, batch.positions, batch.attend, use_reentrant=False)
            else:
                x = block(x, batch.positions, batch.attend)
        return self.head(self.norm(x)) if self.head is not None else x


def padded_causal_attention(q, k, v):
    """(B, T, heads, head_dim) right-padded: plain causal attention, exact for the real tokens, since the
    padding comes after them and causality hides it."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if hasattr(F, "scaled_dot_product_attention"):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(q.shape[-1])
        causal = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool, device=q.device).tril()
        out = scores.masked_fill(~causal, float("-inf")).softmax(-1).to(v.dtype) @ v
    return out.transpose(1, 2)


def synthetic_sequence(sequence_id, length, vocab, seed):
    """Tokens of one sequence, a function of its id: an arithmetic progression mod vocab, learnable from context."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + sequence_id)
    start = torch.randint(vocab, (1,), generator=generator)
    step = torch.randint(1, 8, (1,), generator=generator)
    return (start + step * torch.arange(length)) % vocab


@dataclass
class Processes:
    """This process's place in a torchrun-started run: data-parallel group `group` of `groups`, CP rank `cp_rank`
    of `cp` inside it (`cp_group`); or, with `flex`, unit `rank` of the flex CP domain whose groups `flex` holds."""

    rank: int
    world: int
    groups: int
    group: int
    cp: int
    cp_rank: int
    cp_group: object
    attention: object  # ring_attention or ulysses_attention
    flex: Optional[FlexCPGroups] = None


def flex_degrees(units):
    """The CP group sizes of a flex domain of `units` processes: 1, 2, 4, … while they divide it."""
    degrees = [1]
    while units % (2 * degrees[-1]) == 0:
        degrees.append(2 * degrees[-1])
    return degrees


def join_processes(device, timeout):
    """Joins the process group torchrun's environment describes; returns this process's device. A store or peer
    that does not answer within `timeout` seconds ends the process with an error."""
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    try:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=timedelta(seconds=timeout))
    except (RuntimeError, TimeoutError, ValueError) as error:
        sys.exit(f"train_llama.py: rank {os.environ.get('RANK')} of {os.environ.get('WORLD_SIZE')}: the process "
                 f"group did not start: {error}")
    return device


def start_processes(cp, attention_kind, device, timeout, flex):
    """The data-parallel × CP processes torchrun's environment describes (None when started alone), and this
    process's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if cp < 1 or world % cp != 0:
        sys.exit(f"--cp {cp} must be a positive divisor of the {world} processes (torchrun's WORLD_SIZE)")
    if flex and (cp != 1 or world == 1):
        sys.exit("--flex-cp forms its own CP groups of torchrun's processes: needs WORLD_SIZE >= 2 and --cp 1")
    if world == 1:
        return None, device
    device = join_processes(device, timeout)
    rank = dist.get_rank()
    attention = ring_attention if attention_kind == "ring" else ulysses_attention
    if flex:
        pool = FlexCPGroups(world, flex_degrees(world), timeout=timedelta(seconds=timeout))
        return Processes(rank=rank, world=world, groups=1, group=0, cp=1, cp_rank=0, cp_group=None,
                         attention=attention, flex=pool), device
    cp_groups = [dist.new_group(list(range(first, first + cp))) for first in range(0, world, cp)]  # on every rank
    return Processes(rank=rank, world=world, groups=world // cp, group=rank // cp, cp=cp, cp_rank=rank % cp,
                     cp_group=cp_groups[rank // cp], attention=attention), device


def micro_batch_loss(model, batch, autocast, shard=None, attention=None, group=None):
    """One packed micro-batch's loss over the iteration's normaliser, its gradient accumulated. With `shard`, this
    process's CP shard of it, attention over the shards of `group`."""
    if shard is None:
        tokens, positions, labels = batch.tokens, batch.positions, batch.labels

        def attend(q, k, v):
            return st.varlen_attention(q, k, v, batch.cu_seqlens, batch.max_seqlen)

    else:
        cu_seqlens = batch.cu_seqlens.cpu()
        tokens, positions, labels = (shard.select(t) for t in (batch.tokens, batch.positions, batch.labels))

        def attend(q, k, v):
            return attention(q, k, v, cu_seqlens, group=group)

    with autocast():
        logits = model(tokens, positions, attend)
    loss = F.cross_entropy(logits.float(), labels, ignore_index=st.IGNORE_INDEX, reduction="sum")
    (loss / batch.loss_normaliser).backward()
    return loss.item() / batch.loss_normaliser


def summed_over_processes(model, total):
    """The loss and every gradient summed over all processes (one without a micro-batch still joins every sum)."""
    for parameter in model.parameters():
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
        dist.all_reduce(parameter.grad)
    loss = torch.tensor([total], dtype=torch.float64)
    dist.all_reduce(loss)
    return float(loss[0])


def packed_step(model, planned, sequences, device, autocast, processes: Optional[Processes] = None):
    """Every pipeline's micro-batches, gradients accumulated; returns the iteration's loss.
    Across processes: this process's pipelines and CP shards, then the loss and gradients summed over all."""
    total = 0.0
    for pipeline in range(len(planned.plan.pipelines)):  # data-parallel rank `pipeline`
        if processes is not None and pipeline % processes.groups != processes.group:
            continue
        for batch in st.micro_batches(planned, sequences, pipeline=pipeline, device=device):
            if processes is None:
                total += micro_batch_loss(model, batch, autocast)
            else:
                shard = cp_shard(batch.cu_seqlens.cpu(), processes.cp, processes.cp_rank)
                total += micro_batch_loss(model, batch, autocast, shard, processes.attention, processes.cp_group)
    return total if processes is None else summed_over_processes(model, total)


def flex_problem(planned, units, capacity, attention_kind):
    """The step's flex CP problem on `units` processes: a group of d holds d × `capacity` tokens (a ring's lengths
    charged in 2·d chunks) and costs a quadratic whose compute shrinks and whose overhead grows with d."""
    degrees = [
        sluice.FlexCpDegree(d, sluice.QuadraticLatency(1e-9 / d, 1e-6 / d, 1e-4 * d), d * capacity,
                            2 * d if attention_kind == "ring" and d > 1 else 1)
        for d in flex_degrees(units)
    ]
    return sluice.FlexCpProblem(planned.lengths, units, 1, degrees)


def flex_step(model, planned, sequences, device, autocast, processes, capacity, attention_kind):
    """This process's groups of every micro-batch of the step's flex CP plan; the loss and gradients summed over all
    processes. Returns the loss and the plan's groups per micro-batch, in words."""
    problem = flex_problem(planned, processes.world, capacity, attention_kind)
    plan = sluice.solve_flex_cp(problem)
    ids = planned.ids.tolist()
    normaliser = st.loss_normaliser(planned)
    total = 0.0
    for work in flex_cp_work(problem, plan, processes.rank):
        if work is None:
            continue
        batch = st.pack(sequences, [ids[s] for s in work.sequences], loss_normaliser=normaliser, device=device)
        shard = cp_shard(batch.cu_seqlens.cpu(), work.degree, work.rank)
        total += micro_batch_loss(model, batch, autocast, shard, processes.attention, processes.flex.group(work))
    layout = " | ".join(
        "+".join(str(problem.degrees[group.degree_index].degree) for group in micro_batch.groups)
        for micro_batch in plan.micro_batches
    )
    return summed_over_processes(model, total), layout


@torch.no_grad()
def unpacked_loss(model, planned, sequences, device, autocast, chunk=16):
    """The mean next-token loss of the batch without sluice: length-sorted padded batches of `chunk` sequences."""
    ordered = sorted(planned.ids.tolist(), key=lambda i: len(sequences[i]))
    total, targets = 0.0, 0
    for start in range(0, len(ordered), chunk):
        group = [sequences[i] for i in ordered[start : start + chunk]]
        width = max(len(s) for s in group)
        tokens = torch.zeros(len(group), width, dtype=torch.int64)
        labels = torch.full((len(group), width), st.IGNORE_INDEX, dtype=torch.int64)
        for row, sequence in enumerate(group):
            tokens[row, : len(sequence)] = sequence
            labels[row, : len(sequence) - 1] = sequence[1:]
        tokens, labels = tokens.to(device), labels.to(device)
        positions = torch.arange(width, device=device).expand(len(group), width)
        with autocast():
            logits = model(tokens, positions, padded_causal_attention)
        total += F.cross_entropy(
            logits.float().flatten(0, 1), labels.flatten(), ignore_index=st.IGNORE_INDEX, reduction="sum"
        ).item()
        targets += int((labels != st.IGNORE_INDEX).sum())
    return total / targets


def default_candidates(profile):
    """Every homogeneous strategy of the profile's pipeline-parallel schemes that fills its GPUs: their pipeline
    bubbles make the plan split each rank's share into several micro-batches, which is what this example shows."""
    return [
        sluice.Strategy.homogeneous(cost.scheme, profile.gpus // cost.scheme.gpus)
        for cost in profile.schemes
        if cost.scheme.pp > 1 and profile.gpus % cost.scheme.gpus == 0
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=sorted(TOLERANCE), default="float32",
                        help="bfloat16: autocast to bfloat16 around float32 weights")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--profile", default="llama2-7b", help="the simulated cluster's profile (bundled or a path)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs of the simulated cluster")
    parser.add_argument("--candidates", nargs="+",
                        help="strategies, e.g. 2*tp1pp2+1*tp2pp2 (default: the homogeneous pipeline-parallel ones)")
    parser.add_argument("--lengths", default="man-pages", help="bundled length data (or a path)")
    parser.add_argument("--max-len", type=int, default=256, help="documents truncated to this many tokens")
    parser.add_argument("--tokens-per-batch", type=int, default=4096)
    parser.add_argument("--check", action="store_true", help="compare each step's loss with the unpacked loss")
    parser.add_argument("--cp", type=int, default=1,
                        help="context-parallel degree under torchrun: processes sharing each micro-batch")
    parser.add_argument("--cp-attention", choices=["ring", "ulysses"], default="ring")
    parser.add_argument("--flex-cp", action="store_true",
                        help="the processes form CP groups of 1, 2, 4, … per micro-batch (sluice.solve_flex_cp)")
    parser.add_argument("--flex-capacity", type=int, default=128,
                        help="with --flex-cp: tokens a group of one process holds (a group of d: d times as many)")
    parser.add_argument("--pipelines", action="store_true",
                        help="under torchrun, one process per GPU of the plans (--gpus: WORLD_SIZE): each step's "
                             "pipelines run as planned, TP, CP 2 and recomputation included (sluice.runtime)")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds a process waits for the store or a peer before it fails (under torchrun)")
    parser.add_argument("--save-gradients", metavar="PATH",
                        help="write the first step's summed gradients there (torch.save, by parameter name)")
    args = parser.parse_args(argv)

    if not 0 < args.timeout <= 86400:
        sys.exit(f"--timeout must be in (0, 86400] seconds, got {args.timeout}")
    if args.flex_capacity < 1:
        sys.exit(f"--flex-capacity must be a positive number of tokens, got {args.flex_capacity}")
    engine = None
    if args.pipelines:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world < 2 or args.cp != 1 or args.flex_cp or args.dtype != "float32" or args.save_gradients:
            sys.exit("--pipelines runs the plans' GPUs as torchrun's processes: needs WORLD_SIZE >= 2, --cp 1, no "
                     "--flex-cp, --dtype float32 and no --save-gradients (the optimizer states are sharded)")
        if "--gpus" not in (argv if argv is not None else sys.argv):
            args.gpus = world
        elif args.gpus != world:
            sys.exit(f"--pipelines: --gpus {args.gpus} must be torchrun's WORLD_SIZE ({world})")
        processes, device = None, join_processes(torch.device(args.device), args.timeout)
        leader = dist.get_rank() == 0
    else:
        processes, device = start_processes(args.cp, args.cp_attention, torch.device(args.device), args.timeout,
                                            args.flex_cp)
        leader = processes is None or processes.rank == 0

    def say(*parts, **options):
        if leader:
            print(*parts, **options)

    torch.manual_seed(args.seed)
    bf16 = args.dtype == "bfloat16"

    def autocast():
        if not bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    model = Llama(args.vocab, args.dim, args.layers, args.heads).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    profile = sluice.Profile.bundled(args.profile, gpus=args.gpus)
    if args.pipelines:  # pipelines with CP 2 (ring or Ulysses) and recomputation among the candidates too
        profile = sluice.with_scheme_space(profile, cp=[2], cp_kinds=["ring", "ulysses"], recompute=True)
    candidates = args.candidates or default_candidates(profile)
    dataset = sluice.LengthDataset.bundled(args.lengths).truncated(args.max_len)
    sampler = sluice.BatchSampler(dataset, tokens_per_batch=args.tokens_per_batch, seed=args.seed)
    say(f"model: dim {args.dim}, {args.layers} layers, {args.heads} heads, vocab {args.vocab}, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters on {device}, {args.dtype}")
    say(f"plans: {profile.name} on {profile.gpus} GPUs, {len(candidates)} candidates")
    if processes is not None and processes.flex is not None:
        say(f"processes: {processes.world} units of one flex CP domain, groups of "
            f"{', '.join(map(str, flex_degrees(processes.world)))} ({args.cp_attention} attention)")
    elif processes is not None:
        say(f"processes: {processes.world} = {processes.groups} data-parallel groups × CP {processes.cp} "
            f"({args.cp_attention} attention)")
    if args.pipelines:
        # The runtime is the optimizer (AdamW's defaults but the learning rate), its states sharded over the processes.
        adam = runtime.Adam(lr=args.lr, weight_decay=0.01)
        engine = runtime.Runtime(model, LlamaStage, layers=args.layers, hidden=args.dim, profile=profile,
                                 timeout=timedelta(seconds=args.timeout), adam=adam)
        say(f"processes: {profile.gpus}, one per GPU of each step's plan (sluice.runtime), Adam's states sharded")

    worst = 0.0
    options = sluice.PlanOptions(dispatch=sluice.DispatchOptions(seed=args.seed),
                                 schedule=sluice.ScheduleOptions(seed=args.seed))
    with sluice.Planner(profile, candidates, itertools.islice(sampler, args.steps), options) as planner:
        for planned in planner:
            started = time.perf_counter()
            sequences = {
                i: synthetic_sequence(i, length, args.vocab, args.seed)
                for i, length in zip(planned.ids.tolist(), planned.lengths.tolist())
            }
            optimizer.zero_grad(set_to_none=True)
            if engine is not None and args.check:  # the sharded masters into the model the reference runs
                engine.gather_parameters()
            reference = unpacked_loss(model, planned, sequences, device, autocast) if args.check else None
            if engine is not None:
                try:
                    loss = engine.step(planned, sequences, device=device).loss
                except RuntimeError as error:
                    sys.exit(f"train_llama.py: {error}")
            elif args.flex_cp:
                loss, layout = flex_step(model, planned, sequences, device, autocast, processes, args.flex_capacity,
                                         args.cp_attention)
            else:
                loss = packed_step(model, planned, sequences, device, autocast, processes)
            if args.save_gradients and planned.iteration == 0 and leader:
                gradients = {name: p.grad.detach().cpu() for name, p in model.named_parameters()}
                torch.save(gradients, args.save_gradients + ".partial")
                os.replace(args.save_gradients + ".partial", args.save_gradients)
            if engine is None:
                optimizer.step()
            plan = planned.plan
            shape = ", ".join(str(len(p.micro_batches)) for p in plan.pipelines)
            placed = (f"CP groups per micro-batch [{layout}]" if args.flex_cp
                      else f"{plan.strategy.name}, micro-batches per pipeline [{shape}]")
            line = (f"step {planned.iteration}: {len(sequences)} sequences, {int(planned.lengths.sum())} tokens, "
                    f"{placed}, loss {loss:.6f}")
            if reference is not None:
                error = abs(loss - reference) / abs(reference)
                worst = max(worst, error)
                line += f", unpacked {reference:.6f} (relative {error:.1e})"
            say(f"{line}, {time.perf_counter() - started:.2f} s", flush=True)
            if not np.isfinite(loss):
                sys.exit("loss is not finite")
    say(f"planning ahead: the trainer waited for {planner.waits.waited} of {planner.waits.calls} plans "
        f"({planner.waits.seconds:.3f} s)")
    if args.check:
        tolerance = TOLERANCE[args.dtype]
        if worst > tolerance:
            sys.exit(f"check failed: packed and unpacked losses differ by {worst:.2e} relative (> {tolerance:g})")
        say(f"check passed: packed equals unpacked within {worst:.1e} relative (<= {tolerance:g})")
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
