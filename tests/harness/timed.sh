#!/usr/bin/env bash
# timed.sh NAME CMD...: run CMD, then record how long it took in .cache/timings.txt (printed by `make timings`).
name=$1; shift
start=$(date +%s)
"$@"
rc=$?
mkdir -p .cache
printf '%-28s %5ss  rc=%s\n' "$name" "$(( $(date +%s) - start ))" "$rc" | tee -a .cache/timings.txt >&2
exit $rc
