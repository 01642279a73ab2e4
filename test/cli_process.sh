#!/usr/bin/env bash
# The tool as a process, where in-process tests cannot reach: standard output on /dev/full or closed (exit 1, one
# line), and a file system that fills up mid-write (a file-size limit): exit 1 (unwritable output), one line, and no
# file, temporary or directory left behind. Usage: cli_process.sh path/to/sluice
set -u
tool=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
expect() {  # expect CODE DESCRIPTION: checks $code and the one line in $scratch/err
  if [ "$code" -ne "$1" ] || [ "$(wc -l < "$scratch/err")" -ne 1 ]; then
    echo "FAIL: $2: exit $code, stderr:"; cat "$scratch/err"; failures=$((failures + 1))
  fi
}
expect_empty() {  # no file at all under $scratch/out
  if [ -n "$(ls -A "$scratch/out")" ]; then
    echo "FAIL: $1 left: $(ls -A "$scratch/out")"; failures=$((failures + 1))
  fi
}

for command in "inspect" "inspect --json" "propose" "propose --json" \
               "shard --gpus 16 --strategy 2*tp8pp1 --model llama2-7b --json" \
               "simulate --iterations 1 --tokens 8000 --trials 2 --json" \
               "plan --strategies 4*tp4pp1 --iterations 2 --tokens 8000"; do
  # shellcheck disable=SC2086
  "$tool" $command > /dev/full 2> "$scratch/err"; code=$?
  expect 1 "$command > /dev/full"
  # shellcheck disable=SC2086
  "$tool" $command >&- 2> "$scratch/err"; code=$?
  expect 1 "$command with stdout closed"
done

mkdir "$scratch/out"
full() {  # runs the tool with writes past 1 KiB failing (EFBIG), as on a full disk
  (trap '' XFSZ; ulimit -f 1; exec "$tool" "$@") > /dev/null 2> "$scratch/err"
}
full simulate --iterations 1 --tokens 8000 --trials 2 --svg "$scratch/out/pictures" --trace "$scratch/out/trace.json"; code=$?
expect 1 "simulate --svg --trace on a full disk"; expect_empty "simulate on a full disk"
full plan --strategies 4*tp4pp1 --iterations 2 --tokens 8000 --svg "$scratch/out/loads.svg"; code=$?
expect 1 "plan --svg on a full disk"; expect_empty "plan on a full disk"
full schedule --stages 2 --tokens 8000 --trace "$scratch/out/trace.json"; code=$?
expect 1 "schedule --trace on a full disk"; expect_empty "schedule on a full disk"
full trace --tokens 8000 --trials 2 --svg "$scratch/out/t.svg"; code=$?
expect 1 "trace --svg on a full disk"; expect_empty "trace on a full disk"
full inspect --svg "$scratch/out/h.svg"; code=$?
expect 1 "inspect --svg on a full disk"; expect_empty "inspect on a full disk"

if [ "$failures" -ne 0 ]; then echo "$failures failed"; exit 1; fi
echo "cli_process: all passed"
