#!/usr/bin/env python3
"""The Python binding's cost, measured: one iteration planned from Python against the same call from C++, and a
trainer loop in Python that plans ahead with sluice.Planner.

  PYTHONPATH=build/release/python python3 bench/python_overhead.py [--cpp-bench build/release/bench/sluice_bench]

Overhead: plan_iteration on the benchmark scenario of BM_PlanIteration (bench/assign_fixtures.hpp: LLaMA2-32B on
64 GPUs, synthetic long-tailed lengths truncated to 32K, the first 200K-token batch of seed 1, four candidates),
timed from Python and, with --cpp-bench, by Google Benchmark in C++; the target is Python within 10% of C++.
Overlap: a trainer whose step sleeps the plan's estimated iteration time, with a Planner (lookahead 2, two workers)
planning the next iterations, at 64 and 1,024 GPUs; the target is no wait for a plan after the first step.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

import sluice

CONTEXT = 32768
TOKENS_PER_64_GPUS = 200_000


def scenario(gpus):
    """The profile, candidates and batch sampler of bench/assign_fixtures.hpp for 64 or 1,024 GPUs."""
    scale = gpus // 64
    profile = sluice.Profile.bundled("llama2-32b").with_gpus(gpus)
    candidates = [f"{scale}*tp16pp1+{6 * scale}*tp8pp1", f"{4 * scale}*tp16pp1",
                  f"{2 * scale}*tp16pp1+{4 * scale}*tp8pp1", f"{3 * scale}*tp16pp1+{2 * scale}*tp8pp1"]
    dataset = sluice.LengthDataset(sluice.synthetic_lengths(count=100_000, seed=1), "synthetic").truncated(CONTEXT)
    sampler = sluice.BatchSampler(dataset, tokens_per_batch=TOKENS_PER_64_GPUS * scale, seed=1)
    return profile, candidates, sampler


def python_seconds(profile, candidates, batch, min_seconds):
    """The mean time of one plan_iteration call from Python, over at least `min_seconds`."""
    ids, lengths = batch.ids, batch.lengths
    calls, begin = 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - begin < min_seconds:
        sluice.plan_iteration(lengths, candidates, profile, ids=ids)
        calls += 1
    return (time.perf_counter() - begin) / calls


def cpp_seconds(bench, min_seconds):
    """The same call timed by Google Benchmark in C++ (BM_PlanIteration/64)."""
    output = subprocess.run([bench, "--benchmark_filter=^BM_PlanIteration/64$", "--benchmark_format=json",
                             f"--benchmark_min_time={min_seconds}"], check=True, capture_output=True, text=True).stdout
    run = json.loads(output)["benchmarks"][0]
    return run["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[run["time_unit"]]


def overhead(bench, repeats, min_seconds):
    """Python and C++ timed in alternation, so that both see the same machine load; medians over the repeats."""
    profile, candidates, sampler = scenario(64)
    batch = sampler.next()
    python, cpp = [], []
    for _ in range(repeats):
        python.append(python_seconds(profile, candidates, batch, min_seconds))
        if bench:
            cpp.append(cpp_seconds(bench, min_seconds))
    report = {"sequences": len(batch), "python_s": statistics.median(python)}
    if bench:
        ratios = [p / c for p, c in zip(python, cpp)]
        report.update(cpp_s=statistics.median(cpp), python_over_cpp=statistics.median(ratios) - 1.0)
    return report


def overlap(gpus, iterations):
    """Trains `iterations` emulated steps while a Planner plans ahead; returns the waits after the first step."""
    profile, candidates, sampler = scenario(gpus)
    source = (sampler.next() for _ in range(iterations))
    steps, waited, first_wait, step_seconds = 0, 0, 0.0, []
    with sluice.Planner(profile, candidates, source, lookahead=2, threads=2) as planner:
        for planned in planner:
            waits = planner.waits
            if planned.iteration == 0:
                first_wait = waits.last_seconds
            else:
                steps += 1
                waited += waits.last_seconds > 0
            step_seconds.append(planned.plan.total)
            time.sleep(planned.plan.total)  # the training step
        seconds_after_first = planner.waits.seconds - first_wait
    return {"gpus": gpus, "steps": iterations, "mean_step_s": statistics.mean(step_seconds),
            "first_wait_s": first_wait, "waited_steps_after_first": waited, "wait_s_after_first": seconds_after_first}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpp-bench", help="the sluice_bench program, to time the same call from C++")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-seconds", type=float, default=0.5)
    parser.add_argument("--overlap-iterations", type=int, default=8, help="0 skips the overlap measurement")
    arguments = parser.parse_args()

    report = {"plan_iteration_64_gpus": overhead(arguments.cpp_bench, arguments.repeats, arguments.min_seconds)}
    if arguments.overlap_iterations > 0:
        report["overlap"] = [overlap(gpus, arguments.overlap_iterations) for gpus in (64, 1024)]
    json.dump(report, sys.stdout, indent=2)
    print()
    if arguments.cpp_bench and report["plan_iteration_64_gpus"]["python_over_cpp"] > 0.10:
        sys.exit("python_overhead: planning from Python is more than 10% slower than from C++")


if __name__ == "__main__":
    main()
