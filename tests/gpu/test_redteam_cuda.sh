#!/usr/bin/env bash
# The red-team suite on the GPU: every exploit in tests/redteam/cuda gets the verdict its header
# demands and every honest-but-unusual solution passes (`caught N of N`).
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

"$STITCH" redteam --quiet --timeout 10 >"$WORK/rt.out" 2>"$WORK/rt.err"
rc=$?
cat "$WORK/rt.out"
n=$(ls "$STITCH_SRC"/tests/redteam/cuda/*.cu | wc -l)
check "redteam cuda: exit 0 (got $rc; $(tail -n 2 "$WORK/rt.err"))" [ "$rc" -eq 0 ]
check "redteam cuda: caught $n of $n" grep -q "^caught $n of $n$" "$WORK/rt.out"
finish
