#!/usr/bin/env bash
# Runs every `sluice ...` line of the documentation's shell examples as written: README.md's "Command line"
# section and the ```sh blocks of docs/cli.md, each document's lines in order in one fresh directory (later
# lines read what earlier ones wrote, e.g. proposal.json), `sluice` being the built tool. A line ending in
# a `# doc-test: skip (why)` comment is not run. Fails naming the first line that exits non-zero.
#   test/docs/commands.sh TOOL SOURCE_DIR [--time]
set -euo pipefail
tool=$(realpath "$1")
source_dir=$(realpath "$2")
timing=${3:-}
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

# The lines of the ```sh blocks of a markdown file (of one section only, when given), continuations joined.
sh_lines() {  # FILE [SECTION-HEADING]
  awk -v section="${2:-}" '
    /^#+ / { if (section != "") inside = ($0 == section) }
    section != "" && !inside { next }
    /^```sh$/ { block = 1; next }
    /^```/ { block = 0; next }
    block {
      line = line $0
      if (line ~ /\\$/) { sub(/\\$/, "", line); next }
      print line; line = ""
    }' "$1"
}

# Files the examples name as the reader's own: a profile, measured samples, a trainer's batch and a NumPy length
# file (int32, little-endian).
fixtures() {
  cp "${source_dir}/data/profiles/llama2-7b.json" my_profile.json
  cp "${source_dir}/data/samples/example.samples.csv" my_samples.csv
  echo '[{"id": 3, "length": 4096}, {"id": 8, "length": 17000}, {"id": 12, "length": 950}, {"id": 20, "length": 2300}]' \
    > my-batch.json
  local lengths=()
  mapfile -t lengths < <(grep -E '^[0-9]+$' "${source_dir}/data/lengths/cpython-stdlib.lengths.txt")
  local header="{'descr': '<i4', 'fortran_order': False, 'shape': (${#lengths[@]},), }"
  while (( (10 + ${#header} + 1) % 64 != 0 )); do header+=" "; done
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $(( (${#header} + 1) % 256 )))\\x$(printf %02x $(( (${#header} + 1) / 256 )))"
    printf '%s\n' "${header}"
    for value in "${lengths[@]}"; do
      printf "\\x$(printf %02x $((value & 255)))\\x$(printf %02x $(((value >> 8) & 255)))"
      printf "\\x$(printf %02x $(((value >> 16) & 255)))\\x$(printf %02x $(((value >> 24) & 255)))"
    done
  } > lengths.npy
}

sluice() { "${tool}" "$@"; }

run_document() {  # NAME FILE [SECTION]
  local dir=${work}/$1
  mkdir -p "${dir}"
  cd "${dir}"
  fixtures
  local count=0 line
  while IFS= read -r line; do
    [[ ${line} =~ ^sluice\  ]] || continue
    if [[ ${line} =~ \#\ doc-test:\ skip ]]; then
      echo "skipped: ${line}"
      continue
    fi
    local start=${SECONDS}
    if ! (eval "${line}") > "${dir}/out.txt" 2> "${dir}/err.txt" < /dev/null; then
      echo "FAILED ($2): ${line}"
      tail -n 5 "${dir}/err.txt"
      exit 1
    fi
    [ -z "${timing}" ] || echo "$((SECONDS - start)) s: ${line}"
    count=$((count + 1))
  done < <(sh_lines "$2" "${3:-}")
  echo "$2: ${count} commands ran"
  [ "${count}" -gt 0 ] || { echo "no command found in $2"; exit 1; }
}

# A ```json block whose preceding text names a command (`sluice ... --json`) shows that command's output: every
# "key": value it shows must be in the output (a number may be shortened by dropping trailing digits).
check_json_examples() {  # FILE
  local dir=${work}/json
  mkdir -p "${dir}"
  cd "${dir}"
  awk -v dir="${dir}" '
    /^```json$/ { block++; file = dir "/" block ".json"; print command > (dir "/" block ".cmd"); next }
    /^```/ { file = ""; next }
    file != "" { print > file; next }
    match($0, /`sluice [^`]*`/) { command = substr($0, RSTART + 1, RLENGTH - 2) }' "$1"
  local checked=0 example command pair key value pattern
  for example in "${dir}"/*.json; do
    [ -e "${example}" ] || break
    command=$(cat "${example%.json}.cmd")
    [[ ${command} =~ ^sluice\ .*--json ]] || { echo "$1: a JSON example names no sluice --json command"; exit 1; }
    (eval "${command}") > output.txt < /dev/null || { echo "FAILED ($1): ${command}"; exit 1; }
    while IFS= read -r pair; do
      key=${pair%%\":*}\"
      value=${pair#*\": }
      [ "${value}" != '"..."' ] || continue
      pattern="${key}: ${value//./\\.}"
      [[ ${value} =~ ^-?[0-9]+\.[0-9]+$ ]] && pattern+="[0-9]*"
      if ! grep -qE "${pattern}(,|\$)" output.txt; then
        echo "$1: \`${command}\` does not print ${pair}; it prints: $(grep -E "${key}: " output.txt | head -n 3 | tr -s ' \n' ' ')"
        exit 1
      fi
      checked=$((checked + 1))
    done < <(grep -oE '"[a-z_]+": ("[^"]*"|-?[0-9][0-9.e+-]*|true|false)' "${example}")
  done
  echo "$1: ${checked} values of JSON examples checked"
}

run_document readme "${source_dir}/README.md" "### Command line"
run_document cli "${source_dir}/docs/cli.md"
check_json_examples "${source_dir}/docs/cli.md"
