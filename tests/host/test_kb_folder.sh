#!/usr/bin/env bash
# `stitch import kernelbench DIR` and suites by name, on CPU PyTorch and the host backend: a level
# folder of small programs (tests/kernelbench/*.py and audit/level1/*.py) plus one that must be
# refused (bad/dropout.py) imported two at a time: the table says 7 imported, 1 refused with the
# helper's reason, exit 1; a second run skips them all; --force imports them again; --json; bad
# input (no programs, neither file nor folder) and no torch (the run stops, exit 3). Then the
# imported level as the suite kb1: `export --skill gen --suite kb1` writes a row per task, `bench
# --backend host --suite kb1 --solutions DIR` verifies the host solutions against the import,
# `eval --suite kb1` with a scripted model (tests/fake_llm) scores its correct answer, `serve
# --suite kb1` lists and verifies those tasks by id, and unknown or empty suites are refused
# naming the valid ones.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve_lib.sh"

if ! torch_python; then
	echo "SKIP: no python3 with torch here (scripts/bootstrap --tests installs python3-torch)"
	exit 77
fi
KB=$STITCH_SRC/tests/kernelbench
export STITCH_TASKS=$WORK/tasks  # the task root: kb1 is $STITCH_TASKS/kb/level1
SRC=$WORK/src/level1
mkdir -p "$SRC" "$STITCH_TASKS"
cp "$KB"/*.py "$SRC/"
cp "$KB"/audit/level1/flat_out.py "$KB"/audit/level1/wide_softmax.py "$KB"/bad/dropout.py "$SRC/"
N=$(ls "$SRC"/*.py | wc -l)  # 8: 7 that import and dropout.py

# 1. The folder, two at a time. dropout.py is a real limit (randomness in forward): refused.
start=$(date +%s)
"$STITCH" import kernelbench "$SRC" --jobs 2 >"$WORK/run1.out" 2>"$WORK/run1.err"
rc=$?
echo "import of $N programs, 2 at once: $(($(date +%s) - start)) s"
check "a refusal makes exit 1 ($rc: $(tail -n 1 "$WORK/run1.err"))" [ "$rc" -eq 1 ]
check "the table counts 7 imported, 1 refused" \
	grep -q "^$N programs: 7 imported, 1 refused, 0 skipped, 0 failed" "$WORK/run1.out"
check "the refusal carries the helper's reason" \
	grep -q "^level1/dropout  *refused .*Dropout 'drop'" "$WORK/run1.out"
check "a progress line per program" [ "$(grep -c '^\[[0-9]*/8\] ' "$WORK/run1.err")" -eq "$N" ]
check "the tasks are where kb1 looks" [ -f "$STITCH_TASKS/kb/level1/mlp/task.json" ]
check "a refused program leaves no folder" [ ! -e "$STITCH_TASKS/kb/level1/dropout" ]
check "bytes on disk in the table" awk '$1 == "level1/mlp" && $4 > 1000 { ok = 1 } END { exit !ok }' \
	"$WORK/run1.out"

# 2. Again: every imported program is skipped (the same source), the refused one tried again.
"$STITCH" import kernelbench "$SRC" --jobs 2 --json >"$WORK/run2.json" 2>"$WORK/run2.err"
rc=$?
check "run 2: exit 1 (the refusal again) ($rc)" [ "$rc" -eq 1 ]
check "run 2: 7 skipped, 1 refused, as JSON" python3 - "$WORK/run2.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]
rows = {r["program"]: r for r in d["programs"]}
ok = (t["skipped"], t["refused"], t["imported"]) == (7, 1, 0) and \
     rows["level1/mlp"]["status"] == "skipped" and rows["level1/mlp"]["bytes"] > 0 and \
     "Dropout" in rows["level1/dropout"]["reason"]
sys.exit(0 if ok else print(t) or 1)
EOF
# A changed program is imported again; --force imports every one again.
echo "# changed" >>"$SRC/linear_relu.py"
rm "$SRC/dropout.py" "$SRC/cnn.py" "$SRC/lstm.py" "$SRC/transformer_block.py"
"$STITCH" import kernelbench "$SRC" >"$WORK/run3.out" 2>"$WORK/run3.err"
rc=$?
check "run 3: exit 0 ($rc)" [ "$rc" -eq 0 ]
check "run 3: the changed program imported again, the rest skipped" \
	grep -q "^4 programs: 1 imported, 0 refused, 3 skipped" "$WORK/run3.out"
mkdir -p "$WORK/src/level3" && cp "$KB/linear_relu.py" "$WORK/src/level3/"
"$STITCH" import kernelbench "$WORK/src" --force --jobs 2 >"$WORK/run4.out" 2>"$WORK/run4.err"
rc=$?
check "--force, from the folder above level1 and level3: exit 0 ($rc)" [ "$rc" -eq 0 ]
check "--force: every level's programs, all 5 imported again" \
	grep -q "^5 programs: 5 imported, 0 refused, 0 skipped" "$WORK/run4.out"
check "each level's tasks where its suite looks" [ -f "$STITCH_TASKS/kb/level3/linear_relu/task.json" ]

# A program that runs out of memory beside another import is tried again with fewer at once;
# only the answer it gets alone counts (here a real limit: 4 TiB of inputs).
mkdir -p "$WORK/oom/level1" && cp "$KB/bad/huge_input.py" "$KB/linear_relu.py" "$WORK/oom/level1/"
"$STITCH" import kernelbench "$WORK/oom" --out "$WORK/oomtasks" --jobs 2 >"$WORK/oom.out" 2>"$WORK/oom.err"
rc=$?
check "out of memory beside another import: deferred first" \
	grep -q "level1/huge_input .*deferred .*tried again with fewer at once" "$WORK/oom.err"
check "then refused alone, with the numbers (exit $rc)" sh -c "[ $rc -eq 1 ] && grep -q \
	'^level1/huge_input  *refused .*does not fit in memory' '$WORK/oom.out'"
check "the other program imported" grep -q "^2 programs: 1 imported, 1 refused" "$WORK/oom.out"

# 3. Bad input and a missing torch.
mkdir -p "$WORK/empty"
"$STITCH" import kernelbench "$WORK/empty" >/dev/null 2>"$WORK/empty.err"
rc=$?
check "a folder without programs: exit 2 ($rc)" [ "$rc" -eq 2 ]
check "it says so" grep -q "no KernelBench programs" "$WORK/empty.err"
"$STITCH" import kernelbench /dev/null >/dev/null 2>"$WORK/null.err"
rc=$?
check "neither file nor folder: exit 2 ($rc)" [ "$rc" -eq 2 ]
STITCH_PYTHON=/nonexistent/python "$STITCH" import kernelbench "$SRC" --force \
	>/dev/null 2>"$WORK/nopy.err"
rc=$?
check "no python: exit 3 ($rc)" [ "$rc" -eq 3 ]
printf 'import sys\nprint("import: error: no PyTorch here", file=sys.stderr)\nsys.exit(3)\n' \
	>"$WORK/notorch.py"
printf '#!/bin/sh\nexec python3 %s "$@"\n' "$WORK/notorch.py" >"$WORK/notorch"
chmod +x "$WORK/notorch"
STITCH_PYTHON=$WORK/notorch "$STITCH" import kernelbench "$SRC" --force --jobs 1 \
	>"$WORK/notorch.out" 2>"$WORK/notorch.err"
rc=$?
check "no torch: exit 3 ($rc)" [ "$rc" -eq 3 ]
check "no torch: the run stops with the reason" grep -q "stopped: .*no PyTorch here" "$WORK/notorch.err"
check "no torch: the other programs are not started" grep -q "3 not started" "$WORK/notorch.out"
check "no torch: the tasks already imported are kept" [ -f "$STITCH_TASKS/kb/level1/mlp/task.json" ]

# 4. kb1 as a suite.
"$STITCH" export --skill gen --suite kb1 --out "$WORK/kb1.jsonl" 2>/dev/null
rc=$?
check "export --suite kb1: exit 0 ($rc)" [ "$rc" -eq 0 ]
check "export --suite kb1: one row per imported task" [ "$(wc -l <"$WORK/kb1.jsonl")" -eq 7 ]
check "the rows are the imported tasks" grep -q '"task_id": *"level1/wide_softmax"' "$WORK/kb1.jsonl"
"$STITCH" export --skill gen --suite "kb1,$STITCH_SRC/tasks/t1" --out "$WORK/two.jsonl" 2>/dev/null
check "two suites, one a folder: their tasks together" \
	[ "$(wc -l <"$WORK/two.jsonl")" -eq $((7 + $(ls -d "$STITCH_SRC"/tasks/t1/*/ | wc -l))) ]
"$STITCH" export --skill gen --backend host --suite kb1 --out "$WORK/kb1_host.jsonl" 2>/dev/null
check "export --backend host keeps the imported tasks (their stored outputs check C too)" \
	[ "$(wc -l <"$WORK/kb1_host.jsonl")" -eq 7 ]
mkdir -p "$WORK/sols/level1"
cp "$KB/solutions/linear_relu.c" "$KB/solutions/wide_softmax.c" "$WORK/sols/level1/"
"$STITCH" bench --suite kb1 --solutions "$WORK/sols" --task 'level1/[lw]i*' "${FAST[@]}" \
	--sets eval --no-db --json >"$WORK/bench.json" 2>"$WORK/bench.err"
rc=$?
check "bench --suite kb1: both solutions correct ($rc: $(tail -n 1 "$WORK/bench.err"))" [ "$rc" -eq 0 ]
check "bench --suite kb1: a row each" python3 - "$WORK/bench.json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
ok = sorted((r["task"], r["status"]) for r in rows) == \
     [("level1/linear_relu", "ok"), ("level1/wide_softmax", "ok")]
sys.exit(0 if ok else print(rows) or 1)
EOF
verdicts_keep "$WORK/bench.json" 'verdicts.*?'

# eval over kb1 with a scripted model (tests/fake_llm) that answers linear_relu's C solution.
python3 - "$KB/solutions/linear_relu.c" "$WORK/fake.json" <<'EOF'
import json, sys
code = open(sys.argv[1]).read()
json.dump({"steps": [{"openai_text": "Here is the file.\n\n```c\n" + code + "```\n"}]},
          open(sys.argv[2], "w"))
EOF
"$(dirname "$STITCH")/tests/fake-llm" "$WORK/fake.json" >"$WORK/fake.port" 2>"$WORK/fake.err" &
FAKE_PID=$!
fake_up() { [ -s "$WORK/fake.port" ]; }
check "the fake LLM server starts" wait_for 5 fake_up
OPENAI_API_KEY=test-key STITCH_EVAL_DB=$WORK/eval.db "$STITCH" eval \
	--model "openai-compat:http://127.0.0.1:$(head -n 1 "$WORK/fake.port")/v1:scripted" \
	--suite kb1 --task level1/linear_relu --out "$WORK/eval" --parallel 1 "${FAST[@]}" \
	--no-timing >"$WORK/eval.out" 2>"$WORK/eval.err"
rc=$?
kill "$FAKE_PID" 2>/dev/null
check "eval --suite kb1: exit 0 ($rc: $(tail -n 1 "$WORK/eval.err"))" [ "$rc" -eq 0 ]
check "eval --suite kb1: the sample is correct, tier 1" python3 - "$WORK/eval/results.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = [(r["task"], r["tier"], r["correct"]) for r in rows] == [("level1/linear_relu", 1, True)]
sys.exit(0 if ok else print(rows) or 1)
EOF

# Unknown and empty suites: exit 2, naming the valid ones or the empty folder.
for cmd in "export --skill gen" "bench" "eval --model openai:none" "serve"; do
	"$STITCH" $cmd --suite kb9 >/dev/null 2>"$WORK/bad_suite.err"
	rc=$?
	check "$cmd --suite kb9: exit 2 ($rc)" [ "$rc" -eq 2 ]
	check "$cmd --suite kb9: names the suites" grep -q "unknown suite 'kb9' (suites: kb1, kb2, kb3, suite" \
		"$WORK/bad_suite.err"
done
"$STITCH" export --skill gen --suite kb2 >/dev/null 2>"$WORK/empty_suite.err"
rc=$?
check "an empty suite: exit 2 ($rc)" [ "$rc" -eq 2 ]
check "an empty suite: says where it looked" grep -q "no imported tasks in .*kb/level2" "$WORK/empty_suite.err"
for cmd in bench eval serve export; do
	"$STITCH" $cmd --help | grep -q -- "--suite NAMES"
	check "$cmd --help tells --suite" [ $? -eq 0 ]
done

# 5. serve --suite kb1: its tasks by id, and nothing else.
serve_start kb --suite kb1 "${FAST[@]}" --no-timing --sets eval --seeds 1 --workers 1 || exit 1
http tasks GET /v1/tasks
check "serve --suite kb1 lists the 7 tasks" [ "$(jget "$WORK/tasks.body" tasks | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" -eq 7 ]
body "$WORK/lr.req" '{"task": "level1/linear_relu"}' "$KB/solutions/linear_relu.c"
http lr POST /v1/verify "$WORK/lr.req"
check "serve --suite kb1 verifies level1/linear_relu ($CODE: $(jget "$WORK/lr.body" reason))" \
	[ "$CODE:$(jget "$WORK/lr.body" status)" = 200:ok ]
body "$WORK/other.req" '{"task": "t1/softmax"}' "$KB/solutions/linear_relu.c"
http other POST /v1/verify "$WORK/other.req"
check "a task outside the suite is unknown ($CODE)" [ "$CODE" = 404 ]

verdicts_check
echo "kb_folder: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
