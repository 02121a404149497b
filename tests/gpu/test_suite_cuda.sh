#!/usr/bin/env bash
# Every shipped expert is correct on every seed and size set (hidden ones included) and faster
# than its reference (`stitch bench` on the GPU), and no expert is flagged suspicious.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

# scripts/gpu-test runs the bench once for its report and hands the JSON over (SUITE_BENCH_JSON
# and its exit code SUITE_BENCH_RC) rather than paying for a second run of the whole suite.
if [ -n "${SUITE_BENCH_JSON:-}" ]; then
	cp "$SUITE_BENCH_JSON" "$WORK/bench.json"
	rc=${SUITE_BENCH_RC:-1}
	: >"$WORK/bench.err"
else
	"$STITCH" bench --quiet --no-db --json >"$WORK/bench.json" 2>"$WORK/bench.err"
	rc=$?
fi
check "bench: exit 0 (got $rc: $(tail -n 2 "$WORK/bench.err"))" [ "$rc" -eq 0 ]
verdicts_keep "$WORK/bench.json" 'verdicts.*?'
n_tasks=$("$STITCH" tasks --json | grep -c '"id"')
python3 - "$WORK/bench.json" "$n_tasks" <<'EOF' >"$WORK/check.txt" 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
rows = d["rows"]
print(f"rows {len(rows)} of {n} tasks")
for r in rows:
    ok = r["correct"]
    fast = (r["vs_reference"] or 0) > 1
    sus = r["suspicious"]
    print(("ok  " if ok and fast and not sus else "BAD ") + f'{r["task"]} {r["status"]} '
          f'vs_reference={r["vs_reference"]} suspicious={sus} {r["reason"][:200]}')
EOF
cat "$WORK/check.txt"
check "bench: one row per task" grep -q "^rows $n_tasks of $n_tasks tasks" "$WORK/check.txt"
while read -r line; do
	check "bench: $line" [ "${line%% *}" = ok ]
done < <(grep -E '^(ok|BAD) ' "$WORK/check.txt")
finish
