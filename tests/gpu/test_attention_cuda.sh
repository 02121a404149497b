#!/usr/bin/env bash
# The sm_90a attention paths of the two attention experts (TMA, wgmma, mbarrier ring), each held to
# a host reference piece by piece (tests/gpu/wgmma_selftest.cu: the TMA + SS wgmma tile, the RS
# wgmma P·V, whole calls on ragged T), then timed against the sm_80 path it falls back to:
# t2/attention_causal at D = 64 and t4/flash_attention at D = 128 (its default build, the
# producer warpgroup with setmaxnreg; that build has no watchdog, so a hung kernel ends at the
# timeout below).
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

need_sm90 "the wgmma self-test"
for d in 64 128; do
	selftest "wst$d" wgmma_selftest.cu sm_90a -DSELFTEST_D=$d
	check "D = $d: every tile case and every whole call matches the host (exit $RC)" [ "$RC" -eq 0 ]
	check "D = $d: the Hopper path was the one tested" \
		grep -q "sm_90a path usable = 1" "$WORK/wst$d.log"
done
finish
