#!/usr/bin/env bash
# The library's layers, as docs/architecture.md draws them, and its naming rule for checks: each folder of include/sluice/ may include only the
# folders listed for it, so that no arrow points back up (and nothing below io/ needs the JSON layer). With the
# examples folder too: the tools (the CLI, the executor programs, the Python bindings) include the library, the
# executor's public headers (the executor programs only), examples/common/ and their own folder's files, never
# another tool's files.
# Usage: layering.sh path/to/include/sluice [path/to/examples]
set -u
root=$1
examples=${2:-}
declare -A allowed=(
  [core]=""
  [solver]="core"
  [cost]="core"
  [data]="core"
  [microbatch]="core cost"
  [assign]="core cost solver"
  [shard]="core cost"
  [search]="core cost"
  [proposal]="core cost data assign"
  [schedule]="core cost assign microbatch"
  [plan]="core cost assign microbatch schedule shard"
  [compare]="core cost data proposal assign microbatch schedule shard plan"
  [io]="core solver cost data microbatch assign shard search proposal schedule plan compare"
)
failures=0
for dir in "$root"/*/; do
  module=$(basename "$dir")
  if [ -z "${allowed[$module]+set}" ]; then
    echo "FAIL: include/sluice/$module/ is not in the layering table (test/layering.sh, docs/architecture.md)"
    failures=$((failures + 1)); continue
  fi
  while IFS=: read -r file _ used; do
    case " $module ${allowed[$module]} " in *" $used "*) ;; *)
      echo "FAIL: ${file#"$root"/} includes sluice/$used/, above or beside $module/ in the layering"
      failures=$((failures + 1)) ;;
    esac
  done < <(grep -rnoE '#include "sluice/[a-z_]+/' "$dir" | sed -E 's|#include "sluice/([a-z_]+)/$|\1|')
done
if [ -n "$examples" ]; then
  declare -A tool_allowed=([cli]="sluice/ ../common/" [executor]="sluice/ sluice_executor/ ../common/"
                           [python/src]="sluice/" [common]="sluice/")
  for tool in cli executor python/src common; do
    while IFS=: read -r file _ included; do
      included=${included#\#include \"}
      included=${included%\"}
      ok=0
      for prefix in ${tool_allowed[$tool]}; do [[ $included == "$prefix"* ]] && ok=1; done
      # A file of the tool's own folder, named without a path.
      [[ $included != */* && -f "$examples/$tool/$included" ]] && ok=1
      if [ "$ok" -eq 0 ]; then
        echo "FAIL: examples/$tool/${file##*/} includes \"$included\", outside what examples/$tool/ may use"
        failures=$((failures + 1))
      fi
    done < <(grep -nE '^#include "' "$examples/$tool"/*.hpp "$examples/$tool"/*.cpp 2> /dev/null)
  done
fi
# The naming rule (docs/architecture.md): `validate` checks a plan against its inputs; options, configurations and
# other inputs are checked by a free require_valid, never by a member that validates its own object.
while IFS= read -r hit; do
  echo "FAIL: ${hit#"$root"/}: an input checks itself with validate(); name it require_valid(input)"
  failures=$((failures + 1))
done < <(grep -rnE 'void validate\(\) const' "$root")
[ "$failures" -eq 0 ] && echo "layering holds" || echo "$failures includes or names break the layering"
exit $((failures > 0))
