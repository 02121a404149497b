#!/usr/bin/env bash
# Every shipped expert is correct on every seed and size set and faster than its reference
# (`stitch bench` on the GPU), and verifying an expert as a candidate passes.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

"$STITCH" bench --quiet --json >"$WORK/bench.json" 2>"$WORK/bench.err"
rc=$?
check "bench: exit 0 (got $rc: $(tail -n 2 "$WORK/bench.err"))" [ "$rc" -eq 0 ]
n_ok=$(grep -c '^    "status": "ok"' "$WORK/bench.json")
n_tasks=$("$STITCH" tasks --json | grep -c '"id"')
check "bench: every task ok ($n_ok of $n_tasks)" [ "$n_ok" -eq "$n_tasks" ]
# speedup vs reference of each expert (ratio of medians) must exceed 1
while read -r s; do
	check "bench: expert faster than its reference (speedup $s)" awk -v s="$s" 'BEGIN { exit !(s > 1) }'
done < <(grep '"vs_reference"' "$WORK/bench.json" | sed 's/.*: \([0-9.e+-]*\).*/\1/')
check "bench: no expert flagged" bash -c "! grep -q 'expert_incorrect\|expert_failed' '$WORK/bench.json'"
finish
