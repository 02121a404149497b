#!/usr/bin/env bash
# Verifies that share one GPU (`stitch serve --per-gpu 2`) keep each other's candidates off it
# while they time: an honest copy of t1/topk's expert verified beside the red team's
# sabotage_gpu.cu, whose idle runner keeps short kernels on the GPU whenever it waits for a
# request, is timed at its own speed, as fast as the expert it copies. Until session 36 only the
# baselines' batches stopped the neighbours: the copy's own batches shared the GPU with the
# saboteur's kernels and it came out about 4x slower than the expert (a wrong reward, and under
# a group-relative reward a higher one for the saboteur). Three rounds of the pair posted at once;
# the figures hold in every round, and the neighbours are seen stopped in at least one (the two
# verifies need not overlap in time).
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve_lib.sh"
export STITCH_TASKS="$STITCH_SRC/tasks"
# (no --warm: serve_start waits 20 s for the port, and the first pair compiles the baselines)
serve_start pair --gpus 0 --per-gpu 2 --sets eval --seeds 1 || exit 1

# a copy of the expert with other bytes, so that it runs in a runner of its own
{ echo "/* an honest copy */"; cat "$STITCH_SRC/tasks/t1/topk/expert.cu"; } >"$WORK/honest.cu"
post() { # post NAME FILE: POST /v1/verify of the file on t1/topk, id NAME
	body "$WORK/$1.req" "{\"task\": \"t1/topk\", \"id\": \"$1\"}" "$2"
	http "$1" POST /v1/verify "$WORK/$1.req"
}
seen=0
for round in 1 2 3; do
	post "honest$round" "$WORK/honest.cu" &
	a=$!
	post "sab$round" "$STITCH_SRC/tests/redteam/cuda/sabotage_gpu.cu" &
	b=$!
	wait "$a" "$b"
	h="$WORK/honest$round.body"
	s="$WORK/sab$round.body"
	check "round $round: the copy ok ($(jget "$h" status): $(jget "$h" verdict.reason))" [ "$(jget "$h" status)" = ok ]
	check "round $round: the saboteur ok ($(jget "$s" status): $(jget "$s" verdict.reason))" [ "$(jget "$s" status)" = ok ]
	vs=$(jget "$h" verdict.speedup.vs_expert)
	check "round $round: the copy at 0.85x its expert or more (got $vs; neighbours stopped $(jget "$h" verdict.timing.candidate_stopped.neighbours))" \
		awk -v x="${vs:-0}" 'BEGIN { exit !(x >= 0.85) }'
	vr=$(jget "$s" verdict.speedup.vs_reference)
	check "round $round: the saboteur at 1.3x the reference or less (got $vr)" \
		awk -v x="${vr:-9}" 'BEGIN { exit !(x > 0 && x <= 1.3) }'
	n=$(jget "$h" verdict.timing.candidate_stopped.neighbours)
	q=$(jget "$h" verdict.timing.gpu_quiet.candidate.batches)
	[ "${n:-0}" -gt 0 ] && [ "${q:-0}" -gt 0 ] && seen=$((seen + 1))
done
check "the saboteur's runner stopped for the copy's batches, and their quiet probes, in a round at least ($seen of 3)" [ "$seen" -ge 1 ]
kill -TERM "$SPID"
wait "$SPID"
rc=$?
check "serve drained and stopped (exit $rc)" [ "$rc" -eq 0 ]
pkill -9 -f "[s]titch-runner-cuda --fd .* --workdir $WORK/rtmp/" 2>/dev/null
finish
