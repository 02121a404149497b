#!/usr/bin/env bash
# Inputs are read-only, and a task's host-generated inputs are made once a seed. A runner makes a
# seed's inputs (t3/bfs's graphs) once and uploads them again for every call of that seed, so the
# audit's re-runs (which all share the buffer sets' two seeds) do not pay the generator each
# time: a solution that keeps its first answer and writes it again is still caught (a runner that
# handed out the last seed's inputs for a new seed would give both runners the same stale graph,
# and the kept answer would pass), and the honest search, timed, passes the audit with every
# re-run's digest the committed one. A solution that writes into its inputs (the ABI: st_run reads
# in[], writes out[]) is `incorrect`, naming the input, on a task with kept inputs (where it used
# to compute its later timed calls on its own writes and be called `hacking`) and on one whose
# inputs are fresh for every call alike.
. "$(dirname "$0")/../lib.sh"

E="$STITCH_SRC/tasks/t3/bfs/expert.c"
# the expert's search as bfs_run, and an st_run of each case's own around it
sed 's/^int st_run(/static int bfs_run(/' "$E" >"$WORK/first.c"
cat >>"$WORK/first.c" <<'EOF'

static int32_t *first;
static int64_t first_n;
int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    int64_t n = out[0].shape[0];
    if (first && first_n == n) {
        memcpy(out[0].data, first, (size_t)n * sizeof *first);
        return 0;
    }
    int rc = bfs_run(p, in, n_in, out, n_out, stream);
    if (rc == 0 && (first = realloc(first, (size_t)n * sizeof *first))) {
        memcpy(first, out[0].data, (size_t)n * sizeof *first);
        first_n = n;
    }
    return rc;
}
EOF
sed 's/^int st_run(/static int bfs_run(/' "$E" >"$WORK/scribble.c"
cat >>"$WORK/scribble.c" <<'EOF'

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    int rc = bfs_run(p, in, n_in, out, n_out, stream);
    if (rc == 0 && n_in == 3) {
        int32_t *row_ptr = in[0].data, *col = in[1].data;
        for (int64_t i = 0; i < in[1].shape[0]; i++) col[i] = 0;
        for (int64_t i = 0; i < in[0].shape[0]; i++) row_ptr[i] = 0;
    }
    return rc;
}
EOF

verify "$WORK/first.json" --no-timing t3/bfs "$WORK/first.c"
check "first answer kept: exit 1 (got $RC; $(tail -n 1 "$WORK/first.json.err"))" [ "$RC" -eq 1 ]
check "first answer kept: incorrect ($(field "$WORK/first.json" status))" \
	[ "$(field "$WORK/first.json" status)" = incorrect ]

verify "$WORK/scribble.json" --sets small t3/bfs "$WORK/scribble.c"
check "bfs, inputs written over: exit 1 (got $RC)" [ "$RC" -eq 1 ]
check "bfs, inputs written over: incorrect ($(field "$WORK/scribble.json" status))" \
	[ "$(field "$WORK/scribble.json" status)" = incorrect ]
check "bfs, inputs written over: the reason names row_ptr ($(field "$WORK/scribble.json" reason))" \
	grep -q "wrote into its input 'row_ptr'; inputs are read-only" "$WORK/scribble.json"

# t1/scale's inputs are made for every call: the same rule
S="$STITCH_SRC/tests/data/tasks/t1/scale"
sed 's/\t\ty\[i\] = x\[i\] + x\[i\] + b;/\t\ty[i] = x[i] + x[i] + b, ((float *)in[0].data)[i] = 0;/' \
	"$S/expert.c" >"$WORK/scale_scribble.c"
check "the scale scribbler differs from the expert" bash -c "! cmp -s '$S/expert.c' '$WORK/scale_scribble.c'"
verify "$WORK/scale.json" "$S" "$WORK/scale_scribble.c"
check "scale, input written over: incorrect ($(field "$WORK/scale.json" status))" \
	[ "$(field "$WORK/scale.json" status)" = incorrect ]
check "scale, input written over: the reason names x" \
	grep -q "wrote into its input 'x'" "$WORK/scale.json"
verify "$WORK/scale_ok.json" "$S" "$S/expert.c"
check "scale, the expert: ok ($(field "$WORK/scale_ok.json" reason))" [ "$RC" -eq 0 ]

verify "$WORK/timed.json" --sets small t3/bfs "$E"
check "expert timed: exit 0 (got $RC; $(field "$WORK/timed.json" reason))" [ "$RC" -eq 0 ]
python3 - "$WORK/timed.json" >"$WORK/timed.check" 2>&1 <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["audit"]
assert a["rerun"] >= 3 and a["digest_mismatches"] == 0 and a["digests_binding"], a
PY
check "expert timed: 3+ re-runs, every digest the committed one ($(cat "$WORK/timed.check"))" \
	[ ! -s "$WORK/timed.check" ]
finish
