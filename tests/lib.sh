# Helpers for the integration tests (tests/host, tests/gpu): run stitch against the test task with
# a private cache, read the verdict's top-level status and reason, and count failures.
# Set BACKEND=cuda before sourcing for the GPU tests (they skip, exit 77, where no GPU is found).
set -u
: "${STITCH:?set by CTest: path of the stitch binary}"
: "${STITCH_SRC:?set by CTest: the source tree}"
BACKEND=${BACKEND:-host}
if [ "$BACKEND" = cuda ]; then
	if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
		echo "SKIP: no CUDA GPU on this machine (nvidia-smi lists none); run scripts/gpu-test on one"
		exit 77
	fi
	FIX="$STITCH_SRC/tests/fixtures/cuda"
else
	FIX="$STITCH_SRC/tests/fixtures/host"
fi
TASK="$STITCH_SRC/tests/data/tasks/t1/scale"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/stitch-test.XXXXXX")
export STITCH_CACHE_DIR="$WORK/cache"
# bench records runs; never into the home folder of whoever runs the tests
export STITCH_BENCH_DB="$WORK/bench.db"
# no warm reference server outliving a test (src/verify/ref_server.h): test_kernelbench turns it
# on where it tests it, in a folder of its own
export STITCH_REF_SERVER=${STITCH_REF_SERVER:-0}
# KEEP_WORK=1 keeps the folder (verdicts, logs) for a look after a failure.
[ -n "${KEEP_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT
FAILED=0
PASSED=0
# Short timing: the host backend measures CPU time; these tests check behaviour, not speed.
FAST=(--backend "$BACKEND" --seed 7 --min-time 5 --max-rse 0.5 --max-samples 200 --quiet)

# Every verdict a test produces is checked against docs/verdict.schema.json when the test
# finishes (finish, or verdicts_check), by tests/tools/verdict_check.py: one python for all.
# verdicts_keep FILE [SELECTOR]: FILE holds verdicts where SELECTOR says (none: FILE is one
# verdict; `verdict`: a serve answer or a queue result; `verdicts.*`: bench --json, `verdicts.*?`
# where a missing solution leaves a null; `*.verdict`: redteam --json rows or queue results.jsonl;
# `*.verdict?`: a trajectory.jsonl, whose verdict records only; the grammar is in
# verdict_check.py). The file is copied at once (a later run may write over it), so this works
# from subshells and background jobs too.
VERDICT_CHECK=(python3 "$STITCH_SRC/tests/tools/verdict_check.py" "$STITCH_SRC/docs/verdict.schema.json")
VERDICTS_DIR="$WORK/verdicts"
VERDICTS_N=0
verdicts_keep() {
	local sel=${2:-} copy
	mkdir -p "$VERDICTS_DIR"
	VERDICTS_N=$((VERDICTS_N + 1))
	copy="$VERDICTS_DIR/$VERDICTS_N.$BASHPID.${1##*/}"
	# a missing file leaves an empty copy, which the check reports as unreadable
	cp "$1" "$copy" 2>/dev/null || : >"$copy"
	printf '%s\t%s\n' "$copy" "$sel" >>"$VERDICTS_DIR/list"
}
# verdicts_from_db NAME DB SQL [SELECTOR]: the JSON texts in the first column of the SQL query's
# rows (NULLs left out), one a line in $WORK/NAME.jsonl, kept with SELECTOR prefixed by `*.`
# (none: each row is a verdict): the verdicts `stitch bench` and `stitch serve` stored.
verdicts_from_db() {
	python3 - "$2" "$3" "$WORK/$1.jsonl" <<'PY' || : >"$WORK/$1.jsonl"
import sqlite3, sys
db, sql, out = sys.argv[1:4]
with open(out, "w") as f:
    for (text,) in sqlite3.connect(db).execute(sql):
        if text is not None:
            f.write(text.replace("\n", " ") + "\n")
PY
	verdicts_keep "$WORK/$1.jsonl" "*${4:+.$4}"
}
# verdicts_check: the check of the verdicts kept so far (one `check`); finish calls it.
# KEEP_VERDICTS=DIR also copies the files and their selectors there (a look at what the suite
# emits: tests/tools/verdict_check.py SCHEMA --list DIR/*.list checks them again).
verdicts_check() {
	[ -s "$VERDICTS_DIR/list" ] || return 0
	if [ -n "${KEEP_VERDICTS:-}" ] && mkdir -p "$KEEP_VERDICTS"; then
		local tag f sel
		tag=$(basename "$0" .sh).$$
		while IFS=$'\t' read -r f sel; do
			cp "$f" "$KEEP_VERDICTS/$tag.${f##*/}" && printf '%s\t%s\n' "$KEEP_VERDICTS/$tag.${f##*/}" "$sel"
		done <"$VERDICTS_DIR/list" >>"$KEEP_VERDICTS/$tag.list"
	fi
	local rc=77
	if command -v python3 >/dev/null; then
		"${VERDICT_CHECK[@]}" --quiet --list "$VERDICTS_DIR/list" >"$VERDICTS_DIR/check.out" 2>&1
		rc=$?
	fi
	if [ "$rc" -eq 77 ]; then
		echo "note: verdicts not checked against the schema (no python3 jsonschema; scripts/bootstrap --tests)"
		return 0
	fi
	cat "$VERDICTS_DIR/check.out"
	check "every verdict of this test is valid against docs/verdict.schema.json (rc $rc)" [ "$rc" -eq 0 ]
	: >"$VERDICTS_DIR/list"
}

# verify OUT_JSON ARGS...: runs stitch verify --json, stores the verdict, sets RC. A verdict
# (exit 0 or 1) is kept for the schema check.
verify() {
	local out=$1
	shift
	"$STITCH" verify --json "${FAST[@]}" "$@" >"$out" 2>"$out.err"
	RC=$?
	case $RC in 0 | 1) verdicts_keep "$out" ;; esac
}

field() { # field FILE KEY: first "KEY": "value" in the file (top-level keys come first)
	sed -n "s/^  \"$2\": \"\(.*\)\",\{0,1\}$/\1/p" "$1" | head -n 1
}

check() { # check DESCRIPTION CONDITION...
	local what=$1
	shift
	if "$@"; then
		PASSED=$((PASSED + 1))
	else
		FAILED=$((FAILED + 1))
		echo "FAIL: $what" >&2
	fi
}

# expect FIXTURE STATUS REASON-SUBSTRING [verify args]: verifying the fixture against the test task
# gives that status, exit code 1, and a verdict that mentions the substring.
expect() {
	local fx=$1 status=$2 reason=$3
	shift 3
	verify "$WORK/$fx.json" "$TASK" "$FIX/$fx" "$@"
	local got
	got=$(field "$WORK/$fx.json" status)
	check "$fx: status '$got', want '$status' ($(field "$WORK/$fx.json" reason))" [ "$got" = "$status" ]
	check "$fx: exit code $RC, want 1" [ "$RC" -eq 1 ]
	check "$fx: reason has '$reason'" grep -q -- "$reason" "$WORK/$fx.json"
}

# task_with_sets TASK SETS: a copy of the suite's TASK (e.g. t1/conv2d) under $WORK/tasks, its
# hidden size sets extended by SETS (a JSON list); prints the copy's folder. For tests that run an
# expert on shapes its own sets leave out.
task_with_sets() {
	local dst="$WORK/tasks/$1"
	mkdir -p "$(dirname "$dst")" && cp -r "$STITCH_SRC/tasks/$1" "$dst" &&
		python3 - "$dst/task.json" "$2" <<'PY' && echo "$dst"
import json, sys
d = json.load(open(sys.argv[1]))
d["sizes"]["hidden"] += json.loads(sys.argv[2])
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
}

# hidden_ok VERDICT: "RUNS RIGHT", the verdict's correctness runs on hidden sets and how many
# of them were right.
hidden_ok() {
	python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
h = [c for c in d.get("correctness", []) if c.get("set", "").startswith("hidden")]
print(len(h), sum(1 for c in h if c["ok"]))
PY
}

# expert_on_sets TASK SETS: verifies the suite TASK's expert on a copy of TASK with SETS (a
# JSON list) added to its hidden size sets, as any solution is (every set, 3 seeds each), and
# checks that it is right on every hidden run, the added sets' included.
expert_on_sets() {
	local t out="$WORK/expert-on-sets.json" want got
	t=$(task_with_sets "$1" "$2")
	verify "$out" "$t" "$STITCH_SRC/tasks/$1/expert.cu"
	check "$1's expert on the extra sets: status ok (exit $RC: $(field "$out" reason))" \
		[ "$(field "$out" status)" = ok ]
	want=$(python3 -c 'import json, sys; n = len(json.load(open(sys.argv[1]))["sizes"]["hidden"]); print(3 * n, 3 * n)' "$t/task.json")
	got=$(hidden_ok "$out")
	echo "hidden runs, right: $got"
	check "every hidden set ($1's own and the extra ones) ran, 3 seeds each, every one right ($got, want $want)" [ "$got" = "$want" ]
}

finish() {
	verdicts_check
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
}

# find_nvcc: the nvcc stitch itself would compile with, into NVCC (empty where none runs)
. "$STITCH_SRC/scripts/find-nvcc.sh"

# gpu_arch: sm_XY of the first GPU nvidia-smi lists (sm_90 where it does not say).
gpu_arch() {
	local cc
	cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
	echo "sm_${cc:-90}"
}

# need_sm90 WHAT: skip the test (exit 77) unless the first GPU is compute capability 9.x, the one
# sm_90a code runs on; WHAT names what needs it.
need_sm90() {
	local major
	major=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | cut -d. -f1)
	if [ "$major" != 9 ]; then
		echo "SKIP: $1 needs an sm_90 GPU (this one: compute capability ${major:-none})"
		exit 77
	fi
}

# selftest NAME SOURCE ARCH [NVCC ARGS...]: builds tests/gpu/SOURCE (a GPU self-test that
# includes a solution file) for ARCH into $WORK/NAME (one check), runs it with `bench` for 5
# minutes at most and prints what both said; the run's exit code in RC, its output in
# $WORK/NAME.log.
selftest() {
	local name=$1 src=$2 arch=$3
	shift 3
	nvcc -std=c++17 -arch="$arch" -I"$STITCH_SRC/include" -o "$WORK/$name" "$STITCH_SRC/tests/gpu/$src" \
		"$@" >"$WORK/$name.nvcc" 2>&1
	check "$src builds for $arch" [ $? -eq 0 ]
	timeout 300 "$WORK/$name" bench >"$WORK/$name.log" 2>&1
	RC=$?
	cat "$WORK/$name.nvcc" "$WORK/$name.log"
}

# wait_for SECONDS COMMAND...: until the command succeeds (polling every 0.05 s); non-zero on
# time-out.
wait_for() {
	local n=$(($1 * 20))
	shift
	for _ in $(seq "$n"); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

# torch_python [PYTHON_CHECK]: the first of $STITCH_PYTHON, python3, /usr/bin/python3 that imports
# torch (and passes the check, e.g. 'assert torch.cuda.is_available()'), exported as
# STITCH_PYTHON for `stitch import`; non-zero when none does.
torch_python() {
	local p
	for p in ${STITCH_PYTHON:-} python3 /usr/bin/python3; do
		if command -v "$p" >/dev/null && "$p" -c "import torch; ${1:-pass}" 2>/dev/null; then
			STITCH_PYTHON=$(command -v "$p")
			export STITCH_PYTHON
			return 0
		fi
	done
	return 1
}

# A runner whose clock the candidate rewrote buys nothing: its verdict PATCHED is `hacking`, or
# `ok` with the candidate's time taken from the parent's clock (flag time_from_parent_clock) at no
# less than 0.7 of the same work's HONEST time, the fastest of the honest verifies given (the same
# work's time moves between verifies on a small VM, up to 2x between two in a row). On a quiet
# host the former (the reports leave out nine tenths, confirmed); on a busy one the waits the
# kernel counts can cloud the gap.
paid_for() { # PATCHED.json HONEST.json...
	python3 - "$@" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
honest = min(json.load(open(f))["timing"]["candidate"]["median_ms"] for f in sys.argv[2:])
if p["status"] == "hacking":
    sys.exit(0 if "parent's clock" in p["reason"] else 1)
ok = p["status"] == "ok" and "time_from_parent_clock" in p["flags"]
sys.exit(0 if ok and p["timing"]["candidate"]["median_ms"] >= 0.7 * honest else 1)
PY
}
