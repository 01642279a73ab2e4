#!/usr/bin/env bash
# Regenerates docs/study.md: sets up the machine, builds the study program (bench/system_study.cpp) in its own
# tree, and runs it (sluice against Megatron-LM, HotSPa and DynaPipe on the Hydraulis paper's scenarios).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build/study -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF >/dev/null
cmake --build build/study --target sluice_system_study --parallel "$(nproc)"
./build/study/bench/sluice_system_study > docs/study.md.new
mv docs/study.md.new docs/study.md
echo "study: wrote docs/study.md"
