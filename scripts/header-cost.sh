#!/usr/bin/env bash
# Parse cost of each public header and of the umbrella: CPU seconds (user + system, which load skews far less than
# wall time) and peak resident memory of `g++ -std=c++20 -fsyntax-only`, one header per translation unit, run niced
# one at a time.
# Usage: scripts/header-cost.sh [header ...]   (default: every header under include/sluice, umbrella last)
# Prints a Markdown table; the load average before and after goes to stderr, since load skews the times.
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${CXX:-g++}
flags=(-std=c++20 -fsyntax-only -Iinclude -I/usr/include/eigen3)
# CBC's headers are needed only by the headers that name the CBC backend.
cbc_flags=$(pkg-config --cflags cbc 2>/dev/null || true)

if [[ $# -gt 0 ]]; then
  headers=("$@")
else
  mapfile -t headers < <(cd include && find sluice -name '*.hpp' ! -path sluice/sluice.hpp | sort)
  headers+=(sluice/sluice.hpp)
fi

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| header | parse CPU s | peak MB |"
echo "|---|---:|---:|"
for header in "${headers[@]}"; do
  extra=()
  case $header in
    *cbc.hpp) read -ra extra <<<"$cbc_flags -DSLUICE_HAVE_CBC=1" ;;
  esac
  stats=$(mktemp)
  echo "#include <${header}>" |
    nice -n 5 /usr/bin/time -f '%U %S %M' -o "$stats" "$cxx" "${flags[@]}" "${extra[@]}" -x c++ - ||
    { echo "failed: $header" >&2; rm -f "$stats"; exit 1; }
  read -r user system kilobytes <"$stats"
  rm -f "$stats"
  cpu_seconds=$(awk -v u="$user" -v s="$system" 'BEGIN { print u + s }')
  printf '| `%s` | %.1f | %d |\n' "$header" "$cpu_seconds" $((kilobytes / 1024))
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
