#!/usr/bin/env bash
# `stitch eval` against the fake LLM server on the host backend: two scripted models, three
# tasks (t1/prefix, t1/scale, t2/fma of tests/data/tasks), three modes. The answers are files
# of tests/data/eval/answers whose fate is known (correct and far slower than the reference,
# correct and far faster, wrong, not compiling, no code at all), so every score below is worked
# out by hand, not by stitch's formulas: pass@1 and pass@2, fast_p against the reference and the
# expert, the per-round curves of refine and agent (model A's refine drifts from a fast answer
# to a slow one: correctness rises while fast_1 falls), and the suspicious flag on an answer
# 16x faster than the expert. Then: a second run with the server gone replays every answer from
# the cache; the leaderboard (--list, --compare, the HTML page, checked in headless Chromium);
# bad input.
. "$(dirname "$0")/../lib.sh"

# Host timing on the eval size (fma: 65536 elements), not on the small size, where the call's
# fixed cost blurs the ratios. The fast answer is 16x the expert and 32x the reference, far above
# the highest threshold (fast_5), so that a loaded machine cannot move a figure across one.
EVAL_OPTS=(--backend host --seed 7 --min-time 5 --max-rse 0.5 --max-samples 200 --time-set eval)
. "$STITCH_SRC/tests/eval_lib.sh"

# ---- model A (good) ----------------------------------------------------------------------------
# oneshot, 2 samples: prefix [slow correct, no code], scale [slow correct, wrong], fma [fast, fast]
run_eval a-oneshot fake-a oneshot 2 1 prefix_slow none scale_slow scale_wrong fma_fast fma_fast
A1='{"tasks/t1/prefix/compiled": 1, "tasks/t1/prefix/correct": 1,
     "tasks/t1/prefix/pass@1/compile": 0.5, "tasks/t1/prefix/pass@2/compile": 1,
     "tasks/t1/scale/pass@1/compile": 1, "tasks/t1/scale/pass@1/correct": 0.5,
     "tasks/t1/scale/pass@2/correct": 1, "tasks/t1/scale/pass@1/fast_0_vs_reference": 0.5,
     "tasks/t1/scale/pass@1/fast_1_vs_reference": 0,
     "tasks/t2/fma/pass@1/fast_5_vs_reference": 1, "tasks/t2/fma/pass@1/fast_2_vs_expert": 1,
     "tasks/t2/fma/pass@1/fast_5_vs_expert": 1,
     "overall/pass@1/compile": 0.8333333333333334, "overall/pass@1/correct": 0.6666666666666666,
     "overall/pass@1/fast_1_vs_reference": 0.3333333333333333,
     "overall/pass@1/fast_2_vs_expert": 0.3333333333333333, "overall/pass@1/fast_5_vs_expert": 0.3333333333333333,
     "overall/pass@2/correct": 1, "overall/tasks": 3,
     "tiers/t1//pass@1/compile": 0.75, "tiers/t1//pass@1/correct": 0.5,
     "tiers/t2//pass@1/correct": 1, "tiers/t2//tasks": 1}'
check "A oneshot: scores as worked out by hand ($(expect_scores a-oneshot "$A1"))" expect_scores a-oneshot "$A1"
check "A oneshot: the fma answers 16x faster than the expert are flagged suspicious" python3 - "$WORK/a-oneshot/scores.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["suspicious"]
sys.exit(0 if sorted((x["task"], x["sample"]) for x in s) == [("t2/fma", 0), ("t2/fma", 1)] else 1)
PY
check "A oneshot: one line per sample, in order" python3 - "$WORK/a-oneshot/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = [(r["task"], r["sample"], r["status"], r["final"]) for r in rows]
want = [("t1/prefix", 0, "ok", True), ("t1/prefix", 1, "no_code", True),
        ("t1/scale", 0, "ok", True), ("t1/scale", 1, "incorrect", True),
        ("t2/fma", 0, "ok", True), ("t2/fma", 1, "ok", True)]
sys.exit(0 if got == want else 1)
PY
check "A oneshot: the summary line" grep -q "pass@1 compile 0.83, correct 0.67" "$WORK/a-oneshot.out"
check "A oneshot: the answer kept" [ -s "$WORK/a-oneshot/t1_scale/sample0.answer.md" ]
check "A oneshot: its code kept" [ -s "$WORK/a-oneshot/t1_scale/sample0.c" ]

# refine, 3 rounds: prefix wrong -> slow correct -> no code (keeps round 2's code); scale does
# not compile -> wrong -> slow correct; fma fast -> slow -> slow (the drift to a slow fallback)
run_eval a-refine fake-a refine 1 3 prefix_wrong prefix_slow none scale_nocompile scale_wrong \
	scale_slow fma_fast fma_slow fma_slow
A2='{"overall/pass@1/compile": 1, "overall/pass@1/correct": 1,
     "overall/pass@1/fast_0_vs_reference": 1, "overall/pass@1/fast_1_vs_reference": 0,
     "overall/rounds/0/compile": 0.6666666666666666, "overall/rounds/0/correct": 0.3333333333333333,
     "overall/rounds/0/fast_1_vs_reference": 0.3333333333333333,
     "overall/rounds/1/compile": 1, "overall/rounds/1/correct": 0.6666666666666666,
     "overall/rounds/1/fast_1_vs_reference": 0,
     "overall/rounds/2/correct": 1, "overall/rounds/2/fast_1_vs_reference": 0,
     "tasks/t2/fma/rounds/0/fast_1_vs_reference": 1, "tasks/t2/fma/rounds/2/fast_1_vs_reference": 0}'
check "A refine: scores and round curves as worked out by hand ($(expect_scores a-refine "$A2"))" expect_scores a-refine "$A2"
check "A refine: fma's speed by round falls below 1 (drift to slow code)" python3 - "$WORK/a-refine/scores.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["tasks"]["t2/fma"]["rounds"]
sys.exit(0 if r[0]["geomean_vs_reference"] > 5 and r[2]["geomean_vs_reference"] < 1 else 1)
PY
check "A refine: the model saw the compile error, not the hidden sizes" python3 - "$WORK/a-refine.fake.log" <<'PY'
import json, sys
reqs = [json.loads(json.loads(l)["body"]) for l in open(sys.argv[1])]
# request 4 is scale's round 2: its last user message is the feedback on round 1
fb = reqs[4]["messages"][-1]["content"]
ok = "did not build" in fb and "line" in fb
# no request carries a hidden size of any task (scale 4097, fma 7, prefix 1 would be too short)
ok &= not any("4097" in m["content"] for q in reqs for m in q["messages"])
ok &= "passed every test" in reqs[1]["messages"][-1]["content"] or "failed the tests" in reqs[1]["messages"][-1]["content"]
sys.exit(0 if ok else 1)
PY

# agent, 2 attempts: the loop's best version scores each sample; fma reaches the target at once
run_eval a-agent fake-a agent 1 2 plan prefix_slow none plan scale_wrong scale_slow plan fma_fast
A3='{"overall/pass@1/correct": 1, "overall/pass@1/compile": 1,
     "overall/pass@1/fast_1_vs_reference": 0.3333333333333333,
     "overall/rounds/0/correct": 0.6666666666666666, "overall/rounds/1/correct": 1,
     "tasks/t1/prefix/correct": 1, "tasks/t2/fma/pass@1/fast_5_vs_reference": 1}'
check "A agent: scores as worked out by hand ($(expect_scores a-agent "$A3"))" expect_scores a-agent "$A3"
check "A agent: the loop's own folder per sample" [ -s "$WORK/a-agent/t1_scale/sample0.agent/report.json" ]

# ---- model B (weak) ----------------------------------------------------------------------------
run_eval b-oneshot fake-b oneshot 2 1 prefix_wrong scale_nocompile scale_wrong none fma_slow none
B1='{"overall/pass@1/compile": 0.5, "overall/pass@1/correct": 0.16666666666666666,
     "overall/pass@2/compile": 1, "overall/pass@2/correct": 0.3333333333333333,
     "overall/pass@1/fast_1_vs_reference": 0, "tasks/t1/prefix/compiled": 1,
     "tasks/t1/prefix/correct": 0, "tasks/t2/fma/correct": 1}'
check "B oneshot: scores as worked out by hand ($(expect_scores b-oneshot "$B1"))" expect_scores b-oneshot "$B1"
run_eval b-refine fake-b refine 1 2 prefix_wrong prefix_wrong none scale_wrong fma_slow fma_slow
B2='{"overall/pass@1/compile": 1, "overall/pass@1/correct": 0.3333333333333333,
     "overall/rounds/0/compile": 0.6666666666666666, "overall/rounds/0/correct": 0.3333333333333333,
     "overall/rounds/1/compile": 1, "overall/rounds/1/correct": 0.3333333333333333}'
check "B refine: scores as worked out by hand ($(expect_scores b-refine "$B2"))" expect_scores b-refine "$B2"
run_eval b-agent fake-b agent 1 2 plan prefix_wrong prefix_slow plan scale_nocompile \
	scale_nocompile plan fma_slow fma_slow
B3='{"overall/pass@1/compile": 0.6666666666666666, "overall/pass@1/correct": 0.6666666666666666,
     "overall/pass@1/fast_1_vs_reference": 0,
     "overall/rounds/0/correct": 0.3333333333333333, "overall/rounds/1/correct": 0.6666666666666666}'
check "B agent: scores as worked out by hand ($(expect_scores b-agent "$B3"))" expect_scores b-agent "$B3"

# ---- resume: the server is gone, every answer comes from the cache ------------------------------
"$STITCH" eval --model "openai-compat:http://127.0.0.1:$(head -n 1 "$WORK/a-refine.port")/v1:fake-a" \
	--mode refine --rounds 3 --out "$WORK/a-refine" --parallel 1 "${EVAL_OPTS[@]}" --replay --no-db >"$WORK/again.out" 2>"$WORK/again.err"
rc=$?
check "a second run resumes from the cache ($rc: $(tail -n 1 "$WORK/again.err"))" [ "$rc" -eq 0 ]
check "and scores the same" expect_scores a-refine "$A2"

# ---- the leaderboard ---------------------------------------------------------------------------
"$STITCH" eval --list >"$WORK/list.out" 2>"$WORK/list.err"
check "--list: six runs stored ($(cat "$WORK/list.err"))" [ "$(grep -c 'fake-[ab]' "$WORK/list.out")" -eq 6 ]
"$STITCH" eval --compare 1 2 3 4 5 6 --html "$WORK/board.html" >"$WORK/cmp.out" 2>"$WORK/cmp.err"
rc=$?
check "--compare: exit 0 ($rc: $(tail -n 1 "$WORK/cmp.err"))" [ "$rc" -eq 0 ]
check "--compare: every mode of both models" bash -c "grep -q refine '$WORK/cmp.out' && grep -q agent '$WORK/cmp.out' && grep -q fake-b '$WORK/cmp.out'"
check "the page: two charts, no scripts, no network" bash -c "grep -q 'id=\"fastp\"' '$WORK/board.html' && grep -q 'id=\"rounds\"' '$WORK/board.html' && ! grep -Eq '<script|https?://[^\"]*\\.(js|css)' '$WORK/board.html'"
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -n "$CHROME" ]; then
	HOME="$WORK" timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
		--dump-dom "file://$WORK/board.html" >"$WORK/dom.html" 2>"$WORK/chrome.err"
	check "chromium renders the leaderboard ($(tail -n 1 "$WORK/chrome.err"))" \
		bash -c "grep -q '<svg class=\"chart\" id=\"fastp\"' '$WORK/dom.html' && grep -q 'id=\"rounds\"' '$WORK/dom.html'"
	HOME="$WORK" timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
		--window-size=1000,1400 --screenshot="$WORK/board.png" "file://$WORK/board.html" >/dev/null 2>&1
	check "chromium: screenshot of the leaderboard" [ -s "$WORK/board.png" ]
else
	echo "SKIP (part): no chromium here, the leaderboard page is checked as text only; scripts/bootstrap --tests installs it"
fi
"$STITCH" eval --compare 42 >/dev/null 2>"$WORK/c42"
rc=$?
check "--compare of an unknown run: exit 2 ($rc) and says which" bash -c "[ $rc -eq 2 ] && grep -q \"'42'\" '$WORK/c42'"

# ---- the endpoint fails -------------------------------------------------------------------------
# steps NAME STEP...: a raw script, each STEP a JSON object of the fake server's (the last repeats)
steps() {
	local name=$1
	shift
	printf '{"steps": [%s]}' "$(IFS=,; echo "$*")" >"$WORK/$name.script.json"
}
WRONG=$(python3 -c 'import json,sys; print(json.dumps({"openai_text": "```c\n" + open(sys.argv[1]).read() + "```\n"}))' "$ANSWERS/scale_wrong.c")
# sample 0 answers (wrongly: no timing), sample 1 gets HTTP 400, which is not retried: that round
# is no_answer, left out of the scores, and the run goes on
steps e-400 "$WRONG" '{"status": 400, "body": "{\"error\": {\"message\": \"prompt too long\"}}"}'
fake_eval e-400 fake-a oneshot 2 1 0 --task t1/scale --no-db
check "e-400: the unanswered round is no_answer, with the endpoint's words" python3 - "$WORK/e-400/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = [(r["sample"], r["status"], r["final"]) for r in rows]
sys.exit(0 if got == [(0, "incorrect", True), (1, "no_answer", True)]
         and "HTTP 400" in rows[1]["reason"] and "prompt too long" in rows[1]["reason"] else 1)
PY
E400='{"tasks/t1/scale/samples": 1, "tasks/t1/scale/compiled": 1, "tasks/t1/scale/correct": 0,
      "overall/pass@1/compile": 1, "overall/pass@1/correct": 0}'
check "e-400: scored on the answered sample only ($(expect_scores e-400 "$E400"))" expect_scores e-400 "$E400"
check "e-400: listed as not judged" python3 - "$WORK/e-400/scores.json" <<'PY'
import json, sys
u = json.load(open(sys.argv[1]))["unjudged"]
sys.exit(0 if len(u) == 1 and u[0]["sample"] == 1 else 1)
PY
check "e-400: the summary says so" grep -q "not judged: 1 rounds" "$WORK/e-400.out"
# the endpoint refuses the key: the run stops (exit 3) and no row blames the model
steps e-401 '{"status": 401, "body": "{\"error\": {\"message\": \"invalid api key\"}}"}'
fake_eval e-401 fake-a oneshot 2 1 3 --task t1/scale --no-db
check "e-401: says why it stopped" grep -q "stopped: .*HTTP 401.*invalid api key" "$WORK/e-401.err"
check "e-401: no row" bash -c "! grep -q status '$WORK/e-401/results.jsonl' 2>/dev/null"

# ---- bad input ----------------------------------------------------------------------------------
"$STITCH" eval --backend host >/dev/null 2>"$WORK/e1"
check "no --model: exit 2 ($?)" grep -q -- "--model" "$WORK/e1"
"$STITCH" eval --model openai-compat:http://127.0.0.1:9/v1:x --mode tournament --replay >/dev/null 2>"$WORK/e2"
check "an unknown mode is named" grep -q -- "--mode: 'tournament' is not one of" "$WORK/e2"
"$STITCH" eval --model openai-compat:http://127.0.0.1:9/v1:x --rounds 3 --replay >/dev/null 2>"$WORK/e3"
check "--rounds with oneshot is refused" grep -q "oneshot has one" "$WORK/e3"
"$STITCH" eval --model openai-compat:http://127.0.0.1:9/v1:x --task 'zz/*' --replay --out "$WORK/none" >/dev/null 2>"$WORK/e4"
check "a glob with no task says so" grep -q "no task matches" "$WORK/e4"
finish
