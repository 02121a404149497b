#!/usr/bin/env bash
# What the timed window holds on the GPU. The poison and the L2 flush run in front of each timed
# call's start event, so the host's work to launch a call's first kernel is done meanwhile and not
# timed: a solution that spends 20 us on the host before its launch times as the same solution
# without (within 5 us). Host work well beyond that leaves the GPU waiting inside the window: 300
# us of it before the launch is paid (the median grows by 0.2 ms or more). Neither is hacking.
# Also: a runner's size sets sit in the arena it reserved while starting, not in fresh
# allocations, its own kernels were loaded while it started, and its context asks for the
# hardware queues the environment names (4 when it names none).
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

# candidate_median FILE: the candidate's median in ms from a verdict
candidate_median() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["timing"]["candidate"]["median_ms"])' "$1" 2>/dev/null
}
for us in 20 300; do
	sed "s/^#define HOST_DELAY_US 20$/#define HOST_DELAY_US $us/" "$FIX/host_delay.cu" >"$WORK/delay$us.cu"
done
# --no-policy: the busy wait reads the clock, which the source check refuses in a candidate
TIMED=(--backend cuda --seed 7 --sets eval --seeds 1 --quiet --no-policy)
# (without CUDA_DEVICE_MAX_CONNECTIONS from the caller's environment: its default is checked below)
env -u CUDA_DEVICE_MAX_CONNECTIONS "$STITCH" verify --json "${TIMED[@]}" "$TASK" "$FIX/good.cu" >"$WORK/good.json" 2>"$WORK/good.err"
verdicts_keep "$WORK/good.json"
check "good: ok" [ "$(field "$WORK/good.json" status)" = ok ]
base=$(candidate_median "$WORK/good.json")
# Every runner of a one-shot verify is fresh and places its size sets in the arena it reserved
# while starting (src/runner/dev_keep.h): no device allocation at set-up; without the arena, one.
stage() { # stage FILE NAME: the verdict's runner_stages_ms[NAME], 0 when absent
	python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1])).get("runner_stages_ms", {}).get(sys.argv[2], 0)))' "$1" "$2" 2>/dev/null
}
arena=$(stage "$WORK/good.json" setup.arena_blocks)
new=$(stage "$WORK/good.json" setup.new_blocks)
check "set-ups in the arena ($arena arena, $new new)" [ "${arena:-0}" -gt 0 -a "${new:-1}" -eq 0 ]
# ...and loaded the harness's own kernels while starting (open_stages.kernels), not at their first
# use inside the verify (CUDA's lazy loading waits on the driver's host-wide lock there)
loaded=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1])).get("runners", {})
print(sum(1 for x in r.values() if "kernels" in x.get("runner_ms", {}).get("open_stages", {})), len(r))' "$WORK/good.json" 2>/dev/null)
check "every runner loaded its kernels while starting ($loaded of the runners)" \
	awk -v a="${loaded% *}" -v b="${loaded#* }" 'BEGIN { exit !(b > 0 && a == b) }'
# Runner contexts get four hardware queues unless the environment names a number (which the
# verdict's device record tells).
queues() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["device"]["hw_queues"])' "$1" 2>/dev/null; }
check "runner contexts get 4 hardware queues by default ($(queues "$WORK/good.json"))" [ "$(queues "$WORK/good.json")" = 4 ]
STITCH_RUNNER_ARENA_MB=0 CUDA_DEVICE_MAX_CONNECTIONS=8 "$STITCH" verify --json "${TIMED[@]}" "$TASK" "$FIX/good.cu" >"$WORK/noarena.json" 2>/dev/null
verdicts_keep "$WORK/noarena.json"
check "CUDA_DEVICE_MAX_CONNECTIONS=8 reaches the runners ($(queues "$WORK/noarena.json"))" [ "$(queues "$WORK/noarena.json")" = 8 ]
arena=$(stage "$WORK/noarena.json" setup.arena_blocks)
new=$(stage "$WORK/noarena.json" setup.new_blocks)
check "STITCH_RUNNER_ARENA_MB=0: set-ups allocate ($arena arena, $new new)" [ "${arena:-1}" -eq 0 -a "${new:-0}" -gt 0 ]
for us in 20 300; do
	"$STITCH" verify --json "${TIMED[@]}" "$TASK" "$WORK/delay$us.cu" >"$WORK/d$us.json" 2>"$WORK/d$us.err"
	verdicts_keep "$WORK/d$us.json"
	check "host delay $us us: ok (status $(field "$WORK/d$us.json" status): $(field "$WORK/d$us.json" reason))" \
		[ "$(field "$WORK/d$us.json" status)" = ok ]
done
m20=$(candidate_median "$WORK/d20.json")
m300=$(candidate_median "$WORK/d300.json")
echo "candidate medians: no host delay $base ms, 20 us $m20 ms, 300 us $m300 ms"
check "20 us of host work before the launch is not timed ($m20 vs $base ms)" \
	awk -v a="${m20:-0}" -v b="${base:-0}" 'BEGIN { exit !(b > 0 && a > 0 && a - b < 0.005 && b - a < 0.005) }'
check "300 us of host work before the launch is paid ($m300 vs $base ms)" \
	awk -v a="${m300:-0}" -v b="${base:-0}" 'BEGIN { exit !(b > 0 && a - b >= 0.2) }'
finish
