"""Checks scripts/ncu-kernel-times.py without a GPU, on a log shaped as `ncu --csv` writes it (Nsight Compute's
progress lines and the bench's output around the CSV rows, thousands separators in the values): the per-kernel sums,
the names it shortens, its order, and a log with no CSV rows refused with exit 2 and one line.
Usage: ncu_kernel_times_check.py path/to/ncu-kernel-times.py"""
import contextlib
import importlib.util
import io
import math
import os
import sys
import tempfile

spec = importlib.util.spec_from_file_location("ncu_kernel_times", sys.argv[1])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def row(index, name, unit, value):
    return (f'"{index}","5871","sluice_executor_bench","127.0.0.1","{name}","1","13","(128, 1, 1)","(256, 32, 1)",'
            f'"0","9.0","Command line profiler metrics","gpu__time_duration.sum","{unit}","{value}"')


log = "\n".join([
    "==PROF== Connected to process 5871 (sluice_executor_bench)",
    HEADER,
    row(0, "void unnamed>::forward_kernel<128>(ForwardArgs)", "ns", "12,052,544"),
    row(1, "void sluice::executor::kernels::(anonymous namespace)::rmsnorm_backward_kernel<true>("
           "const __nv_bfloat16 *, const float *)", "us", "100.5"),
    row(2, "nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT", "ns", "2,000,000"),
    row(3, "void unnamed>::forward_kernel<128>(ForwardArgs)", "ns", "11,947,456"),
    row(4, "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
           "(T1::Params)", "ms", "1.5"),
    "BM_LayerStack/8192/manual_time 77.7 ms",
]) + "\n"

times = script.kernel_times(io.StringIO(log))
expected = {
    "forward_kernel<128>": (24e-3, 2),
    "rmsnorm_backward_kernel<true>": (100.5e-6, 1),
    "nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT": (2e-3, 1),
    "Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>": (1.5e-3, 1),
}
assert times.keys() == expected.keys(), times
for name, (seconds, launches) in expected.items():
    assert math.isclose(times[name][0], seconds, rel_tol=1e-12) and times[name][1] == launches, (name, times[name])

with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "ncu_layers.log")
    with open(path, "w") as f:
        f.write(log)
    sys.argv = ["ncu-kernel-times.py", path]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert script.main() == 0
    lines = printed.getvalue().splitlines()
    assert [line.split()[-1] for line in lines[:4]] == [
        "forward_kernel<128>", "nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT",
        "Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>",
        "rmsnorm_backward_kernel<true>"], lines
    assert lines[0].split()[:4] == ["24.000", "ms", "87.0%", "2x"], lines[0]
    assert lines[4] == "    27.601 ms total, 5 launches", lines[4]

    with open(path, "w") as f:
        f.write("==PROF== No kernels were profiled.\n")
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        assert script.main() == 2
    assert errors.getvalue() == f"ncu-kernel-times: {path}: no ncu CSV rows\n", errors.getvalue()
print("ncu-kernel-times.py: sums, names, order and a log without rows checked")
