#!/usr/bin/env bash
# `stitch export`: training datasets from the suite (--skill gen) and from solve runs (--skill
# opt). A scripted run (a wrong draft, then a fix) on the host backend gives one repair and one
# optimise record, each with the version's code and its recorded feedback; a folder of runs
# gives the same; the output is the same every time and to a file as to stdout. The gen record
# carries the task's description. Bad input (format, skill, folder, a broken trajectory line)
# ends in exit 2 with one line naming the problem.
. "$(dirname "$0")/../lib.sh"

FAKE=$(dirname "$STITCH")/tests/fake-llm
QUICK=(--backend host --seed 7 --min-time 5 --max-rse 0.5 --max-samples 200 --quiet)
RUN="$WORK/runs/wrong_fix"
# --max-attempts 2: the run ends after the fix whatever the fix's timing on a busy host (a fix timed
# under the target once went on to a third version in CI, session 45); the records are the point here

: >"$WORK/port"
"$FAKE" "$STITCH_SRC/tests/data/solve/wrong_fix.json" >"$WORK/port" 2>"$WORK/fake.err" &
FAKE_PID=$!
for _ in $(seq 100); do
	[ -s "$WORK/port" ] && break
	sleep 0.05
done
"$STITCH" solve --model "openai-compat:http://127.0.0.1:$(head -n 1 "$WORK/port")/v1:fake" \
	--out "$RUN" --target-speedup 0.2 --max-attempts 2 "${QUICK[@]}" "$TASK" >"$WORK/solve.out" 2>"$WORK/solve.err"
rc=$?
kill "$FAKE_PID" 2>/dev/null
wait "$FAKE_PID" 2>/dev/null
check "solve wrong_fix: exit 0 (got $rc: $(tail -n 1 "$WORK/solve.err"))" [ "$rc" -eq 0 ]
verdicts_keep "$RUN/trajectory.jsonl" '*.verdict?'

export_() { # export_ NAME ARGS...: stdout in $WORK/NAME.jsonl, stderr in .err, exit code in RC
	local name=$1
	shift
	"$STITCH" export "$@" >"$WORK/$name.jsonl" 2>"$WORK/$name.err"
	RC=$?
}
line() { sed -n "$2p" "$WORK/$1.jsonl"; }
has() { # has NAME LINE TEXT: line LINE of the output contains TEXT (fixed string)
	line "$1" "$2" | grep -qF -- "$3"
}
none() { [ "$RC" -eq 0 ] && [ ! -s "$WORK/$1.jsonl" ]; } # none NAME: exit 0, no records
# The shape every record has: one object per line, chat messages first, verl's fields after.
shaped() {
	local bad
	local head='^{"prompt": \[{"role": "user", "content": ".*"}\], "data_source": "stitch", '
	local tail='"ability": "cuda", "reward_model": {"style": "rule", "ground_truth": ""}, '
	local info='"extra_info": {"task_id": "t1/scale", .*, "index": [0-9]*}}$'
	bad=$(grep -cv "$head$tail$info" "$WORK/$1.jsonl")
	[ "$bad" -eq 0 ]
}

# ---- opt: one record per version with feedback ------------------------------------------------
export_ opt --skill opt --trajectories "$RUN" --task-dir "$TASK"
check "opt: exit 0 (got $RC: $(cat "$WORK/opt.err"))" [ "$RC" -eq 0 ]
check "opt: 2 records (got $(wc -l <"$WORK/opt.jsonl"))" [ "$(wc -l <"$WORK/opt.jsonl")" -eq 2 ]
check "opt: every line a record of the documented shape" shaped opt
if command -v jq >/dev/null; then
	check "opt: every line is JSON (jq)" jq -e . "$WORK/opt.jsonl" >/dev/null
fi
check "opt: first record is a repair" has opt 1 '"template": "coder-repair"'
check "opt: repair prompt is the repair template" has opt 1 '# You are the Coder: repair'
check "opt: repair prompt holds the wrong version's code" has opt 1 'y[i] = x[i];'
check "opt: repair prompt holds its feedback" has opt 1 'status: incorrect'
check "opt: repair prompt holds the history" has opt 1 'attempt 1 (draft): incorrect'
check "opt: second record is an optimise" has opt 2 '"template": "coder-optimise"'
check "opt: optimise prompt is the optimise template" has opt 2 'You are the Coder: make it faster'
check "opt: optimise prompt holds the fixed code" has opt 2 'y[i] = 2.0f * x[i] + b;'
check "opt: optimise prompt holds its feedback" has opt 2 'status: ok'
check "opt: optimise prompt holds the plan" has opt 2 'One pass: y = 2x + b over the input vector.'
check "opt: skill and size set" has opt 2 '"skill": "opt", "template": "coder-optimise", "size_set": "eval", "backend": "host"'
check "opt: baselines from the verdict" has opt 2 '"baseline_ms": {"reference": '
check "opt: the repair record carries its version's code for the reward's judge" \
	has opt 1 '"previous_code": "'
check "opt: and its feedback" has opt 1 '"feedback": "'
check "opt: the untimed version borrows the run's baselines" has opt 1 '"baseline_ms": {"reference": '
check "opt: source names the trajectory and version" \
	has opt 1 "\"source\": \"$RUN/trajectory.jsonl#"
check "opt: records are numbered" has opt 2 '"index": 1}}'
# The repair record's prompt is what the workflow sent for attempt 2, character for character.
sent=$(grep '"agent":"coder","stage":"repair_correct"' "$RUN/trajectory.jsonl" |
	grep -o '"content":"[^"]*\(\\"[^"]*\)*"' | head -n 1 | sed 's/^"content":"//')
check "opt: repair prompt matches the request the run sent" has opt 1 "$sent"

# A run whose wrong version failed on a hidden size set, with feedback recorded as a Verifier
# that named the hidden sizes would have written it: the dataset says a hidden set failed and
# never its sizes (the feedback is made again from the verdict).
mkdir -p "$WORK/leaky/r1"
python3 - "$RUN/trajectory.jsonl" "$WORK/leaky/r1/trajectory.jsonl" <<'PY'
import json, sys
out, done = [], set()
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["type"] == "verdict" and r["verdict"]["status"] == "incorrect" and "v" not in done:
        v = r["verdict"]
        v["reason"] = "set hidden1, seed 1: y: 3 of 4097 elements off"
        v.setdefault("correctness", []).append({"set": "hidden1", "sizes": {"n": 4097},
            "seed_index": 0, "ok": False, "outputs": [{"name": "y", "ok": False,
            "summary": "y: 3 of 4097 elements off, worst y[4096] got 1 want 2"}]})
        done.add("v")
    if r["type"] == "feedback" and "f" not in done:
        r["text"] += "\nset hidden1 (n=4097): y: 3 of 4097 elements off"
        done.add("f")
    out.append(json.dumps(r))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
export_ leaky --skill opt --trajectories "$WORK/leaky" --task-dir "$TASK"
check "opt, hidden set failed: exit 0 ($RC: $(cat "$WORK/leaky.err"))" [ "$RC" -eq 0 ]
check "opt, hidden set failed: the record says so" has leaky 1 'a hidden size set: outputs wrong'
# The sizes as the verdict and feedback wrote them; a bare "4097" can occur inside a timing or hash.
check "opt, hidden set failed: its sizes appear nowhere" \
	bash -c "! grep -Eq '4097 elements|n=4097|n\\\\?\": ?4097|y\\[4096\\]' '$WORK/leaky.jsonl'"

export_ parent --skill opt --trajectories "$WORK/runs/" --task-dir "$TASK"
check "opt: a folder of runs gives the same records" cmp -s "$WORK/opt.jsonl" "$WORK/parent.jsonl"
export_ twice --skill opt --trajectories "$RUN" --trajectories "$WORK/runs" --task-dir "$TASK"
check "opt: a run named twice is exported once" cmp -s "$WORK/opt.jsonl" "$WORK/twice.jsonl"
export_ again --skill opt --trajectories "$RUN" --task-dir "$TASK"
check "opt: deterministic" cmp -s "$WORK/opt.jsonl" "$WORK/again.jsonl"
export_ tofile --skill opt --trajectories "$RUN" --task-dir "$TASK" --out "$WORK/out.jsonl" --format jsonl
check "opt --out: exit 0 (got $RC: $(cat "$WORK/tofile.err"))" [ "$RC" -eq 0 ]
check "opt --out: the file equals stdout" cmp -s "$WORK/opt.jsonl" "$WORK/out.jsonl"
check "opt --out: nothing on stdout" [ ! -s "$WORK/tofile.jsonl" ]
check "opt --out: no temp file left" [ "$(ls "$WORK" | grep -c 'out.jsonl.tmp')" -eq 0 ]
export_ other --skill opt --trajectories "$RUN" --task-dir "$TASK" --tasks 't2/*'
check "opt --tasks: a glob that matches nothing gives no records" none other
export_ cuda --skill opt --trajectories "$RUN" --task-dir "$TASK" --backend cuda
check "opt --backend cuda: the host run is left out" none cuda

# ---- gen: one first-draft prompt per task ---------------------------------------------------
export_ gen --skill gen --task-dir "$TASK" --backend host
check "gen: no previous_code (a first draft starts from nothing)" bash -c "! grep -q previous_code '$WORK/gen.jsonl'"
check "gen: exit 0 (got $RC: $(cat "$WORK/gen.err"))" [ "$RC" -eq 0 ]
check "gen: 1 record (got $(wc -l <"$WORK/gen.jsonl"))" [ "$(wc -l <"$WORK/gen.jsonl")" -eq 1 ]
check "gen: a record of the documented shape" shaped gen
check "gen: the draft template" has gen 1 '# You are the Coder: first version'
check "gen: the task's description" \
	has gen 1 'Test task: y[i] = 2 * x[i] + b[0] for a float32 vector x of n elements'
check "gen: the host reference" has gen 1 'host reference: y = 2x + b, one plain loop'
check "gen: no plan" has gen 1 'no plan: design and write it in one go'
check "gen: metadata" has gen 1 '"skill": "gen", "template": "coder-draft", "size_set": "eval", '
check "gen: no baselines, from the suite" \
	has gen 1 '"backend": "host", "baseline_ms": null, "source": "suite", "index": 0}}'

# ---- bad input: exit 2, one line ------------------------------------------------------------
one_line() { [ "$(wc -l <"$WORK/bad.err")" -eq 1 ] && grep -qF -- "$1" "$WORK/bad.err"; }
bad() { # bad WHAT MESSAGE-SUBSTRING ARGS...
	local what=$1 msg=$2
	shift 2
	export_ bad --task-dir "$TASK" "$@"
	check "$what: exit 2 (got $RC)" [ "$RC" -eq 2 ]
	check "$what: one line naming '$msg' ($(cat "$WORK/bad.err"))" one_line "$msg"
	check "$what: nothing on stdout" [ ! -s "$WORK/bad.jsonl" ]
}
bad "--format csv" "csv" --skill gen --format csv
bad "unknown skill" "--skill" --skill rl
bad "no skill" "--skill" --format jsonl
bad "missing folder" "$WORK/nowhere" --skill opt --trajectories "$WORK/nowhere"
bad "folder without runs" "no trajectory.jsonl" --skill opt --trajectories "$WORK/runs/wrong_fix/versions"
mkdir -p "$WORK/broken/r1"
head -n 3 "$RUN/trajectory.jsonl" >"$WORK/broken/r1/trajectory.jsonl"
echo '{"type": "code", "attempt": 1, "path": ' >>"$WORK/broken/r1/trajectory.jsonl"
bad "a line that is not JSON" "$WORK/broken/r1/trajectory.jsonl:4:" --skill opt --trajectories "$WORK/broken"
bad "--out in a missing folder" "$WORK/nowhere" --skill gen --out "$WORK/nowhere/x.jsonl"
bad "unknown option" "--frobnicate" --skill gen --frobnicate

finish
