#!/usr/bin/env bash
# Bad input gets one line on stderr that says what and where, exit code 2, no core dump and no
# partial files (the cache holds only complete entries).
. "$(dirname "$0")/../lib.sh"
cd "$WORK" || exit 1
ulimit -c unlimited 2>/dev/null

bad() { # bad DESCRIPTION EXPECTED-SUBSTRING ARGS...
	local what=$1 want=$2
	shift 2
	"$STITCH" "$@" >"$WORK/out" 2>"$WORK/err"
	local rc=$?
	check "$what: exit 2 (got $rc)" [ "$rc" -eq 2 ]
	check "$what: one line on stderr ($(head -c 300 "$WORK/err"))" [ "$(wc -l <"$WORK/err")" -eq 1 ]
	check "$what: message has '$want'" grep -q -- "$want" "$WORK/err"
}

mkdir -p "$WORK/tasks/t1/broken"
echo '{"name": "broken", "tier": 1, "sizes": ' >"$WORK/tasks/t1/broken/task.json"

bad "missing task" "no task" verify --backend host t9/nothing "$FIX/good.c"
bad "malformed task.json" "task.json" verify --backend host "$WORK/tasks/t1/broken" "$FIX/good.c"
bad "missing solution" "no such file" verify --backend host "$TASK" "$WORK/nope.c"
bad "not C or CUDA" "not a C or CUDA source" verify --backend host "$TASK" "$FIX/notes.txt"
bad "unknown arch" "unknown arch 'sm_xx'" verify --arch sm_xx "$TASK" "$FIX/good.c"
bad "unknown backend" "unknown backend" verify --backend tpu "$TASK" "$FIX/good.c"
bad "unknown option" "unknown option" verify --frobnicate "$TASK" "$FIX/good.c"
bad "unknown command" "not a stitch command" frobnicate
bad "bad seeds" "--seeds" verify --seeds zero "$TASK" "$FIX/good.c"
bad "serve: no spares" "--spares" serve --spares 0
bad "worker: no spares" "--spares" worker --queue redis://127.0.0.1:1 --spares 0
bad "no comparison threads" "--compare-threads" verify --backend host --compare-threads 0 "$TASK" "$FIX/good.c"
bad "unknown size set" "unknown size set" verify --backend host --sets medium "$TASK" "$FIX/good.c"
bad "profile on the host backend" "needs the cuda backend" profile --backend host "$TASK" "$FIX/good.c"
bad "trace without a file" "--trace needs a file name" verify --backend host "$TASK" "$FIX/good.c" --trace
bad "trace into a missing folder" "does not exist" verify --backend host --trace "$WORK/no/such/t.json" "$TASK" "$FIX/good.c"
bad "trace on the host backend" "--trace needs the cuda backend" verify --backend host --trace "$WORK/t.json" "$TASK" "$FIX/good.c"

check "no core files" bash -c "! ls $WORK/core* >/dev/null 2>&1"
check "no temp files left in the cache" bash -c "! find '$STITCH_CACHE_DIR' -name '*.tmp*' | grep -q ."
"$STITCH" --help >"$WORK/help" && check "--help lists verify" grep -q verify "$WORK/help"
"$STITCH" verify --help >"$WORK/help" && check "verify --help lists --backend" grep -q -- --backend "$WORK/help"
"$STITCH" profile --help >"$WORK/help" && check "profile --help lists --trace" grep -q -- --trace "$WORK/help"
finish
