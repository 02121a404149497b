#!/usr/bin/env bash
# GPU faults are verdicts: an illegal address, a trap, a kernel that never ends, a failed
# allocation, a wrong or unwritten element; and the parent carries on with the next job.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

expect wrong.cu incorrect 'worst y\[500\]'
expect unwritten.cu incorrect 'y\[999\]'
expect illegal.cu runtime_error 'illegal'
expect trap.cu runtime_error 'CUDA error'
expect oom.cu runtime_error 'st_init returned 12'
check "oom: what it printed is in the verdict as its own" grep -q '"candidate": "oom fixture: cudaMalloc of 1 PiB: out of memory' "$WORK/oom.cu.json"
start=$(date +%s)
expect hang.cu timeout 'did not answer within 5 s' --timeout 5
took=$(($(date +%s) - start))
check "hang: verdict within 40 s (took $took s)" [ "$took" -lt 40 ]
check "hang: no runner left behind" bash -c '! pgrep -f "[s]titch-runner-cuda --fd" >/dev/null'

verify "$WORK/good.json" "$TASK" "$FIX/good.cu"
check "good after the faults: ok (rc $RC, $(field "$WORK/good.json" reason))" [ "$(field "$WORK/good.json" status)" = ok ]
finish
