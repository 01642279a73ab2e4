#!/usr/bin/env python3
"""Three CP plans of one long-context batch, for scripts/cp-gpu-check.py --flex-plans to time on one GPU.

One domain of 8 units (a unit is one GPU: LLaMA2-7B's tp1pp1 base, bundled profile) with ring CP of degree 1, 2, 4
and 8, one batch of real document lengths; the plans:
  - sluice: groups of mixed degrees side by side in a micro-batch (solve_flex_cp; FlexSP, Wang et al., ASPLOS'25);
  - dynamic_cp: Megatron-LM's dynamic CP, the same problem with one degree per micro-batch;
  - static_cp8: CP 8 only, the reference the GPU check compares the others with.
Each plan is written with its groups (degree, first unit, sequence lengths in packed order), its predicted seconds
per group, per micro-batch and in total, and its problem's lower bound. Needs the compiled package, not PyTorch:
  PYTHONPATH=build/release/python python3 scripts/flex-cp-gpu-plans.py --out flex-plans.json
"""
import argparse
import json
import sys

import sluice

UNITS, DEGREES = 8, (1, 2, 4, 8)


def degrees_of(profile):
    """The degrees as flex_cp_problem makes them (assign::flex_cp_problem: the CP scheme's fitted latency, its
    MaxLen as capacity, 2·R chunks of a ring), but from the schemes with full activation recomputation: without it
    LLaMA2-7B's tp1cp8ringpp1 holds 53,888 tokens, short of the 64K context, and flex_cp_problem takes no AC base."""
    degrees = []
    for degree in DEGREES:
        cost = profile.at(sluice.Scheme(1, 1, cp=degree, recompute=True))
        degrees.append(sluice.FlexCpDegree(degree, cost.latency, cost.max_len, 1 if degree == 1 else 2 * degree))
    return degrees


def described(name, problem, plan):
    """The plan's groups in the order flex_cp_work packs them (a group's sequences ascending), with the seconds it
    predicts for them (one stage's forward and backward of the whole model, not attention alone)."""
    plan.check(problem)
    micro_batches = []
    for micro_batch in plan.micro_batches:
        groups = [{"degree": problem.degrees[group.degree_index].degree, "first_unit": group.first_unit,
                   "sequences": [int(s) for s in group.sequences],
                   "lengths": [int(problem.lengths[s]) for s in group.sequences],
                   "predicted_seconds": problem.group_seconds(group)} for group in micro_batch.groups]
        micro_batches.append({"groups": groups, "predicted_seconds": problem.micro_batch_seconds(micro_batch)})
    return {"name": name, "units": problem.units, "pp": problem.pp,
            "degrees": [degree.degree for degree in problem.degrees],
            "one_degree_per_micro_batch": problem.one_degree_per_micro_batch, "micro_batches": micro_batches,
            "predicted_seconds": plan.seconds, "lower_bound": plan.lower_bound}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--dataset", default="debian-changelogs", help="bundled lengths (the long-context one)")
    parser.add_argument("--context", type=int, default=65536, help="documents truncated to this many tokens")
    parser.add_argument("--tokens", type=int, default=8 * 65536, help="at most this many tokens in the batch")
    parser.add_argument("--seed", type=int, default=1, help="the batch sampler's seed")
    arguments = parser.parse_args()

    # The batch as the planners sample one: shuffled documents, truncated as a trainer truncates them.
    dataset = sluice.LengthDataset.bundled(arguments.dataset).truncated(arguments.context)
    lengths = sluice.BatchSampler(dataset, tokens_per_batch=arguments.tokens, seed=arguments.seed).next().lengths
    profile = sluice.with_scheme_space(sluice.Profile.bundled("llama2-7b", gpus=UNITS), cp=DEGREES[1:],
                                       cp_kinds=["ring"], recompute=True)
    degrees = degrees_of(profile)
    problems = {"sluice": sluice.FlexCpProblem(lengths, UNITS, 1, degrees),
                "dynamic_cp": sluice.FlexCpProblem(lengths, UNITS, 1, degrees, one_degree_per_micro_batch=True),
                "static_cp8": sluice.FlexCpProblem(lengths, UNITS, 1, degrees[-1:])}
    plans = [described(name, problem, sluice.solve_flex_cp(problem)) for name, problem in problems.items()]
    document = {"what": "CP plans of one batch on 8 GPUs (LLaMA2-7B tp1pp1 with recomputation, ring CP "
                        f"{', '.join(map(str, DEGREES))}), seconds as the bundled profile predicts them",
                "dataset": arguments.dataset, "context": arguments.context, "seed": arguments.seed,
                "tokens": int(lengths.sum()), "lengths": [int(length) for length in lengths],
                "reference": "static_cp8", "plans": plans}
    with open(arguments.out, "w") as file:
        json.dump(document, file, indent=1)
    print(f"{len(lengths)} sequences, {document['tokens']} tokens (longest {max(lengths)}) of {arguments.dataset}")
    for plan in plans:
        print(f"  {plan['name']:10} {len(plan['micro_batches'])} micro-batches, predicted "
              f"{plan['predicted_seconds']:.3f} s (lower bound {plan['lower_bound']:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
