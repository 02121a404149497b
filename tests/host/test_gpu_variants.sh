#!/usr/bin/env bash
# scripts/gpu-variants' verify path, on the host backend: a variant of a host expert that only
# adds a comment verifies ok beside its expert (a line with the status, the three medians and
# the speed-up, the verdict kept), one that doubles the answer is named with its status and
# reason, and the script's exit says whether every variant was ok. (The CUDA variants of
# bench/variants take the same path on a GPU; tests/suite/test_variants.sh checks that they
# apply and compile.)
. "$(dirname "$0")/../lib.sh"
GV="$STITCH_SRC/scripts/gpu-variants"
EXPERT=tasks/t1/transpose/expert.c
command -v patch >/dev/null || { echo "SKIP: no patch tool on this machine"; exit 77; }

mkdir -p "$WORK/v"
mkpatch() { # NAME FILE: the patch that turns the expert into FILE
	diff -u --label "a/$EXPERT" --label "b/$EXPERT" "$STITCH_SRC/$EXPERT" "$2" >"$WORK/v/$1.patch"
}
{ echo "/* the expert, other bytes */"; cat "$STITCH_SRC/$EXPERT"; } >"$WORK/comment.c"
mkpatch comment "$WORK/comment.c"
sed 's/= x\[r \* cols + col\];/= 2.0f * x[r * cols + col];/' "$STITCH_SRC/$EXPERT" >"$WORK/wrong.c"
check "the wrong variant differs from the expert" [ "$(cmp -s "$WORK/wrong.c" "$STITCH_SRC/$EXPERT"; echo $?)" -eq 1 ]
mkpatch wrong "$WORK/wrong.c"

VOPTS=(-- --seed 7 --min-time 5 --max-rse 0.5 --max-samples 200)
STITCH=$STITCH "$GV" --backend host --dir "$WORK/v" "$WORK/out" "${VOPTS[@]}" >"$WORK/all.out" 2>&1
rc=$?
cat "$WORK/all.out"
check "one wrong variant: exit 1 (exit $rc)" [ "$rc" -eq 1 ]
check "the comment variant: ok, its medians and speed-up" grep -Eq \
	'^comment \(t1/transpose\): ok; medians ms: candidate [0-9.]+, expert [0-9.]+, reference [0-9.]+; [0-9.]+x the expert' \
	"$WORK/all.out"
check "the wrong variant: named with its status" grep -q '^wrong (t1/transpose): incorrect;' "$WORK/all.out"
check "and the reason under it" grep -A1 '^wrong ' "$WORK/all.out" | grep -q '^    .'
check "the verdicts are kept" [ -s "$WORK/out/comment.json" ] && [ -s "$WORK/out/wrong.json" ]
verdicts_keep "$WORK/out/comment.json"
verdicts_keep "$WORK/out/wrong.json"

STITCH=$STITCH "$GV" --backend host --dir "$WORK/v" "$WORK/out1" comment "${VOPTS[@]}" >"$WORK/one.out" 2>&1
rc=$?
check "the comment variant alone: exit 0 (exit $rc)" [ "$rc" -eq 0 ]
check "and nothing else ran" [ "$(grep -c '(t1/transpose)' "$WORK/one.out")" -eq 1 ]
"$GV" --backend host --check "$WORK/x" >/dev/null 2>&1
check "--check with --backend host is bad usage (exit 2)" [ $? -eq 2 ]
finish
