#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds the sluice tool and runs the main job on the bundled data:
# `sluice inspect` of the man-pages lengths with the LLaMA2-7B profile. Extra arguments go to sluice inspect.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
# Its own build tree, so that the test presets' trees keep their settings.
cmake -S . -B build/default -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF >/dev/null
cmake --build build/default --target sluice --parallel "$(nproc)"
sluice=./build/default/examples/cli/sluice
"${sluice}" inspect --context 32768 --bin-width 2048
echo
# Propose candidate strategies from the length distribution, then plan ten iterations with them.
"${sluice}" plan --propose --context 32768 "$@"
