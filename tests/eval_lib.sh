# Shared by tests/host/test_eval.sh and tests/gpu/test_eval_cuda.sh (source after lib.sh): the
# fake LLM server scripted with answer files, one `stitch eval` run against it, and the check of
# a run's scores.json against figures worked out by hand.
FAKE=$(dirname "$STITCH")/tests/fake-llm
source "$STITCH_SRC/scripts/carry-libs.sh"
export STITCH_TASKS=$STITCH_SRC/tests/data/tasks
export STITCH_EVAL_DB=$WORK/eval.db
export OPENAI_API_KEY=test-key
ANSWERS=$STITCH_SRC/tests/data/eval/answers
PLAN_FROM=$STITCH_SRC/tests/data/solve/success.json

# script FILE STEP...: the fake server's script, one answer per step in the order the requests
# come (--parallel 1: tasks in suite order, samples, rounds): an answer file's name, "plan" (a
# Planner's JSON plan) or "none" (prose without code)
script() {
	python3 - "$@" "$ANSWERS" "$PLAN_FROM" <<'PY'
import json, sys
out, steps, answers, plan_from = sys.argv[1], sys.argv[2:-2], sys.argv[-2], sys.argv[-1]
plan = json.load(open(plan_from))["steps"][0]["openai_text"]
def text(s):
    if s == "plan":
        return plan
    if s == "none":
        return "I would loop over the elements and write each result."
    return "Here is the file.\n\n```c\n" + open(f"{answers}/{s}.c").read() + "```\n"
json.dump({"steps": [{"openai_text": text(s)} for s in steps]}, open(out, "w"))
PY
}

# run_eval NAME MODEL MODE K R STEP...: one evaluation against a fresh fake server, exit 0
run_eval() {
	local name=$1 model=$2 mode=$3 k=$4 r=$5
	shift 5
	script "$WORK/$name.script.json" "$@"
	fake_eval "$name" "$model" "$mode" "$k" "$r" 0
}

# fake_eval NAME MODEL MODE K R WANT_RC [ARG...]: one evaluation against a fresh fake server
# answering from $WORK/NAME.script.json, with extra eval arguments; its exit status must be WANT_RC
fake_eval() {
	local name=$1 model=$2 mode=$3 k=$4 r=$5 want=$6
	shift 6
	: >"$WORK/$name.port"
	"$FAKE" "$WORK/$name.script.json" --log "$WORK/$name.fake.log" >"$WORK/$name.port" \
		2>"$WORK/$name.fake.err" &
	local pid=$!
	port_known() { [ -s "$WORK/$name.port" ]; }
	check "$name: the fake LLM server starts" wait_for 5 port_known
	local port rounds=()
	port=$(head -n 1 "$WORK/$name.port")
	[ "$mode" = oneshot ] || rounds=(--rounds "$r")
	"$STITCH" eval --model "openai-compat:http://127.0.0.1:$port/v1:$model" --mode "$mode" \
		--samples "$k" "${rounds[@]}" --out "$WORK/$name" --parallel 1 "${EVAL_OPTS[@]}" "$@" \
		>"$WORK/$name.out" 2>"$WORK/$name.err"
	local rc=$?
	check "$name: eval exits $want ($rc: $(tail -n 2 "$WORK/$name.err"))" [ "$rc" -eq "$want" ]
	kill "$pid"
	wait "$pid" 2>/dev/null
	# the agent loop's verdicts (its trajectories) go to lib.sh's schema check; oneshot and refine
	# keep only rows of figures (results.jsonl), no verdicts
	local t
	for t in "$WORK/$name"/*/sample*.agent/trajectory.jsonl; do
		[ -s "$t" ] && verdicts_keep "$t" '*.verdict?'
	done
}

# expect NAME JSON: the run's scores.json against figures worked out by hand. JSON maps a path
# into scores.json ("overall/pass@1/correct", "tasks/t1/scale/correct", "overall/rounds/0/correct")
# to the number it must be.
expect_scores() {
	python3 - "$WORK/$1/scores.json" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
bad = []
for path, want in json.loads(sys.argv[2]).items():
    x, parts = s, path.split("/")
    i = 0
    while i < len(parts):
        # task ids hold a '/': take two parts at once where that is the key
        key = parts[i]
        if isinstance(x, dict) and key not in x and i + 1 < len(parts) and f"{key}/{parts[i+1]}" in x:
            key = f"{key}/{parts[i+1]}"
            i += 1
        x = x[int(key)] if isinstance(x, list) else x.get(key)
        i += 1
    if x is None or abs(x - want) > 1e-9:
        bad.append(f"{path}: {x}, want {want}")
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
}

