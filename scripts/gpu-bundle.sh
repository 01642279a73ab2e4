#!/usr/bin/env bash
# Copies the executor's GPU programs out of a release build into one small folder with the build's layout, so that
# a GPU machine without the build's dependencies runs them with `scripts/gpu-check.sh BUNDLE_DIR`. The shared
# libraries they load from the distribution (Google Benchmark's, say) go into BUNDLE_DIR/lib, which gpu-check.sh
# puts on the library path; the C and C++ runtimes and CUDA's libraries (CUDA 13) come from the GPU machine.
#   scripts/gpu-bundle.sh [BUILD_DIR=build/release] [BUNDLE_DIR=build/gpu-bundle] [PROGRAM ...]
# PROGRAMs (paths inside the build) default to every GPU program; each one named must have been built.
set -euo pipefail
build=${1:-build/release}
bundle=${2:-build/gpu-bundle}
programs=("${@:3}")
if [ ${#programs[@]} -eq 0 ]; then
  programs=(
    test/executor/test_executor_kernels
    test/executor/test_executor_cuda
    reference_executor/sluice_executor_bench
    examples/executor/sluice_profile_gpu
    examples/executor/sluice_run_plan
    examples/executor/sluice_measure_systems
  )
fi
rm -rf "${bundle}"
for program in "${programs[@]}"; do
  [ -x "${build}/${program}" ] || { echo "gpu-bundle: ${build}/${program} is missing: build it first" >&2; exit 2; }
  mkdir -p "${bundle}/$(dirname "${program}")"
  cp "${build}/${program}" "${bundle}/${program}"
done
# Libraries of the distribution other than the C and C++ runtimes: the GPU machine may lack them.
mkdir -p "${bundle}/lib"
for program in "${programs[@]}"; do
  ldd "${build}/${program}" | awk '$3 ~ /^\/(usr\/)?lib/ {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
  while read -r library; do cp -L "${library}" "${bundle}/lib/"; done
du -sh "${bundle}"
