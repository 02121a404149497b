#!/usr/bin/env bash
# `stitch serve` on the host backend, against a real service started here (port 0, private
# database, spool and cache): health, the task list, verdicts for a correct, a wrong, a crashing
# and a hanging candidate, every refusal (400, 401, 404, 405, 409, 413), request ids (a repeat
# gets the stored answer byte for byte; two at once share one run), the reward and its
# breakdown, the queue limit (429 with Retry-After), a restart after kill -9 (the unanswered
# request is queued again and the repeated id gets its answer; no runner outlives the killed
# service), the SIGTERM drain (the client in flight gets its answer, new requests do not get in,
# exit 0), the documented metrics, and examples/verl_reward.py against the service.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve_lib.sh"

# Short verifies: one seed of the small set, no timing (on the host backend the timing of a
# tiny task takes about 10 s, and with a --timeout of a few seconds its batches are cut); a hang
# is cut after 3 s.
SERVE=("${FAST[@]}" --timeout 3 --no-timing --sets small --seeds 1)
export STITCH_SERVE_TOKEN=s3cret
TOKEN=s3cret
serve_start main "${SERVE[@]}" --workers 2 --body-max 8192 || exit 1
MAIN_PID=$SPID

# ---- health and tasks ------------------------------------------------------------------------
TOKEN= http health GET /healthz
check "healthz: 200 without a token (got $CODE)" [ "$CODE" = 200 ]
check "healthz: ok true" [ "$(jget "$WORK/health.body" ok)" = true ]
check "healthz: 2 workers" [ "$(jget "$WORK/health.body" workers)" = 2 ]
http tasks GET /v1/tasks
check "tasks: 200 (got $CODE)" [ "$CODE" = 200 ]
check "tasks: lists t1/scale" grep -q '"id":"t1/scale"' "$WORK/tasks.body"
check "tasks: no hidden sizes" bash -c "! grep -q 4097 '$WORK/tasks.body'"

# ---- verdicts --------------------------------------------------------------------------------
verdict() { # verdict NAME FIXTURE [JSON]: POST /v1/verify of the fixture; sets CODE
	body "$WORK/$1.req" "${3:-"{\"task\": \"t1/scale\"}"}" "$2"
	http "$1" POST /v1/verify "$WORK/$1.req"
}
verdict good "$FIX/good.c"
check "good: 200 (got $CODE: $(head -c 300 "$WORK/good.body"))" [ "$CODE" = 200 ]
check "good: status ok" [ "$(jget "$WORK/good.body" status)" = ok ]
check "good: kind verify" [ "$(jget "$WORK/good.body" kind)" = verify ]
check "good: the verdict inside" [ "$(jget "$WORK/good.body" verdict.status)" = ok ]
check "good: a made-up id, also in X-Request-Id" \
	grep -qi "^X-Request-Id: $(jget "$WORK/good.body" id)\$" "$WORK/good.hdr"
check "good: seconds queued and total" [ -n "$(jget "$WORK/good.body" seconds.total)" ]
# Two workers share the CPUs the server may use for their comparisons.
share=$(( $(nproc) / 2 ))
[ "$share" -ge 1 ] || share=1
[ "$share" -le 16 ] || share=16
check "good: compared with the worker's share of the CPUs, $share (got $(jget "$WORK/good.body" verdict.compare_threads))" \
	[ "$(jget "$WORK/good.body" verdict.compare_threads)" = "$share" ]
# A worker keeps its shared-memory blocks: of three verifies one after another on two workers,
# the second goes to the first one's worker (and reuses its blocks) or to the other, and then the
# third finds a worker that has verified before either way: the second or the third takes every
# block instead of making them. (Which worker takes a request is a race.)
verdict good2 "$FIX/good.c"
verdict good3 "$FIX/good.c"
all_reused() { test "$(jget "$1" verdict.shm_blocks.made)" = 0 -a "$(jget "$1" verdict.shm_blocks.reused)" -ge 2; }
either() { "$1" "$2" || "$1" "$3"; } # either TEST A B: TEST holds for A or for B
check "second or third verify: every block reused (got $(jget "$WORK/good2.body" verdict.shm_blocks), $(jget "$WORK/good3.body" verdict.shm_blocks))" \
	either all_reused "$WORK/good2.body" "$WORK/good3.body"
check "third verify: still ok" [ "$(jget "$WORK/good3.body" verdict.status)" = ok ]
verdict wrong "$FIX/wrong.c"
check "wrong: 200 (got $CODE)" [ "$CODE" = 200 ]
check "wrong: status incorrect" [ "$(jget "$WORK/wrong.body" status)" = incorrect ]
verdict segv "$FIX/segv.c"
check "segv: 200 (got $CODE)" [ "$CODE" = 200 ]
check "segv: status runtime_error" [ "$(jget "$WORK/segv.body" status)" = runtime_error ]
verdict exec "$STITCH_SRC/tests/redteam/host/exec_raw.c"
check "exec_raw: 200 (got $CODE)" [ "$CODE" = 200 ]
check "exec_raw: forbidden or hacking" grep -Eq '^(forbidden|hacking)$' <<<"$(jget "$WORK/exec.body" status)"

# A hang, asked twice at once under one id: one run (one timeout verdict), the same answer twice.
timeouts0=$(metric 'stitch_serve_verdicts_total{status="timeout"}')
body "$WORK/hang.req" '{"task": "t1/scale", "id": "hang-1"}' "$FIX/hang.c"
http hang_a POST /v1/verify "$WORK/hang.req" &
sleep 0.5
http hang_b POST /v1/verify "$WORK/hang.req"
wait $!
check "hang: 200 (got $CODE)" [ "$CODE" = 200 ]
check "hang: status timeout" [ "$(jget "$WORK/hang_b.body" status)" = timeout ]
check "hang: both clients got the same answer" cmp -s "$WORK/hang_a.body" "$WORK/hang_b.body"
check "hang: one run for the two (timeout verdicts ${timeouts0:-0} -> $(metric 'stitch_serve_verdicts_total{status="timeout"}'))" \
	[ "$(metric 'stitch_serve_verdicts_total{status="timeout"}')" = $((${timeouts0:-0} + 1)) ]

# ---- refusals --------------------------------------------------------------------------------
printf '{"task": "t1/scale", "code": ' >"$WORK/malformed.req"
http malformed POST /v1/verify "$WORK/malformed.req"
check "malformed JSON: 400 (got $CODE)" [ "$CODE" = 400 ]
check "malformed JSON: error says JSON" grep -q 'not JSON' "$WORK/malformed.body"
body "$WORK/nocode.req" '{"task": "t1/scale"}'
http nocode POST /v1/verify "$WORK/nocode.req"
check "missing code: 400 (got $CODE)" [ "$CODE" = 400 ]
check "missing code: error names code" grep -q 'code is missing' "$WORK/nocode.body"
verdict unknown_field "$FIX/good.c" '{"task": "t1/scale", "colour": "red"}'
check "unknown field: 400 (got $CODE)" [ "$CODE" = 400 ]
check "unknown field: error names it" grep -q "colour" "$WORK/unknown_field.body"
verdict unknown_option "$FIX/good.c" '{"task": "t1/scale", "options": {"fast": true}}'
check "unknown option: 400 (got $CODE)" [ "$CODE" = 400 ]
verdict bad_id "$FIX/good.c" '{"task": "t1/scale", "id": "a b"}'
check "bad id: 400 (got $CODE)" [ "$CODE" = 400 ]
verdict unknown_task "$FIX/good.c" '{"task": "t9/nope"}'
check "unknown task: 404 (got $CODE)" [ "$CODE" = 404 ]
verdict path_task "$FIX/good.c" "{\"task\": \"$STITCH_SRC/tests/data/tasks/t1/scale\"}"
check "a path as task: 404 (got $CODE)" [ "$CODE" = 404 ]
http get_verify GET /v1/verify
check "GET /v1/verify: 405 (got $CODE)" [ "$CODE" = 405 ]
http post_tasks POST /v1/tasks "$WORK/nocode.req"
check "POST /v1/tasks: 405 (got $CODE)" [ "$CODE" = 405 ]
http nopath GET /v1/nothing
check "unknown path: 404 (got $CODE)" [ "$CODE" = 404 ]
python3 -c "print('/* ' + 'x' * 20000 + ' */')" | cat "$FIX/good.c" - >"$WORK/big.c"
verdict big "$WORK/big.c"
check "body over --body-max: 413 (got $CODE)" [ "$CODE" = 413 ]

# ---- the bearer token ------------------------------------------------------------------------
TOKEN= verdict notoken "$FIX/good.c"
check "no token: 401 (got $CODE)" [ "$CODE" = 401 ]
check "no token: WWW-Authenticate" grep -qi '^WWW-Authenticate: Bearer' "$WORK/notoken.hdr"
TOKEN=wrong verdict badtoken "$FIX/good.c"
check "wrong token: 401 (got $CODE)" [ "$CODE" = 401 ]
TOKEN= http notoken_tasks GET /v1/tasks
check "no token, /v1/tasks: 401 (got $CODE)" [ "$CODE" = 401 ]
TOKEN=s3cret verdict goodtoken "$FIX/good.c"
check "right token: 200 (got $CODE)" [ "$CODE" = 200 ]

# ---- request ids -----------------------------------------------------------------------------
stored0=$(metric stitch_serve_stored_answers_total)
verdict same1 "$FIX/good.c" '{"task": "t1/scale", "id": "same-1"}'
check "id same-1: 200 (got $CODE)" [ "$CODE" = 200 ]
check "id same-1: the answer's id" [ "$(jget "$WORK/same1.body" id)" = same-1 ]
verdict same2 "$FIX/good.c" '{"task": "t1/scale", "id": "same-1"}'
check "id same-1 again: 200 (got $CODE)" [ "$CODE" = 200 ]
check "id same-1 again: byte-identical answer" cmp -s "$WORK/same1.body" "$WORK/same2.body"
check "id same-1 again: from the store (stored answers $stored0 -> $(metric stitch_serve_stored_answers_total))" \
	[ "$(metric stitch_serve_stored_answers_total)" = $((stored0 + 1)) ]
verdict same3 "$FIX/wrong.c" '{"task": "t1/scale", "id": "same-1"}'
check "id same-1 with other code: 409 (got $CODE)" [ "$CODE" = 409 ]
body "$WORK/same4.req" '{"task": "t1/scale", "id": "same-1"}' "$FIX/good.c"
http same4 POST /v1/reward "$WORK/same4.req"
check "id same-1 as a reward: 409 (got $CODE)" [ "$CODE" = 409 ]

# ---- the reward ------------------------------------------------------------------------------
body "$WORK/reward.req" '{"task": "t1/scale", "id": "reward-1"}' "$FIX/good.c"
http reward POST /v1/reward "$WORK/reward.req"
check "reward good: 200 (got $CODE: $(head -c 300 "$WORK/reward.body"))" [ "$CODE" = 200 ]
check "reward good: kind reward" [ "$(jget "$WORK/reward.body" kind)" = reward ]
check "reward good: reward > 0 ($(jget "$WORK/reward.body" reward.reward))" \
	python3 -c "import sys; sys.exit(not float('$(jget "$WORK/reward.body" reward.reward)') > 0)"
for f in correct speedup baseline rule rubric lambda formula; do
	check "reward good: breakdown has $f" python3 -c "
import json, sys; sys.exit('$f' not in json.load(open('$WORK/reward.body'))['reward'])"
done
check "reward good: correct true" [ "$(jget "$WORK/reward.body" reward.correct)" = true ]
body "$WORK/reward_wrong.req" '{"task": "t1/scale"}' "$FIX/wrong.c"
http reward_wrong POST /v1/reward "$WORK/reward_wrong.req"
check "reward wrong: 200 (got $CODE)" [ "$CODE" = 200 ]
check "reward wrong: 0" python3 -c "import sys; sys.exit(float('$(jget "$WORK/reward_wrong.body" reward.reward)') != 0)"
check "reward wrong: zeroed by incorrect" [ "$(jget "$WORK/reward_wrong.body" reward.zeroed_by)" = incorrect ]
body "$WORK/reward_opt.req" '{"task": "t1/scale", "skill": "opt", "feedback": "faster"}' "$FIX/good.c"
http reward_opt POST /v1/reward "$WORK/reward_opt.req"
check "reward opt without previous_code: 400 (got $CODE)" [ "$CODE" = 400 ]
check "reward opt without previous_code: says so" grep -q previous_code "$WORK/reward_opt.body"
body "$WORK/reward_skill.req" '{"task": "t1/scale", "skill": "fast"}' "$FIX/good.c"
http reward_skill POST /v1/reward "$WORK/reward_skill.req"
check "reward with an unknown skill: 400 (got $CODE)" [ "$CODE" = 400 ]

# examples/verl_reward.py against this service: the fenced block of a completion is verified,
# a completion with two blocks gets 0 without a request, and a repeat is answered from the store.
stored0=$(metric stitch_serve_stored_answers_total)
STITCH_SERVE_URL="http://127.0.0.1:$PORT" python3 - "$STITCH_SRC/examples" "$FIX/good.c" \
	>"$WORK/example.out" 2>&1 <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import verl_reward as v
good = "Here it is:\n```c\n" + open(sys.argv[2]).read() + "```\n"
info = {"task_id": "t1/scale", "skill": "gen"}
print(v.compute_score("stitch", good, "", info))
print(v.compute_score_batch(["stitch"] * 2, [good, good + good], ["", ""], [info, info]))
EOF
check "example: compute_score > 0 ($(head -n 3 "$WORK/example.out"))" python3 -c "
import sys; a, b = open('$WORK/example.out').read().split('\n')[:2]
sys.exit(not (float(a) > 0 and eval(b) == [float(a), 0.0]))"
check "example: the repeat came from the store" \
	[ "$(metric stitch_serve_stored_answers_total)" = $((stored0 + 1)) ]

# ---- metrics ---------------------------------------------------------------------------------
TOKEN= http metrics GET /metrics
check "metrics: 200 without a token (got $CODE)" [ "$CODE" = 200 ]
for series in 'stitch_serve_answers_total{code="200"}' 'stitch_serve_answers_total{code="400"}' \
	'stitch_serve_answers_total{code="401"}' 'stitch_serve_answers_total{code="404"}' \
	'stitch_serve_answers_total{code="405"}' 'stitch_serve_answers_total{code="409"}' \
	'stitch_serve_answers_total{code="413"}' \
	'stitch_serve_verdicts_total{status="ok"}' 'stitch_serve_verdicts_total{status="incorrect"}' \
	'stitch_serve_verdicts_total{status="runtime_error"}' \
	'stitch_serve_verdicts_total{status="timeout"}' stitch_serve_stored_answers_total \
	'stitch_serve_latency_seconds{quantile="0.5"}' 'stitch_serve_latency_seconds{quantile="0.9"}' \
	'stitch_serve_latency_seconds{quantile="0.99"}' stitch_serve_latency_seconds_sum \
	stitch_serve_latency_seconds_count 'stitch_serve_queue_depth{stage="compile"}' \
	'stitch_serve_queue_depth{stage="run"}' 'stitch_serve_queue_depth{stage="judge"}' \
	stitch_serve_inflight stitch_serve_waiting_clients stitch_serve_draining \
	stitch_serve_uptime_seconds 'stitch_serve_worker_busy_ratio{worker="0",gpu="host"}' \
	'stitch_serve_worker_busy_ratio{worker="1",gpu="host"}' \
	'stitch_serve_runners_kept{kind="spare"}' 'stitch_serve_runners_kept{kind="loaded"}' \
	'stitch_serve_runner_takes_total{kind="spare",found="yes"}' \
	'stitch_serve_runner_takes_total{kind="loaded",found="yes"}'; do
	check "metrics: $series" grep -qF -- "$series " "$WORK/metrics.body"
done
# The same task's reference ran in a kept runner, loaded by an earlier request, and candidates
# got spares started ahead.
check "metrics: kept reference runners were reused" \
	[ "$(metric 'stitch_serve_runner_takes_total{kind="loaded",found="yes"}')" -gt 0 ]
check "metrics: spares were taken" \
	[ "$(metric 'stitch_serve_runner_takes_total{kind="spare",found="yes"}')" -gt 0 ]
check "metrics: a TYPE line per family" [ "$(grep -c '^# TYPE stitch_serve_' "$WORK/metrics.body")" -ge 10 ]

# ---- kill -9 and restart ---------------------------------------------------------------------
# A hang (3 s) is in flight when the service is killed; the restarted service queues it again
# from the database by itself, and the repeated id gets the answer it stored.
body "$WORK/restart.req" '{"task": "t1/scale", "id": "restart-1"}' "$FIX/hang.c"
http restart_first POST /v1/verify "$WORK/restart.req" &
CLIENT=$!
inflight() { [ "$(metric stitch_serve_inflight)" = 1 ]; }
check "restart: the request is in flight" wait_for 20 inflight
# Its runners started, and a second later the candidate spins in st_run (the reference's and
# expert's runners wait on their sockets and leave with their parent in any case).
check "restart: the hang's runners started" wait_for 20 runners_left
sleep 1
kill -9 "$MAIN_PID"
wait "$MAIN_PID" 2>/dev/null
wait "$CLIENT"
check "restart: the killed service's client got no answer (got $(cat "$WORK/restart_first.code"))" \
	[ "$(cat "$WORK/restart_first.code")" = 0 ]
check "restart: no runner left behind by the killed service" wait_for 5 eval '! runners_left'
for p in $(runner_pids); do # (so that the checks below do not see it again)
	kill -9 "$p"
done
check "restart: the stored request is the request, nothing more" python3 -c "
import json, sqlite3
r = sqlite3.connect('$WORK/main.db').execute(
    \"select request, answered from serve_requests where id = 'restart-1'\").fetchone()
assert r[1] is None and json.loads(r[0]) == json.load(open('$WORK/restart.req')), r"
serve_start main "${SERVE[@]}" --workers 2 --body-max 8192 || exit 1
MAIN_PID=$SPID
check "restart: the unanswered request was queued again" \
	grep -q '^serve: 1 unanswered request from before queued again$' "$WORK/main.log"
idle() { [ "$(metric stitch_serve_inflight)" = 0 ]; }
check "restart: the queued request ran by itself" wait_for 30 idle
http restart_again POST /v1/verify "$WORK/restart.req"
check "restart: the repeated id gets 200 (got $CODE)" [ "$CODE" = 200 ]
check "restart: status timeout" [ "$(jget "$WORK/restart_again.body" status)" = timeout ]
check "restart: the answer's id" [ "$(jget "$WORK/restart_again.body" id)" = restart-1 ]
check "restart: the answer came from the store" [ "$(metric stitch_serve_stored_answers_total)" = 1 ]
verdict same5 "$FIX/good.c" '{"task": "t1/scale", "id": "same-1"}'
check "restart: an id answered before the kill gets the same answer" \
	cmp -s "$WORK/same1.body" "$WORK/same5.body"
kill -TERM "$MAIN_PID"
wait "$MAIN_PID"
rc=$?
check "main: exit 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]

# ---- queue limit and drain -------------------------------------------------------------------
# One worker, one request in flight at most: while a hang runs, the next request gets 429 with
# a Retry-After; SIGTERM then drains: the hang's client gets its answer, a new request is turned
# away (503, or refused once the socket is closed), the service exits 0.
unset STITCH_SERVE_TOKEN
TOKEN=
serve_start small "${SERVE[@]}" --workers 1 --queue-max 1 || exit 1
SMALL_PID=$SPID
body "$WORK/slow.req" '{"task": "t1/scale", "id": "slow-1"}' "$FIX/hang.c"
http slow POST /v1/verify "$WORK/slow.req" &
CLIENT=$!
check "queue: the hang is in flight" wait_for 20 inflight
verdict full "$FIX/good.c" '{"task": "t1/scale", "id": "full-1"}'
check "queue full: 429 (got $CODE)" [ "$CODE" = 429 ]
check "queue full: Retry-After" grep -qi '^Retry-After: [0-9]' "$WORK/full.hdr"
check "queue full: the refused request is not stored" python3 -c "
import sqlite3, sys
sys.exit(sqlite3.connect('$WORK/small.db').execute(
    \"select count(*) from serve_requests where id = 'full-1'\").fetchone()[0] != 0)"
kill -TERM "$SMALL_PID"
draining() { [ "$(metric stitch_serve_draining)" = 1 ] || [ "$CODE" = 0 ]; }
wait_for 5 draining
verdict during "$FIX/good.c" '{"task": "t1/scale", "id": "during-1"}'
check "drain: a new request gets 503 or no connection (got $CODE)" grep -Eqx '503|0' <<<"$CODE"
wait "$CLIENT"
check "drain: the client in flight got 200 (got $(cat "$WORK/slow.code"))" [ "$(cat "$WORK/slow.code")" = 200 ]
check "drain: its verdict (timeout)" [ "$(jget "$WORK/slow.body" status)" = timeout ]
wait "$SMALL_PID"
rc=$?
check "drain: exit 0 (got $rc)" [ "$rc" -eq 0 ]
check "drain: the log says it drained a request in flight" \
	grep -q 'draining: 1 request in flight' "$WORK/small.log"
check "drain: stopped" grep -q '^serve: stopped$' "$WORK/small.log"
check "drain: no runner left behind" wait_for 5 eval '! runners_left'
# ---- --warm ----------------------------------------------------------------------------------
# The baselines of the named tasks are in the compile cache before the service listens: the
# reference and expert of t1/scale and t2/fma, four shared objects in a cache of its own.
STITCH_CACHE_DIR=$WORK/warm-cache serve_start warm "${SERVE[@]}" --warm t1/scale,t2/fma || exit 1
WARM_PID=$SPID
check "warm: logged before listening" \
	bash -c "grep -n . '$WORK/warm.log' | grep -A9 'warm: the baselines of 2 tasks compiled' | grep -q 'listening on'"
check "warm: 4 baselines in the cache (got $(ls "$WORK"/warm-cache/compile/*.so 2>/dev/null | wc -l))" \
	[ "$(ls "$WORK"/warm-cache/compile/*.so 2>/dev/null | wc -l)" = 4 ]
# ... and loaded in kept runners: each task's reference and expert (the warm-up verifies the
# expert as its candidate), so that the first request of a warmed task starts neither.
check "warm: loaded on the host in the log" grep -q 'warm: the baselines of 2 tasks loaded on the host' "$WORK/warm.log"
loaded=$(metric 'stitch_serve_runners_kept{kind="loaded"}')
check "warm: 4 loaded runners kept before any request (got $loaded)" [ "$loaded" = 4 ]
verdict warm1 "$FIX/good.c"
check "warm: first request ok (got $(jget "$WORK/warm1.body" verdict.status))" \
	[ "$(jget "$WORK/warm1.body" verdict.status)" = ok ]
check "warm: its reference loaded already (got $(jget "$WORK/warm1.body" verdict.runners.reference.from))" \
	[ "$(jget "$WORK/warm1.body" verdict.runners.reference.from)" = loaded ]
check "warm: its expert loaded already (got $(jget "$WORK/warm1.body" verdict.runners.expert.from))" \
	[ "$(jget "$WORK/warm1.body" verdict.runners.expert.from)" = loaded ]
# ... and their runners still hold the memory of the size set the warm-up ran, poisoned, which
# the same set's buffers now come from instead of new allocations (src/runner/dev_keep.c).
kept=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["verdict"]["runner_stages_ms"].get("setup.kept_blocks", 0)))' "$WORK/warm1.body" 2>/dev/null)
check "warm: the kept runners reuse their kept device blocks (got ${kept:-none})" [ "${kept:-0}" -gt 0 ]
kill -TERM "$WARM_PID"
wait "$WARM_PID"
# Checked before the devices are probed: the CUDA backend's own default, on a machine with a GPU
# or without, gives the usage error; so does --warm with --queue (no workers of its own).
"$STITCH" serve --listen 127.0.0.1:0 --db "$WORK/warm2.db" --warm t1/scale,t9/none \
	>/dev/null 2>"$WORK/warm2.err"
rc=$?
check "warm: an unknown task is a usage error (exit $rc)" [ "$rc" = 2 ]
check "warm: the message names it" grep -q "warm: task 't9/none'" "$WORK/warm2.err"
"$STITCH" serve --listen 127.0.0.1:0 --db "$WORK/warm3.db" --queue redis://127.0.0.1:1 \
	--warm all >/dev/null 2>"$WORK/warm3.err"
rc=$?
check "warm: with --queue a usage error (exit $rc)" [ "$rc" = 2 ]
check "warm: the message says why" grep -q "with --queue it has none" "$WORK/warm3.err"
finish
