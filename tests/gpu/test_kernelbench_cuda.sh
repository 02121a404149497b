#!/usr/bin/env bash
# KernelBench import on the GPU: the four test programs of tests/kernelbench/ imported with CUDA
# PyTorch (expected outputs from the GPU, eager and torch.compile timed with a cold L2), then each
# hand-written CUDA solution verified against its import with full timing. Prints one table row
# per program (import seconds without torch.compile, eager, compile, stitch, speedups) and
# appends the table to $KB_SUMMARY when set (scripts/gpu-test puts it into its summary).
BACKEND=cuda
source "$(dirname "$0")/../lib.sh"

if ! torch_python 'assert torch.cuda.is_available()'; then
	echo "SKIP: no python3 with CUDA torch here"
	exit 77
fi
KB=$STITCH_SRC/tests/kernelbench
ROOT=$WORK/tasks
TABLE=$WORK/table.md
{
	echo "| program | import (s, without compile) | PyTorch eager (ms) | torch.compile (ms) | stitch solution (ms) | vs eager | vs compile | seeds |"
	echo "|---|---|---|---|---|---|---|---|"
} >"$TABLE"
for name in mlp cnn transformer_block lstm; do
	T=$ROOT/kb/level3/$name
	"$STITCH" import kernelbench "$KB/$name.py" --out "$T" --level 3 \
		>"$WORK/import-$name.out" 2>"$WORK/import-$name.err"
	rc=$?
	cat "$WORK/import-$name.err"
	check "$name: import on the GPU exits 0 ($rc)" [ "$rc" -eq 0 ]
	check "$name: the import timed eager and compile" \
		python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["baselines"]; sys.exit(0 if b["eager_ms"] > 0 and b["compile_ms"] > 0 else 1)' "$T/task.json"
	"$STITCH" verify --json --quiet "$T" "$KB/solutions/$name.cu" >"$WORK/$name.json" 2>"$WORK/$name.err"
	rc=$?
	verdicts_keep "$WORK/$name.json"
	check "$name: the CUDA solution is correct against the import ($rc: $(field "$WORK/$name.json" reason))" \
		[ "$rc" -eq 0 ]
	python3 - "$T/task.json" "$WORK/$name.json" "$name" >>"$TABLE" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
v = json.load(open(sys.argv[2]))
b, sp = t.get("baselines", {}), v.get("speedup", {})
med = v.get("timing", {}).get("candidate", {}).get("median_ms")
f = lambda x, d=4: "-" if x is None else f"{x:.{d}f}"
print(f"| {sys.argv[3]} | {t['source'].get('import_s', 0):.2f} | {f(b.get('eager_ms'))} | "
      f"{f(b.get('compile_ms'))} | {f(med)} | {f(sp.get('vs_eager'), 2)} | "
      f"{f(sp.get('vs_compile'), 2)} | {len(v.get('correctness', []))} {v['status']} |")
EOF
done
# Seeds drawn at verify time on the GPU (the import's helper, secret seed base).
"$STITCH" verify --json --quiet --no-profile --fresh-seeds "$ROOT/kb/level3/mlp" "$KB/solutions/mlp.cu" \
	>"$WORK/fresh.json" 2>"$WORK/fresh.err"
rc=$?
verdicts_keep "$WORK/fresh.json"
check "mlp with --fresh-seeds on the GPU ($rc: $(field "$WORK/fresh.json" reason)$(tail -n 1 "$WORK/fresh.err"))" [ "$rc" -eq 0 ]
cat "$TABLE"
[ -n "${KB_SUMMARY:-}" ] && cat "$TABLE" >>"$KB_SUMMARY"
verdicts_check
echo "kernelbench_cuda: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
