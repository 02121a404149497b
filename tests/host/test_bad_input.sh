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
bad "unknown backend" "--backend: 'tpu' is not one of: cuda, host" verify --backend tpu "$TASK" "$FIX/good.c"
bad "unknown option" "unknown option" verify --frobnicate "$TASK" "$FIX/good.c"
bad "unknown command" "not a stitch command" frobnicate
bad "bad seeds" "--seeds" verify --seeds zero "$TASK" "$FIX/good.c"
bad "serve: no spares" "--spares" serve --spares 0
bad "worker: no spares" "--spares" worker --queue redis://127.0.0.1:1 --spares 0
bad "no comparison threads" "--compare-threads" verify --backend host --compare-threads 0 "$TASK" "$FIX/good.c"
bad "unknown size set" "unknown size set" verify --backend host --sets medium "$TASK" "$FIX/good.c"
bad "profile on the host backend" "--backend: 'host' is not one of: cuda" profile --backend host "$TASK" "$FIX/good.c"
bad "trace without a file" "--trace needs a value (FILE)" verify --backend host "$TASK" "$FIX/good.c" --trace
bad "trace into a missing folder" "does not exist" verify --backend host --trace "$WORK/no/such/t.json" "$TASK" "$FIX/good.c"
bad "trace on the host backend" "--trace needs the cuda backend" verify --backend host --trace "$WORK/t.json" "$TASK" "$FIX/good.c"


# Strict values: whole numbers where a count is meant, finite numbers, no sign on a seed,
# no empty list; refused while parsing, before any work.
bad "fractional seeds" "--seeds: '2.5' is not an integer" verify --backend host --seeds 2.5 "$TASK" "$FIX/good.c"
bad "seeds not a number" "--seeds: 'abc' is not an integer" verify --backend host --seeds abc "$TASK" "$FIX/good.c"
bad "negative seed" "--seed: '-5' is not a positive integer" verify --backend host --seed -5 "$TASK" "$FIX/good.c"
bad "timeout nan" "--timeout: 'nan' is not a finite number" verify --backend host --timeout nan "$TASK" "$FIX/good.c"
bad "min-time inf" "--min-time: 'inf' is not a finite number" verify --backend host --min-time inf "$TASK" "$FIX/good.c"
bad "empty size-set list" "--sets needs a value" verify --backend host --sets "" "$TASK" "$FIX/good.c"
bad "size-set list of nothing" "--sets: ',' is not a comma list" verify --backend host --sets , "$TASK" "$FIX/good.c"
bad "missing value" "--seeds needs a value (N)" verify --backend host "$TASK" "$FIX/good.c" --seeds
bad "bench: fractional tier" "--tier: '1.5' is not an integer" bench --backend host --tier 1.5
bad "eval: samples not a number" "--samples: 'many' is not an integer" eval --model openai:x --samples many
bad "queue: unknown option" "unknown option '--frobnicate'" queue status --frobnicate
bad "tasks: unknown option" "unknown option '--frobnicate'" tasks --frobnicate
bad "redteam: bad timeout" "--timeout: 'nan' is not a finite number" redteam --backend host --timeout nan
bad "worker: nan reclaim time" "--reclaim-after: 'nan' is not a" worker --queue redis://127.0.0.1:1 --reclaim-after nan
bad "solve: nan time budget" "--max-time: 'nan' is not a finite number" solve --model openai:x --max-time nan "$TASK"
bad "export: unknown skill" "--skill: 'foo' is not one of: gen, opt" export --skill foo
bad "import: fractional seeds" "--seeds: '1.5' is not an integer" import kernelbench "$WORK/x.py" --seeds 1.5
bad "eval --compare: a page with --list" "--list and --html cannot be given together" eval --list --html "$WORK/p.html"
# Options that cannot go together are named, both of them.
bad "bench: two formats" "--json and --csv cannot be given together" bench --backend host --json --csv
bad "verify: no timing but a timed set" "--no-timing and --time-set cannot be given together" verify --backend host --no-timing --time-set eval "$TASK" "$FIX/good.c"
bad "profile: timing both ways" "--timing and --no-timing cannot be given together" profile --timing --no-timing "$TASK" "$FIX/good.c"
bad "ncu on the host backend" "--ncu needs the cuda backend" verify --backend host --ncu "$TASK" "$FIX/good.c"
# An error found after the candidate has run (here: no size set to time, known only once every
# set ran) is not a verdict: nothing on stdout that a reward could read as "ok".
bad "verify --json: an error after the sets ran" "no size set named 'hidden' to time" verify --backend host --json --quiet --time-set hidden "$TASK" "$FIX/good.c"
check "and no verdict on stdout ($(head -c 80 "$WORK/out"))" [ ! -s "$WORK/out" ]
# A folder without task.json is not a task, whatever it is.
mkdir -p "$WORK/suite/t1/scale" && cp "$TASK/task.json" "$WORK/suite/t1/scale/"
STITCH_TASKS="$WORK/suite" bad "tier folder as the task" "not a task folder: .*/suite/t1 (no task.json)" verify --backend host t1 "$FIX/good.c"
STITCH_TASKS="$WORK/suite" bad "empty task" "not a task folder: .*/suite (no task.json)" verify --backend host "" "$FIX/good.c"
bad "a folder outside the suite" "(no task.json)" verify --backend host ../../etc "$FIX/good.c"
bad "a folder as the solution" "is a directory" verify --backend host "$TASK" "$WORK"
# queue submit reads every file before it contacts the queue (port 1: nothing listens).
bad "queue submit: missing file" "$WORK/nope.c" queue submit --queue redis://127.0.0.1:1 t1/scale "$WORK/nope.c"
bad "queue submit: a folder" "is a directory" queue submit --queue redis://127.0.0.1:1 t1/scale "$WORK"

env_fail() { # env_fail DESCRIPTION EXPECTED-SUBSTRING ARGS...: exit 3, the environment's fault
	local what=$1 want=$2
	shift 2
	"$STITCH" "$@" >"$WORK/out" 2>"$WORK/err"
	local rc=$?
	check "$what: exit 3 (got $rc: $(head -c 300 "$WORK/err"))" [ "$rc" -eq 3 ]
	check "$what: message has '$want'" grep -q -- "$want" "$WORK/err"
}
env_fail "eval: unreachable endpoint" "unreachable" eval --backend host --model openai-compat:http://127.0.0.1:1/v1:m
env_fail "solve: unreachable endpoint" "unreachable" solve --backend host --model openai-compat:http://127.0.0.1:1/v1:m --out "$WORK/solve" "$TASK"
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
	env_fail "verify .cu without a GPU suggests the host backend" "'--backend host' verifies a C solution" \
		verify --quiet "$TASK" "$STITCH_SRC/tests/fixtures/cuda/good.cu"
fi

bad "import: not a Python program" "not a Python program" import kernelbench "$STITCH_SRC/README.md"
# An import that fails takes its task folder away with it (a python without torch here).
STITCH_PYTHON=false "$STITCH" import kernelbench "$STITCH_SRC/tests/kernelbench/mlp.py" --out "$WORK/imp/mlp" \
	--no-baselines >"$WORK/out" 2>"$WORK/err"
rc=$?
check "import with no usable python: fails (got $rc)" [ "$rc" -ne 0 ]
check "import with no usable python: no task folder left" [ ! -e "$WORK/imp/mlp" ]
check "no core files" bash -c "! ls $WORK/core* >/dev/null 2>&1"
check "no temp files left in the cache" bash -c "! find '$STITCH_CACHE_DIR' -name '*.tmp*' | grep -q ."
"$STITCH" --help >"$WORK/help" && check "--help lists verify" grep -q verify "$WORK/help"
"$STITCH" verify --help >"$WORK/help" && check "verify --help lists --backend" grep -q -- --backend "$WORK/help"
"$STITCH" profile --help >"$WORK/help" && check "profile --help lists --trace" grep -q -- --trace "$WORK/help"
check "profile --help offers no host backend" bash -c "! grep -- '--backend' '$WORK/help' | grep -q host"
check "profile --help: one seed by default" grep -q -- "--seeds N .*(default 1)" "$WORK/help"
"$STITCH" redteam --help >"$WORK/help" && check "redteam --help shows its own --min-time default" grep -q -- "--min-time MS .*(default 20)" "$WORK/help"
"$STITCH" bench --help >"$WORK/help" && check "bench --help names the conflicting formats" grep -q -- "--json, --csv, --md" "$WORK/help"
"$STITCH" eval --help >"$WORK/help" && check "eval --help: exit 3 for no model endpoint" grep -q "3 no GPU, no model endpoint" "$WORK/help"
finish
