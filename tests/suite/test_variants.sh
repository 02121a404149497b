#!/usr/bin/env bash
# The blind variants of bench/variants still apply to the experts they change and compile for
# sm_90a (scripts/gpu-variants --check), so none waits for a GPU in a state that cannot run; and
# the script says so when one does not: a patch whose context no longer matches its expert, and
# one that applies but does not compile, each make it exit 1 with the variant named. Needs nvcc,
# not a GPU; skipped with a reason without one.
. "$(dirname "$0")/../lib.sh"

find_nvcc
if [ -z "$NVCC" ] || ! command -v patch >/dev/null; then
	echo "SKIP: no nvcc or no patch tool on this machine; the variants cannot be checked here"
	exit 77
fi
export STITCH_NVCC=$NVCC # the script compiles with the same one
GV="$STITCH_SRC/scripts/gpu-variants"

# the folder's own patches, when any wait for a GPU (none, once every one was measured)
n=$(ls "$STITCH_SRC"/bench/variants/*.patch 2>/dev/null | wc -l)
"$GV" --check "$WORK/all" >"$WORK/all.out" 2>&1
rc=$?
cat "$WORK/all.out"
check "every variant of bench/variants applies and compiles (exit $rc)" [ "$rc" -eq 0 ]
check "a line for each of its $n variants" [ "$(grep -c ': applies to tasks/.* and compiles for sm_90a$' "$WORK/all.out")" -eq "$n" ]
[ "$n" -gt 0 ] || check "an empty folder is said to be one" grep -q 'none waiting for a GPU' "$WORK/all.out"

# a good patch (a comment added to t1/softmax's expert), the same made stale (its context
# changed), and a broken one (applies, does not compile)
mkdir -p "$WORK/good" "$WORK/bad"
E=tasks/t1/softmax/expert.cu
{ cat "$STITCH_SRC/$E"; echo "/* a variant that only adds this comment */"; } >"$WORK/softmax.cu"
diff -u --label "a/$E" --label "b/$E" "$STITCH_SRC/$E" "$WORK/softmax.cu" >"$WORK/good/comment.patch"
"$GV" --check --dir "$WORK/good" "$WORK/goodout" >"$WORK/good.out" 2>&1
rc=$?
cat "$WORK/good.out"
check "a good patch: exit 0 (exit $rc)" [ "$rc" -eq 0 ]
check "it is named as applying and compiling" grep -q "^comment: applies to $E and compiles for sm_90a$" "$WORK/good.out"
sed '0,/^ /s/^ \(.*\)$/ \1 stale/' "$WORK/good/comment.patch" >"$WORK/bad/stale.patch"
cat >"$WORK/bad/broken.patch" <<'P'
--- a/tasks/t1/softmax/expert.cu
+++ b/tasks/t1/softmax/expert.cu
@@ -1,1 +1,2 @@
+this is not C++;
P
sed -n 1p "$STITCH_SRC/tasks/t1/softmax/expert.cu" | sed 's/^/ /' >>"$WORK/bad/broken.patch"
"$GV" --check --dir "$WORK/bad" "$WORK/badout" >"$WORK/bad.out" 2>&1
rc=$?
cat "$WORK/bad.out"
check "bad patches: exit 1 (exit $rc)" [ "$rc" -eq 1 ]
check "the stale patch is named as not applying" grep -q '^stale: the patch does not apply to tasks/' "$WORK/bad.out"
check "the broken one is named as not compiling" grep -q '^broken: does not compile for sm_90a:' "$WORK/bad.out"
"$GV" --check --dir "$WORK/bad" "$WORK/x" no_such >"$WORK/none.out" 2>&1
check "an unknown variant is named" grep -q '^no_such: no ' "$WORK/none.out"
finish
