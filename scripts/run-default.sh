#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds the sluice tool and runs the main job on the bundled data: `sluice
# simulate` of 50 iterations of the man-pages lengths (about 100K tokens each), comparing Megatron-LM, HotSPa,
# DynaPipe and sluice in two scenarios:
#   - LLaMA2-7B on 16 GPUs, context 32K: every system runs without pipelining (PP = 1 is fastest at this size);
#   - LLaMA2-32B on 64 GPUs, context 27,904 (the longest a TP-within-a-node scheme holds): pipelined schemes
#     (tp8pp4, tp8pp2) and heterogeneous strategies, chosen per iteration.
# Each prints the comparison table and writes its pictures (SVG) and a Chrome trace into build/default/pictures/.
# Extra arguments go to both runs of sluice simulate (e.g. --iterations 100 --seed 3); each run sets its own
# --profile, --gpus and --context.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
# Its own build tree, so that the test presets' trees keep their settings.
cmake -S . -B build/default -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF >/dev/null
cmake --build build/default --target sluice --parallel "$(nproc)"
pictures=build/default/pictures
run() {
  local name=$1
  shift
  ./build/default/examples/cli/sluice simulate --iterations 50 --svg "${pictures}/${name}" \
    --trace "${pictures}/${name}/trace.json" "$@"
  echo
}
run llama2-7b-16gpus --context 32768 "$@"
run llama2-32b-64gpus --profile llama2-32b --gpus 64 --context 27904 "$@"
echo "open the pictures in a browser: ${pictures}/*/*.svg; the traces in ui.perfetto.dev: ${pictures}/*/trace.json"
