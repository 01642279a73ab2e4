#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds the sluice tool and runs the main job on the bundled data:
# `sluice simulate` of 50 iterations of the man-pages lengths (about 100K tokens each, context 32K) with the
# LLaMA2-7B profile on 16 GPUs, comparing Megatron-LM, HotSPa, DynaPipe and sluice. It prints the comparison
# table and writes the pictures (SVG) and a Chrome trace into build/default/pictures.
# Extra arguments go to sluice simulate (e.g. --profile llama2-32b --gpus 64 --cross-node-tp).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
# Its own build tree, so that the test presets' trees keep their settings.
cmake -S . -B build/default -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF >/dev/null
cmake --build build/default --target sluice --parallel "$(nproc)"
pictures=build/default/pictures
# The main job's context is 32K (simulate's own default follows the data: docs/cli.md, "The context").
context=(--context 32768)
for arg in "$@"; do case $arg in --context | --context=*) context=() ;; esac; done
./build/default/examples/cli/sluice simulate --iterations 50 "${context[@]}" --svg "${pictures}" --trace "${pictures}/trace.json" "$@"
echo "open the pictures in a browser: ${pictures}/*.svg; the trace in ui.perfetto.dev: ${pictures}/trace.json"
