#!/usr/bin/env bash
# `stitch solve` against the fake LLM server (tests/fake_llm), on the host backend and the scale
# test task: scripted conversations (tests/data/solve/*.json) for the clean path, a compile
# error then a fix, a wrong answer then a fix, a malformed plan, an answer without code, a
# truncated answer, replanning, HTTP 429 and 5xx, a hung connection and an exhausted budget.
# Each must end in its documented state with the trajectory complete; then a replay offline
# and the errors that must come before any work (no key, unreachable endpoint, bad model).
. "$(dirname "$0")/../lib.sh"

FAKE=$(dirname "$STITCH")/tests/fake-llm
SCRIPTS="$STITCH_SRC/tests/data/solve"
QUICK=(--backend host --seed 7 --min-time 5 --max-rse 0.5 --max-samples 200 --quiet)

start_fake() { # SCRIPT [ARGS]: start the server, set PORT
	: >"$WORK/port"
	"$FAKE" "$@" --log "$WORK/fake.log" >"$WORK/port" 2>"$WORK/fake.err" &
	FAKE_PID=$!
	for _ in $(seq 100); do
		[ -s "$WORK/port" ] && break
		sleep 0.05
	done
	PORT=$(head -n 1 "$WORK/port")
}
stop_fake() {
	kill "$FAKE_PID" 2>/dev/null
	wait "$FAKE_PID" 2>/dev/null
}
# solve NAME ARGS...: one run with script NAME; report in $WORK/NAME/report.json, exit code in RC
solve() {
	local name=$1
	shift
	start_fake "$SCRIPTS/$name.json"
	"$STITCH" solve --model "openai-compat:http://127.0.0.1:$PORT/v1:fake" --out "$WORK/$name" \
		--target-speedup 0.2 "${QUICK[@]}" "$@" "$TASK" >"$WORK/$name.out" 2>"$WORK/$name.err"
	RC=$?
	stop_fake
	solve_verdicts "$WORK/$name"
}
# solve_verdicts DIR: the verdicts of a run's trajectory and of its report's best version, kept
# for the schema check (a run that failed before its first verify has none)
solve_verdicts() {
	[ -s "$1/trajectory.jsonl" ] && verdicts_keep "$1/trajectory.jsonl" '*.verdict?'
	[ -s "$1/report.json" ] && verdicts_keep "$1/report.json" 'best?.verdict'
}
state() { sed -n 's/^  "state": "\(.*\)",$/\1/p' "$WORK/$1/report.json"; }
num() { sed -n "s/^  \"$2\": \([0-9.e+-]*\),\{0,1\}$/\1/p" "$WORK/$1/report.json"; }
statuses() { # the attempts' statuses, from the report's history
	sed -n '/^  "history": \[/,$p' "$WORK/$1/report.json" | grep -o '"status": "[a-z_]*"' |
		sed 's/"status": //; s/"//g' | tr '\n' ' '
}
types() { grep -c "\"type\":\"$2\"" "$WORK/$1/trajectory.jsonl"; }

solve success
check "success: exit 0 (got $RC: $(tail -n 1 "$WORK/success.err"))" [ "$RC" -eq 0 ]
check "success: state done (got $(state success))" [ "$(state success)" = done ]
check "success: one attempt (got $(num success attempts))" [ "$(num success attempts)" = 1 ]
check "success: best.c written" cmp -s "$WORK/success/best.c" "$(ls "$WORK"/success/versions/*.c)"
check "success: plan.json written" grep -q '"summary"' "$WORK/success/plan.json"
check "success: trajectory has 2 requests, 2 responses, 1 code, 1 verdict" \
	[ "$(types success request)$(types success response)$(types success code)$(types success verdict)" = 2211 ]
check "success: report has token counts" grep -q '"input": 20' "$WORK/success/report.json"

# Offline: the same run again from the cache, no server listening.
"$STITCH" solve --model "openai-compat:http://127.0.0.1:$PORT/v1:fake" --out "$WORK/success" \
	--target-speedup 0.2 --replay "${QUICK[@]}" "$TASK" >"$WORK/replay.out" 2>"$WORK/replay.err"
check "replay: exit 0 without a server (got $?: $(tail -n 1 "$WORK/replay.err"))" [ "$(state success)" = done ]
check "replay: answers came from the cache" grep -q '"cached":true' "$WORK/success/trajectory.jsonl"
solve_verdicts "$WORK/success"

# Resume: an interrupted run (budget of one attempt) goes on where it stopped; the answers it
# already had come from its cache, so the server (scripted with the rest of the conversation)
# sees only the new request.
solve compile_fix --max-attempts 1
start_fake "$SCRIPTS/resume_rest.json" --port "$PORT"
"$STITCH" solve --model "openai-compat:http://127.0.0.1:$PORT/v1:fake" --resume "$WORK/compile_fix" \
	--target-speedup 0.2 "${QUICK[@]}" "$TASK" >/dev/null 2>"$WORK/resume.err"
rc=$?
stop_fake
check "resume: exit 0 (got $rc: $(tail -n 1 "$WORK/resume.err"))" [ "$rc" -eq 0 ]
check "resume: done ($(state compile_fix))" [ "$(state compile_fix)" = done ]
check "resume: cached answers replayed" grep -q '"cached":true' "$WORK/compile_fix/trajectory.jsonl"
solve_verdicts "$WORK/compile_fix"
check "resume: the server saw one request" [ "$(wc -l <"$WORK/fake.log")" -eq 1 ]
rm -rf "$WORK/compile_fix"

solve compile_fix
check "compile error then fix: done in 2 attempts (state $(state compile_fix), $(num compile_fix attempts))" \
	[ "$(state compile_fix)/$(num compile_fix attempts)" = done/2 ]
check "compile error then fix: history compile_error, ok ($(statuses compile_fix))" \
	bash -c "echo '$(statuses compile_fix)' | grep -q '^compile_error ok'"
check "compile error then fix: the repair prompt quoted the diagnostics" \
	grep -q 'line [0-9]' "$WORK/fake.log"

solve wrong_fix
check "wrong then fix: done in 2 attempts ($(state wrong_fix), $(num wrong_fix attempts))" \
	[ "$(state wrong_fix)/$(num wrong_fix attempts)" = done/2 ]
check "wrong then fix: history incorrect, ok ($(statuses wrong_fix))" \
	bash -c "echo '$(statuses wrong_fix)' | grep -q '^incorrect ok'"

# --verifier-model: after the wrong version a model writes the Verifier's note, which the repair
# prompt carries after the facts; no note once the run is done.
solve verifier_note --verifier-model "openai-compat:http://127.0.0.1:1/v1:unused-but-checked" 2>/dev/null
check "verifier model unreachable: refused before any work (exit $RC)" [ "$RC" -eq 3 ]
start_fake "$SCRIPTS/verifier_note.json"
"$STITCH" solve --model "openai-compat:http://127.0.0.1:$PORT/v1:fake" \
	--verifier-model "openai-compat:http://127.0.0.1:$PORT/v1:fake-verifier" --out "$WORK/verifier_note" \
	--target-speedup 0.2 "${QUICK[@]}" "$TASK" >"$WORK/verifier_note.out" 2>"$WORK/verifier_note.err"
RC=$?
stop_fake
solve_verdicts "$WORK/verifier_note"
check "verifier note: done in 2 attempts (exit $RC, $(state verifier_note), $(num verifier_note attempts))" \
	[ "$RC/$(state verifier_note)/$(num verifier_note attempts)" = 0/done/2 ]
check "verifier note: one request by the verifier agent" \
	[ "$(grep '"agent":"verifier"' "$WORK/verifier_note/trajectory.jsonl" | grep -c '"type":"request"')" = 1 ]
check "verifier note: the repair prompt carries the note after the facts" \
	bash -c "grep '\"stage\":\"repair_correct\"' '$WORK/verifier_note/trajectory.jsonl' | grep -q 'The Verifier.s note:.*NOTE-MARKER-7731'"
check "verifier note: the report names the verifier model" grep -q '"verifier_model": "openai-compat:' "$WORK/verifier_note/report.json"

# Two samples per round, asked for at once: one is wrong, one right; the right one goes on.
solve samples --samples 2
check "samples: done in one round ($(state samples), $(num samples attempts))" \
	[ "$(state samples)/$(num samples attempts)" = done/1 ]
check "samples: both answers verified" [ "$(types samples verdict)" -eq 2 ]
check "samples: the server saw the two requests" [ "$(grep -c chat/completions "$WORK/fake.log")" -eq 3 ]
check "samples: both versions compiled together before the verifies" \
	grep -q '"type":"precompiled".*"versions":2\|"versions":2.*"type":"precompiled"' "$WORK/samples/trajectory.jsonl"
check "samples: each verify found its version compiled" \
	[ "$(grep '"type":"verdict"' "$WORK/samples/trajectory.jsonl" | grep -c '"cached":true')" -eq 2 ]

solve bad_plan
check "malformed plan: repaired once, done ($(state bad_plan))" [ "$(state bad_plan)" = done ]
check "malformed plan: the repair request names the problem" grep -q 'That plan is not valid' "$WORK/fake.log"

solve no_code
check "no code block: asked again, done in 2 attempts ($(statuses no_code))" \
	[ "$(state no_code)/$(num no_code attempts)" = done/2 ]
check "no code block: recorded as no_code" grep -q '"type":"no_code"' "$WORK/no_code/trajectory.jsonl"
check "no code block: the next request carried the reason" grep -q 'no fenced code block' "$WORK/fake.log"

solve truncated
check "truncated answer: asked again, done ($(statuses truncated))" \
	bash -c "echo '$(statuses truncated)' | grep -q '^no_code ok'"

solve replan --replan-after 2 --max-replans 1
check "replan: one new plan after two wrong attempts (replans $(num replan replans))" \
	[ "$(num replan replans)" = 1 ]
check "replan: then done ($(state replan))" [ "$(state replan)" = done ]
check "replan: two plans in the trajectory" [ "$(types replan plan)" -eq 2 ]

solve rate_limited
check "429 with Retry-After: done after a retry ($(state rate_limited))" [ "$(state rate_limited)" = done ]
check "429: the retry is counted" grep -q '"retries": [1-9]' "$WORK/rate_limited/report.json"

solve server_errors
check "500 then 502: done after retries ($(state server_errors))" [ "$(state server_errors)" = done ]

solve hang --llm-timeout 1
check "hung connection: exit 1 (got $RC)" [ "$RC" -eq 1 ]
check "hung connection: state failed, says timeout" grep -q '"why": ".*timeout' "$WORK/hang/report.json"
check "hung connection: the plan made before it is kept" [ -s "$WORK/hang/plan.json" ]

solve budget --max-attempts 2
check "budget: exit 1 (got $RC)" [ "$RC" -eq 1 ]
check "budget: state budget_exhausted ($(state budget))" [ "$(state budget)" = budget_exhausted ]
check "budget: no best" bash -c "! grep -q '\"best\"' '$WORK/budget/report.json'"

# Errors before any work: one line, exit 2 or 3, nothing written.
env -u OPENAI_API_KEY "$STITCH" solve --model openai:gpt-test --out "$WORK/nokey" "$TASK" >/dev/null 2>"$WORK/nokey.err"
rc=$?
check "no key: exit 2 (got $rc)" [ "$rc" -eq 2 ]
check "no key: names OPENAI_API_KEY" grep -q OPENAI_API_KEY "$WORK/nokey.err"
check "no key: nothing written" [ ! -e "$WORK/nokey" ]
"$STITCH" solve --model "vllm:http://127.0.0.1:9/v1:m" --out "$WORK/down" "$TASK" >/dev/null 2>"$WORK/down.err"
rc=$?
check "unreachable endpoint: exit 3 (got $rc)" [ "$rc" -eq 3 ]
check "unreachable endpoint: says so" grep -q unreachable "$WORK/down.err"
check "unreachable endpoint: nothing written" [ ! -e "$WORK/down" ]
"$STITCH" solve --model "frob:x" "$TASK" >/dev/null 2>"$WORK/bad.err"
rc=$?
check "bad model string: exit 2 (got $rc)" [ "$rc" -eq 2 ]
check "bad model string: one line" [ "$(wc -l <"$WORK/bad.err")" -eq 1 ]
finish
