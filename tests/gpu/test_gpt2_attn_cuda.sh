#!/usr/bin/env bash
# t3/gpt2_forward's attention (tests/gpu/gpt2_attn_selftest.cu): the sm_90a kernel on TMA maps of
# the qkv buffer and the mma.sync fallback against a host reference on ragged T, graph replays
# and causality bit for bit, then both timed at the eval size.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

major=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | cut -d. -f1)
if [ "$major" != 9 ]; then
	echo "SKIP: the GPT-2 attention self-test needs an sm_90 GPU (this one: compute capability ${major:-none})"
	exit 77
fi
selftest gast gpt2_attn_selftest.cu sm_90a -lcublasLt
check "every case matches the host, replays and causality hold (exit $RC)" [ "$RC" -eq 0 ]
check "the sm_90a path was the one tested" grep -q "sm_90a path usable = 1" "$WORK/gast.log"
finish
