#!/usr/bin/env bash
# Lints the sources as CI does: clang-format (.clang-format) over the C++ and CUDA sources, flake8 (.flake8) over
# the Python, clang-tidy (.clang-tidy: checks that find defects, not style) over every header of the library.
# Exits 1 when a tool finds something, 77 (ctest's skip) when a tool or git is missing.
# Usage: scripts/lint.sh [--fix] [--only format|python|tidy]
#   --fix first rewrites the C++ and CUDA sources in .clang-format's layout.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=false
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --fix) fix=true ;;
    --only) only="${2:-}"; shift ;;
    *) echo "lint: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
case "$only" in ""|format|python|tidy) ;; *) echo "lint: --only takes format, python or tidy, got '$only'" >&2; exit 2 ;; esac

need() {
  if ! command -v "$1" > /dev/null; then
    echo "lint: $1 is not installed (scripts/install-deps.sh --tests installs it)" >&2
    exit 77
  fi
}
need git
git rev-parse --is-inside-work-tree > /dev/null 2>&1 || { echo "lint: not a git checkout" >&2; exit 77; }

if [ -z "$only" ] || [ "$only" = format ]; then
  need clang-format
  mapfile -t sources < <(git ls-files '*.hpp' '*.cpp' '*.h' '*.cu' '*.cuh')
  if $fix; then clang-format -i "${sources[@]}"; fi
  echo "lint: clang-format, ${#sources[@]} files"
  clang-format --dry-run --Werror "${sources[@]}"
fi

if [ -z "$only" ] || [ "$only" = python ]; then
  if ! /usr/bin/python3 -m flake8 --version > /dev/null 2>&1; then
    echo "lint: flake8 is not installed (scripts/install-deps.sh --tests installs it)" >&2
    exit 77
  fi
  mapfile -t python < <(git ls-files '*.py')
  echo "lint: flake8, ${#python[@]} files"
  /usr/bin/python3 -m flake8 "${python[@]}"
fi

if [ -z "$only" ] || [ "$only" = tidy ]; then
  need clang-tidy-16
  need pkg-config
  # One translation unit of every header: sluice.hpp includes all but those that need CBC's headers.
  unit=$(mktemp -d)
  trap 'rm -rf "$unit"' EXIT
  {
    echo '#include "sluice/sluice.hpp"'
    for header in include/sluice/assign/*_cbc.hpp; do echo "#include \"${header#include/}\""; done
  } > "$unit/headers.cpp"
  echo "lint: clang-tidy, every header"
  # shellcheck disable=SC2046 # pkg-config's flags are words
  clang-tidy-16 --quiet "$unit/headers.cpp" -- -std=c++20 -Iinclude -isystem /usr/include/eigen3 \
    $(pkg-config --cflags cbc) -DSLUICE_HAVE_CBC=1 -DSLUICE_BUNDLED_DATA_DIR='"data"'
fi
