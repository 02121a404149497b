#!/usr/bin/env bash
# The scripted evaluation of tests/host/test_eval.sh on the GPU: the same two fake models, three
# tasks and three modes, the answers compiled as CUDA and verified with the default GPU verify
# (every size set but hidden ones where the task has none, eval timing). What every round's
# status must be is known in advance and checked; speed on the GPU is not (these tasks are a
# few microseconds, launch-bound), so the speedups are recorded, not asserted: one table row
# per run, appended to $EVAL_SUMMARY when set (scripts/gpu-test puts it into its summary). The
# agent runs are scripted so that no first attempt can end a loop early whatever its speed.
BACKEND=cuda
source "$(dirname "$0")/../lib.sh"
EVAL_OPTS=(--backend cuda --seed 7)
. "$STITCH_SRC/tests/eval_lib.sh"

# statuses NAME WANT: the run's rows as "task:sample:round:status" in order match the regular
# expression WANT (whole)
statuses() {
	python3 - "$WORK/$1/results.jsonl" "$2" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = " ".join(f'{r["task"].split("/")[1]}:{r["sample"]}:{r["round"]}:{r["status"]}' for r in rows)
if not re.fullmatch(sys.argv[2], got):
    print(f"got {got}")
    sys.exit(1)
PY
}

run_eval a-oneshot fake-a oneshot 2 1 prefix_slow none scale_slow scale_wrong fma_fast fma_fast
check "A oneshot: statuses ($(statuses a-oneshot x))" statuses a-oneshot \
	"prefix:0:1:ok prefix:1:1:no_code scale:0:1:ok scale:1:1:incorrect fma:0:1:ok fma:1:1:ok"
run_eval a-refine fake-a refine 1 3 prefix_wrong prefix_slow none scale_nocompile scale_wrong \
	scale_slow fma_fast fma_slow fma_slow
check "A refine: statuses" statuses a-refine \
	"prefix:0:1:incorrect prefix:0:2:ok prefix:0:3:no_code scale:0:1:compile_error scale:0:2:incorrect scale:0:3:ok fma:0:1:ok fma:0:2:ok fma:0:3:ok"
run_eval a-agent fake-a agent 1 2 plan prefix_wrong prefix_slow plan scale_wrong scale_slow plan fma_fast
# fma's first attempt ends the loop where it reaches the target speedup (2x), as on the host; a
# launch-bound GPU kernel may not, and then the loop makes its second attempt
check "A agent: statuses" statuses a-agent \
	"prefix:0:1:incorrect prefix:0:2:ok scale:0:1:incorrect scale:0:2:ok fma:0:1:ok( fma:0:2:ok)?"
run_eval b-oneshot fake-b oneshot 2 1 prefix_wrong scale_nocompile scale_wrong none fma_slow none
check "B oneshot: statuses" statuses b-oneshot \
	"prefix:0:1:incorrect prefix:1:1:compile_error scale:0:1:incorrect scale:1:1:no_code fma:0:1:ok fma:1:1:no_code"
run_eval b-refine fake-b refine 1 2 prefix_wrong prefix_wrong none scale_wrong fma_slow fma_slow
check "B refine: statuses" statuses b-refine \
	"prefix:0:1:incorrect prefix:0:2:incorrect scale:0:1:no_code scale:0:2:incorrect fma:0:1:ok fma:0:2:ok"
run_eval b-agent fake-b agent 1 2 plan prefix_wrong prefix_slow plan scale_nocompile \
	scale_nocompile plan fma_slow fma_slow
check "B agent: statuses" statuses b-agent \
	"prefix:0:1:incorrect prefix:0:2:ok scale:0:1:compile_error scale:0:2:compile_error fma:0:1:ok fma:0:2:ok"
# the figures that do not depend on speed, worked out by hand as on the host
check "pass@1 correct of every run" bash -c "
	expect_scores() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if abs(s[\"overall\"][\"pass@1\"][\"correct\"] - float(sys.argv[2])) < 1e-9 else 1)' \"\$@\"; }
	expect_scores '$WORK/a-oneshot/scores.json' 0.6666666666666666 &&
	expect_scores '$WORK/a-refine/scores.json' 1 && expect_scores '$WORK/a-agent/scores.json' 1 &&
	expect_scores '$WORK/b-oneshot/scores.json' 0.16666666666666666 &&
	expect_scores '$WORK/b-refine/scores.json' 0.3333333333333333 &&
	expect_scores '$WORK/b-agent/scores.json' 0.6666666666666666"
"$STITCH" eval --compare 1 2 3 4 5 6 --html "$WORK/board.html" >"$WORK/cmp.out" 2>&1
check "--compare of the six runs" grep -q "fake-b" "$WORK/cmp.out"

TABLE=$WORK/table.md
{
	echo "| run | mode | pass@1 compile | correct | fast_1 vs ref | fast_1 vs expert | geomean vs ref (correct) | correct by round | geomean vs ref by round | wall (s) |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	for n in a-oneshot a-refine a-agent b-oneshot b-refine b-agent; do
		python3 - "$WORK/$n/scores.json" "$n" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
o, p = s["overall"], s["overall"]["pass@1"]
g = lambda x: f"{x:.2f}x" if x else "-"
by_round = " / ".join("%.2f" % r["correct"] for r in o["rounds"])
speed_by_round = " / ".join(g(r["geomean_vs_reference"]) for r in o["rounds"])
print("| %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s | %.1f |" % (
    sys.argv[2], s["mode"], p["compile"], p["correct"], p["fast_1_vs_reference"],
    p["fast_1_vs_expert"], g(o.get("geomean_vs_reference")), by_round, speed_by_round, s["wall_s"]))
PY
	done
} >"$TABLE"
cat "$TABLE"
cat "$WORK/cmp.out"
if [ -n "${EVAL_SUMMARY:-}" ]; then
	cat "$TABLE" >>"$EVAL_SUMMARY"
	cp "$WORK/board.html" "$(dirname "$EVAL_SUMMARY")/eval-board.html" 2>/dev/null
fi
finish
