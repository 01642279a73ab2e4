#!/usr/bin/env python3
"""The PyTorch equivalents of sluice_executor_bench, on the same shapes and GPU, in one run.

Runs sluice_executor_bench (its JSON output), then the same work in PyTorch, and prints sluice / PyTorch per figure:

  attention   one causal sequence of 4K, 16K and 32K tokens, 32 heads x 128, bf16, forward + backward, through
              scaled_dot_product_attention with each backend that runs it (FLASH = FlashAttention-2, CUDNN, EFFICIENT);
              TFLOP/s counted as the bench counts them (7 * tokens^2 * hidden)
  varlen      the same over 16K and 64K tokens packed from BM_AttentionVarlen's mix of sequence lengths, through
              torch.nn.attention.varlen.varlen_attn (FlashAttention-2 over cu_seqlens) and through
              scaled_dot_product_attention on jagged nested tensors with each backend that runs it
  gemm        bf16 8192^3 matmul with fp32 accumulation on random data; TFLOP/s = 2 n^3 / time (paired with the bench's
              cublasGemmEx, cuBLASLt's first algorithm and its heuristic's first 8 one by one); and the 12 products
              of one LLaMA-7B-shaped layer's forward and backward on 8192 tokens (y = x W, dx = dy W^T, dW = x^T dy
              for QKV, attention output, gate|up and down), dW in bf16 as autograd computes it; the bench's
              BM_GemmLayer runs them as the executor does, dW accumulated in fp32 (and in bf16 beside it)
  layers      forward + backward of 4 LLaMA-7B-shaped decoder layers (hidden 4096, 32 heads, SwiGLU 11008; RMSNorm,
              rotary embedding, causal attention within each 2048-token sequence) on 8192 and 16384 tokens, eager and
              torch.compile; tokens/s
  loss        cross-entropy over a 32,000-word vocabulary on 8192 tokens of bf16 logits, forward + backward (the
              softmax in fp32, the logits' gradient in bf16), eager and torch.compile; GB/s of two reads of the
              logits and one write of their gradient, as the bench's BM_CrossEntropy counts them

PyTorch is needed only here, on the GPU machine; sluice never builds against it. Times are CUDA-event times taken as
Google Benchmark takes the bench's: after warm-up, runs back to back for --min-time seconds (default 0.5, the bench's
default minimum time) and their mean, the median of --repetitions such windows: a few runs alone would time the GPU
at its boost clock, and the bench at the clock it sustains.

  scripts/compare-torch.py [--bench build/release/reference_executor/sluice_executor_bench] [--repetitions 5]
                           [--min-time 0.5] [--json compare-torch.json] [--only attention,varlen,gemm,layers,loss]
                           [--bench-json [LABEL=]REPORT ...]

--bench-json reads reports the bench already wrote (--benchmark_out, JSON) instead of running it; the rows of a
report given as LABEL=REPORT are labelled "LABEL ..." (a build with other attention kernels, say).
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

ATTENTION_TOKENS = (4096, 16384, 32768)
VARLEN_TOKENS = (16384, 65536)
# BM_AttentionVarlen's sequence lengths, repeated (the last cut) up to the token count.
VARLEN_LENGTHS = (4096, 1024, 256, 2048, 512, 128, 3072, 768, 1536, 384, 2560)
GEMM_N = 8192
GEMM_LT_RANKS = 8  # BM_GemmLtRanked's algorithms, by the rank cuBLASLt's heuristic gives them
GEMM_LAYER_TOKENS = 8192
LAYER_TOKENS = (8192, 16384)
LOSS_TOKENS, LOSS_VOCAB = 8192, 32000
HEADS, HEAD_DIM = 32, 128
HIDDEN = HEADS * HEAD_DIM
FFN = 11008
LAYERS = 4
SEQUENCE = 2048
MIN_SECONDS = 0.5  # Google Benchmark's default --benchmark_min_time, which the bench runs with
MAX_RUNS = 100000  # a window's cap, should a run report no time
Timing = collections.namedtuple("Timing", "repetitions min_seconds")


def attention_flops(tokens):
    return 7.0 * tokens * tokens * HIDDEN


def varlen_lengths(tokens):
    lengths, total = [], 0
    while total < tokens:
        lengths.append(min(VARLEN_LENGTHS[len(lengths) % len(VARLEN_LENGTHS)], tokens - total))
        total += lengths[-1]
    return lengths


def run_bench(bench, repetitions):
    """The bench's median per benchmark name: {name: {"seconds": s, counter: value}}."""
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "bench.json")
        subprocess.run([bench, f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"], check=True,
                       stdout=subprocess.DEVNULL)
        with open(out) as f:
            report = json.load(f)
    return bench_medians(report)


def bench_medians(report):
    """Google Benchmark's JSON report reduced to each benchmark's median: seconds per iteration and counters."""
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    medians = {}
    for entry in report["benchmarks"]:
        if entry.get("aggregate_name", "median") != "median" or entry.get("error_occurred"):
            continue
        name = entry.get("run_name", entry["name"])
        figures = {"seconds": entry["real_time"] * scale[entry["time_unit"]]}
        for counter in ("TFLOP/s", "tokens/s", "GB/s"):
            if counter in entry:
                figures[counter] = entry[counter]
        medians[name] = figures
    return medians


def sustained(time_one, repetitions, min_seconds):
    """The median over `repetitions` windows of the mean time of runs done back to back until their times add up to
    `min_seconds`: as Google Benchmark takes the bench's manual times (iterations until --benchmark_min_time, their
    mean). A few runs alone time the GPU at its boost clock, runs kept up for seconds at the clock it sustains under
    its power limit, so both sides are timed the same way."""
    means = []
    for _ in range(repetitions):
        total, runs = 0.0, 0
        while total < min_seconds and runs < MAX_RUNS:
            total += time_one()
            runs += 1
        means.append(total / runs)
    return statistics.median(means)


def timed(torch, work, timing, warmup=3):
    """CUDA-event seconds of work(), sustained() over timing's windows after `warmup` untimed runs."""
    for _ in range(warmup):
        work()
    torch.cuda.synchronize()

    def time_one():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3

    return sustained(time_one, timing.repetitions, timing.min_seconds)


def torch_attention(torch, timing):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    figures = {}
    for tokens in ATTENTION_TOKENS:
        generator = torch.Generator(device="cuda").manual_seed(tokens)
        shape = (1, HEADS, tokens, HEAD_DIM)
        q, k, v, dout = (torch.rand(shape, device="cuda", generator=generator, dtype=torch.bfloat16) * 2 - 1
                         for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        for name, backend in backends.items():
            def work():
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                out.backward(dout)
            try:
                seconds = timed(torch, work, timing)
            except RuntimeError as error:  # the backend does not run this shape on this GPU
                print(f"  attention {tokens} {name}: not run ({str(error).splitlines()[0]})", file=sys.stderr)
                continue
            figures[f"attention/{tokens}/{name}"] = {"seconds": seconds,
                                                     "TFLOP/s": attention_flops(tokens) / seconds * 1e-12}
        q = k = v = dout = None  # freed before the next size (del would leave the closures' names undefined)
        torch.cuda.empty_cache()
    return figures


def torch_varlen(torch, timing):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    figures = {}
    for tokens in VARLEN_TOKENS:
        lengths = varlen_lengths(tokens)
        flops = 7.0 * HIDDEN * sum(length * length for length in lengths)
        generator = torch.Generator(device="cuda").manual_seed(tokens)
        q, k, v, dout = (torch.rand((tokens, HEADS, HEAD_DIM), device="cuda", generator=generator,
                                    dtype=torch.bfloat16) * 2 - 1 for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        offsets = torch.tensor([0] + lengths, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
        longest = max(lengths)

        def packed():
            from torch.nn.attention.varlen import varlen_attn
            try:
                return varlen_attn(q, k, v, offsets, offsets, longest, longest, is_causal=True)
            except TypeError:  # later releases express the causal mask as a window
                return varlen_attn(q, k, v, offsets, offsets, longest, longest, window_size=(-1, 0))

        def jagged(backend):
            def run():
                nested = [torch.nested.nested_tensor_from_jagged(t, offsets.long()).transpose(1, 2)
                          for t in (q, k, v)]
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(*nested, is_causal=True)
                return out.transpose(1, 2).values()
            return run

        variants = {"varlen_attn": packed, "jagged_flash": jagged(SDPBackend.FLASH_ATTENTION),
                    "jagged_cudnn": jagged(SDPBackend.CUDNN_ATTENTION),
                    "jagged_efficient": jagged(SDPBackend.EFFICIENT_ATTENTION)}
        for name, forward in variants.items():
            try:
                seconds = timed(torch, lambda: forward().backward(dout), timing)
            except (RuntimeError, ImportError, TypeError) as error:  # not in this release, or not for this shape
                print(f"  varlen {tokens} {name}: not run ({str(error).splitlines()[0]})", file=sys.stderr)
                continue
            figures[f"varlen/{tokens}/{name}"] = {"seconds": seconds, "TFLOP/s": flops / seconds * 1e-12}
        q = k = v = dout = None  # freed before the next size (del would leave the closures' names undefined)
        torch.cuda.empty_cache()
    return figures


def torch_gemm(torch, timing):
    generator = torch.Generator(device="cuda").manual_seed(GEMM_N)
    a, b = (torch.rand((GEMM_N, GEMM_N), device="cuda", generator=generator, dtype=torch.bfloat16) * 2 - 1
            for _ in range(2))
    seconds = timed(torch, lambda: torch.matmul(a, b), timing)
    return {f"gemm/{GEMM_N}": {"seconds": seconds, "TFLOP/s": 2.0 * GEMM_N ** 3 / seconds * 1e-12}}


def layer_products():
    """(n, k) of one decoder layer's projections y[tokens x n] = x[tokens x k] W[k x n], as BM_GemmLayer has them."""
    return [(3 * HIDDEN, HIDDEN), (HIDDEN, HIDDEN), (2 * FFN, HIDDEN), (HIDDEN, FFN)]


def gemm_layer_flops(tokens):
    """Forward and both backward products of every projection: 3 * 2 * tokens * n * k each."""
    return sum(6.0 * tokens * n * k for n, k in layer_products())


def torch_gemm_layer(torch, timing):
    tokens = GEMM_LAYER_TOKENS
    generator = torch.Generator(device="cuda").manual_seed(tokens)

    def uniform(*shape):
        return torch.rand(shape, device="cuda", generator=generator, dtype=torch.bfloat16) * 2 - 1

    operands = [(uniform(tokens, k), uniform(k, n), uniform(tokens, n)) for n, k in layer_products()]

    def work():
        for x, w, _ in operands:
            torch.matmul(x, w)
        for x, w, dy in operands:
            torch.matmul(dy, w.t())
            torch.matmul(x.t(), dy)

    seconds = timed(torch, work, timing)
    return {f"gemm_layer/{tokens}": {"seconds": seconds, "TFLOP/s": gemm_layer_flops(tokens) / seconds * 1e-12}}


def decoder_layers(torch):
    """LLaMA's decoder layer as the executor runs it: RMSNorm, fused QKV, rotary embedding (rotate_half), causal
    attention within each sequence, output projection and residual; RMSNorm, SwiGLU (fused gate | up), down
    projection and residual. bf16 parameters, no biases."""
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(HIDDEN))

        def forward(self, x):
            x32 = x.float()
            return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * self.weight

    def rotate(x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm = RMSNorm()
            self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
            self.output = nn.Linear(HIDDEN, HIDDEN, bias=False)
            self.mlp_norm = RMSNorm()
            self.gate_up = nn.Linear(HIDDEN, 2 * FFN, bias=False)
            self.down = nn.Linear(FFN, HIDDEN, bias=False)

        def forward(self, x, cos, sin):
            batch, length, _ = x.shape
            q, k, v = self.qkv(self.attention_norm(x)).view(batch, length, 3, HEADS, HEAD_DIM).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (rotate(q, cos, sin), rotate(k, cos, sin), v))
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.output(attended.transpose(1, 2).reshape(batch, length, HIDDEN))
            gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
            return x + self.down(F.silu(gate) * up)

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
            positions = torch.arange(SEQUENCE, dtype=torch.float64)
            inverse = 10000.0 ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
            angles = torch.outer(positions, inverse).repeat(1, 2)  # [SEQUENCE, HEAD_DIM], rotate_half's pairing
            self.register_buffer("cos", angles.cos()[:, None, :].to(torch.bfloat16), persistent=False)
            self.register_buffer("sin", angles.sin()[:, None, :].to(torch.bfloat16), persistent=False)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x, self.cos, self.sin)
            return x

    return Stack().to(device="cuda", dtype=torch.bfloat16)


def torch_layers(torch, timing):
    figures = {}
    eager = decoder_layers(torch)
    compiled = torch.compile(eager)
    for tokens in LAYER_TOKENS:
        generator = torch.Generator(device="cuda").manual_seed(tokens)
        shape = (tokens // SEQUENCE, SEQUENCE, HIDDEN)
        x = (torch.rand(shape, device="cuda", generator=generator, dtype=torch.bfloat16) * 2 - 1).requires_grad_(True)
        dout = torch.rand(shape, device="cuda", generator=generator, dtype=torch.bfloat16) * 2 - 1
        for name, model in (("eager", eager), ("compiled", compiled)):
            seconds = timed(torch, lambda: model(x).backward(dout), timing)
            figures[f"layers/{tokens}/{name}"] = {"seconds": seconds, "tokens/s": tokens / seconds}
        x = dout = None
        torch.cuda.empty_cache()
    return figures


def loss_bytes(tokens, vocab):
    """Two reads of bf16 logits and one write of their gradient: the least a fused cross-entropy moves."""
    return 3.0 * 2 * tokens * vocab


def torch_loss(torch, timing):
    import torch.nn.functional as F

    def loss(logits, targets):
        return F.cross_entropy(logits.float(), targets)

    generator = torch.Generator(device="cuda").manual_seed(LOSS_TOKENS)
    logits = (torch.randn((LOSS_TOKENS, LOSS_VOCAB), device="cuda", generator=generator) * 2).to(torch.bfloat16)
    logits.requires_grad_(True)
    targets = torch.randint(LOSS_VOCAB, (LOSS_TOKENS,), device="cuda", generator=generator)
    figures = {}
    for name, function in (("eager", loss), ("compiled", torch.compile(loss))):
        def work():
            logits.grad = None
            function(logits, targets).backward()
        seconds = timed(torch, work, timing)
        figures[f"loss/{LOSS_TOKENS}/{name}"] = {"seconds": seconds,
                                                 "GB/s": loss_bytes(LOSS_TOKENS, LOSS_VOCAB) / seconds * 1e-9}
    return figures


def write_output(path, text):
    """As sluice writes its outputs: a file whole (a temporary renamed over it), through a symbolic link to its
    target, a FIFO or a device directly."""
    target = os.path.realpath(path)
    if os.path.exists(target) and not os.path.isfile(target):
        with open(target, "w") as f:
            f.write(text)
        return
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(target), delete=False) as f:
        staged = f.name
        try:
            f.write(text)
        except BaseException:
            os.unlink(staged)
            raise
    os.chmod(staged, os.stat(target).st_mode & 0o7777 if os.path.exists(target) else 0o644)
    os.replace(staged, target)


def read_bench_reports(specifications):
    """[(label, medians)] of the reports named LABEL=PATH or PATH (label "")."""
    reports = []
    for specification in specifications:
        label, _, path = specification.rpartition("=")
        with open(path) as f:
            reports.append((label, bench_medians(json.load(f))))
    return reports


def ratios(sluice, torch_figures):
    """(figure, sluice value, PyTorch value, unit, sluice / PyTorch) rows, matching the bench's names."""
    rows = []
    pairs = []
    # The wmma attention kernels (the fallback), then the mma ones, the executor's default (rows labelled "mma ...").
    for kernel, single, varlen in (("", "BM_AttentionForwardBackward", "BM_AttentionVarlen"),
                                   ("mma ", "BM_AttentionMma", "BM_AttentionMmaVarlen")):
        pairs += [(f"{single}/{t}/manual_time", f"attention/{t}/{b}", "TFLOP/s", kernel)
                  for t in ATTENTION_TOKENS for b in ("flash", "cudnn", "efficient")]
        pairs += [(f"{varlen}/{t}/manual_time", f"varlen/{t}/{v}", "TFLOP/s", kernel)
                  for t in VARLEN_TOKENS for v in ("varlen_attn", "jagged_flash", "jagged_cudnn", "jagged_efficient")]
    pairs.append((f"BM_Gemm/{GEMM_N}/manual_time", f"gemm/{GEMM_N}", "TFLOP/s", ""))
    pairs.append((f"BM_GemmLt/{GEMM_N}/manual_time", f"gemm/{GEMM_N}", "TFLOP/s", "cublaslt "))
    pairs += [(f"BM_GemmLtRanked/{GEMM_N}/{rank}/manual_time", f"gemm/{GEMM_N}", "TFLOP/s", f"cublaslt #{rank} ")
              for rank in range(GEMM_LT_RANKS)]
    pairs.append((f"BM_GemmLayer/{GEMM_LAYER_TOKENS}/1/manual_time", f"gemm_layer/{GEMM_LAYER_TOKENS}", "TFLOP/s", ""))
    pairs.append((f"BM_GemmLayer/{GEMM_LAYER_TOKENS}/0/manual_time", f"gemm_layer/{GEMM_LAYER_TOKENS}", "TFLOP/s",
                  "bf16 dW "))
    pairs += [(f"BM_LayerStack/{t}/manual_time", f"layers/{t}/{m}", "tokens/s", "")
              for t in LAYER_TOKENS for m in ("eager", "compiled")]
    pairs += [(f"BM_CrossEntropy/{LOSS_TOKENS}/1/manual_time", f"loss/{LOSS_TOKENS}/{m}", "GB/s", "")
              for m in ("eager", "compiled")]
    for bench_name, torch_name, unit, kernel in pairs:
        if bench_name in sluice and torch_name in torch_figures and unit in sluice[bench_name]:
            ours, theirs = sluice[bench_name][unit], torch_figures[torch_name][unit]
            rows.append((kernel + torch_name, ours, theirs, unit, ours / theirs))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", default="build/release/reference_executor/sluice_executor_bench")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=MIN_SECONDS)
    parser.add_argument("--json", default="compare-torch.json")
    parser.add_argument("--only", default="attention,varlen,gemm,layers,loss")
    parser.add_argument("--bench-json", action="append", default=[], metavar="[LABEL=]REPORT")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    if not parts <= {"attention", "varlen", "gemm", "layers", "loss"} or args.repetitions < 1 or not args.min_time > 0:
        parser.error("--only takes attention, varlen, gemm, layers and loss; --repetitions must be >= 1 and "
                     "--min-time > 0")
    timing = Timing(args.repetitions, args.min_time)

    import torch
    if not torch.cuda.is_available():
        print("compare-torch: no CUDA device", file=sys.stderr)
        return 2
    reports = (read_bench_reports(args.bench_json) if args.bench_json
               else [("", run_bench(args.bench, args.repetitions))])
    figures = {}
    if "attention" in parts:
        figures.update(torch_attention(torch, timing))
    if "varlen" in parts:
        figures.update(torch_varlen(torch, timing))
    if "gemm" in parts:
        figures.update(torch_gemm(torch, timing))
        figures.update(torch_gemm_layer(torch, timing))
    if "layers" in parts:
        figures.update(torch_layers(torch, timing))
    if "loss" in parts:
        figures.update(torch_loss(torch, timing))
    rows = [((label + " " if label else "") + name, *rest)
            for label, sluice in reports for name, *rest in ratios(sluice, figures)]
    sluice = {(label + " " if label else "") + name: value
              for label, medians in reports for name, value in medians.items()}
    device = torch.cuda.get_device_name()
    write_output(args.json, json.dumps(
        {"device": device, "torch": torch.__version__, "sluice": sluice, "pytorch": figures,
         "ratios": [{"figure": r[0], "sluice": r[1], "pytorch": r[2], "unit": r[3], "ratio": r[4]} for r in rows]},
        indent=2))
    print(f"{device}, PyTorch {torch.__version__}")
    print(f"{'figure':40} {'sluice':>12} {'PyTorch':>12} {'unit':>9} {'sluice/PyTorch':>15}")
    for name, ours, theirs, unit, ratio in rows:
        print(f"{name:40} {ours:12.1f} {theirs:12.1f} {unit:>9} {ratio:15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
