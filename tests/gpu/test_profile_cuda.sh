#!/usr/bin/env bash
# The profiler on the GPU: the eager MLP reference shows its separate GEMM, bias and GELU kernels
# and a finding that names the unfused work; the expert shows fewer kernels; CUPTI's kernel
# durations plus gaps agree with event time of the run within 5 %; --trace writes a Chrome trace;
# a solution that crashes under the profiler gets a verdict.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

MLP="$STITCH_SRC/tasks/t2/mlp_gelu"
num() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -n 1; }

"$STITCH" profile --json --quiet --trace "$WORK/ref.trace.json" t2/mlp_gelu "$MLP/reference.cu" \
	>"$WORK/ref.json" 2>"$WORK/ref.err"
rc=$?
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
check "profile expert: exit 0 (got $rc: $(tail -n 1 "$WORK/exp.err"))" [ "$rc" -eq 0 ]
exp_launches=$(num "$WORK/exp.json" launches)
check "expert: fewer launches than the reference ($exp_launches < $ref_launches)" \
	[ "${exp_launches:-99}" -lt "${ref_launches:-0}" ]
agree=$(num "$WORK/exp.json" agreement)
check "expert: kernels + gaps within 5 % of event time (ratio $agree)" \
	awk -v a="$agree" 'BEGIN { exit !(a > 0.95 && a < 1.05) }'

"$STITCH" profile --json --quiet "$TASK" "$FIX/crash_third_call.cu" >"$WORK/crash.json" 2>"$WORK/crash.err"
rc=$?
check "crash under the profiler: exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "crash under the profiler: runtime_error from the profile phase" \
	grep -q '"reason": "profile:' "$WORK/crash.json"
finish
