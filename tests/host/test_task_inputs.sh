#!/usr/bin/env bash
# Inputs a task's host generator makes (t3/bfs's graphs): a runner makes a seed's inputs once and
# uploads them again for every call of that seed, so the audit's re-runs (which all share the
# buffer sets' two seeds) do not pay the generator each time. Both halves are checked by what a
# solution sees: one that keeps its first answer and writes it again is caught (a runner that
# handed out the last seed's inputs for a new seed would give both runners the same stale graph,
# and the kept answer would pass); one that writes over its inputs after each search is still
# right when a seed is run again (an upload skipped would leave it the wrecked graph). The honest
# search, timed, passes the audit with every re-run's digest the committed one.
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

verify "$WORK/scribble.json" --no-timing t3/bfs "$WORK/scribble.c"
check "inputs written over: exit 0 (got $RC; $(field "$WORK/scribble.json" reason))" [ "$RC" -eq 0 ]
check "inputs written over: no nondeterministic flag" \
	bash -c "! grep -q '\"nondeterministic\"' '$WORK/scribble.json'"

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
