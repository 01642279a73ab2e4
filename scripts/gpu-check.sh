#!/usr/bin/env bash
# Everything in sluice that needs a GPU, in one run on a GPU machine, most important first: the kernel tests (each
# attention kernel's errors printed), the attention and GEMM benchmarks, the CUDA backend tests, the layer stack,
# the compared systems' plans executed (sluice_measure_systems), the bench against PyTorch (scripts/compare-torch.py),
# the Python package's CUDA checks, the profiler with its samples and sluice_run_plan, ring attention's blocks and
# the flex CP plans' attention, one MPI process per rank over NCCL, the other build's CUDA tests, and under Nsight
# Compute the mma kernels' time and every kernel of the layer stack's. Logs and reports go to OUT_DIR; a summary is
# printed last.
#   scripts/gpu-check.sh [BUILD_DIR=build/release] [OUT_DIR=gpu-check]
# BUILD_DIR may be a folder made by scripts/gpu-bundle.sh (the GPU programs only, for a machine without the build's
# dependencies). The environment may add:
#   SLUICE_GPU_CHECK_SECONDS  wall-clock budget (default 1200): each step is cut to what is left, and a step that
#                             finds less than 20 s left is skipped (and reported), so the run ends inside it.
#   SLUICE_GPU_CHECK_OTHER    LABEL=DIR: a second bundle built with other attention kernels
#                             (SLUICE_EXECUTOR_ATTENTION: mma64, mma_single_pass or wmma); its CUDA tests and layer
#                             stack run too, labelled LABEL.
#                             sluice_measure_systems and the profiler run from BUILD_DIR if its kernels test passed,
#                             else from DIR.
#   SLUICE_GPU_CHECK_STEPS    the names of the steps to run (default: all), such as "cuda profile mpi_gpu".
#   SLUICE_GPU_CHECK_PYTHON   a folder holding the sluice Python package built for this machine's python3: its
#                             CUDA tests and examples/python/train_llama.py --device cuda run.
set -uo pipefail
build=${1:-build/release}
out=${2:-gpu-check}
budget=${SLUICE_GPU_CHECK_SECONDS:-1200}
other_label=
other_build=
if [ -n "${SLUICE_GPU_CHECK_OTHER:-}" ]; then
  other_label=${SLUICE_GPU_CHECK_OTHER%%=*}
  other_build=${SLUICE_GPU_CHECK_OTHER#*=}
fi
python_package=${SLUICE_GPU_CHECK_PYTHON:-}
mkdir -p "${out}"
status=0
summary=()

step() {  # step NAME LIMIT COMMAND...: runs with at most LIMIT s (and what is left of the budget), logs to NAME.log
  local name=$1 limit=$2
  shift 2
  if [ -n "${SLUICE_GPU_CHECK_STEPS:-}" ] && [[ " ${SLUICE_GPU_CHECK_STEPS} " != *" ${name} "* ]]; then return 1; fi
  local left=$((budget - SECONDS))
  if [ "${left}" -lt 20 ]; then
    summary+=("${name}: skipped, ${left} s of the budget left")
    status=1
    return 1
  fi
  [ "${limit}" -le "${left}" ] || limit=${left}
  echo "=== ${name} (at ${SECONDS} s, limit ${limit} s): $*"
  local began=${SECONDS}
  timeout "${limit}" "$@" > "${out}/${name}.log" 2>&1
  local code=$?
  summary+=("${name}: exit ${code} after $((SECONDS - began)) s")
  [ "${code}" -eq 0 ] || { status=1; tail -n 5 "${out}/${name}.log"; }
  return "${code}"
}

bench() {  # bench NAME LIMIT BUILD FILTER: the bench's runs matching FILTER, medians of 3, report NAME.json
  step "$1" "$2" "$3/reference_executor/sluice_executor_bench" --benchmark_filter="$4" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_out="${out}/$1.json" --benchmark_out_format=json
}

# systems_alone_and_mpi LABEL OUT_DIR PROGRAM OPTION...: sluice_measure_systems alone and as rank 0 of mpirun -n 2
# --bind-to none (process 1 waiting), each timed, writing OUT_DIR/systems_LABEL_{alone,mpi}.json; fails unless the
# two documents hold the same losses.
systems_alone_and_mpi() {
  local label=$1 out=$2 began
  shift 2
  began=${EPOCHREALTIME}
  "$@" --json "${out}/systems_${label}_alone.json" || return
  echo "alone: $(awk "BEGIN {print ${EPOCHREALTIME} - ${began}}") s"
  began=${EPOCHREALTIME}
  mpirun -n 2 --bind-to none "$@" --json "${out}/systems_${label}_mpi.json" || return
  echo "mpirun -n 2 --bind-to none: $(awk "BEGIN {print ${EPOCHREALTIME} - ${began}}") s"
  diff <(grep -o '"loss": [^,]*' "${out}/systems_${label}_alone.json") \
    <(grep -o '"loss": [^,]*' "${out}/systems_${label}_mpi.json")
}
export -f systems_alone_and_mpi

# The distribution's libraries that scripts/gpu-bundle.sh copied beside the programs.
for bundle_lib in "${build}/lib" ${other_build:+"${other_build}/lib"}; do
  [ -d "${bundle_lib}" ] || continue
  bundle_lib=$(cd "${bundle_lib}" && pwd)
  export LD_LIBRARY_PATH="${bundle_lib}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
done

# The bundled data and the executor tests' files, wherever this checkout is (the build may have been made elsewhere).
repository=$(cd "$(dirname "$0")/.." && pwd)
export SLUICE_DATA_DIR="${repository}/data"
export SLUICE_EXECUTOR_TEST_DATA="${repository}/test/executor"

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version 2> /dev/null | tail -n 2
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'cuDNN',
torch.backends.cudnn.version())" 2>&1
} | tee "${out}/device.txt"

step kernels 120 "${build}/test/executor/test_executor_kernels"
kernels_passed=$?
bench bench 320 "${build}" '^BM_(Attention|RingAttention|Gemm)'
step cuda 150 "${build}/test/executor/test_executor_cuda"
bench layers 150 "${build}" '^BM_(Layer(Stack|Elementwise)|CrossEntropy)/'
if [ -n "${other_build}" ]; then
  bench "layers_${other_label}" 120 "${other_build}" '^BM_LayerStack'
fi
measure_build=${build}
[ "${kernels_passed}" -eq 0 ] || [ -z "${other_build}" ] || measure_build=${other_build}
echo "(measure_systems, profile and run_plan from ${measure_build})"
if [ -n "${python_package}" ]; then
  export PYTHONPATH="${python_package}${PYTHONPATH:+:${PYTHONPATH}}"
  step python_tests 150 python3 -m pytest -q -rs -p no:cacheprovider -k cuda \
    "${repository}/examples/python/tests/test_torch.py"
  step train_llama 150 python3 "${repository}/examples/python/train_llama.py" --steps 4 --device cuda \
    --dtype bfloat16 --check
fi
# Lengths up to 16,384, the 8-GPU comparison's context below: a fit that extrapolates past its longest sample
# predicted a 16K-token sequence 11% slow.
step profile 150 "${measure_build}/examples/executor/sluice_profile_gpu" --out "${out}/executor_profile.json" \
  --samples "${out}/executor_samples.csv" --lengths 256,512,1024,2048,4096,8192,16384
# Stages of TP 2, ring and Ulysses CP 2 and their hybrid at CP 4, their lanes serialized on the GPU.
step profile_parallel 150 "${measure_build}/examples/executor/sluice_profile_gpu" \
  --schemes tp1pp1,tp2pp1,tp1cp2ringpp1,tp1cp2ulyssespp1,tp1cp4hybrid2pp1ac --lengths 512,1024,2048,4096 \
  --out "${out}/executor_profile_parallel.json" --samples "${out}/executor_samples_parallel.csv"
if [ -f "${out}/executor_profile.json" ]; then
  step run_streams 60 "${measure_build}/examples/executor/sluice_run_plan" --profile "${out}/executor_profile.json" \
    --trace "${out}/run_trace.json"
fi
step measure_systems 240 "${measure_build}/examples/executor/sluice_measure_systems" --iterations 2 --progress \
  --json "${out}/measured_systems.json"
# The profiled decoder (8 layers, hidden 1024) on 4 GPUs at context 8,192 and on 8 GPUs at 16,384, 3 iterations:
# docs/measured.md's prediction tables.
if [ -f "${out}/executor_profile.json" ]; then
  for gpus in 4 8; do
    step "measure_small_${gpus}" 120 "${measure_build}/examples/executor/sluice_measure_systems" --progress \
      --profile "${out}/executor_profile.json" --layers 8 --hidden 1024 --heads 8 --ffn 2816 --vocab 32000 \
      --gpus "${gpus}" --tokens $((gpus * 8192)) --context $((gpus * 2048)) --iterations 3 \
      --json "${out}/measured_small_${gpus}.json"
  done
fi
# The same comparison with the CP schemes (ring and Ulysses CP 2) and recompute in every system's scheme space.
step measure_systems_cp 240 "${measure_build}/examples/executor/sluice_measure_systems" --iterations 1 --progress \
  --cp 2 --cp-kinds ring,ulysses --ac --json "${out}/measured_systems_cp.json"
# And with TP 2 too: the profile measured on the spot holds <2, PP> (its lanes serialized), so every system may
# choose TP 2, CP 2 or recompute, and the executed plans run them.
step measure_systems_tp 300 "${measure_build}/examples/executor/sluice_measure_systems" --iterations 1 --progress \
  --tp 1,2 --cp 2 --cp-kinds ring,ulysses --ac --json "${out}/measured_systems_tp.json"
if python3 -c "import torch" 2> /dev/null; then
  # Ring attention's FlashAttention blocks, every CP rank serialized on this GPU.
  # and one rank's share of the flex CP plans that scripts/gpu-bundle.sh planned, against static CP 8.
  flex_plans=()
  [ ! -f "${build}/flex-cp-plans.json" ] || flex_plans=(--flex-plans "${build}/flex-cp-plans.json")
  step cp_flash 180 python3 "${repository}/scripts/cp-gpu-check.py" --json "${out}/cp-gpu.json" "${flex_plans[@]}"
  reports=(--bench-json "${out}/bench.json" --bench-json "${out}/layers.json")
  [ -z "${other_build}" ] || reports+=(--bench-json "${other_label}=${out}/layers_${other_label}.json")
  step compare_torch 300 python3 "${repository}/scripts/compare-torch.py" "${reports[@]}" --repetitions 3 \
    --json "${out}/compare-torch.json"
fi
if [ -f "${out}/executor_profile.json" ]; then
  step run_dynapipe 60 "${measure_build}/examples/executor/sluice_run_plan" --profile "${out}/executor_profile.json" \
    --dynapipe --pp 2 --replicas 2 --serialize --trace "${out}/run_trace_dynapipe.json"
fi
# TP and CP on the GPU, end to end: the test profile's TP 2 schemes plan a 2*tp2pp1 strategy at context
# 256 and a Ulysses CP 2 strategy with recompute at context 1024 (the host backend plans the same).
for context in 256 1024; do
  step "run_parallel_${context}" 60 "${measure_build}/examples/executor/sluice_run_plan" \
    --profile "${repository}/test/executor/host_profile_tp.json" --layers 4 --hidden 128 --heads 2 --ffn 256 \
    --vocab 128 --cp 2 --cp-kinds ulysses --ac --tokens 2048 --context "${context}" --gpus 4 \
    --trace "${out}/run_trace_parallel_${context}.json"
done
# Ring CP and the hybrid at context 1024: the same profile plans 1*tp2cp2ringpp1 and 1*tp1cp4hybrid2pp1ac.
step run_ring_1024 60 "${measure_build}/examples/executor/sluice_run_plan" \
  --profile "${repository}/test/executor/host_profile_tp.json" --layers 4 --hidden 128 --heads 2 --ffn 256 \
  --vocab 128 --cp 2 --cp-kinds ring --ac --tokens 2048 --context 1024 --gpus 4 --trace "${out}/run_trace_ring.json"
step run_hybrid_1024 60 "${measure_build}/examples/executor/sluice_run_plan" \
  --profile "${repository}/test/executor/host_profile_tp.json" --layers 4 --hidden 128 --heads 2 --ffn 256 \
  --vocab 128 --cp 4 --cp-kinds hybrid --ac --tokens 2048 --context 1024 --gpus 4 \
  --trace "${out}/run_trace_hybrid.json"
# One MPI process per rank over NCCL, where the bundle carries Open MPI (scripts/gpu-bundle.sh): the equality test
# with one process per GPU; plans of one rank alone and under mpirun -n 2 (rank 0 on the GPU over NCCL, process 1
# waiting; mpirun -n 1 would run them alone), with the same losses, also for LLaMA-7B-shaped layers; two ranks on
# one GPU refused with a line naming the rank.
if [ -f "${measure_build}/openmpi/env.sh" ] || command -v mpirun > /dev/null; then
  [ ! -f "${measure_build}/openmpi/env.sh" ] || . "${measure_build}/openmpi/env.sh"
  gpus=$(nvidia-smi --list-gpus | wc -l)
  step mpi_gpu 120 mpirun -n "${gpus}" "${measure_build}/test/executor/test_executor_mpi_gpu"
  if [ -f "${out}/executor_profile.json" ]; then
    # Alone, bound to one CPU by taskset, and under mpirun -n 2 (rank 0 on the GPU over NCCL, process 1 waiting)
    # with Open MPI's default binding (one core each when it starts at most two) and with --bind-to none: the same
    # loss, and the seconds each took, for the model's initial parameters are drawn on the CPUs the process may use.
    step mpi_run_plan 180 bash -c 'set -e
      build=$1 out=$2
      plan=("${build}/examples/executor/sluice_run_plan" --profile "${out}/executor_profile.json" --gpus 1)
      timed() {  # timed NAME [LAUNCHER...]: runs the plan, output in run_plan_NAME.txt, and says how long it took
        local name=$1 began=${EPOCHREALTIME}
        shift
        "$@" "${plan[@]}" --trace "${out}/run_trace_${name}.json" > "${out}/run_plan_${name}.txt" 2>&1
        echo "${name} ($*): $(awk "BEGIN {print ${EPOCHREALTIME} - ${began}}") s"
        cat "${out}/run_plan_${name}.txt"
      }
      timed alone
      timed alone_one_cpu taskset -c 0
      timed mpi_bound mpirun -n 2 --report-bindings
      NCCL_DEBUG=INFO NCCL_DEBUG_FILE="${out}/nccl.%p.txt" timed mpi mpirun -n 2 --bind-to none
      for name in mpi_bound mpi; do grep -q "on 1 MPI process × .* (NCCL)" "${out}/run_plan_${name}.txt"; done
      for name in alone_one_cpu mpi_bound mpi; do
        diff <(grep "^loss" "${out}/run_plan_alone.txt") <(grep "^loss" "${out}/run_plan_${name}.txt")
      done
      grep -q "may use 1 of the machine" "${out}/run_plan_alone_one_cpu.txt"
      ! grep -q "may use 1 of the machine" "${out}/run_plan_mpi.txt"' _ "${measure_build}" "${out}"
    # Every system's plans of two batches of the default model.
    step mpi_measure_systems 180 bash -c 'systems_alone_and_mpi "$@"' _ default "${out}" \
      "${measure_build}/examples/executor/sluice_measure_systems" --profile "${out}/executor_profile.json" \
      --layers 8 --hidden 1024 --heads 8 --ffn 2816 --gpus 1 --iterations 2 --tokens 16384 --context 4096 --progress
  fi
  # LLaMA-7B-shaped layers (a billion parameters to draw and gather per plan), profiled first: one batch.
  llama7b=(--layers 4 --hidden 4096 --heads 32 --ffn 11008 --vocab 32000)
  step mpi_llama7b 200 bash -c 'profiler=$1 systems=$2 out=$3
    shift 3
    "${profiler}" "$@" --pp 1,2,4 --lengths 512,1024,2048,4096 --repetitions 3 --gpus 1 \
      --out "${out}/profile_llama7b.json" &&
      systems_alone_and_mpi llama7b "${out}" "${systems}" "$@" --profile "${out}/profile_llama7b.json" --gpus 1 \
        --iterations 1 --tokens 16384 --context 4096 --progress' _ \
    "${measure_build}/examples/executor/sluice_profile_gpu" "${measure_build}/examples/executor/sluice_measure_systems" \
    "${out}" "${llama7b[@]}"
  if [ "${gpus}" -eq 1 ]; then
    step mpi_two_on_one_gpu 60 bash -c '! mpirun -n 2 --oversubscribe "$1/test/executor/test_executor_mpi_gpu" &&
      echo "(the run failed, as it must)"' _ "${measure_build}"
    if [ -f "${out}/mpi_two_on_one_gpu.log" ] && ! grep -q "rank 1: .*would bind GPU 1" "${out}/mpi_two_on_one_gpu.log"
    then
      summary+=("mpi_two_on_one_gpu: its error names no rank")
      status=1
    fi
  fi
fi
if [ -n "${other_build}" ]; then
  step "cuda_${other_label}" 150 "${other_build}/test/executor/test_executor_cuda"
fi
if command -v ncu > /dev/null; then
  # The mma kernels one by one (forward, dq, dkdv) at 16K tokens; their FLOPs: 2, 3 and 4·tokens²·hidden.
  step ncu_mma 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    -k 'regex:(^|::)(forward|dq|dkdv)_kernel' --launch-count 6 \
    "${build}/reference_executor/sluice_executor_bench" '--benchmark_filter=^BM_AttentionMma/16384/' \
    --benchmark_min_time=0.01
  # The single-pass backward's kernel at 16K tokens (5·tokens²·hidden FLOPs), turns waited included.
  step ncu_single_pass 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    -k 'regex:(^|::)dkdv_kernel' --launch-count 2 \
    "${build}/reference_executor/sluice_executor_bench" '--benchmark_filter=^BM_AttentionMmaSinglePassBackward/16384/' \
    --benchmark_min_time=0.01
  # Every kernel of one iteration of the layer stack at 8K tokens (the bench brackets its first timed iteration
  # with cudaProfilerStart/Stop), summed per kernel in the summary: where the layer's time goes.
  step ncu_layers 150 ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
    "${build}/reference_executor/sluice_executor_bench" '--benchmark_filter=^BM_LayerStack/8192/' \
    --benchmark_min_time=0.01
fi

echo
echo "=== summary (${SECONDS} s)"
printf '%s\n' "${summary[@]}"
echo "--- attention kernel errors"
grep -h "forward, head_dim\|backward, head_dim" "${out}/kernels.log" | sed 's/^.*MESSAGE: //' | sort -u
for log in "${out}"/cuda*.log "${out}/kernels.log"; do
  [ -f "${log}" ] && grep -h "test cases:" "${log}" | sed "s|^|$(basename "${log}"): |"
done
if command -v python3 > /dev/null; then
  python3 - "${out}" << 'EOF'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        report = json.load(open(path))
    except ValueError:
        continue
    if not isinstance(report, dict) or "benchmarks" not in report:
        continue
    print(f"--- {os.path.basename(path)}")
    for entry in report["benchmarks"]:
        if entry.get("aggregate_name") != "median":
            continue
        rate = entry.get("TFLOP/s") or entry.get("tokens/s") or entry.get("GB/s")
        print(f"{entry['run_name']:44} {entry['real_time']:10.3f} {entry['time_unit']}"
              + (f" {rate:14.1f}" if rate else "") + (" ERROR" if entry.get("error_occurred") else "")
              + (f"  {entry['label']}" if entry.get("label") else ""))
EOF
fi
for name in compare_torch measure_systems measure_small_4 measure_small_8 measure_systems_cp measure_systems_tp \
  python_tests train_llama profile ncu_mma ncu_single_pass; do
  [ -f "${out}/${name}.log" ] && { echo "--- ${name}"; tail -n 60 "${out}/${name}.log" | cut -c1-200; }
done
if [ -f "${out}/ncu_layers.log" ] && command -v python3 > /dev/null; then
  echo "--- ncu_layers: time per kernel, one iteration of BM_LayerStack/8192"
  python3 "${repository}/scripts/ncu-kernel-times.py" "${out}/ncu_layers.log"
fi
exit "${status}"
