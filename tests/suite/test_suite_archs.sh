#!/usr/bin/env bash
# Every shipped CUDA solution of the bundled suite (reference.cu, expert*.cu) compiles for the
# three GPU generations the suite targets: Ampere (sm_80), Hopper (sm_90a) and Blackwell
# (sm_100a), with the flags the verifier uses. Code that exists for one generation only must be
# guarded so the others still build. Needs nvcc, not a GPU; skipped with a reason without one.
. "$(dirname "$0")/../lib.sh"

find_nvcc
if [ -z "$NVCC" ]; then
	echo "SKIP: no nvcc on this machine; the suite's CUDA files cannot be compiled here"
	exit 77
fi
ARCHS=(-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a
	-gencode arch=compute_100a,code=sm_100a)
export NVCC WORK STITCH_SRC
export ARCHS_FLAT="${ARCHS[*]}"
compile_one() { # FILE: one line "ok FILE" or "FAIL FILE" followed by the log
	local f=$1 out
	out="$WORK/obj/$(echo "${f#"$STITCH_SRC"/tasks/}" | tr / _).o"
	# shellcheck disable=SC2086
	if "$NVCC" -std=c++17 -O3 -Xcompiler -fPIC $ARCHS_FLAT -I"$STITCH_SRC/include" -c "$f" \
		-o "$out" >"$out.log" 2>&1; then
		echo "ok $f"
	else
		echo "FAIL $f"
		head -n 20 "$out.log" | sed 's/^/    /'
	fi
}
export -f compile_one
mkdir -p "$WORK/obj"
find "$STITCH_SRC/tasks" -name '*.cu' \( -name 'reference.cu' -o -name 'expert*.cu' \) | sort \
	>"$WORK/files"
n=$(wc -l <"$WORK/files")
check "the suite has CUDA solutions ($n files)" [ "$n" -ge 8 ]
start=$(date +%s)
xargs -P "$(nproc)" -I{} bash -c 'compile_one "$@"' _ {} <"$WORK/files" >"$WORK/results"
cat "$WORK/results"
while read -r f; do
	check "$f compiles for sm_80, sm_90a and sm_100a" grep -qx "ok $f" "$WORK/results"
done <"$WORK/files"
echo "compiled $n files for three archs in $(($(date +%s) - start)) s"
finish
