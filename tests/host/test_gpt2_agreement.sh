#!/usr/bin/env bash
# t3/gpt2_forward's top-token rule on a small set: 1 % of the positions may disagree with the
# reference's top token, and always at least one (the small set has 64 positions, where a bare
# 99 % would let an honest bf16 program lose to a single near-tie). A host candidate runs the
# task's own host reference (its text: a candidate may not include files outside the toolkit),
# then makes the top token of its first N positions one the reference ranks far below its top:
# with N = 1 it must pass, with N = 2 fail on the agreement (the NMSE barely moves), and the
# reason must say how many disagree and how many may.
. "$(dirname "$0")/../lib.sh"

REF="$STITCH_SRC/tasks/t3/gpt2_forward/reference.c"
make_candidate() { # make_candidate N FILE: the reference, then N positions' top token moved
	{ echo '#define st_run reference_st_run'; cat "$REF"; echo '#undef st_run'; } >"$2"
	cat >>"$2" <<EOF
/* Position r's logit of its lowest-scored token raised one above the row's top. */
int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    int rc = reference_st_run(p, in, n_in, out, n_out, stream);
    if (rc != 0) return rc;
    const int64_t V = out[0].shape[2], rows = out[0].shape[0] * out[0].shape[1];
    uint16_t *lg = (uint16_t *)out[0].data;
    for (int64_t r = 0; r < $1 && r < rows; r++) {
        uint16_t *row = lg + r * V;
        int64_t lo = 0;
        float top = bf16_to_f32(row[0]);
        for (int64_t j = 1; j < V; j++) {
            if (bf16_to_f32(row[j]) < bf16_to_f32(row[lo])) lo = j;
            if (bf16_to_f32(row[j]) > top) top = bf16_to_f32(row[j]);
        }
        row[lo] = f32_to_bf16(top + 1.0f);
    }
    return 0;
}
EOF
}

for n in 1 2; do
	make_candidate $n "$WORK/moved$n.c"
	"$STITCH" verify --json "${FAST[@]}" --no-timing --sets small --seeds 1 t3/gpt2_forward \
		"$WORK/moved$n.c" >"$WORK/v$n.json" 2>"$WORK/v$n.err"
	echo "rc $?" >>"$WORK/v$n.err"
	verdicts_keep "$WORK/v$n.json"
done
reason1=$(field "$WORK/v1.json" reason)
reason2=$(field "$WORK/v2.json" reason)
check "one moved top token of 64 passes ($(field "$WORK/v1.json" status): $reason1$(tail -n 1 "$WORK/v1.err"))" \
	[ "$(field "$WORK/v1.json" status)" = ok ]
check "two moved top tokens of 64 fail ($(field "$WORK/v2.json" status): $reason2)" \
	[ "$(field "$WORK/v2.json" status)" = incorrect ]
check "the reason counts them: 2 disagree, at most 1 may ($reason2)" \
	grep -q "2 disagree, at most 1 may" <<<"$reason2"
finish
