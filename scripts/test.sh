#!/usr/bin/env bash
# Sets up a fresh Debian machine and runs the whole test suite: the release and the
# debug-asan (AddressSanitizer + UndefinedBehaviorSanitizer) builds, each with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh --tests
jobs=$(nproc)

for preset in release debug-asan; do
  echo "=== ${preset}: configure and build"
  cmake --preset "${preset}"
  cmake --build --preset "${preset}" --parallel "${jobs}"
  echo "=== ${preset}: test"
  ctest --preset "${preset}" --parallel "${jobs}"
done
