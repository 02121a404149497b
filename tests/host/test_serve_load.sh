#!/usr/bin/env bash
# `stitch serve` under load on the host backend: serve-load (tests/load/serve_load.c) sends 2000
# requests from 32 clients, alternately /v1/verify and /v1/reward, 11.5 % of them crashing,
# hanging or trying something forbidden, 2 % for another task (tests/load/mix-host.txt), half
# of them code the compile cache has seen. The queue takes 16 at a time (so clients wait in
# line, and those not admitted within --admit-wait get 429s and retry after the Retry-After)
# and the deadline is 2 s (so a hang's client, whose verdict takes a little longer, gets a 504
# and repeats its id). Every request must get exactly one 200 answer with its own id
# and the status its candidate deserves, a sample sent again must get the stored answers byte
# for byte, and the service must be the same process at the end (no restart). The figures are
# printed; STITCH_LOAD_REQUESTS sets another number of requests.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve_lib.sh"

LOAD=$(dirname "$STITCH")/tests/serve-load
REQUESTS=${STITCH_LOAD_REQUESTS:-2000}
WORKERS=$(nproc)
# Short verifies: one seed of the small set, hangs cut after 2 s; no timing (every request says
# {"timing": false}: timing a tiny task on the host backend takes about 10 s).
serve_start load "${FAST[@]}" --timeout 2 --sets small --seeds 1 --workers "$WORKERS" \
	--queue-max 16 --deadline 2 || exit 1
PID0=$SPID
start=$(date +%s)
"$LOAD" --url "http://127.0.0.1:$PORT" --clients 32 --requests "$REQUESTS" \
	--mix "$STITCH_SRC/tests/load/mix-host.txt" --root "$STITCH_SRC" --timing-share 0 \
	--reuse 0.5 --resend 100 --workers "$WORKERS" --json "$WORK/load.json" --quiet \
	>"$WORK/load.out" 2>"$WORK/load.err"
rc=$?
took=$(($(date +%s) - start))
cat "$WORK/load.out"
head -n 20 "$WORK/load.err"
echo "load test: $took s for $REQUESTS requests on $WORKERS workers"

num() { jget "$WORK/load.json" "$1"; }
check "serve-load: exit 0 (got $rc)" [ "$rc" -eq 0 ]
check "serve-load: $REQUESTS answers (got $(num answers))" [ "$(num answers)" = "$REQUESTS" ]
for k in lost duplicated wrong_status id_mismatches no_reward resend_mismatches; do
	check "serve-load: $k 0 (got $(num $k))" [ "$(num $k)" = 0 ]
done
check "serve-load: 100 ids sent again (got $(num resent))" [ "$(num resent)" = 100 ]
check "serve-load: the resent answers came from the store (+$(num stored_answers_delta))" \
	[ "$(num stored_answers_delta)" = 100 ]
bad=$(python3 -c "
import json
k = json.load(open('$WORK/load.json'))['kinds']
print(sum(v['sent'] for n, v in k.items() if n not in ('good', 'wrong', 'fma')))")
fma_sent=$(num kinds.fma.sent) fma_ok=$(num kinds.fma.expected)
check "serve-load: the other task's requests answered as expected ($fma_ok of $fma_sent)" \
	[ "${fma_sent:-0}" -gt 0 -a "$fma_ok" = "$fma_sent" ]
check "serve-load: at least 10 % crash, hang or hack ($bad of $REQUESTS)" [ $((bad * 10)) -ge "$REQUESTS" ]
check "serve-load: the queue limit was reached, and retried (429: $(num retries.429))" \
	[ "$(num retries.429)" -gt 0 ] 2>/dev/null
check "serve-load: the deadline passed, and the id was repeated (504: $(num retries.504))" \
	[ "$(num retries.504)" -gt 0 ] 2>/dev/null

check "service: the same process at the end" kill -0 "$PID0"
check "service: started once" [ "$(grep -c 'listening on' "$WORK/load.log")" = 1 ]
TOKEN= http health GET /healthz
check "service: healthy after the load ($CODE)" [ "$CODE" = 200 ]
check "service: nothing left in flight" [ "$(metric stitch_serve_inflight)" = 0 ]
grep -E '^stitch_serve_(verdicts_total|answers_total|worker_busy|latency_seconds\{)' \
	"$WORK/metrics.body"
kill -TERM "$PID0"
wait "$PID0"
rc=$?
check "service: exit 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
check "service: no runner left behind" wait_for 5 eval '! runners_left'

# The runner is hostile (docs/architecture.md): with the source check off, 10 % of the requests
# break the runner protocol (tests/load/mix-host-protocol.txt). Each gets its verdict (hacking),
# nothing is lost, no worker is left stuck, and the throughput is printed beside the same load
# of honest answers only (tests/load/mix-host-honest.txt).
PREQ=${STITCH_LOAD_PROTOCOL_REQUESTS:-300}
rates=()
for mix in honest protocol; do
	serve_start "p$mix" "${FAST[@]}" --no-policy --timeout 2 --sets small --seeds 1 \
		--workers "$WORKERS" --queue-max 16 --deadline 5 || exit 1
	P=$SPID
	start=$(date +%s.%N)
	"$LOAD" --url "http://127.0.0.1:$PORT" --clients 16 --requests "$PREQ" \
		--mix "$STITCH_SRC/tests/load/mix-host-$mix.txt" --root "$STITCH_SRC" --timing-share 0 \
		--workers "$WORKERS" --json "$WORK/p$mix.json" --quiet >"$WORK/p$mix.out" 2>"$WORK/p$mix.err"
	rc=$?
	rates+=("$(python3 -c "import sys; print('%.2f' % ($PREQ / ($(date +%s.%N) - $start)))")")
	pnum() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v = v.get(k, {}) if isinstance(v, dict) else {}
print(v if v != {} else "")' "$WORK/p$mix.json" "$1"; }
	check "$mix load: exit 0 (got $rc; $(head -c 300 "$WORK/p$mix.err"))" [ "$rc" -eq 0 ]
	check "$mix load: $PREQ answers (got $(pnum answers))" [ "$(pnum answers)" = "$PREQ" ]
	for k in lost duplicated wrong_status id_mismatches no_reward; do
		check "$mix load: $k 0 (got $(pnum $k))" [ "$(pnum $k)" = 0 ]
	done
	TOKEN= http "h$mix" GET /healthz
	check "$mix load: healthy after it ($CODE)" [ "$CODE" = 200 ]
	check "$mix load: nothing left in flight" [ "$(metric stitch_serve_inflight)" = 0 ]
	kill -TERM "$P"
	wait "$P"
	check "$mix load: exit 0 after SIGTERM (got $?)" [ $? -eq 0 ]
done
hack=$(python3 -c "
import json
k = json.load(open('$WORK/pprotocol.json'))['kinds']
print(sum(v['sent'] for n, v in k.items() if n not in ('good', 'wrong')))")
check "protocol load: at least 5 % of the requests broke the protocol ($hack of $PREQ)" \
	[ $((hack * 20)) -ge "$PREQ" ]
echo "protocol load: ${rates[1]} requests/s against ${rates[0]} for the honest load ($(python3 -c "print('%.0f' % (100 * ${rates[1]} / ${rates[0]}))") %)"
check "service: no runner left behind after the protocol load" wait_for 5 eval '! runners_left'
# Every 200 answer the services stored (what their clients got, byte for byte) holds a verdict:
# all of them go to the schema check.
for db in load phonest pprotocol; do
	verdicts_from_db "answers-$db" "$WORK/$db.db" \
		"select answer from serve_requests where http_status = 200" verdict
done
finish
