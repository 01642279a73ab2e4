#!/usr/bin/env bash
# Copies the executor's GPU programs out of a release build into one small folder with the build's layout, so that
# a GPU machine without the build's dependencies runs them with `scripts/gpu-check.sh BUNDLE_DIR`. The shared
# libraries they load from the distribution (Google Benchmark's, say) go into BUNDLE_DIR/lib, which gpu-check.sh
# puts on the library path; the C and C++ runtimes and CUDA's libraries (CUDA 13) come from the GPU machine.
#   scripts/gpu-bundle.sh [BUILD_DIR=build/release] [BUNDLE_DIR=build/gpu-bundle] [PROGRAM ...]
# PROGRAMs (paths inside the build) default to every GPU program; each one named must have been built. Where the
# build has the Python package, BUNDLE_DIR/flex-cp-plans.json holds the flex CP plans gpu-check.sh times.
# When a program links libmpi (or SLUICE_GPU_BUNDLE_MPI=1; =0 skips it), Open MPI's runtime goes into
# BUNDLE_DIR/openmpi (the absolute paths of this machine, under it): mpirun, orted, ompi_info, the MCA plugins
# (less those needing InfiniBand, libfabric, UCX or PSM), help texts and mca params, PMIx's plugins; the libraries
# they load go into BUNDLE_DIR/lib. On the GPU machine, with B the bundle's absolute path, `. B/openmpi/env.sh` sets:
#   OPAL_PREFIX=B/openmpi/usr  OPAL_SYSCONFDIR=B/openmpi/etc/openmpi  PATH=B/openmpi/usr/bin:$PATH
#   PMIX_PKGLIBDIR=B/openmpi/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix  LD_LIBRARY_PATH=B/lib:$LD_LIBRARY_PATH
#   PMIX_PKGDATADIR=B/openmpi/usr/lib/x86_64-linux-gnu/pmix2/share/pmix (PMIx's paths are absolute: no PMIX_PREFIX)
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (it runs as root there)
#   OMPI_MCA_btl_vader_single_copy_mechanism=none (containers often forbid the cross-memory copy)
# then `mpirun -n 1 B/PROGRAM`, or B/PROGRAM alone (singleton: it starts B's orted itself).
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
  # Built where MPI and NCCL are.
  [ ! -x "${build}/test/executor/test_executor_mpi_gpu" ] || programs+=(test/executor/test_executor_mpi_gpu)
fi
rm -rf "${bundle}"
for program in "${programs[@]}"; do
  [ -x "${build}/${program}" ] || { echo "gpu-bundle: ${build}/${program} is missing: build it first" >&2; exit 2; }
  mkdir -p "${bundle}/$(dirname "${program}")"
  cp "${build}/${program}" "${bundle}/${program}"
done
objects=("${programs[@]/#/${build}/}")
mpi=${SLUICE_GPU_BUNDLE_MPI:-}
if [ -z "${mpi}" ]; then
  mpi=0
  for object in "${objects[@]}"; do
    if [[ $(ldd "${object}") == */libmpi.so* ]]; then mpi=1; fi
  done
fi
if [ "${mpi}" = 1 ]; then
  command -v ompi_info > /dev/null || { echo "gpu-bundle: Open MPI needs ompi_info (openmpi-bin)" >&2; exit 2; }
  ompi=${bundle}/openmpi
  ompi_path() { ompi_info --parsable --path "$1" | sed -n "s|^path:$1:||p" | head -n 1; }
  prefix=$(ompi_path prefix) bindir=$(ompi_path bindir) pkglibdir=$(ompi_path pkglibdir)
  pkgdatadir=$(ompi_path pkgdatadir) sysconfdir=$(ompi_path sysconfdir)
  pmix=$(dirname "$(dirname "$(readlink -f "$(ldd "${pkglibdir}/mca_pmix_ext3x.so" |
    awk '$1 ~ /^libpmix\.so/ {print $3}')")")")
  mkdir -p "${ompi}${bindir}" "${ompi}${pkglibdir}" "${ompi}${pkgdatadir}" "${ompi}${sysconfdir}" \
    "${ompi}${pmix}/lib/pmix" "${ompi}${pmix}/share/pmix"
  cp -L "${bindir}/orterun" "${bindir}/orted" "${bindir}/ompi_info" "${ompi}${bindir}/"
  ln -s orterun "${ompi}${bindir}/mpirun"
  ln -s orterun "${ompi}${bindir}/mpiexec"
  cp "${pkgdatadir}"/help-*.txt "${ompi}${pkgdatadir}/"
  cp "${sysconfdir}"/openmpi-mca-params.conf "${sysconfdir}"/openmpi-default-hostfile "${ompi}${sysconfdir}/"
  # PMIx's own mca params name its plugins' absolute folder: left out, PMIX_PKGLIBDIR finds them.
  cp "${pmix}"/lib/pmix/*.so "${ompi}${pmix}/lib/pmix/"
  cp "${pmix}"/share/pmix/help-*.txt "${ompi}${pmix}/share/pmix/"
  objects+=("${ompi}${bindir}"/{orterun,orted,ompi_info} "${ompi}${pmix}"/lib/pmix/*.so)
  for plugin in "${pkglibdir}"/*.so; do
    if [[ $(ldd "${plugin}") =~ /lib(ibverbs|fabric|uc[pstm]|psm|infinipath)[^/]*\.so ]]; then continue; fi
    cp "${plugin}" "${ompi}${pkglibdir}/"
    objects+=("${ompi}${pkglibdir}/$(basename "${plugin}")")
  done
  cat > "${ompi}/env.sh" <<EOF
# Source it (bash) to run the bundle's programs under this bundled Open MPI: see scripts/gpu-bundle.sh.
sluice_bundle=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")/.." && pwd)
export OPAL_PREFIX=\${sluice_bundle}/openmpi${prefix} OPAL_SYSCONFDIR=\${sluice_bundle}/openmpi${sysconfdir}
export PMIX_PKGLIBDIR=\${sluice_bundle}/openmpi${pmix}/lib/pmix
export PMIX_PKGDATADIR=\${sluice_bundle}/openmpi${pmix}/share/pmix
export PATH=\${sluice_bundle}/openmpi${bindir}:\${PATH}
export LD_LIBRARY_PATH=\${sluice_bundle}/lib\${LD_LIBRARY_PATH:+:\${LD_LIBRARY_PATH}}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
EOF
fi
# The flex CP plans whose ring attention scripts/cp-gpu-check.py times, planned here: the GPU machine's Python may
# not load this build's sluice extension.
python_package=${build}/python
if [ -d "${python_package}/sluice" ]; then
  PYTHONPATH="${python_package}${PYTHONPATH:+:${PYTHONPATH}}" /usr/bin/python3 \
    "$(dirname "$0")/flex-cp-gpu-plans.py" --out "${bundle}/flex-cp-plans.json"
fi
# Libraries of the distribution other than the C and C++ runtimes: the GPU machine may lack them.
mkdir -p "${bundle}/lib"
for object in "${objects[@]}"; do
  ldd "${object}" | awk '$3 ~ /^\/(usr\/)?lib/ {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
  while read -r library; do cp -L "${library}" "${bundle}/lib/"; done
du -sh "${bundle}"
