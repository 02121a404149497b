#!/usr/bin/env bash
# `stitch eval --mode oneshot` against the fake LLM server on the host backend: three scripted
# samples for t1/scale (a correct solution, a wrong one, an answer without code), whose scores
# are worked out by hand here: compile 2 of 3, correct 1 of 3, so pass@1 = 2/3 and 1/3 and
# pass@3 = 1 for both (unbiased estimator). A second run with the server gone (--replay) takes
# every answer from the cache and scores the same. Bad input: no model, a mode not built yet.
. "$(dirname "$0")/../lib.sh"

FAKE=$(dirname "$STITCH")/tests/fake-llm
source "$STITCH_SRC/scripts/carry-libs.sh"
export STITCH_TASKS=$STITCH_SRC/tests/data/tasks
: >"$WORK/port"
"$FAKE" "$STITCH_SRC/tests/data/eval/oneshot.json" --log "$WORK/fake.log" >"$WORK/port" 2>"$WORK/fake.err" &
FAKE_PID=$!
port_known() { [ -s "$WORK/port" ]; }
check "the fake LLM server starts" wait_for 5 port_known
PORT=$(head -n 1 "$WORK/port")
export OPENAI_API_KEY=test-key
MODEL="openai-compat:http://127.0.0.1:$PORT/v1:fake"
EVAL=(--backend host --seed 7 --min-time 5 --max-rse 0.5 --max-samples 200 --task t1/scale
      --samples 3 --parallel 1 --out "$WORK/eval")
"$STITCH" eval --model "$MODEL" "${EVAL[@]}" >"$WORK/eval.out" 2>"$WORK/eval.err"
rc=$?
check "eval exits 0 ($rc: $(tail -n 2 "$WORK/eval.err"))" [ "$rc" -eq 0 ]
scores() { # the figures worked out by hand
	python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t = s["tasks"]["t1/scale"]
ok = (t["samples"], t["compiled"], t["correct"]) == (3, 2, 1)
close = lambda a, b: abs(a - b) < 1e-9
ok &= close(t["pass@1"]["compile"], 2 / 3) and close(t["pass@1"]["correct"], 1 / 3)
ok &= close(t["pass@3"]["compile"], 1.0) and close(t["pass@3"]["correct"], 1.0)
ok &= close(s["overall"]["pass@1"]["correct"], 1 / 3) and s["overall"]["tasks"] == 1
ok &= close(s["tiers"]["t1/"]["pass@1"]["compile"], 2 / 3)
sys.exit(0 if ok else 1)
PY
}
check "scores: compile 2/3, correct 1/3 at pass@1; 1 and 1 at pass@3" scores "$WORK/eval/scores.json"
check "results: one line per sample with its status" python3 - "$WORK/eval/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if [r["status"] for r in rows] == ["ok", "incorrect", "no_code"] else 1)
PY
check "the summary line" grep -q "pass@1 compile 0.67, correct 0.33" "$WORK/eval.out"
check "answers and code kept" [ -s "$WORK/eval/t1_scale/sample0.answer.md" ] && [ -s "$WORK/eval/t1_scale/sample0.c" ]
kill "$FAKE_PID"
wait "$FAKE_PID" 2>/dev/null
# The server is gone: every answer comes from the cache, nothing is paid twice.
"$STITCH" eval --model "$MODEL" "${EVAL[@]}" --replay >"$WORK/again.out" 2>"$WORK/again.err"
rc=$?
check "a second run resumes from the cache ($rc: $(tail -n 1 "$WORK/again.err"))" [ "$rc" -eq 0 ]
check "and scores the same" scores "$WORK/eval/scores.json"

"$STITCH" eval --backend host >/dev/null 2>"$WORK/e1"
check "no --model: exit 2 ($?)" grep -q -- "--model" "$WORK/e1"
"$STITCH" eval --model "$MODEL" --mode agent >/dev/null 2>"$WORK/e2"
check "a mode not built yet says so" grep -q "not built yet" "$WORK/e2"
finish
