#!/usr/bin/env bash
# The library's layers, as docs/architecture.md draws them: each folder of include/sluice/ may include only the
# folders listed for it, so that no arrow points back up (and nothing below io/ needs the JSON layer).
# Usage: layering.sh path/to/include/sluice
set -u
root=$1
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
[ "$failures" -eq 0 ] && echo "layering holds" || echo "$failures includes break the layering"
exit $((failures > 0))
