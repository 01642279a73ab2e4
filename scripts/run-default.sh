#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds the sluice tool and runs the main job on the bundled data:
# `sluice inspect` of the man-pages lengths with the LLaMA2-7B profile. Extra arguments go to sluice inspect.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF >/dev/null
cmake --build --preset release --target sluice --parallel "$(nproc)"
./build/release/examples/cli/sluice inspect --context 32768 --bin-width 2048 "$@"
