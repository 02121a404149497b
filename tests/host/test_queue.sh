#!/usr/bin/env bash
# The Redis queue on the host backend: redis-server on loopback (AOF, fsync always), several
# `stitch worker` processes, and QUEUE_JOBS (default 5000) distinct jobs submitted by one
# producer that waits for all of them. Mid-sweep one worker is killed with -9 in the middle of a
# job and Redis itself is killed and restarted from its append-only file; every job must still
# get exactly one result, the killed worker's job finished by another. Also: a job answered
# before is not queued again, bad URLs and options, status output.
source "$(dirname "$0")/../lib.sh"

if ! command -v redis-server >/dev/null; then
	echo "SKIP: no redis-server here (scripts/bootstrap --tests installs it)"
	exit 77
fi
export STITCH_TASKS=$STITCH_SRC/tests/data/tasks
N=${QUEUE_JOBS:-5000}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=redis://127.0.0.1:$PORT
mkdir -p "$WORK/redis" "$WORK/jobs"
redis_start() {
	redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly yes --appendfsync always \
		--dir "$WORK/redis" --daemonize no >>"$WORK/redis.log" 2>&1 &
	REDIS_PID=$!
	for _ in $(seq 100); do
		redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && return 0
		sleep 0.1
	done
	return 1
}
WORKER_PIDS=()
cleanup_queue() {
	for p in "${WORKER_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	kill -9 "$REDIS_PID" 2>/dev/null
}
trap 'cleanup_queue; rm -rf "$WORK"' EXIT
check "redis starts" redis_start
OPTS='{"sets": "small", "seeds": 1, "timing": false}'
worker() { # NAME [options]: a worker in the background
	local name=$1
	shift
	"$STITCH" worker --queue "$URL" --backend host --name "$name" --quiet --reclaim-after 1 \
		"$@" >>"$WORK/worker-$name.log" 2>&1 &
	WORKER_PIDS+=($!)
}

# ---- bad input -------------------------------------------------------------------------------
"$STITCH" worker --backend host >/dev/null 2>"$WORK/e1"
check "worker without --queue: exit 2 ($?)" grep -q -- "--queue" "$WORK/e1"
"$STITCH" worker --queue rediss://127.0.0.1:1 --backend host >/dev/null 2>"$WORK/e2"
check "rediss:// with nobody there: says where ($(cat "$WORK/e2"))" grep -q "127.0.0.1:1" "$WORK/e2"
"$STITCH" queue status --queue redis://127.0.0.1:1 >/dev/null 2>"$WORK/e3"
rc=$?
check "no Redis there: exit 3 ($rc)" [ "$rc" -eq 3 ]
"$STITCH" queue submit --queue "$URL" --options '[1]' t1/scale x.c >/dev/null 2>"$WORK/e4"
check "--options must be an object" grep -q "JSON object" "$WORK/e4"

# ---- the sweep ---------------------------------------------------------------------------------
python3 - "$WORK/jobs" "$N" "$FIX/good.c" <<'EOF'
import sys
folder, n, src = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
for i in range(n):
    open(f"{folder}/j{i:05d}.c", "w").write(src + f"\n/* job {i} */\n")
EOF
# w1 alone takes a job that hangs (a timeout verdict after 3 s) and is killed with -9 in the
# middle of it: the job must be answered by another worker, once w1's heartbeat has expired.
worker w1 --timeout 3
"$STITCH" queue submit --queue "$URL" --arch host --options "$OPTS" t1/scale "$FIX/hang.c" \
	>"$WORK/hang.txt"
victim_job=$(cut -d' ' -f1 "$WORK/hang.txt")
on_it() { redis-cli -p "$PORT" get stitch:worker:w1/0 2>/dev/null | grep -q "$victim_job"; }
check "w1 works on the hanging job" wait_for 20 on_it
kill -9 "${WORKER_PIDS[0]}"
worker w2 --timeout 3
worker w3 --timeout 3 --workers 2
start=$(date +%s.%N)
"$STITCH" queue submit --queue "$URL" --arch host --options "$OPTS" --wait --timeout 900 \
	t1/scale "$WORK"/jobs/*.c >"$WORK/results.jsonl" 2>"$WORK/submit.err" &
SUBMIT=$!
# Later, Redis goes down hard and comes back from its append-only file.
for _ in $(seq 600); do
	[ "$(wc -l <"$WORK/results.jsonl")" -ge $((N / 2)) ] && break
	sleep 0.2
done
kill -9 "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null
sleep 1
check "redis restarts from its AOF" redis_start
wait "$SUBMIT"
rc=$?
took=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
verdicts_keep "$WORK/results.jsonl" '*.verdict'
check "submit --wait exits 0 ($rc: $(tail -n 2 "$WORK/submit.err"))" [ "$rc" -eq 0 ]
check "the sweep's figures" python3 - "$WORK/results.jsonl" "$N" "$took" <<'EOF'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n, took = int(sys.argv[2]), float(sys.argv[3])
ids = [r["id"] for r in rows]
status = collections.Counter(r.get("status") for r in rows)
workers = collections.Counter(r.get("worker", "?").split("/")[0] for r in rows)
lost = n - len(set(ids))
dup = len(ids) - len(set(ids))
print(f"queue: {len(rows)} results for {n} jobs in {took:.1f} s ({60 * n / took:.0f}/min): "
      f"{lost} lost, {dup} duplicated, statuses {dict(status)}, by worker {dict(workers)}")
sys.exit(0 if len(rows) == n and lost == 0 and dup == 0 and status == {"ok": n} else 1)
EOF
"$STITCH" queue submit --queue "$URL" --arch host --options "$OPTS" --wait --timeout 120 t1/scale \
	"$FIX/hang.c" >"$WORK/hang.json"
verdicts_keep "$WORK/hang.json" verdict
check "the killed worker's job was answered by another ($(cat "$WORK/hang.json" | head -c 300))" \
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["status"] == "timeout" and not r["worker"].startswith("w1/") else 1)' "$WORK/hang.json"
check "one result stored per job (stats:done = $N + 1)" [ "$(redis-cli -p "$PORT" get stitch:stats:done)" = $((N + 1)) ]
check "nothing left in the stream" [ "$(redis-cli -p "$PORT" xlen stitch:jobs:host)" = 0 ]

# ---- a job answered before is answered from the store, not queued -------------------------------
"$STITCH" queue submit --queue "$URL" --arch host --options "$OPTS" t1/scale "$WORK/jobs/j00000.c" \
	>"$WORK/again.txt"
check "a repeated job is answered, not queued" grep -q " answered$" "$WORK/again.txt"
"$STITCH" queue submit --queue "$URL" --arch host --options "$OPTS" --wait t1/scale \
	"$WORK/jobs/j00001.c" >"$WORK/again.json"
check "and --wait returns its stored result" grep -q '"status":"ok"' "$WORK/again.json"
verdicts_keep "$WORK/again.json" verdict

# ---- trusted jobs: only a task's own solutions ------------------------------------------------
"$STITCH" queue submit --queue "$URL" --arch host --options "$OPTS" --wait --trusted t1/scale \
	"$WORK/jobs/j00002.c" >"$WORK/trusted-bad.json"
check "a trusted job that is not a shipped solution is refused" \
	grep -q '"status":"error".*shipped solutions' "$WORK/trusted-bad.json"
"$STITCH" queue submit --queue "$URL" --arch host --options "$OPTS" --wait --trusted t1/scale \
	"$STITCH_TASKS/t1/scale/expert.c" >"$WORK/trusted-ok.json"
check "the task's own expert runs trusted" grep -q '"status":"ok"' "$WORK/trusted-ok.json"
verdicts_keep "$WORK/trusted-ok.json" verdict

# ---- stitch bench through the queue: the same rows as on this machine ----------------------------
BENCH=(--backend host --no-db --json --min-time 5 --max-rse 0.5 --max-samples 200)
"$STITCH" bench "${BENCH[@]}" --queue "$URL" >"$WORK/bench-queue.json" 2>"$WORK/bench-queue.err"
rc=$?
"$STITCH" bench "${BENCH[@]}" >"$WORK/bench-local.json" 2>/dev/null
check "bench --queue exits 0 ($rc: $(tail -n 1 "$WORK/bench-queue.err"))" [ "$rc" -eq 0 ]
verdicts_keep "$WORK/bench-queue.json" 'verdicts.*'
verdicts_keep "$WORK/bench-local.json" 'verdicts.*'
check "bench --queue: the tasks and statuses of a local bench" python3 - "$WORK/bench-queue.json" \
	"$WORK/bench-local.json" <<'EOF'
import json, sys
q, l = (json.load(open(f)) for f in sys.argv[1:3])
rows = lambda b: sorted((r["task"], r["status"]) for r in b["rows"])
sys.exit(0 if rows(q) == rows(l) and rows(q) and all(s == "ok" for _, s in rows(q)) else 1)
EOF

# ---- stitch eval through the queue: the workers verify each sample ------------------------------
EVAL_OPTS=(--backend host --min-time 5 --max-rse 0.5 --max-samples 200 --task t1/scale --no-db
           --queue "$URL")
. "$STITCH_SRC/tests/eval_lib.sh"
export OPENAI_API_KEY=test-key
before=$(redis-cli -p "$PORT" get stitch:stats:done)
run_eval eval-queue fake oneshot 2 1 scale_slow scale_wrong
check "eval --queue: the samples' verdicts came from the workers (done $before -> $(redis-cli -p "$PORT" get stitch:stats:done))" \
	[ "$(redis-cli -p "$PORT" get stitch:stats:done)" = $((before + 2)) ]
check "eval --queue: statuses ok and incorrect" python3 - "$WORK/eval-queue/results.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if [r["status"] for r in rows] == ["ok", "incorrect"] else 1)
EOF
# other options, so that these jobs are not the ones above answered from the store
EVAL_OPTS=(--backend host --min-time 5 --max-rse 0.5 --max-samples 150 --task t1/scale --no-db
           --queue "$URL")
before=$(redis-cli -p "$PORT" get stitch:stats:done)
run_eval eval-queue-agent fake agent 1 2 plan scale_wrong scale_slow
check "eval --queue, agent mode: both attempts verified by the workers" \
	[ "$(redis-cli -p "$PORT" get stitch:stats:done)" = $((before + 2)) ]
check "eval --queue, agent mode: incorrect, then ok" python3 - "$WORK/eval-queue-agent/results.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if [r["status"] for r in rows] == ["incorrect", "ok"] and rows[1]["final"] else 1)
EOF

# ---- stitch serve --queue: the HTTP API, answered by the queue's workers -------------------------
"$STITCH" serve --backend host --queue "$URL" --listen 127.0.0.1:0 --db "$WORK/serve.db" \
	--spool "$WORK/serve.spool" >"$WORK/serve.port" 2>"$WORK/serve.log" &
SERVE_PID=$!
WORKER_PIDS+=("$SERVE_PID")
sport() { sed -n 's/^port \([0-9]*\)$/\1/p' "$WORK/serve.port" | grep -q .; }
check "serve --queue starts without a GPU" wait_for 20 sport
check "serve --queue: verify, a bad task" python3 - "$(sed -n 's/^port //p' "$WORK/serve.port")" \
	"$FIX/good.c" "$WORK/serve-queue.json" <<'EOF'
import json, sys, urllib.request, urllib.error
url = f"http://127.0.0.1:{sys.argv[1]}/v1/verify"
code = open(sys.argv[2]).read() + "\n/* through serve */\n"
def post(obj):
    req = urllib.request.Request(url, data=json.dumps(obj).encode(), method="POST")
    try:
        r = urllib.request.urlopen(req, timeout=120)
        return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
st, a = post({"task": "t1/scale", "code": code,
              "options": {"sets": "small", "seeds": 1, "timing": False}})
st2, b = post({"task": "t1/no_such_task", "code": code})
print(f"serve --queue: {st} {a.get('status')}; unknown task: {st2} {b.get('error', '')[:80]}")
json.dump(a, open(sys.argv[3], "w"))
sys.exit(0 if st == 200 and a["status"] == "ok" and a["verdict"]["status"] == "ok" and st2 in (404, 422) else 1)
EOF
verdicts_keep "$WORK/serve-queue.json" verdict
kill -TERM "$SERVE_PID"
wait "$SERVE_PID"

# ---- status ------------------------------------------------------------------------------------
"$STITCH" queue status --queue "$URL" >"$WORK/status.txt"
check "status: jobs done (the sweep's, the hung one, the trusted ones, the bench's)" \
	[ "$(sed -n 's/^jobs done: //p' "$WORK/status.txt")" -ge $((N + 3)) ]
check "status: the killed worker's consumer is dead, the others alive" \
	sh -c "grep 'consumer w1/0' '$WORK/status.txt' | grep -q DEAD && grep 'consumer w2/0' '$WORK/status.txt' | grep -q alive"
"$STITCH" queue status --queue "$URL" --json >"$WORK/status.json"
check "status --json parses" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["done"] > 0 and d["streams"] else 1)' "$WORK/status.json"

# ---- SIGTERM: a worker finishes its job and leaves the group ------------------------------------
kill -TERM "${WORKER_PIDS[1]}"
wait "${WORKER_PIDS[1]}"
rc=$?
check "a worker stops on SIGTERM with exit 0 ($rc)" [ "$rc" -eq 0 ]
check "and says what it did" grep -q "stopped:" "$WORK/worker-w2.log"

# ---- TLS (rediss://): a Redis that speaks TLS only, a worker and a producer through it ----------
if command -v openssl >/dev/null && openssl req -x509 -newkey rsa:2048 -nodes -days 1 \
	-keyout "$WORK/tls.key" -out "$WORK/tls.crt" -subj /CN=localhost \
	-addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1; then
	TPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	mkdir -p "$WORK/redis-tls"
	redis-server --port 0 --tls-port "$TPORT" --bind 127.0.0.1 --tls-cert-file "$WORK/tls.crt" \
		--tls-key-file "$WORK/tls.key" --tls-auth-clients no --save "" --dir "$WORK/redis-tls" \
		>"$WORK/redis-tls.log" 2>&1 &
	WORKER_PIDS+=($!)
	tls_up() { redis-cli --tls --cacert "$WORK/tls.crt" -p "$TPORT" ping 2>/dev/null | grep -q PONG; }
	check "a TLS-only redis starts" wait_for 10 tls_up
	TURL=rediss://localhost:$TPORT
	"$STITCH" queue status --queue "$TURL" >/dev/null 2>"$WORK/tls-untrusted.err"
	rc=$?
	check "rediss:// without the server's CA: refused, exit 3 ($rc: $(cat "$WORK/tls-untrusted.err"))" \
		bash -c "[ $rc -eq 3 ] && grep -q 'TLS handshake' '$WORK/tls-untrusted.err'"
	STITCH_REDIS_CA=$WORK/tls.crt "$STITCH" queue status --queue "redis://localhost:$TPORT" \
		>/dev/null 2>&1
	check "plain redis:// to the TLS port fails" [ $? -eq 3 ]
	export STITCH_REDIS_CA=$WORK/tls.crt
	"$STITCH" worker --queue "$TURL" --backend host --name tls --quiet >>"$WORK/worker-tls.log" 2>&1 &
	WORKER_PIDS+=($!)
	"$STITCH" queue submit --queue "$TURL" --arch host --options "$OPTS" --wait --timeout 60 \
		t1/scale "$FIX/good.c" >"$WORK/tls.json" 2>"$WORK/tls.err"
	check "a job through TLS: verified by the worker ($(head -c 200 "$WORK/tls.json")$(cat "$WORK/tls.err"))" \
		python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["status"] == "ok" and r["worker"].startswith("tls/") else 1)' "$WORK/tls.json"
	verdicts_keep "$WORK/tls.json" verdict
	unset STITCH_REDIS_CA
else
	echo "SKIP (part): no openssl command here to make a certificate; TLS not tested"
fi

verdicts_check
echo "queue: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
