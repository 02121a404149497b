#!/usr/bin/env bash
# Admission before allocation (issue 34 item 1): a task whose size set cannot fit this machine is
# refused at once, exit 2, with a message that names the set and the bytes, and `stitch tasks`
# marks it; a candidate whose st_init allocates without bound gets runtime_error, not the OOM
# killer. Every verify runs under ulimit -v, so a regression fails here instead of taking the
# machine's memory.
. "$(dirname "$0")/../lib.sh"
cd "$WORK" || exit 1
LIMIT_KB=$((3 * 1024 * 1024)) # 3 GiB of address space for stitch and its runners

# huge NAME ROWS COLS: a copy of tasks/t1/softmax as $WORK/NAME/t1/softmax, its small set ROWS x COLS
huge() {
	mkdir -p "$WORK/$1/t1"
	cp -r "$STITCH_SRC/tasks/t1/softmax" "$WORK/$1/t1/"
	sed -i "s/\"small\": {\"rows\": [0-9]*, \"cols\": [0-9]*}/\"small\": {\"rows\": $2, \"cols\": $3}/" \
		"$WORK/$1/t1/softmax/task.json"
	grep -q "\"rows\": $2, \"cols\": $3" "$WORK/$1/t1/softmax/task.json"
}

# refused NAME WANT: a host verify of NAME's softmax exits 2 within 10 s, one line naming WANT.
refused() {
	local start=$SECONDS rc
	(ulimit -v "$LIMIT_KB" && exec timeout 60 "$STITCH" verify --backend host --no-timing --seed 7 \
		"$WORK/$1/t1/softmax" "$STITCH_SRC/tasks/t1/softmax/reference.c") >"$WORK/$1.out" 2>"$WORK/$1.err"
	rc=$?
	check "$1: exit 2 (got $rc: $(head -c 400 "$WORK/$1.err"))" [ "$rc" -eq 2 ]
	check "$1: within 10 s (took $((SECONDS - start)) s)" [ $((SECONDS - start)) -le 10 ]
	check "$1: one line on stderr" [ "$(wc -l <"$WORK/$1.err")" -eq 1 ]
	check "$1: message has '$2'" grep -q -- "$2" "$WORK/$1.err"
}

check "made the 1e6 x 1e6 copy" huge terabytes 1000000 1000000
refused terabytes "size set 'small'"
check "terabytes: names the largest tensor's bytes" grep -q "x is 3.6 TiB (4000000000000 bytes)" "$WORK/terabytes.err"
check "terabytes: says what the machine has" grep -q "this machine has" "$WORK/terabytes.err"

# rows * cols fits an int64 for neither: the loader refuses the product itself
check "made the overflowing copy" huge overflow 4000000000 4000000000
refused overflow "overflows"
# rows * cols * 4 bytes does not fit 64 bits, though the element count fits an int64
check "made the byte-overflow copy" huge bytes 2147483648 2147483648
refused bytes "small"

# the listing loads it (another machine may have the memory) but marks it
"$STITCH" tasks --root "$WORK/terabytes" >"$WORK/tasks.out" 2>"$WORK/tasks.err"
rc=$?
check "tasks: exit 0 (got $rc)" [ "$rc" -eq 0 ]
check "tasks: the row is marked" grep -q "t1/softmax.*TOO LARGE" "$WORK/tasks.out"
check "tasks: a warning names the set" grep -q "warning: t1/softmax: size set 'small'" "$WORK/tasks.err"
"$STITCH" tasks --json --root "$WORK/terabytes" >"$WORK/tasks.json" 2>/dev/null
check "tasks --json: too_large" grep -q '"too_large"' "$WORK/tasks.json"
"$STITCH" tasks --root "$STITCH_SRC/tasks" >"$WORK/suite.out" 2>"$WORK/suite.err"
check "the suite: nothing marked" bash -c "! grep -q 'TOO LARGE' '$WORK/suite.out'"

# a candidate that allocates in st_init until malloc fails: runtime_error, exit 1
(ulimit -v "$LIMIT_KB" && exec timeout 120 "$STITCH" verify --json "${FAST[@]}" --no-timing \
	"$TASK" "$FIX/init_hog.c") >"$WORK/hog.json" 2>"$WORK/hog.err"
rc=$?
verdicts_keep "$WORK/hog.json"
check "init_hog: exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "init_hog: runtime_error ($(field "$WORK/hog.json" reason))" \
	[ "$(field "$WORK/hog.json" status)" = runtime_error ]

# the host runner's address-space limit is below the machine's memory (7/8 of MemTotal or of the
# cgroup's limit, at most 32 GiB): as_limit.c returns 100 + the limit in GiB from st_init
verify "$WORK/as.json" --no-timing --no-policy "$TASK" "$FIX/as_limit.c"
total_gib=$(awk '/^MemTotal:/ {print int($2 * 7 / 8 / 1048576)}' /proc/meminfo)
got=$(sed -n 's/.*st_init returned \([0-9]*\).*/\1/p' "$WORK/as.json" | head -n 1)
got=${got:-0}
check "as_limit: a limit is set (st_init returned $got: $(field "$WORK/as.json" reason))" \
	[ "$got" -ge 100 ]
check "as_limit: $((got - 100)) GiB <= 7/8 of MemTotal ($total_gib GiB)" \
	[ $((got - 100)) -le "$total_gib" ]
check "as_limit: $((got - 100)) GiB <= 32 GiB" [ $((got - 100)) -le 32 ]

# stitch serve's per-request cap: 16 KiB is less than the scale task's small set takes (three
# shared blocks of three pages), so the request gets 422 with the message
. "$STITCH_SRC/tests/serve_lib.sh"
serve_start cap "${FAST[@]}" --no-timing --sets small --seeds 1 --workers 1 \
	--max-request-gb 0.000015 || exit 1
body "$WORK/cap.req" '{"task": "t1/scale"}' "$FIX/good.c"
http cap POST /v1/verify "$WORK/cap.req"
check "serve --max-request-gb: 422 (got $CODE: $(head -c 300 "$WORK/cap.body"))" [ "$CODE" = 422 ]
check "serve --max-request-gb: the message names the cap" grep -q -- "--max-request-gb" "$WORK/cap.body"
"$STITCH" serve --max-request-gb lots >/dev/null 2>"$WORK/cap.err"
check "serve --max-request-gb lots: exit 2" [ $? -eq 2 ]
finish
