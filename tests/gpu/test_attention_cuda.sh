#!/usr/bin/env bash
# The sm_90a attention path of t2/attention_causal's expert (TMA, wgmma, mbarrier ring) held to a
# host reference piece by piece (tests/gpu/wgmma_selftest.cu: the TMA + SS wgmma tile, the RS
# wgmma P·V, whole calls on ragged T), then timed against the sm_80 path it falls back to.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

major=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | cut -d. -f1)
if [ "$major" != 9 ]; then
	echo "SKIP: the wgmma self-test needs an sm_90 GPU (this one: compute capability ${major:-none})"
	exit 77
fi
nvcc -std=c++17 -arch=sm_90a -I"$STITCH_SRC/include" -o "$WORK/wst" \
	"$STITCH_SRC/tests/gpu/wgmma_selftest.cu" >"$WORK/nvcc.log" 2>&1
check "the self-test builds for sm_90a" [ $? -eq 0 ]
timeout 300 "$WORK/wst" bench >"$WORK/wst.log" 2>&1
rc=$?
cat "$WORK/wst.log"
check "every tile case and every whole call matches the host (exit $rc)" [ "$rc" -eq 0 ]
check "the Hopper path was the one tested" grep -q "sm_90a path usable = 1" "$WORK/wst.log"
finish
