#!/usr/bin/env bash
# t3/gpt2_forward's attention (tests/gpu/gpt2_attn_selftest.cu): the sm_90a kernel on TMA maps of
# the qkv buffer and the mma.sync fallback against a host reference on ragged T, graph replays
# and causality bit for bit, then both timed at the eval size.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

need_sm90 "the GPT-2 attention self-test"
selftest gast gpt2_attn_selftest.cu sm_90a -lcublasLt
check "every case matches the host, replays and causality hold (exit $RC)" [ "$RC" -eq 0 ]
check "the sm_90a path was the one tested" grep -q "sm_90a path usable = 1" "$WORK/gast.log"
finish
