#!/usr/bin/env bash
# One program's file output written to every kind of destination, checked as a user of any Unix tool expects:
# a new file is made and an existing one keeps its permission bits; a symbolic link is written through and stays a
# link; a FIFO (with a reader) and standard output ("-", /dev/stdout) are written directly; a character device with
# /dev/null's numbers takes the text and one with /dev/full's fails with exit 1 and one line on stderr, both staying
# devices (nodes made in a scratch directory, never the machine's own; skipped and reported when they cannot be
# made); a directory is bad input (exit 2, one line). Usage:
#   output_kinds.sh EXPECTED COMMAND...
# where the argument OUT of COMMAND is replaced by the destination and EXPECTED is a string the output holds.
set -u
expected=$1
shift
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

run() {  # run DESTINATION: the command with OUT replaced; its stdout in $scratch/stdout, stderr in $scratch/stderr
  local arguments=() word
  for word in "${command[@]}"; do
    if [ "${word}" = OUT ]; then arguments+=("$1"); else arguments+=("${word}"); fi
  done
  timeout 300 "${arguments[@]}" > "${scratch}/stdout" 2> "${scratch}/stderr"
}
command=("$@")

expect() {  # expect CODE DESCRIPTION: the last run's exit code, and one line on stderr when it failed
  if [ "${code}" -ne "$1" ]; then
    fail "$2: exit ${code} (expected $1): $(head -c 300 "${scratch}/stderr")"
  elif [ "$1" -ne 0 ] && [ "$(wc -l < "${scratch}/stderr")" -ne 1 ]; then
    fail "$2: not one line on stderr: $(cat "${scratch}/stderr")"
  fi
}

holds() {  # holds FILE DESCRIPTION
  grep -q -- "${expected}" "$1" || fail "$2: '${expected}' not written"
}

mkdir "${scratch}/out"
cd "${scratch}/out" || exit 1

run new.out; code=$?
expect 0 "a new file"; holds new.out "a new file"
[ "$(stat -c %a new.out)" = 644 ] || fail "a new file: mode $(stat -c %a new.out), expected 644"

chmod 600 new.out
run new.out; code=$?
expect 0 "an existing file"; holds new.out "an existing file"
[ "$(stat -c %a new.out)" = 600 ] || fail "an existing file: mode $(stat -c %a new.out), expected 600 kept"

mkdir sub
echo old > sub/target.out
ln -s sub/target.out link.out
run link.out; code=$?
expect 0 "a symbolic link"; holds sub/target.out "a symbolic link"
[ -L link.out ] || fail "a symbolic link: link.out is no longer a link"

mkfifo fifo
cat fifo > from-fifo &
reader=$!
run fifo; code=$?
wait "${reader}"
expect 0 "a FIFO"; holds from-fifo "a FIFO"
[ -p fifo ] || fail "a FIFO: fifo is no longer a FIFO"

for name in - /dev/stdout; do
  run "${name}"; code=$?
  expect 0 "${name}"; holds "${scratch}/stdout" "${name}"
done

if mknod null c 1 3 2> /dev/null && mknod full c 1 7 2> /dev/null; then
  run null; code=$?
  expect 0 "a character device (/dev/null's numbers)"
  [ -c null ] || fail "a character device: null is no longer one"
  run full; code=$?
  expect 1 "a character device (/dev/full's numbers)"
  grep -q "full: write error" "${scratch}/stderr" || fail "/dev/full's numbers: $(cat "${scratch}/stderr")"
  [ -c full ] || fail "a character device: full is no longer one"
else
  echo "skipped: cannot make device nodes here (needs root): the character-device cases did not run"
fi

mkdir directory
run directory; code=$?
expect 2 "a directory"
if [ ! -d directory ] || [ -n "$(ls -A directory)" ]; then fail "a directory: changed"; fi

leftovers=$(find . -name '.*.sluice-*')
[ -z "${leftovers}" ] || fail "temporaries left behind: ${leftovers}"
if [ "${failures}" -ne 0 ]; then
  echo "${failures} failed: ${command[*]}"
  exit 1
fi
echo "output kinds: all passed: ${command[*]}"
