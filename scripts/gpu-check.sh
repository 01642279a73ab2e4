#!/usr/bin/env bash
# The reference executor's checks on a GPU machine, from a release build: the GPU tests, the executor
# benchmarks, the profiler, sluice_run_plan on the profile it wrote, sluice_measure_systems (the compared systems'
# plans executed) and, where python3 has PyTorch, scripts/compare-torch.py (the bench against PyTorch on the same
# shapes). Logs go to OUT_DIR.
#   scripts/gpu-check.sh [BUILD_DIR=build/release] [OUT_DIR=gpu-check]
# BUILD_DIR may be a folder made by scripts/gpu-bundle.sh (the GPU programs only, for a machine without the build's
# dependencies).
set -uo pipefail
build=${1:-build/release}
out=${2:-gpu-check}
mkdir -p "${out}"
status=0

step() {  # step NAME COMMAND...: runs, logs to OUT_DIR/NAME.log, remembers a failure and goes on
  local name=$1
  shift
  echo "=== ${name}: $*"
  timeout 240 "$@" 2>&1 | tee "${out}/${name}.log"
  local code=${PIPESTATUS[0]}
  [ "${code}" -eq 0 ] || { echo "!!! ${name} exited ${code}"; status=1; }
}

# The bundled data and the executor tests' files, wherever this checkout is (the build may have been made elsewhere).
repository=$(cd "$(dirname "$0")/.." && pwd)
export SLUICE_DATA_DIR="${repository}/data"
export SLUICE_EXECUTOR_TEST_DATA="${repository}/test/executor"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "${out}/device.txt"
step kernels "${build}/test/executor/test_executor_kernels"
step cuda "${build}/test/executor/test_executor_cuda"
step host "${build}/test/executor/test_executor_host"
step bench "${build}/reference_executor/sluice_executor_bench" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_out="${out}/bench.json" --benchmark_out_format=json
step profile "${build}/examples/executor/sluice_profile_gpu" --out "${out}/executor_profile.json"
if [ -f "${out}/executor_profile.json" ]; then
  step run_streams "${build}/examples/executor/sluice_run_plan" --profile "${out}/executor_profile.json" \
    --trace "${out}/run_trace.json"
  step run_serialized "${build}/examples/executor/sluice_run_plan" --profile "${out}/executor_profile.json" \
    --serialize --trace "${out}/run_trace_serialized.json"
  step run_dynapipe "${build}/examples/executor/sluice_run_plan" --profile "${out}/executor_profile.json" \
    --dynapipe --pp 2 --replicas 2 --serialize --trace "${out}/run_trace_dynapipe.json"
fi
step measure_systems "${build}/examples/executor/sluice_measure_systems" --json "${out}/measured_systems.json"
if python3 -c "import torch" 2> /dev/null; then
  step compare_torch python3 "${repository}/scripts/compare-torch.py" --bench "${build}/reference_executor/sluice_executor_bench" \
    --repetitions 3 --json "${out}/compare-torch.json"
fi
exit "${status}"
