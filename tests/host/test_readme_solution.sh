#!/usr/bin/env bash
# The solutions README.md teaches ("Writing a solution") work as written: the C one, the fenced
# block after the line `<!-- readme-solution: host ...`, verifies `ok` on the host backend
# (exit 0, on the default small set and on every size set, hidden ones included); the CUDA one,
# the block after `<!-- readme-solution: cuda ...`, compiles with nvcc for sm_90a where nvcc is
# found (else that part is skipped, with the reason printed).
. "$(dirname "$0")/../lib.sh"

README="$STITCH_SRC/README.md"
# block MARKER FENCE: the lines of the first ```FENCE block after the marker line
block() {
	awk -v m="<!-- readme-solution: $1" -v open="\`\`\`$2" '
		index($0, m) == 1 { found = 1; next }
		found && !inside && $0 == open { inside = 1; next }
		inside && $0 == "```" { exit }
		inside { print }' "$README"
}
block host c >"$WORK/my_softmax.c"
block cuda cuda >"$WORK/my_softmax.cu"
check "README has the host solution block" grep -q 'st_run' "$WORK/my_softmax.c"
check "README has the cuda solution block" grep -q '__global__' "$WORK/my_softmax.cu"

verify "$WORK/host.json" t1/softmax "$WORK/my_softmax.c"
check "host solution: exit $RC, want 0 ($(field "$WORK/host.json" reason))" [ "$RC" -eq 0 ]
check "host solution: status ok" [ "$(field "$WORK/host.json" status)" = ok ]
verify "$WORK/host_all.json" t1/softmax "$WORK/my_softmax.c" --sets small,eval,hidden --seeds 1 \
	--no-timing
check "host solution on every size set: exit $RC, want 0 ($(field "$WORK/host_all.json" reason))" \
	[ "$RC" -eq 0 ]
check "host solution on every size set: hidden ones checked" grep -q '"set": "hidden2"' \
	"$WORK/host_all.json"

find_nvcc
if [ -n "$NVCC" ]; then
	"$NVCC" -c -arch=sm_90a -std=c++17 -I"$STITCH_SRC/include" -Werror all-warnings \
		-o "$WORK/my_softmax.o" "$WORK/my_softmax.cu" >"$WORK/nvcc.log" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] || cat "$WORK/nvcc.log"
	check "cuda solution compiles with $NVCC (rc $rc)" [ "$rc" -eq 0 ]
else
	echo "skipped: the cuda solution's compile check (no nvcc on PATH, \$STITCH_NVCC or /usr/local/cuda/bin)"
fi
finish
