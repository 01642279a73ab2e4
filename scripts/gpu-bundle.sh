#!/usr/bin/env bash
# Copies the executor's GPU programs out of a release build into one small folder with the build's layout, so that
# a GPU machine without the build's dependencies (doctest, Google Benchmark, CBC) runs them with
# `scripts/gpu-check.sh BUNDLE_DIR`. They need only the CUDA runtime and cuBLAS of a CUDA 13 install there.
#   scripts/gpu-bundle.sh [BUILD_DIR=build/release] [BUNDLE_DIR=build/gpu-bundle]
set -euo pipefail
build=${1:-build/release}
bundle=${2:-build/gpu-bundle}
programs=(
  test/executor/test_executor_kernels
  test/executor/test_executor_cuda
  test/executor/test_executor_host
  reference_executor/sluice_executor_bench
  examples/executor/sluice_profile_gpu
  examples/executor/sluice_run_plan
  examples/executor/sluice_measure_systems
)
rm -rf "${bundle}"
for program in "${programs[@]}"; do
  [ -x "${build}/${program}" ] || { echo "gpu-bundle: ${build}/${program} is missing: build the release preset" >&2; exit 2; }
  mkdir -p "${bundle}/$(dirname "${program}")"
  cp "${build}/${program}" "${bundle}/${program}"
done
du -sh "${bundle}"
