#!/usr/bin/env bash
# The "best" bar (docs/bench.md): with no vendor figures for the device, bench, its reports and
# the verdict say the bar is the expert; with a vendor file for the device (a fixture whose
# figures are of the host's timed set, one far faster and one far slower than the expert) rows
# and scores pick the faster of the two and name which set the bar, the Markdown, CSV and JSON
# carry fast_p and geomean vs best beside the old columns, a stored run reads back with them,
# and a verdict with a bar still passes the schema. `bench --vendor` without torch says so.
. "$(dirname "$0")/../lib.sh"

SUITE="$WORK/suite"
mkdir -p "$SUITE/t1"
cp -r "$STITCH_SRC/tests/data/tasks/t1/scale" "$SUITE/t1/"
cp -r "$STITCH_SRC/tasks/t1/softmax" "$SUITE/t1/"
export STITCH_TASKS="$SUITE"
export STITCH_VENDOR_DIR="$WORK/vendor"
mkdir -p "$STITCH_VENDOR_DIR"
DB="$WORK/runs.db"

# no vendor file for this device: the bar is the expert, and the outputs say so
"$STITCH" bench "${FAST[@]}" --db "$DB" >"$WORK/plain.out" 2>"$WORK/plain.err"
rc=$?
cat "$WORK/plain.out"
check "no vendor file: exit 0 (got $rc; $(tail -n 1 "$WORK/plain.err"))" [ "$rc" -eq 0 ]
check "no vendor file: the table says the bar is the expert" \
	grep -q "^bar 'best' = the expert on every task: no vendor (PyTorch) figures" "$WORK/plain.out"
check "no vendor file: every row's bar is the expert" \
	[ "$(grep -cE '^t1/(scale|softmax) +ok .* expert ' "$WORK/plain.out")" -eq 2 ]

# the device's name, as the verdict gives it, names the fixture's file
"$STITCH" verify --json "${FAST[@]}" "$SUITE/t1/scale" "$SUITE/t1/scale/expert.c" >"$WORK/v0.json" 2>/dev/null
DEVICE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device"]["device"])' "$WORK/v0.json")
check "the verdict names the device ($DEVICE)" [ -n "$DEVICE" ]
check "no vendor file: the verdict's best_note says where it looked" python3 - "$WORK/v0.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["baselines"]
assert b["best"] == "expert" and b["best_ms"] == b["expert_ms"], b
assert "no vendor figures for" in b["best_note"] and "vendor" in b["best_note"], b
PY
SLUG=$(printf '%s' "$DEVICE" | sed -E 's/[^A-Za-z0-9]+/_/g; s/^_+//; s/_+$//')
python3 - "$STITCH_SRC/tests/fixtures/vendor/host.json.in" "$STITCH_VENDOR_DIR/$SLUG.json" "$DEVICE" <<'PY'
import sys
src, dst, dev = sys.argv[1:4]
open(dst, "w").write(open(src).read().replace("@DEVICE@", dev.replace('"', '\\"')))
PY

"$STITCH" bench "${FAST[@]}" --db "$DB" --json >"$WORK/best.json" 2>"$WORK/best.err"
rc=$?
check "vendor file: exit 0 (got $rc; $(tail -n 1 "$WORK/best.err"))" [ "$rc" -eq 0 ]
check "vendor file: rows and scores pick the faster, naming which ($(tail -n 1 "$WORK/best.check" 2>/dev/null))" python3 - "$WORK/best.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["task"]: r for r in d["rows"]}
s, m = rows["t1/scale"], rows["t1/softmax"]
assert s["best"] == "vendor" and s["best_ms"] == 1e-06 and s["vendor_ms"] == 1e-06, s
assert abs(s["vs_best"] / (1e-06 / s["solution_ms"]) - 1) < 1e-9 and s["vs_best"] < s["vs_expert"], s
assert m["best"] == "expert" and m["best_ms"] == m["expert_ms"] and m["vendor_ms"] == 1e6, m
assert abs(m["vs_best"] - m["vs_expert"]) < 1e-12, m
a = d["score"]["all"]
assert a["bar"] == {"with_vendor": 2, "vendor": 1}, a["bar"]
assert set(a["fast_p"]) == {"reference", "expert", "best"} and set(a["geomean"]) >= {"best"}
assert a["fast_p"]["best"]["1"] <= a["fast_p"]["expert"]["1"], a["fast_p"]
v = {x["task"]: x for x in d["verdicts"]}
b = v["t1/scale"]["baselines"]
assert b["best"] == "vendor" and b["vendor_backend"] == "fast" and "best_note" not in b, b
assert "vs_vendor" in v["t1/scale"]["speedup"] and "vs_best" in v["t1/scale"]["speedup"]
assert "is faster than the vendor" in v["t1/softmax"]["baselines"]["best_note"]
PY

"$STITCH" bench "${FAST[@]}" --no-db --md --baseline best >"$WORK/best.md" 2>/dev/null
check "md: the bar sentence and the best columns" bash -c "
	grep -q 'vendor figures for 2 of 2 tasks, the vendor set the bar on 1, the expert on 1' '$WORK/best.md' &&
	grep -q '| fast_p vs best | geomean vs best |' '$WORK/best.md' &&
	grep -Eq '^\| t1/scale \| ok \|.*\| vendor \|' '$WORK/best.md' &&
	grep -q 'Headline baseline: best' '$WORK/best.md'"
"$STITCH" bench "${FAST[@]}" --no-db --csv >"$WORK/best.csv" 2>/dev/null
check "csv: the old columns first, the bar's after them" bash -c "
	grep -q '^task,tier,status,compiled,correct,reference_ms,expert_ms,solution_ms,vs_reference,vs_expert,sol_fraction,suspicious,reason,vendor_ms,best_ms,best,vs_best,sol_roof$' '$WORK/best.csv' &&
	grep -q '^\"t1/scale\".*,\"vendor\",' '$WORK/best.csv'"

# the stored run reads back with its bar (from the stored verdicts)
"$STITCH" bench --db "$DB" --compare 1 2 >"$WORK/cmp.out" 2>&1
check "compare of the runs before and after the vendor file: exit 0" [ $? -eq 0 ]
if python3 -c 'import sqlite3' 2>/dev/null; then
	check "store: the verdict of run 2 keeps the bar" python3 - "$DB" <<'PY'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
v = json.loads(c.execute("select verdict from results where run=2 and task='t1/scale'").fetchone()[0])
assert v["baselines"]["best"] == "vendor", v["baselines"]
PY
fi

# a verdict with a bar against the schema
"$STITCH" verify --json "${FAST[@]}" "$SUITE/t1/scale" "$SUITE/t1/scale/expert.c" >"$WORK/v1.json" 2>/dev/null
python3 "$STITCH_SRC/tests/tools/verdict_check.py" "$STITCH_SRC/docs/verdict.schema.json" "$WORK/v1.json" >"$WORK/schema.out" 2>&1
rc=$?
if [ "$rc" -eq 77 ]; then
	echo "SKIP (part): $(cat "$WORK/schema.out")"
else
	check "verdict with vendor_ms, best and vs_best is valid ($(tail -n 2 "$WORK/schema.out"))" [ "$rc" -eq 0 ]
fi
check "verify's text names the bar" bash -c "'$STITCH' verify ${FAST[*]} '$SUITE/t1/scale' '$SUITE/t1/scale/expert.c' 2>/dev/null | grep -q \"^best .*the vendor's fixture op (always faster) (fast)\""

# a broken vendor file: verification goes on, the bar is the expert and the note says why
echo '{"device": 1}' >"$STITCH_VENDOR_DIR/$SLUG.json"
"$STITCH" verify --json "${FAST[@]}" "$SUITE/t1/scale" "$SUITE/t1/scale/expert.c" >"$WORK/v2.json" 2>/dev/null
check "broken vendor file: ok, bar expert, note says unreadable" python3 - "$WORK/v2.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
assert v["status"] == "ok" and v["baselines"]["best"] == "expert", v["baselines"]
assert "vendor figures unreadable" in v["baselines"]["best_note"]
PY

# --vendor: the helper needs torch and a GPU; without them exit 3 and the reason
STITCH_PYTHON=/nonexistent/python3 "$STITCH" bench --vendor >/dev/null 2>"$WORK/vendor.err"
rc=$?
check "--vendor with no python: exit 3 and why (got $rc)" bash -c "[ $rc -eq 3 ] && grep -q 'needs python3 with torch' '$WORK/vendor.err'"
"$STITCH" bench --vendor --task 't1/*' --tier 1 >/dev/null 2>&1
check "--vendor --task with --tier: exit 2" [ $? -eq 2 ]
"$STITCH" bench --vendor --solutions "$WORK" >/dev/null 2>&1
check "--vendor with --solutions: exit 2" [ $? -eq 2 ]
finish
