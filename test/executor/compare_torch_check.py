"""Checks scripts/compare-torch.py without a GPU: how it reads Google Benchmark's JSON report (medians only, errored
runs skipped, time units; reports given by file, labelled or not) and pairs the bench's figures with PyTorch's; and,
where PyTorch is installed without a CUDA device, that it exits 2 with one line.
Usage: compare_torch_check.py path/to/compare-torch.py"""
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile

spec = importlib.util.spec_from_file_location("compare_torch", sys.argv[1])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)

report = {"benchmarks": [
    {"name": "BM_Gemm/8192/manual_time_mean", "run_name": "BM_Gemm/8192/manual_time", "aggregate_name": "mean",
     "real_time": 2.0, "time_unit": "ms", "TFLOP/s": 500.0},
    {"name": "BM_Gemm/8192/manual_time_median", "run_name": "BM_Gemm/8192/manual_time", "aggregate_name": "median",
     "real_time": 1.5, "time_unit": "ms", "TFLOP/s": 700.0},
    {"name": "BM_GemmLtRanked/8192/3/manual_time_median", "run_name": "BM_GemmLtRanked/8192/3/manual_time",
     "aggregate_name": "median", "real_time": 1.25, "time_unit": "ms", "TFLOP/s": 880.0,
     "label": "algorithm 66, tile 18, stages 22"},
    {"name": "BM_GemmLayer/8192/1/manual_time_median", "run_name": "BM_GemmLayer/8192/1/manual_time",
     "aggregate_name": "median", "real_time": 20.0, "time_unit": "ms", "TFLOP/s": 600.0},
    {"name": "BM_GemmLayer/8192/0/manual_time_median", "run_name": "BM_GemmLayer/8192/0/manual_time",
     "aggregate_name": "median", "real_time": 18.0, "time_unit": "ms", "TFLOP/s": 660.0},
    {"name": "BM_LayerStack/8192/manual_time_median", "run_name": "BM_LayerStack/8192/manual_time",
     "aggregate_name": "median", "real_time": 100000.0, "time_unit": "us", "tokens/s": 81920.0},
    {"name": "BM_CrossEntropy/8192/1/manual_time_median", "run_name": "BM_CrossEntropy/8192/1/manual_time",
     "aggregate_name": "median", "real_time": 0.5, "time_unit": "ms", "GB/s": 3000.0},
    {"name": "BM_AttentionMma/4096/manual_time_median", "run_name": "BM_AttentionMma/4096/manual_time",
     "aggregate_name": "median", "real_time": 2.0, "time_unit": "ms", "TFLOP/s": 240.0},
    {"name": "BM_AttentionForwardBackward/4096/manual_time_median", "aggregate_name": "median",
     "run_name": "BM_AttentionForwardBackward/4096/manual_time", "real_time": 0, "time_unit": "ms",
     "error_occurred": True, "error_message": "no CUDA device"},
]}
medians = script.bench_medians(report)
assert sorted(medians) == ["BM_AttentionMma/4096/manual_time", "BM_CrossEntropy/8192/1/manual_time",
                           "BM_Gemm/8192/manual_time",
                           "BM_GemmLayer/8192/0/manual_time", "BM_GemmLayer/8192/1/manual_time",
                           "BM_GemmLtRanked/8192/3/manual_time",
                           "BM_LayerStack/8192/manual_time"], medians
assert medians["BM_Gemm/8192/manual_time"] == {"seconds": 1.5 * 1e-3, "TFLOP/s": 700.0}, medians
assert medians["BM_LayerStack/8192/manual_time"] == {"seconds": 100000.0 * 1e-6, "tokens/s": 81920.0}, medians
assert medians["BM_CrossEntropy/8192/1/manual_time"] == {"seconds": 0.5e-3, "GB/s": 3000.0}, medians

pytorch = {"gemm/8192": {"seconds": 1.4e-3, "TFLOP/s": 800.0},
           "gemm_layer/8192": {"seconds": 15e-3, "TFLOP/s": 750.0},
           "layers/8192/eager": {"seconds": 0.08, "tokens/s": 102400.0},
           "attention/4096/flash": {"seconds": 1e-3, "TFLOP/s": 300.0},
           "loss/8192/compiled": {"seconds": 0.625e-3, "GB/s": 2400.0}}
rows = script.ratios(medians, pytorch)
assert rows == [("mma attention/4096/flash", 240.0, 300.0, "TFLOP/s", 0.8),
                ("gemm/8192", 700.0, 800.0, "TFLOP/s", 0.875),
                ("cublaslt #3 gemm/8192", 880.0, 800.0, "TFLOP/s", 1.1),
                ("gemm_layer/8192", 600.0, 750.0, "TFLOP/s", 0.8),
                ("bf16 dW gemm_layer/8192", 660.0, 750.0, "TFLOP/s", 0.88),
                ("layers/8192/eager", 81920.0, 102400.0, "tokens/s", 0.8),
                ("loss/8192/compiled", 3000.0, 2400.0, "GB/s", 1.25)], rows
# Reports the bench already wrote, one of them labelled (another build's kernels).
with tempfile.TemporaryDirectory() as scratch:
    path = os.path.join(scratch, "layers.json")
    with open(path, "w") as f:
        json.dump(report, f)
    reports = script.read_bench_reports([path, f"wmma={path}"])
assert [label for label, _ in reports] == ["", "wmma"] and reports[0][1] == reports[1][1] == medians, reports

# Its JSON output is written as sluice writes files: through a symbolic link, keeping the target's mode.
with tempfile.TemporaryDirectory() as scratch:
    target, link = os.path.join(scratch, "target.json"), os.path.join(scratch, "link.json")
    with open(target, "w") as f:
        f.write("old")
    os.chmod(target, 0o600)
    os.symlink("target.json", link)
    script.write_output(link, "new")
    with open(target) as f:
        assert f.read() == "new" and os.path.islink(link) and os.stat(target).st_mode & 0o777 == 0o600
    assert sorted(os.listdir(scratch)) == ["link.json", "target.json"], os.listdir(scratch)

# PyTorch is timed as Google Benchmark times the bench: windows of runs back to back until min_seconds, each its
# mean, the median of the windows.
run_times = iter([0.375, 0.375, 0.125, 0.125, 0.125, 0.125, 0.25, 0.25])
assert script.sustained(lambda: next(run_times), 3, 0.5) == 0.25
assert next(run_times, None) is None  # every window stopped once its runs added up to 0.5 s
assert script.sustained(lambda: 0.0, 1, 0.5) == 0.0  # a run reporting no time ends its window at the cap
assert script.Timing(3, 0.5).min_seconds == 0.5

assert script.attention_flops(4096) == 7.0 * 4096 * 4096 * 4096
assert script.loss_bytes(8192, 32000) == 6.0 * 8192 * 32000
# One LLaMA-7B layer's projections, each run forward, for dx and for dW: 6 * tokens * hidden * (4 * hidden + 3 * ffn).
assert script.gemm_layer_flops(8192) == 6.0 * 8192 * 4096 * (4 * 4096 + 3 * 11008)
# BM_AttentionVarlen's packing: the mix sums to 16384, longer batches repeat it, the last length is cut to fit.
assert script.varlen_lengths(16384) == list(script.VARLEN_LENGTHS)
assert script.varlen_lengths(65536) == 4 * list(script.VARLEN_LENGTHS)
assert script.varlen_lengths(5000) == [4096, 904]

try:
    import torch
except ImportError:
    torch = None
if torch is not None and not torch.cuda.is_available():
    sys.argv = ["compare-torch.py", "--bench", "/nonexistent"]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = script.main()
    assert code == 2 and stderr.getvalue() == "compare-torch: no CUDA device\n", (code, stderr.getvalue())
print("compare-torch.py: report reading and pairing as expected")
