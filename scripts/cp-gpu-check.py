#!/usr/bin/env python3
"""Ring attention's FlashAttention blocks on one CUDA GPU (run by scripts/gpu-check.sh).

One GPU cannot run a CP group over NCCL (NCCL puts one rank per GPU), so this runs every rank's part of the ring
one after another in one process (sluice.context_parallel.ring_attention_serialized), as the executor serializes
ranks on one GPU:
  - check: bf16 inputs, FlashAttention's varlen kernel per block (PyTorch's own), against float32 attention of the
    unsharded sequences: output and gradients within bf16 tolerance, for CP 1, 2, 4 and 8;
  - time: the forward and backward of a long-document batch, CP 1 to 8, against one varlen call on the unsharded
    batch: what cutting the work into the ring's blocks costs on one GPU (no communication is in these times);
  - with --flex-plans: one GPU's attention work (forward and backward) under each CP plan that
    scripts/flex-cp-gpu-plans.py wrote, each group's ring timed at its degree, against the plans' predictions.
It loads sluice.torch and sluice.context_parallel from the source tree without the compiled extension, which
they do not need for this, so that a GPU machine without a build of the package runs it.
  scripts/cp-gpu-check.py [--json FILE] [--flex-plans FILE]
"""
import argparse
import json
import os
import statistics
import sys
import types

import torch
import torch.nn.functional as F

source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python", "sluice")
package = types.ModuleType("sluice")
package.__path__ = [source]
for name in ("IterationPlan", "Planned", "RankPlacement"):  # sluice.torch's type annotations only
    setattr(package, name, object)
sys.modules["sluice"] = package
import sluice.context_parallel as context_parallel  # noqa: E402

TOLERANCE = 2e-2  # bf16 operands (8 significant bits), float32 accumulation
HEADS, HEAD_DIM = 8, 128


def packed(lengths, seed, dtype):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    shape = (sum(lengths), HEADS, HEAD_DIM)
    return [torch.randn(shape, generator=generator, device="cuda", dtype=dtype) for _ in range(4)]


def inputs(lengths, seed):
    """bf16 q, k and v that take gradients, and the output's upstream gradient, for the packed sequences."""
    return [t.requires_grad_(i < 3) for i, t in enumerate(packed(lengths, seed, torch.bfloat16))]


def cu_of(lengths):
    return torch.tensor([0, *lengths], dtype=torch.int64).cumsum(0).to(torch.int32)


def unsharded(q, k, v, upstream, lengths):
    """Float32 causal attention sequence by sequence: the output and the gradients of q, k and v."""
    q, k, v = (t.float().detach().requires_grad_() for t in (q, k, v))
    outs, start = [], 0
    for length in lengths:
        rows = slice(start, start + length)
        outs.append(F.scaled_dot_product_attention(*(t[rows].transpose(0, 1) for t in (q, k, v)), is_causal=True)
                    .transpose(0, 1))
        start += length
    out = torch.cat(outs)
    (out * upstream.float()).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


def ring(q, k, v, upstream, lengths, cp):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = context_parallel.ring_attention_serialized(q, k, v, cu_of(lengths), cp)
    out.backward(upstream)
    return out.detach(), q.grad, k.grad, v.grad


def relative_error(value, expected):
    return float((value.float() - expected).norm() / expected.norm())


def check():
    lengths = [1, 7, 300, 1000, 2047, 4109]
    q, k, v, upstream = packed(lengths, 1, torch.bfloat16)
    assert isinstance(context_parallel._block_math(q), context_parallel._FlashBlocks), "no FlashAttention here"
    expected = unsharded(q, k, v, upstream, lengths)
    rows, worst = [], 0.0
    for cp in (1, 2, 4, 8):
        results = ring(q, k, v, upstream, lengths, cp)
        errors = [relative_error(value, wanted) for value, wanted in zip(results, expected)]
        worst = max(worst, *errors)
        rows.append({"cp": cp, "output": errors[0], "dq": errors[1], "dk": errors[2], "dv": errors[3]})
        print(f"check cp {cp}: relative error output {errors[0]:.2e}, dq {errors[1]:.2e}, dk {errors[2]:.2e}, "
              f"dv {errors[3]:.2e}")
    return rows, worst <= TOLERANCE


def median_ms(run, repetitions=5):
    run()  # warm-up
    times = []
    for _ in range(repetitions):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def ring_forward_backward(q, k, v, upstream, cu, cp):
    return lambda: context_parallel.ring_attention_serialized(q, k, v, cu, cp).backward(upstream)


def timing():
    lengths = [65536, 32768, 16384, 8192, 4096, 2048, 1024, 512, 256, 128]
    q, k, v, upstream = inputs(lengths, 2)
    cu = cu_of(lengths).cuda()
    scale = HEAD_DIM ** -0.5

    def whole():
        out = torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, max(lengths), max(lengths), 0.0, True, False,
                                                      scale=scale)[0]
        return out

    def whole_backward():
        out, lse, rng_state, unused, _ = torch.ops.aten._flash_attention_forward(
            q, k, v, cu, cu, max(lengths), max(lengths), 0.0, True, False, scale=scale)
        torch.ops.aten._flash_attention_backward(upstream, q, k, v, out, lse, cu, cu, max(lengths), max(lengths),
                                                 0.0, True, rng_state, unused, scale=scale)

    flops = sum(2 * 2 * length * length / 2 * HEADS * HEAD_DIM for length in lengths)  # causal forward
    rows = [{"what": "one varlen call, unsharded", "cp": 1, "forward_ms": median_ms(whole),
             "forward_backward_ms": median_ms(whole_backward)}]
    for cp in (1, 2, 4, 8):
        def forward():
            with torch.no_grad():
                context_parallel.ring_attention_serialized(q, k, v, cu, cp)

        rows.append({"what": "ring, every rank serialized", "cp": cp, "forward_ms": median_ms(forward),
                     "forward_backward_ms": median_ms(ring_forward_backward(q, k, v, upstream, cu, cp))})
    print(f"time: {sum(lengths)} tokens in {len(lengths)} sequences (longest {max(lengths)}), {HEADS} heads of "
          f"{HEAD_DIM}, bf16; causal forward {flops / 1e12:.2f} TFLOP")
    for row in rows:
        row["forward_tflops"] = flops / row["forward_ms"] / 1e9
        print(f"  {row['what']:28} cp {row['cp']}: forward {row['forward_ms']:8.2f} ms "
              f"({row['forward_tflops']:6.1f} TFLOP/s), forward+backward {row['forward_backward_ms']:8.2f} ms, "
              f"one rank's share {row['forward_backward_ms'] / row['cp']:8.2f} ms")
    return rows


def flex_plans(document):
    """Each plan's attention on one unit: per micro-batch its slowest group's share, summed over micro-batches (PP 1:
    no fill or drain). The plans' predictions are the whole model's, so only ratios between plans compare."""
    group_ms, rows = {}, []  # a group several plans form is timed once
    for plan in document["plans"]:
        micro_batches = []
        for micro_batch in plan["micro_batches"]:
            shares = []
            for group in micro_batch["groups"]:
                key = (group["degree"], tuple(group["lengths"]))
                if key not in group_ms:
                    q, k, v, upstream = inputs(group["lengths"], 3)
                    group_ms[key] = median_ms(ring_forward_backward(q, k, v, upstream, cu_of(group["lengths"]),
                                                                    group["degree"]), repetitions=3)
                # The ring's chunks give each rank the same causal work, so a unit's share is the group's / degree.
                shares.append(group_ms[key] / group["degree"])
            micro_batches.append({"share_ms": shares, "ms": max(shares),
                                  "predicted_seconds": micro_batch["predicted_seconds"]})
        rows.append({"name": plan["name"], "ms": sum(row["ms"] for row in micro_batches),
                     "predicted_seconds": plan["predicted_seconds"], "lower_bound": plan["lower_bound"],
                     "micro_batches": micro_batches})
    reference = next(row for row in rows if row["name"] == document["reference"])
    print(f"flex plans: {document['tokens']} tokens in {len(document['lengths'])} sequences, one unit's attention "
          f"(forward+backward, bf16, {HEADS} heads of {HEAD_DIM})")
    for row in rows:
        row["measured_ratio"] = row["ms"] / reference["ms"]
        row["predicted_ratio"] = row["predicted_seconds"] / reference["predicted_seconds"]
        row["measured_over_predicted"] = row["measured_ratio"] / row["predicted_ratio"]
        print(f"  {row['name']:12} {len(row['micro_batches'])} micro-batches: measured {row['ms']:9.2f} ms, "
              f"predicted {row['predicted_seconds']:8.3f} s; over {reference['name']}: measured "
              f"{row['measured_ratio']:.3f}x, predicted {row['predicted_ratio']:.3f}x "
              f"(measured/predicted {row['measured_over_predicted']:.3f})")
    return {"reference": document["reference"], "tokens": document["tokens"], "plans": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--flex-plans", help="time the CP plans of this file (scripts/flex-cp-gpu-plans.py --out)")
    arguments = parser.parse_args()
    document = None
    if arguments.flex_plans:  # read before any GPU work, so that a bad file costs none
        with open(arguments.flex_plans) as file:
            document = json.load(file)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    checks, passed = check()
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "check": checks,
              "check_passed": passed, "tolerance": TOLERANCE, "timing": timing()}
    if document is not None:
        report["flex_plans"] = {"file": arguments.flex_plans, **flex_plans(document)}
    if arguments.json:
        with open(arguments.json, "w") as file:
            json.dump(report, file, indent=2)
    print("check passed" if passed else f"check FAILED: an error above {TOLERANCE}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
