#!/usr/bin/env bash
# `stitch solve t2/mlp_gelu` on the GPU against a scripted model (tests/fake_llm playing
# tests/data/solve-gpu/mlp_gelu.json): plan -> a draft that does not compile -> its repair (eager
# GEMMs with bias and GELU fused) -> an optimisation onto cuBLASLt epilogues, each version
# verified and profiled for real; the run ends done, with the fastest version as best.cu and a
# report. SOLVE_REPORT_DIR, when set, receives the run's folder (scripts/gpu-test keeps it).
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

FAKE=$(dirname "$STITCH")/tests/fake-llm
# The GPU machine may lack libmicrohttpd: scripts/carry-libs.sh finds the carried copy.
starts() { "$FAKE" --help 2>&1 | grep -q '^usage: fake-llm'; }
source "$STITCH_SRC/scripts/carry-libs.sh"
if ! starts; then
	echo "SKIP: the fake LLM server does not start here ($("$FAKE" --help 2>&1 | head -n 1))"
	exit 77
fi
"$FAKE" "$STITCH_SRC/tests/data/solve-gpu/mlp_gelu.json" --log "$WORK/fake.log" >"$WORK/port" 2>"$WORK/fake.err" &
FAKE_PID=$!
trap 'kill $FAKE_PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do
	[ -s "$WORK/port" ] && break
	sleep 0.05
done
PORT=$(head -n 1 "$WORK/port")
OUTDIR="$WORK/run"
start=$(date +%s.%N)
"$STITCH" solve --model "openai-compat:http://127.0.0.1:$PORT/v1:scripted" --out "$OUTDIR" \
	--max-attempts 3 --target-speedup 1.9 t2/mlp_gelu >"$WORK/solve.out" 2>"$WORK/solve.err"
rc=$?
took=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
cat "$WORK/solve.out"
tail -n 20 "$WORK/solve.err"
report="$OUTDIR/report.json"
check "solve: exit 0 (got $rc)" [ "$rc" -eq 0 ]
verdicts_keep "$OUTDIR/trajectory.jsonl" '*.verdict?'
verdicts_keep "$report" 'best.verdict'
python3 - "$report" <<'EOF' >"$WORK/check.txt" 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
hist = [h.get("status") for h in r.get("history", [])]
print("state", r.get("state"))
print("attempts", r.get("attempts"))
print("statuses", " ".join(str(h) for h in hist))
best = r.get("best") or {}
print("best_speedup", (best.get("speedup") or {}).get("vs_reference"))
print("wall_s", r.get("wall_s"), "overhead_ms_per_attempt", r.get("overhead_ms_per_attempt"))
EOF
cat "$WORK/check.txt"
check "solve: state done" grep -qx "state done" "$WORK/check.txt"
check "solve: three attempts" grep -qx "attempts 3" "$WORK/check.txt"
check "solve: compile error, then correct, then correct" grep -qx "statuses compile_error ok ok" "$WORK/check.txt"
sp=$(sed -n 's/^best_speedup //p' "$WORK/check.txt")
check "solve: best speedup over the reference above the 1.9 target ($sp)" awk -v s="$sp" 'BEGIN { exit !(s > 1.9) }'
check "solve: best.cu is the cuBLASLt version" grep -q cublasLtMatmul "$OUTDIR/best.cu"
check "solve: plan.json, report.json and trajectory.jsonl written" \
	bash -c "[ -s '$OUTDIR/plan.json' ] && [ -s '$report' ] && [ -s '$OUTDIR/trajectory.jsonl' ]"
echo "scripted solve of t2/mlp_gelu: ${took} s wall"
if [ -n "${SOLVE_REPORT_DIR:-}" ]; then
	mkdir -p "$SOLVE_REPORT_DIR" && cp -r "$OUTDIR"/. "$SOLVE_REPORT_DIR"/ && cp "$WORK/solve.err" "$SOLVE_REPORT_DIR/progress.log"
fi
finish
