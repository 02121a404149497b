# Helpers for the tests of `stitch serve` (tests/host/test_serve*.sh), sourced after lib.sh: start
# a service on a free port with a private database and spool in $WORK, talk HTTP to it (python3's
# urllib: curl's command line is not among the test dependencies), read JSON fields. Every
# service started here is killed when the test exits.
export STITCH_TASKS="$STITCH_SRC/tests/data/tasks"
# Runners get their folders under a TMPDIR of this test's own, so that one left behind (by a
# killed service) can be seen, and killed when the test ends (as in test_faults.sh, a runner
# started as root drops to a user of its own, which must be able to pass through).
mkdir -p "$WORK/rtmp"
chmod 711 "$WORK" "$WORK/rtmp"
export TMPDIR="$WORK/rtmp"
runner_pids() { pgrep -f "[s]titch-runner-host --fd .* --workdir $WORK/rtmp/"; }
runners_left() { runner_pids >/dev/null; }
SERVE_PIDS=()
serve_cleanup() {
	local p
	for p in "${SERVE_PIDS[@]}" $(runner_pids); do
		kill -9 "$p" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap serve_cleanup EXIT

# serve_start NAME ARGS...: `stitch serve` on 127.0.0.1, port 0, database $WORK/NAME.db, spool
# $WORK/NAME.spool, its stderr appended to $WORK/NAME.log; sets SPID and PORT. Non-zero when it
# did not say its port within 20 s.
serve_start() {
	local name=$1
	shift
	: >"$WORK/$name.port"
	"$STITCH" serve --listen 127.0.0.1:0 --db "$WORK/$name.db" --spool "$WORK/$name.spool" "$@" \
		>"$WORK/$name.port" 2>>"$WORK/$name.log" &
	SPID=$!
	SERVE_PIDS+=("$SPID")
	PORT=
	for _ in $(seq 400); do
		PORT=$(sed -n 's/^port \([0-9][0-9]*\)$/\1/p' "$WORK/$name.port")
		[ -n "$PORT" ] && return 0
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.05
	done
	echo "serve_start $name: no port; log:" >&2
	cat "$WORK/$name.log" >&2
	return 1
}

# http NAME METHOD PATH [BODY_FILE]: a request to 127.0.0.1:$PORT with $TOKEN as bearer token
# when set; the answer's body in $WORK/NAME.body, its headers in $WORK/NAME.hdr, its status in
# $WORK/NAME.code and CODE (0 when no HTTP answer came: refused, reset). Run in the background,
# only the files tell. A 200 of /v1/verify or /v1/reward holds a verdict: kept for lib.sh's
# schema check.
http() {
	CODE=$(python3 - "$1" "$2" "http://127.0.0.1:$PORT$3" "${4:-}" "${TOKEN:-}" "$WORK" <<'EOF'
import sys, urllib.request, urllib.error
name, method, url, body, token, work = sys.argv[1:7]
req = urllib.request.Request(url, data=open(body, "rb").read() if body else None, method=method)
req.add_header("Content-Type", "application/json")
if token:
    req.add_header("Authorization", "Bearer " + token)
try:
    r = urllib.request.urlopen(req, timeout=300)
    code, hdrs, data = r.status, r.headers, r.read()
except urllib.error.HTTPError as e:
    code, hdrs, data = e.code, e.headers, e.read()
except Exception as e:
    code, hdrs, data = 0, {}, str(e).encode()
open(f"{work}/{name}.body", "wb").write(data)
open(f"{work}/{name}.hdr", "w").write("".join(f"{k}: {v}\n" for k, v in hdrs.items()))
open(f"{work}/{name}.code", "w").write(f"{code}\n")
print(code)
EOF
)
	case "$CODE $2 $3" in
	"200 POST /v1/verify" | "200 POST /v1/reward") verdicts_keep "$WORK/$1.body" verdict ;;
	esac
}

# body OUT JSON [CODE_FILE]: the JSON object, with "code" set to the file's text when given.
body() {
	python3 - "$@" <<'EOF'
import json, sys
out, obj = sys.argv[1], json.loads(sys.argv[2])
if len(sys.argv) > 3:
    obj["code"] = open(sys.argv[3]).read()
open(out, "w").write(json.dumps(obj))
EOF
}

# jget FILE PATH: the value at a dotted path of the JSON file (strings bare, the rest as JSON;
# empty when absent or not JSON).
jget() {
	python3 - "$1" "$2" <<'EOF' 2>/dev/null
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v if isinstance(v, str) else json.dumps(v))
EOF
}

# metric NAME_WITH_LABELS: its value in the service's /metrics now (empty when absent).
metric() {
	http metrics GET /metrics
	awk -v k="$1" '$1 == k { print $2 }' "$WORK/metrics.body"
}

