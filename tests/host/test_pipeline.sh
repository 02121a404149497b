#!/usr/bin/env bash
# The whole pipeline on the host backend: a correct solution passes over every size set with the
# figures the verdict promises; the compile cache makes the second verify skip the compiler;
# --samples puts every timed sample in the verdict; a broken expert is flagged without touching
# the candidate's verdict; a busy host makes no honest answer look like hacking; the bundled
# suite's host experts pass `stitch bench --backend host`.
. "$(dirname "$0")/../lib.sh"

verify "$WORK/v1.json" "$TASK" "$FIX/good.c" --sets small,eval,hidden --time-set eval
check "good: exit 0 (got $RC)" [ "$RC" -eq 0 ]
check "good: status ok" [ "$(field "$WORK/v1.json" status)" = ok ]
for set in small eval hidden0; do
	check "good: set $set checked 3 times" [ "$(grep -c "\"set\": \"$set\"" "$WORK/v1.json")" -ge 3 ]
done
check "good: timing of the candidate" grep -q '"median_ms"' "$WORK/v1.json"
check "good: speedup vs reference" grep -q '"vs_reference"' "$WORK/v1.json"
check "good: SOL fraction" grep -q '"fraction"' "$WORK/v1.json"
check "good: first compile not cached" grep -q '"cached": false' "$WORK/v1.json"

verify "$WORK/v2.json" "$TASK" "$FIX/good.c" --no-timing
check "second verify: compile cached" grep -q '"cached": true' "$WORK/v2.json"

# --samples: every timed sample in the verdict, kept and dropped alike
verify "$WORK/v3.json" "$TASK" "$FIX/good.c" --samples --min-time 5
raw=$(python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["timing"]["candidate"]
ok = all(len(x) == 4 and x[0] > 0 for x in c["raw"])
print("%d %d %d" % (len(c["raw"]), c["samples"] + c["discarded"], ok))' "$WORK/v3.json" 2>&1)
read -r n_raw n_samples raw_ok <<<"$raw"
check "--samples: one raw row per sample ($raw)" test "${n_raw:-0}" -gt 0 -a "${n_raw:-0}" = "${n_samples:-}" -a "${raw_ok:-}" = 1

"$STITCH" verify "${FAST[@]}" "$TASK" "$FIX/good.c" >"$WORK/text.out" 2>&1
check "text verdict: status line" grep -q '^status     ok' "$WORK/text.out"

"$STITCH" bench "${FAST[@]}" >"$WORK/bench.out" 2>"$WORK/bench.err"
rc=$?
cat "$WORK/bench.out"
check "bench --backend host: exit 0 (got $rc; $(tail -n 3 "$WORK/bench.err"))" [ "$rc" -eq 0 ]
for t in t1/softmax t1/gemm_bf16 t2/mlp_gelu t3/bfs; do
	check "bench: $t ok" grep -q "^$t *ok " "$WORK/bench.out"
done
# the verdicts the bench stored (in $STITCH_BENCH_DB), for the schema check
verdicts_from_db bench "$STITCH_BENCH_DB" "select verdict from results"
# A broken expert (its outputs one element off) is flagged, and the candidate's verdict stands:
# the expert is a baseline, checked on each set's first seed.
mkdir -p "$WORK/bx/t1"
cp -r "$TASK" "$WORK/bx/t1/scale"
cp "$FIX/wrong.c" "$WORK/bx/t1/scale/expert.c"
verify "$WORK/bx.json" "$WORK/bx/t1/scale" "$FIX/good.c" --sets small,eval,hidden --no-timing
expert_failure() { python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
print("expert_incorrect" in v["flags"], v.get("expert_failure", "-"))' "$1" 2>&1; }
check "broken expert: the candidate still ok (status $(field "$WORK/bx.json" status))" \
	[ "$(field "$WORK/bx.json" status)" = ok ]
check "broken expert: flagged on the first set's first seed ($(expert_failure "$WORK/bx.json"))" \
	grep -q "^True set small, seed 1: " <<<"$(expert_failure "$WORK/bx.json")"

# A busy host is not hacking: with a spinning loop on every CPU the runners wait for a CPU a
# scheduler slice at a time, and a fast honest answer (t2/fma's, 16x the expert) was called
# hacking by the parent-clock check in 2 of 6 verifies before that wait was taken off.
FMA="$STITCH_SRC/tests/data/tasks/t2/fma"
LOADERS=()
for _ in $(seq "$(nproc)"); do
	timeout 60 sh -c 'while :; do :; done' &
	LOADERS+=($!)
done
for s in 1 2 3 4; do
	"$STITCH" verify --json --backend host --seed "$s" --min-time 5 --max-rse 0.5 --max-samples 200 \
		--quiet --time-set eval "$FMA" "$STITCH_SRC/tests/data/eval/answers/fma_fast.c" \
		>"$WORK/busy$s.json" 2>"$WORK/busy$s.err"
	verdicts_keep "$WORK/busy$s.json"
done
kill "${LOADERS[@]}" 2>/dev/null
wait "${LOADERS[@]}" 2>/dev/null
for s in 1 2 3 4; do
	check "busy host, seed $s: ok ($(field "$WORK/busy$s.json" status): $(field "$WORK/busy$s.json" reason))" \
		[ "$(field "$WORK/busy$s.json" status)" = ok ]
done
check "busy host: the verdicts say how long the runners waited for a CPU" python3 -c '
import json, sys
w = [json.load(open(f))["timing"]["parent_clock"]["cpu_wait_ms"] for f in sys.argv[1:]]
sys.exit(0 if all(x >= 0 for x in w) and any(x > 0 for x in w) else 1)' "$WORK"/busy[1-4].json

# One comparison thread (serve may share the cores among its workers): the same verdict.
verify "$WORK/one-thread.json" "$TASK" "$FIX/good.c" --compare-threads 1
check "--compare-threads 1: ok (status $(field "$WORK/one-thread.json" status))" \
	[ "$(field "$WORK/one-thread.json" status)" = ok ]
threads() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("compare_threads"))' "$1" 2>&1; }
check "--compare-threads 1: the verdict says 1 (got $(threads "$WORK/one-thread.json"))" \
	[ "$(threads "$WORK/one-thread.json")" = 1 ]
# A verify on its own makes its shared memory and frees it (only serve's workers keep it).
check "a lone verify makes its blocks" python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["shm_blocks"]; sys.exit(0 if b["made"] >= 2 and b["reused"] == 0 else 1)' "$WORK/one-thread.json"
# By default as many as the CPUs the process may use (nproc reads the same mask), at most 16.
want=$(nproc)
[ "$want" -le 16 ] || want=16
check "default comparison threads: $want (got $(threads "$WORK/v2.json"))" [ "$(threads "$WORK/v2.json")" = "$want" ]
if command -v taskset >/dev/null; then
	taskset -c 0 "$STITCH" verify --json "${FAST[@]}" --no-timing "$TASK" "$FIX/good.c" >"$WORK/pinned.json" 2>"$WORK/pinned.err"
	verdicts_keep "$WORK/pinned.json"
	check "pinned to one CPU: one comparison thread (got $(threads "$WORK/pinned.json"))" \
		[ "$(threads "$WORK/pinned.json")" = 1 ]
else
	echo "skip: no taskset here, the affinity check is left out"
fi
finish
