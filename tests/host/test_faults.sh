#!/usr/bin/env bash
# Every fault of a candidate is a verdict with the right status and a reason that says what
# happened, and the parent carries on (each verify below is a fresh parent, and the good
# solution after the faults still passes with the same cache).
. "$(dirname "$0")/../lib.sh"

# The pointer-keyed cache is tests/redteam/host/cache_by_pointer.c (test_redteam.sh).
expect wrong.c incorrect 'worst y\[500\]'
expect unwritten.c incorrect 'y\[999\]'
expect segv.c runtime_error 'signal 11'
expect abort_run.c runtime_error 'signal 6'
expect rc.c runtime_error 'st_run returned 7'
expect init_fail.c runtime_error 'st_init returned 3'
# What it printed is in the verdict as the candidate's, its terminal escape made harmless; not
# where the failing set is a hidden one (it printed that set's size).
check "init_fail: its words in the verdict" grep -q '"candidate": "?\[2Jinit_fail: no table for n=1000' "$WORK/init_fail.c.json"
"$STITCH" verify "${FAST[@]}" "$TASK" "$FIX/init_fail.c" >"$WORK/init_fail.txt" 2>&1
check "init_fail: the report marks its words as the candidate's" grep -q '^  | ?\[2Jinit_fail: no table' "$WORK/init_fail.txt"
check "init_fail: no escape byte reaches the report" bash -c "! grep -q \$'\\033' '$WORK/init_fail.txt'"
# Its output is read through the descriptor stitch opened, never by name: a solution that points
# the name at another file (here without the sandbox, which refuses the link) shows only its own.
verify "$WORK/relink.json" "$TASK" "$FIX/init_fail_relink.c" --no-policy --no-sandbox
check "relink: runtime_error (rc $RC)" [ "$(field "$WORK/relink.json" status)" = runtime_error ]
check "relink: its own words in the verdict" grep -q '"candidate": "init_fail_relink: its own words' "$WORK/relink.json"
check "relink: nothing of the file its name points at" bash -c "! grep -q 'root:' '$WORK/relink.json'"
verify "$WORK/init_hidden.json" "$TASK" "$FIX/init_fail.c" --sets hidden --time-set hidden0
check "init_fail on a hidden set: runtime_error (rc $RC)" [ "$(field "$WORK/init_hidden.json" status)" = runtime_error ]
check "init_fail on a hidden set: nothing it printed" bash -c "! grep -q 'no table' '$WORK/init_hidden.json'"
expect exit_run.c runtime_error 'exited with status 0'
expect syntax.c compile_error 'undeclared'
# A solution that cannot be loaded, or lacks a function of the ABI, is the candidate's problem: a
# verdict (exit 1), not bad input.
expect noabi.c compile_error 'does not export st_free'
expect undefined_symbol.c compile_error 'undefined symbol: st_fixture_missing_helper'

# Runners of this check get their folders under a TMPDIR of its own, so that looking for one
# left behind cannot see runners of tests running beside it. A runner started as root drops to
# a user of its own, which must be able to pass through to its folder.
start=$(date +%s)
mkdir -p "$WORK/hangtmp"
chmod 711 "$WORK" "$WORK/hangtmp"
TMPDIR="$WORK/hangtmp" expect hang.c timeout 'did not answer within 2 s' --timeout 2
took=$(($(date +%s) - start))
check "hang: verdict within 20 s (took $took s)" [ "$took" -lt 20 ]
check "hang: no runner left behind" bash -c "! pgrep -f '[s]titch-runner-host --fd .* --workdir $WORK/hangtmp' >/dev/null"

# The compile error names the file and the line.
check "syntax: diagnostic with file and line" grep -q '"line": 7' "$WORK/syntax.c.json"

verify "$WORK/good.json" "$TASK" "$FIX/good.c"
check "good after faults: ok (rc $RC)" [ "$(field "$WORK/good.json" status)" = ok ]
finish
