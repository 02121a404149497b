#!/usr/bin/env bash
# SOL by the binding roof on the host backend: t1/spmv_csr, whose cost.roof is "l2", gets an L2
# bound in its verdict beside the DRAM one; a copy of the test task whose L2 bytes dwarf its DRAM
# bytes gets a verdict that names the L2 as its roof (JSON, the text line, and stitch bench's
# table, CSV and JSON); one that counts many special-function operations (cost.sfu) gets the
# "sfu" roof; one that counts synchronisations (cost.syncs) reports them, with no bound on the
# host; a task.json with an unknown roof is refused, naming the file and the key.
. "$(dirname "$0")/../lib.sh"

# t1/spmv_csr as shipped: the L2 bound is counted whichever bound sets the floor on this CPU
verify "$WORK/spmv.json" t1/spmv_csr "$STITCH_SRC/tasks/t1/spmv_csr/expert.c"
check "spmv_csr: exit 0 (got $RC; $(tail -n 2 "$WORK/spmv.json.err"))" [ "$RC" -eq 0 ]
python3 - "$WORK/spmv.json" <<'EOF' >"$WORK/spmv.check" 2>&1
import json, sys
v = json.load(open(sys.argv[1]))
s = v["sol"]
f = s["floors_ms"]
assert s["l2_bytes"] > s["bytes"] > 0, s
assert f["l2"] > 0 and f["dram"] > 0, f
assert s["roof"] in ("dram", "l2"), s["roof"]
assert abs(s["floor_ms"] - max(f.values())) < 1e-12, (s["floor_ms"], f)
assert abs(s["floor_ms"] - f[s["roof"]]) < 1e-12
assert abs(s["fraction"] - s["floor_ms"] / v["timing"]["candidate"]["median_ms"]) < 1e-9
assert s["peaks"]["l2_gbs"] > 0, s["peaks"]
EOF
check "spmv_csr: sol has the L2 bound beside DRAM's, the floor the larger ($(cat "$WORK/spmv.check"))" \
	[ ! -s "$WORK/spmv.check" ]

# A copy of the test task with roof "l2" and a thousand times its DRAM bytes through the L2
SUITE="$WORK/suite"
mkdir -p "$SUITE/t1"
cp -r "$STITCH_SRC/tests/data/tasks/t1/scale" "$SUITE/t1/"
sed -i 's|"bytes": "8\*n", "unit": "fp32"}|"bytes": "8*n", "unit": "fp32", "roof": "l2", "l2_bytes": "8000*n"}|' \
	"$SUITE/t1/scale/task.json"
check "the copy declares roof l2" grep -q '"roof": "l2"' "$SUITE/t1/scale/task.json"
export STITCH_TASKS="$SUITE"

verify "$WORK/l2.json" t1/scale "$FIX/good.c"
check "roof l2: exit 0 (got $RC; $(tail -n 2 "$WORK/l2.json.err"))" [ "$RC" -eq 0 ]
python3 - "$WORK/l2.json" <<'EOF' >"$WORK/l2.check" 2>&1
import json, sys
s = json.load(open(sys.argv[1]))["sol"]
assert s["roof"] == "l2", s
assert s["l2_bytes"] == 8000 * 1000, s  # the small set times on the host: n = 1000
assert abs(s["floor_ms"] - s["floors_ms"]["l2"]) < 1e-12, s
assert s["floors_ms"]["l2"] > s["floors_ms"]["dram"], s
EOF
check "roof l2: the verdict's sol names the L2 and its floor ($(cat "$WORK/l2.check"))" \
	[ ! -s "$WORK/l2.check" ]

"$STITCH" verify "${FAST[@]}" t1/scale "$FIX/good.c" >"$WORK/l2.txt" 2>&1
check "roof l2: the text verdict says which roof" grep -Eq '^SOL +[0-9.]+% \(l2\) of the ' "$WORK/l2.txt"

"$STITCH" bench "${FAST[@]}" --task t1/scale --no-db >"$WORK/bench.out" 2>"$WORK/bench.err"
check "bench: the table shows the roof beside SOL" grep -Eq '^t1/scale +ok .* [0-9]+% \(l2\) ' "$WORK/bench.out"
"$STITCH" bench "${FAST[@]}" --task t1/scale --no-db --csv >"$WORK/bench.csv" 2>>"$WORK/bench.err"
check "bench --csv: a sol_roof column" grep -q ',sol_roof$' "$WORK/bench.csv"
check "bench --csv: l2 in it" grep -q '^"t1/scale",.*,"l2"$' "$WORK/bench.csv"
"$STITCH" bench "${FAST[@]}" --task t1/scale --no-db --json >"$WORK/bench.json" 2>>"$WORK/bench.err"
verdicts_keep "$WORK/bench.json" 'verdicts.*?'
check "bench --json: the row's sol_roof is l2" python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))
sys.exit(0 if b["rows"][0]["sol_roof"] == "l2" else 1)' "$WORK/bench.json"

# cost.sfu: a copy of the test task that counts a million special-function operations an element
# binds on the special-function rate (the host's: expf and logf), and says so
SUITE2="$WORK/suite2"
mkdir -p "$SUITE2/t1"
cp -r "$STITCH_SRC/tests/data/tasks/t1/scale" "$SUITE2/t1/"
sed -i 's|"bytes": "8\*n", "unit": "fp32"}|"bytes": "8*n", "unit": "fp32", "sfu": "1000000*n"}|' \
	"$SUITE2/t1/scale/task.json"
check "the copy counts special functions" grep -q '"sfu": "1000000\*n"' "$SUITE2/t1/scale/task.json"
STITCH_TASKS="$SUITE2" verify "$WORK/sfu.json" t1/scale "$FIX/good.c"
check "sfu: exit 0 (got $RC; $(tail -n 2 "$WORK/sfu.json.err"))" [ "$RC" -eq 0 ]
python3 - "$WORK/sfu.json" <<'EOF' >"$WORK/sfu.check" 2>&1
import json, sys
s = json.load(open(sys.argv[1]))["sol"]
assert s["roof"] == "sfu", s
assert s["sfu_ops"] == 1e6 * 1000, s  # the small set: n = 1000
assert s["peaks"]["sfu"] > 0, s["peaks"]
f = s["floors_ms"]
assert abs(f["sfu"] - s["sfu_ops"] / (s["peaks"]["sfu"] * 1e12) * 1e3) < 1e-9 * f["sfu"], f
assert abs(s["floor_ms"] - f["sfu"]) < 1e-12 and f["sfu"] > f["dram"], s
EOF
check "sfu: the verdict's sol names the special-function roof and its floor ($(cat "$WORK/sfu.check"))" \
	[ ! -s "$WORK/sfu.check" ]
STITCH_TASKS="$SUITE2" "$STITCH" verify "${FAST[@]}" t1/scale "$FIX/good.c" >"$WORK/sfu.txt" 2>&1
check "sfu: the text verdict names the roof and counts the operations" \
	grep -Eq '^SOL +[0-9.e-]+% \(sfu\) of the .*, 1e\+09 special-function ops\)' "$WORK/sfu.txt"

# cost.syncs: counted and reported, but the host backend has no grid barrier to time (peak
# sync_us null), so no such bound, and the roof is what it was
sed -i 's|"sfu": "1000000\*n"}|"syncs": "n"}|' "$SUITE2/t1/scale/task.json"
check "the copy counts synchronisations" grep -q '"syncs": "n"' "$SUITE2/t1/scale/task.json"
STITCH_TASKS="$SUITE2" verify "$WORK/sync.json" t1/scale "$FIX/good.c"
check "syncs: exit 0 (got $RC; $(tail -n 2 "$WORK/sync.json.err"))" [ "$RC" -eq 0 ]
python3 - "$WORK/sync.json" <<'EOF' >"$WORK/sync.check" 2>&1
import json, sys
s = json.load(open(sys.argv[1]))["sol"]
assert s["syncs"] == 1000, s
assert "sync_us" in s["peaks"] and s["peaks"]["sync_us"] is None, s["peaks"]
assert "sync" not in s["floors_ms"] and s["roof"] in ("dram", "fp32"), s
EOF
check "syncs: counted in the verdict, no bound without the host's peak ($(cat "$WORK/sync.check"))" \
	[ ! -s "$WORK/sync.check" ]

# an unknown roof: bad input, the file and the key named
sed -i 's|"roof": "l2"|"roof": "hbm"|' "$SUITE/t1/scale/task.json"
"$STITCH" verify "${FAST[@]}" t1/scale "$FIX/good.c" >"$WORK/bad.out" 2>&1
rc=$?
check "unknown roof: exit 2 (got $rc)" [ "$rc" -eq 2 ]
check "unknown roof: the message names the file and cost.roof" \
	grep -q "t1/scale/task.json: cost.roof: unknown roof 'hbm' (known: dram l2)" "$WORK/bad.out"

finish
