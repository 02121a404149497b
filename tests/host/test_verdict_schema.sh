#!/usr/bin/env bash
# Verdicts of every status the host backend can give (ok, compile_error, forbidden,
# runtime_error, timeout, incorrect, hacking, plus the edge cases: non-finite outputs, a
# candidate that is the reference itself, --samples, a file without the ABI) and the example
# verdicts in examples/ are valid against docs/verdict.schema.json, checked offline by
# tests/tools/verdict_check.py (the same check lib.sh runs on every verdict of every test); the
# checker itself must reject a verdict without a status, with an unknown status, with an
# undocumented key, and with the audit's fields (audit, timing.parent_clock, deadline_s) broken.
# The human-readable verdict must agree with the JSON (docs/verdict.md).
. "$(dirname "$0")/../lib.sh"

PY=${PYTHON:-python3}
CHECK=("${VERDICT_CHECK[@]}")
if ! command -v "$PY" >/dev/null; then
	echo "SKIP: no $PY (scripts/bootstrap --tests installs python3 and python3-jsonschema)"
	exit 77
fi
"$PY" -c 'import jsonschema' 2>/dev/null || {
	echo "SKIP: $PY has no jsonschema module (scripts/bootstrap --tests installs python3-jsonschema)"
	exit 77
}

# Candidates made here: a forbidden call, a NaN in the output, the reference's own bytes.
cat >"$WORK/forbidden.c" <<'C'
#include <stdlib.h>
#include "stitch/solution.h"
int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg, (void)params, (void)n_params, (void)stream;
	*ctx = NULL;
	return system("true");
}
int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx, (void)in, (void)n_in, (void)out, (void)n_out, (void)stream;
	return 0;
}
void st_free(void *ctx) { (void)ctx; }
C
sed 's|y\[i\] = 2.0f \* x\[i\] + b + (i == in\[0\].shape\[0\] / 2 ? 0.5f : 0.0f);|{ y[i] = 2.0f * x[i] + b; if (i == 3) y[i] = 0.0f / 0.0f; }|' \
	"$FIX/wrong.c" >"$WORK/nan.c"
check "nan.c made from wrong.c" grep -q '0.0f / 0.0f' "$WORK/nan.c"
cp "$TASK/reference.c" "$WORK/refcopy.c"

# name STATUS EXIT FILE [verify args] (lib.sh's verify keeps each verdict for the schema check)
run() {
	local name=$1 status=$2 want_rc=$3 file=$4
	shift 4
	verify "$WORK/$name.json" "$TASK" "$file" "$@"
	check "$name: exit $RC, want $want_rc" [ "$RC" -eq "$want_rc" ]
	check "$name: status '$(field "$WORK/$name.json" status)', want '$status'" \
		[ "$(field "$WORK/$name.json" status)" = "$status" ]
}
run ok ok 0 "$FIX/good.c" --samples
run compile_error compile_error 1 "$FIX/syntax.c"
run forbidden forbidden 1 "$WORK/forbidden.c"
run runtime_error runtime_error 1 "$FIX/segv.c"
run timeout timeout 1 "$FIX/hang.c" --timeout 2
run incorrect incorrect 1 "$FIX/wrong.c"
run nonfinite incorrect 1 "$WORK/nan.c"
# A raw fork the source check would refuse: without it the sandbox kills the runner.
run hacking hacking 1 "$STITCH_SRC/tests/redteam/host/fork_raw.c" --no-policy
run refcopy ok 0 "$WORK/refcopy.c"
# Not a whole solution (no st_free): the candidate's problem, a compile_error verdict.
run noabi compile_error 1 "$FIX/noabi.c"
# The examples docs/verdict.md points at.
for f in "$STITCH_SRC"/examples/verdict-*.json; do
	verdicts_keep "$f"
done
n_kept=$(wc -l <"$VERDICTS_DIR/list")
check "10 verdicts and the 2 examples kept for the check (got $n_kept)" [ "$n_kept" -eq 12 ]
verdicts_check

# The audit's fields are in an untrusted candidate's timed verdict (docs/verdict.md, `audit`).
check "ok: audit, timing.parent_clock and deadline_s present" "$PY" -c '
import json, sys
v = json.load(open(sys.argv[1]))
sys.exit(not ("audit" in v and "parent_clock" in v["timing"] and v["deadline_s"] > 0))' "$WORK/ok.json"

# The sentinels the schema allows are the ones docs/verdict.md explains.
check "nonfinite: max_abs -1 and nmse -1 with nonfinite 1" "$PY" -c '
import json, sys
o = json.load(open(sys.argv[1]))["correctness"][0]["outputs"][0]
sys.exit(not (o["max_abs"] == -1 and o["nmse"] == -1 and o["nonfinite"] == 1))' "$WORK/nonfinite.json"

# The checker can fail: a verdict without a status, with a status nobody documents, with a key
# the schema does not know.
mutate() { # mutate NAME PYTHON-STATEMENT-ON-v
	"$PY" -c "
import json, sys
v = json.load(open(sys.argv[1]))
$2
json.dump(v, open(sys.argv[2], 'w'))" "$WORK/ok.json" "$WORK/bad_$1.json"
	"${CHECK[@]}" "$WORK/bad_$1.json" >"$WORK/bad_$1.out" 2>&1
	local r=$?
	check "checker rejects a verdict with $1 (rc $r, want 1)" [ "$r" -eq 1 ]
}
mutate no_status 'del v["status"]'
mutate bogus_status 'v["status"] = "fine"'
mutate unknown_key 'v["surprise"] = 1'
mutate failure_without_reason 'v["status"] = "incorrect"'
mutate audit_without_digest_count 'del v["audit"]["digest_mismatches"]'
mutate audit_without_repeated_count 'del v["audit"]["rerun_repeated"]'
mutate audit_binding_as_number 'v["audit"]["digests_binding"] = 1'
mutate parent_clock_unknown_key 'v["timing"]["parent_clock"]["surprise"] = 1'
mutate parent_clock_negative_excess 'v["timing"]["parent_clock"]["excess_ms"] = -1'
mutate deadline_zero 'v["deadline_s"] = 0'
mutate unknown_flag 'v["flags"].append("looks_fine")'
check "checker names the missing key" grep -q "'status' is a required property" "$WORK/bad_no_status.out"

# The human text says what the JSON holds.
human() { # human NAME FILE [args]: the human-readable verdict of FILE into NAME.txt
	local name=$1 file=$2
	shift 2
	"$STITCH" verify "${FAST[@]}" "$@" "$TASK" "$file" >"$WORK/$name.txt" 2>&1
}
human nonfinite "$WORK/nan.c"
check "nonfinite: human text says the error is not finite" grep -q 'max abs err not finite' "$WORK/nonfinite.txt"
check "nonfinite: no 'max abs err 0'" bash -c "! grep -q 'max abs err 0' '$WORK/nonfinite.txt'"
human incorrect "$FIX/wrong.c"
check "incorrect: says the check stopped at the first failure" grep -q 'stopped at the first failure' "$WORK/incorrect.txt"
human refcopy "$WORK/refcopy.c"
check "refcopy: says the candidate is the reference" grep -q 'the candidate is the reference' "$WORK/refcopy.txt"
check "refcopy: not 'not run'" bash -c "! grep -q 'not run' '$WORK/refcopy.txt'"
finish
