#!/usr/bin/env bash
# The queue with workers as separate hosts: each `stitch worker` runs in its own network
# namespace with a veth link to this machine, which holds redis-server, so a worker reaches
# Redis over its link only (not the machine's loopback, which a namespace does not share).
# 400 distinct jobs through `stitch queue submit --wait`; one host's worker is killed with -9
# in the middle of a job that hangs: every job gets exactly one result, the killed host's job
# is answered by the other. Needs root (or CAP_NET_ADMIN) and iproute2; skipped elsewhere.
source "$(dirname "$0")/../lib.sh"

if ! command -v redis-server >/dev/null || ! command -v ip >/dev/null; then
	echo "SKIP: needs redis-server and iproute2 (scripts/bootstrap --tests installs them)"
	exit 77
fi
TAG=st$$
if ! ip netns add "${TAG}a" 2>/dev/null; then
	echo "SKIP: no network namespaces here (needs root or CAP_NET_ADMIN); tests/host/test_queue.sh runs the workers as processes"
	exit 77
fi
export STITCH_TASKS=$STITCH_SRC/tests/data/tasks
N=${QUEUE_HOST_JOBS:-400}
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	for h in a b; do
		ip netns del "$TAG$h" 2>/dev/null
		ip link del "${TAG}v$h" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
# host H (a, b): namespace $TAG$H, link ${TAG}v$H here <-> ${TAG}p$H there, 10.77.N.1 here
net=0
for h in a b; do
	net=$((net + 1))
	[ "$h" = a ] || ip netns add "$TAG$h"
	ip link add "${TAG}v$h" type veth peer name "${TAG}p$h" &&
		ip link set "${TAG}p$h" netns "$TAG$h" &&
		ip addr add "10.77.$net.1/24" dev "${TAG}v$h" && ip link set "${TAG}v$h" up &&
		ip netns exec "$TAG$h" ip addr add "10.77.$net.2/24" dev "${TAG}p$h" &&
		ip netns exec "$TAG$h" ip link set "${TAG}p$h" up &&
		ip netns exec "$TAG$h" ip link set lo up
	check "host $h: its namespace and link" [ $? -eq 0 ]
done
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/redis" "$WORK/jobs"
redis-server --port "$PORT" --bind 127.0.0.1 10.77.1.1 10.77.2.1 --protected-mode no --save "" \
	--appendonly yes --appendfsync always --dir "$WORK/redis" >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
up() { redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; }
check "redis starts" wait_for 10 up

# Isolation first: inside a namespace the machine's loopback is not there.
ip netns exec "${TAG}a" "$STITCH" queue status --queue "redis://127.0.0.1:$PORT" >/dev/null 2>"$WORK/iso.err"
rc=$?
check "host a cannot reach Redis on the machine's loopback (exit $rc)" [ "$rc" -eq 3 ]

worker() { # HOST NET [options]: that host's worker, reaching Redis over its link
	local h=$1 n=$2
	shift 2
	ip netns exec "$TAG$h" "$STITCH" worker --queue "redis://10.77.$n.1:$PORT" --backend host \
		--name "host-$h" --quiet --reclaim-after 1 "$@" >>"$WORK/worker-$h.log" 2>&1 &
	PIDS+=($!)
	WPID=$!
}
OPTS='{"sets": "small", "seeds": 1, "timing": false}'
worker a 1 --timeout 3
victim=$WPID
"$STITCH" queue submit --queue "redis://127.0.0.1:$PORT" --arch host --options "$OPTS" t1/scale \
	"$FIX/hang.c" >"$WORK/hang.txt"
job=$(cut -d' ' -f1 "$WORK/hang.txt")
on_it() { redis-cli -p "$PORT" get stitch:worker:host-a/0 2>/dev/null | grep -q "$job"; }
check "host a works on the hanging job" wait_for 20 on_it
kill -9 "$victim"
worker b 2 --timeout 3 --workers 2
worker a 1 --timeout 3 # host a comes back under the same name
python3 - "$WORK/jobs" "$N" "$FIX/good.c" <<'EOF'
import sys
folder, n, src = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
for i in range(n):
    open(f"{folder}/j{i:04d}.c", "w").write(src + f"\n/* job {i} on two hosts */\n")
EOF
"$STITCH" queue submit --queue "redis://127.0.0.1:$PORT" --arch host --options "$OPTS" --wait \
	--timeout 600 t1/scale "$WORK"/jobs/*.c >"$WORK/results.jsonl" 2>"$WORK/submit.err"
rc=$?
verdicts_keep "$WORK/results.jsonl" '*.verdict'
check "submit --wait exits 0 ($rc: $(tail -n 1 "$WORK/submit.err"))" [ "$rc" -eq 0 ]
check "every job one result, both hosts worked" python3 - "$WORK/results.jsonl" "$N" <<'EOF'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[2])
ids = [r["id"] for r in rows]
hosts = collections.Counter(r.get("worker", "?").split("/")[0] for r in rows)
ok = len(rows) == n and len(set(ids)) == n and all(r.get("status") == "ok" for r in rows)
print(f"hosts: {n} jobs, {len(rows)} results, {len(set(ids))} distinct, by host {dict(hosts)}")
sys.exit(0 if ok and hosts["host-a"] > 0 and hosts["host-b"] > 0 else 1)
EOF
"$STITCH" queue submit --queue "redis://127.0.0.1:$PORT" --arch host --options "$OPTS" --wait \
	--timeout 120 t1/scale "$FIX/hang.c" >"$WORK/hang.json"
verdicts_keep "$WORK/hang.json" verdict
check "the killed host's job was answered by a live worker ($(head -c 200 "$WORK/hang.json"))" \
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["status"] == "timeout" else 1)' "$WORK/hang.json"
check "one result stored per job (stats:done = $N + 1)" [ "$(redis-cli -p "$PORT" get stitch:stats:done)" = $((N + 1)) ]
finish
