#!/usr/bin/env bash
# Independent `stitch verify` processes on one GPU take turns to measure through the GPU's lock
# file (src/verify/gpu_flock.c): three started together each end `ok`, all within three minutes
# (their compiles and the device's peaks included), each verdict saying how long it waited for
# the others (gpu_wait_s), the lock files made in STITCH_GPU_LOCK_DIR. Before session 43 each
# verify's quiet probe saw the others' contexts and waited for them: on the H200 three such
# verifies were all still waiting when stopped at 75 s (alone, each took under 2 s), and a soak
# of three lanes ended 1 verify in 540 s.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"
export STITCH_GPU_LOCK_DIR=$WORK/locks

OPTS=(--backend cuda --json --quiet --sets eval,small --seeds 1 --min-time 100)
pids=()
t0=$(date +%s)
for t in t1/softmax t1/gemm_bf16 t1/topk; do
	n=${t#t1/}
	# a copy with other bytes: an untrusted candidate, probed and stopped like any other
	{ echo "/* a copy */"; cat "$STITCH_SRC/tasks/$t/expert.cu"; } >"$WORK/$n.cu"
	timeout 300 "$STITCH" verify "${OPTS[@]}" "$STITCH_SRC/tasks/$t" "$WORK/$n.cu" \
		>"$WORK/$n.json" 2>"$WORK/$n.err" &
	pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do
	wait "$p"
	rcs+=($?)
done
took=$(($(date +%s) - t0))
echo "three verifies at once: exits ${rcs[*]}, $took s"
i=0
for n in softmax gemm_bf16 topk; do
	check "$n: exit 0 (got ${rcs[$i]}; $(tail -n 1 "$WORK/$n.err"))" [ "${rcs[$i]}" -eq 0 ]
	check "$n: ok ($(field "$WORK/$n.json" status): $(field "$WORK/$n.json" reason))" \
		[ "$(field "$WORK/$n.json" status)" = ok ]
	w=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["gpu_wait_s"])' "$WORK/$n.json" 2>/dev/null)
	check "$n: the verdict says how long it waited for the GPU (gpu_wait_s $w)" \
		awk -v x="${w:-x}" 'BEGIN { exit !(x ~ /^[0-9.eE+-]+$/ && x >= 0) }'
	verdicts_keep "$WORK/$n.json"
	i=$((i + 1))
done
check "the three within 180 s (took $took s; compiles and the device peaks included)" [ "$took" -le 180 ]
check "the GPU's lock files in STITCH_GPU_LOCK_DIR" ls "$WORK"/locks/*.lock
finish
