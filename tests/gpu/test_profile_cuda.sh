#!/usr/bin/env bash
# The profiler on the GPU: the eager MLP reference shows its separate GEMM, bias and GELU kernels
# and a finding that names the unfused work; the expert shows fewer kernels; CUPTI's kernel
# durations plus gaps agree with event time of the run within 5 %; --trace writes a Chrome trace;
# a solution that crashes under the profiler gets a verdict. Every answer is a verdict, checked
# against docs/verdict.schema.json (lib.sh).
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

MLP="$STITCH_SRC/tasks/t2/mlp_gelu"
num() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -n 1; }

"$STITCH" profile --json --quiet --trace "$WORK/ref.trace.json" t2/mlp_gelu "$MLP/reference.cu" \
	>"$WORK/ref.json" 2>"$WORK/ref.err"
rc=$?
verdicts_keep "$WORK/ref.json"
check "profile reference: exit 0 (got $rc: $(tail -n 1 "$WORK/ref.err"))" [ "$rc" -eq 0 ]
ref_launches=$(num "$WORK/ref.json" launches)
check "reference: at least 5 launches (got $ref_launches)" [ "${ref_launches:-0}" -ge 5 ]
check "reference: bias kernel in the timeline" grep -q '"name": "bias_add_kernel' "$WORK/ref.json"
check "reference: GELU kernel in the timeline" grep -q '"name": "gelu_kernel' "$WORK/ref.json"
check "reference: a finding names the unfused work" grep -q 'fuse them into the GEMM epilogue' "$WORK/ref.json"
agree=$(num "$WORK/ref.json" agreement)
check "reference: kernels + gaps within 5 % of event time (ratio $agree)" \
	awk -v a="$agree" 'BEGIN { exit !(a > 0.95 && a < 1.05) }'
check "trace: valid Chrome trace with kernel events" python3 -c "
import json, sys
t = json.load(open('$WORK/ref.trace.json'))
k = [e for e in t['traceEvents'] if e.get('ph') == 'X' and e.get('cat') == 'kernel']
sys.exit(0 if len(k) >= 5 else 1)"

"$STITCH" profile --json --quiet t2/mlp_gelu "$MLP/expert.cu" >"$WORK/exp.json" 2>"$WORK/exp.err"
rc=$?
verdicts_keep "$WORK/exp.json"
check "profile expert: exit 0 (got $rc: $(tail -n 1 "$WORK/exp.err"))" [ "$rc" -eq 0 ]
exp_launches=$(num "$WORK/exp.json" launches)
check "expert: fewer launches than the reference ($exp_launches < $ref_launches)" \
	[ "${exp_launches:-99}" -lt "${ref_launches:-0}" ]
agree=$(num "$WORK/exp.json" agreement)
check "expert: kernels + gaps within 5 % of event time (ratio $agree)" \
	awk -v a="$agree" 'BEGIN { exit !(a > 0.95 && a < 1.05) }'

# Nsight Compute on the expert at eval size: per-kernel metrics, in at most 60 s for the pass
if command -v ncu >/dev/null || [ -n "${STITCH_NCU:-}" ]; then
	start=$(date +%s.%N)
	"$STITCH" profile --json --quiet --ncu t1/softmax "$STITCH_SRC/tasks/t1/softmax/expert.cu" \
		>"$WORK/ncu.json" 2>"$WORK/ncu.err"
	rc=$?
	verdicts_keep "$WORK/ncu.json"
	took=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
	check "profile --ncu: exit 0 (got $rc: $(tail -n 1 "$WORK/ncu.err"))" [ "$rc" -eq 0 ]
	python3 - "$WORK/ncu.json" <<'EOF' >"$WORK/ncu.check" 2>&1
import json, sys
v = json.load(open(sys.argv[1]))
n = v["profile"]["ncu"]
assert "error" not in n, n.get("error")
k = n["kernels"]
print("kernels", len(k))
top = k[0]
print("top", top["name"][:60], top["duration_us"], top.get("dram_pct"), top.get("registers"))
assert top["duration_us"] > 10 and top.get("dram_pct", 0) > 50 and top.get("registers", 0) > 0
assert "softmax" in top["name"]
assert top.get("bound") in ("memory", "compute") and top.get("roof_pct", 0) > 50
print("phase_s", v["phases_s"].get("ncu"))
print("ok")
EOF
	cat "$WORK/ncu.check"
	check "profile --ncu: the softmax kernel with duration, DRAM %, registers" grep -qx ok "$WORK/ncu.check"
	phase=$(sed -n 's/^phase_s //p' "$WORK/ncu.check")
	check "profile --ncu: the ncu pass took at most 60 s ($phase s; whole profile $took s)" \
		awk -v p="$phase" 'BEGIN { exit !(p + 0 > 0 && p + 0 <= 60) }'
	# The work counters: a cuBLAS GEMM's FLOPs as ncu counts them against the task's 2*M*N*K.
	"$STITCH" profile --json --quiet --ncu t1/gemm_bf16 "$STITCH_SRC/tasks/t1/gemm_bf16/expert.cu" \
		>"$WORK/ncu-gemm.json" 2>"$WORK/ncu-gemm.err"
	verdicts_keep "$WORK/ncu-gemm.json"
	python3 - "$WORK/ncu-gemm.json" "$STITCH_SRC/tasks/t1/gemm_bf16/task.json" <<'EOF' >"$WORK/ncu-gemm.check" 2>&1
import json, sys
v = json.load(open(sys.argv[1]))
e = json.load(open(sys.argv[2]))["sizes"]["eval"]
n = v["profile"]["ncu"]
assert "error" not in n, n.get("error")
want = 2.0 * e["M"] * e["N"] * e["K"]
got = sum(k.get("flops", 0) for k in n["kernels"])
top = n["kernels"][0]
print("gemm flops: ncu %.4g, task %.4g, ratio %.3f; top kernel %.1f TFLOP/s at %.0f FLOP/B"
      % (got, want, got / want, top.get("tflops", 0), top.get("intensity", 0)))
assert 0.9 < got / want < 1.1
print("ok")
EOF
	cat "$WORK/ncu-gemm.check"
	check "profile --ncu: a GEMM's counted FLOPs match 2*M*N*K ($(head -n 1 "$WORK/ncu-gemm.check"))" \
		grep -qx ok "$WORK/ncu-gemm.check"
else
	echo "note: no ncu here; profile --ncu is checked for its 'not available' answer only"
fi
STITCH_NCU=/nonexistent/ncu "$STITCH" profile --json --quiet --ncu t1/softmax \
	"$STITCH_SRC/tasks/t1/softmax/expert.cu" >"$WORK/noncu.json" 2>"$WORK/noncu.err"
rc=$?
verdicts_keep "$WORK/noncu.json"
check "profile --ncu without ncu: still exit 0 (got $rc)" [ "$rc" -eq 0 ]
check "profile --ncu without ncu: the profile says so" grep -q 'not found' "$WORK/noncu.json"

"$STITCH" profile --json --quiet "$TASK" "$FIX/crash_third_call.cu" >"$WORK/crash.json" 2>"$WORK/crash.err"
rc=$?
verdicts_keep "$WORK/crash.json"
check "crash under the profiler: exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "crash under the profiler: runtime_error from the profile phase" \
	grep -q '"reason": "profile:' "$WORK/crash.json"
finish
