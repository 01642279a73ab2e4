#!/usr/bin/env bash
# Runs every command of commands.txt and compares its output with the recorded one, byte for byte, so that a
# refactor provably changes no plan, figure or document. Usage: check.sh path/to/sluice [--update]
set -u
tool=$1
update=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../../data" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
while read -r name args; do
  case "$name" in ''|'#'*) continue ;; esac
  # "@file" in the arguments names a file the command writes, compared (or recorded) as NAME.file.
  extra=$(grep -o '@[^ ]*' <<< "$args" | tr -d '@')
  # "<data>" names the bundled data directory, written back as "<data>" in the output below.
  args=${args//<data>/$data}
  # shellcheck disable=SC2086
  if ! "$tool" ${args//@/$scratch/} > "$scratch/$name.json" 2> "$scratch/err"; then
    echo "FAIL: $name: sluice $args"; cat "$scratch/err"; failures=$((failures + 1)); continue
  fi
  # Wall-clock planning times are measured, not planned, and the bundled data's path depends on the checkout:
  # both are blanked before comparing.
  sed -i -E -e 's/("(mean_)?planning_seconds": )[^,}]*/\1"measured"/' -e "s|$data/|<data>/|g" "$scratch/$name.json" ${extra:+"$scratch/$extra"}
  for file in "$name.json" ${extra:+"$name.${extra#*.}"}; do
    produced=$scratch/$file
    [ "$file" = "$name.json" ] || produced=$scratch/$extra
    if [ "$update" = "--update" ]; then
      cp "$produced" "$here/$file"
    elif ! cmp -s "$produced" "$here/$file"; then
      echo "FAIL: $name: $file differs from the recorded output"
      diff <(head -c 200000 "$here/$file") <(head -c 200000 "$produced") | head -20
      failures=$((failures + 1))
    fi
  done
done < "$here/commands.txt"
[ "$failures" -eq 0 ] && echo "all outputs identical" || echo "$failures outputs differ"
exit $((failures > 0))
