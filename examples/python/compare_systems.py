# %% [markdown]
# # Comparing systems
# Megatron-LM-style fixed-length packing, HotSPa's length ranges, DynaPipe and sluice on the same batches of the
# bundled data that `sluice simulate` uses by default, every iteration simulated (Hydraulis §8). Prints, per system,
# the median iteration time, the mean throughput and the speedup over the fixed-length baseline (Megatron-LM's
# median iteration time over the system's), and plots them when matplotlib is installed.
#
#     python3 compare_systems.py --iterations 5 --out compare_systems.png

# %%
import os
import sys

# Run from examples/python, the script's directory would put the source sluice/ (without the built extension)
# ahead of the installed package.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != HERE]

import argparse  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402

import sluice  # noqa: E402

parser = argparse.ArgumentParser(description="Megatron-LM, HotSPa, DynaPipe and sluice, simulated.")
parser.add_argument("--iterations", type=int, default=10, help="iterations to simulate (default 10)")
parser.add_argument("--gpus", type=int, default=None, help="cluster size (default: the profile's own)")
parser.add_argument("--profile", default="llama2-7b", help="bundled profile name or path (default llama2-7b)")
parser.add_argument("--lengths", default="man-pages", help="bundled length file name or path (default man-pages)")
parser.add_argument("--tokens", type=int, default=100_000, help="tokens per iteration (default 100000)")
parser.add_argument("--seed", type=int, default=0, help="sampler, dispatch and schedule seed (default 0)")
parser.add_argument("--out", default="compare_systems.png", help="the picture (default compare_systems.png)")
args = parser.parse_args()

# %% The comparison, with the stage-to-stage links `sluice simulate` assumes (100 GB/s, 10 µs) and boundary
# tensors as wide as the model's hidden size.
profile = sluice.Profile.bundled(args.profile, gpus=args.gpus)
dataset = sluice.LengthDataset.bundled(args.lengths)
hidden = json.loads(profile.to_json())["model"]["hidden"]
comparison = sluice.compare_systems(profile, dataset, tokens=args.tokens, iterations=args.iterations, seed=args.seed,
                            problem=sluice.ProblemOptions(hidden=hidden, latency=1e-5, bandwidth=100e9))
summaries = comparison.summarize()

# %% One row per system; the baseline is Megatron-LM's fixed-length packing.
baseline = comparison["megatron"]
print(f"{profile.name} on {profile.gpus} GPUs, {os.path.basename(dataset.source)}: {args.iterations} iterations of "
      f"at most {args.tokens} tokens, context {comparison.bounds[-1]}")
print(f"{'system':<12}{'median s':>10}{'tokens/s':>12}{'×megatron':>11}  configuration")
rows = []
for run in comparison.systems:
    if run.failure:
        print(f"{run.name:<12}failed: {run.failure}")
        continue
    median = float(np.median(run.seconds))
    speedup = float(np.median(baseline.seconds)) / median if not baseline.failure else float("nan")
    rows.append((run.name, median, summaries[run.name].tokens_per_second, speedup))
    print(f"{run.name:<12}{median:>10.3f}{summaries[run.name].tokens_per_second:>12.0f}{speedup:>11.3f}  "
          f"{run.configuration}")

# %% Per-iteration times and throughput, when matplotlib is there.
try:
    import matplotlib
except ImportError:
    print("matplotlib is not installed: no picture")
    sys.exit(0)
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

figure, (times, throughput) = plt.subplots(1, 2, figsize=(11, 4))
for run in comparison.systems:
    if not run.failure:
        times.plot(np.arange(len(run.seconds)), run.seconds, marker="o", label=run.name)
times.set(xlabel="iteration", ylabel="simulated seconds", title="iteration time")
times.legend()
names = [row[0] for row in rows]
bars = throughput.bar(names, [row[2] for row in rows])
throughput.bar_label(bars, labels=[f"×{row[3]:.2f}" for row in rows])
throughput.set(ylabel="tokens / s", title="throughput (label: speedup over megatron)")
figure.suptitle(f"{profile.name} on {profile.gpus} GPUs, {os.path.basename(dataset.source)}")
figure.tight_layout()
figure.savefig(args.out, dpi=120)
print(f"wrote {args.out}")
