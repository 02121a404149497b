#!/usr/bin/env bash
# The device input generator (the one every GPU verify draws its inputs from, before every timed
# call of an untrusted candidate) held to its host recipe and to its distributions, including a
# pair whose first uniform rounds to 1 (tests/gpu/gen_check.cu).
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

GEN="$(dirname "$STITCH")/stitch-test-gen"
check "stitch-test-gen is built beside stitch ($GEN)" [ -x "$GEN" ]
if [ -x "$GEN" ]; then
	"$GEN" 64 >"$WORK/gen.log" 2>&1
	rc=$?
	cat "$WORK/gen.log"
	check "every generator case matches its recipe and distribution (exit $rc)" [ "$rc" -eq 0 ]
fi
finish
