#!/usr/bin/env bash
# The red-team suite on the GPU: every exploit in tests/redteam/cuda gets the verdict its header
# demands and every honest-but-unusual solution passes (`caught N of N`). Each file's verdict
# (`--json` carries them) is checked against docs/verdict.schema.json (lib.sh).
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

"$STITCH" redteam --quiet --timeout 10 --json >"$WORK/rt.json" 2>"$WORK/rt.err"
rc=$?
# the table, as `stitch redteam` prints it without --json
python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
for x in r:
    print("%-7s %-24s %-18s got %-14s %s" % ("caught" if x["caught"] else "MISSED", x["file"],
          x["expect"], x["got"], x["exploit"]))
print("caught %d of %d" % (sum(x["caught"] for x in r), len(r)))' "$WORK/rt.json" >"$WORK/rt.out" 2>&1
cat "$WORK/rt.out"
n=$(ls "$STITCH_SRC"/tests/redteam/cuda/*.cu | wc -l)
check "redteam cuda: exit 0 (got $rc; $(tail -n 2 "$WORK/rt.err"))" [ "$rc" -eq 0 ]
check "redteam cuda: caught $n of $n" grep -q "^caught $n of $n$" "$WORK/rt.out"
check "redteam cuda: every row has its verdict, of the status it got" python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r and all(x["verdict"] and x["verdict"]["status"] == x["got"] for x in r) else 1)' "$WORK/rt.json"
verdicts_keep "$WORK/rt.json" '*.verdict'

check "redteam cuda: the informed forger is hacking" grep -q "^caught  informed_forger.cu .* got hacking" "$WORK/rt.out"
check "redteam cuda: the protocol family has at least 9 files" \
	[ "$(ls "$STITCH_SRC"/tests/redteam/cuda/proto_*.cu | wc -l)" -ge 9 ]

# A runner whose timer and clock were rewritten from inside reports a tenth of each call; the
# parent's own clock sees the rest and the lie buys nothing (lib.sh's paid_for). The same work
# without the rewrite passes.
sed 's/dl_iterate_phdr(visit, NULL);//' "$STITCH_SRC/tests/redteam/cuda/patch_timer.cu" >"$WORK/slow_honest.cu"
verify "$WORK/sh.json" "$TASK" "$WORK/slow_honest.cu" --no-policy
check "same work, timer untouched: ok (status $(field "$WORK/sh.json" status))" \
	[ "$(field "$WORK/sh.json" status)" = ok ]
verify "$WORK/pt.json" "$TASK" "$STITCH_SRC/tests/redteam/cuda/patch_timer.cu" --no-policy
verify "$WORK/sh2.json" "$TASK" "$WORK/slow_honest.cu" --no-policy  # the same work again: the faster honest time is the bar
check "source check off: patched runner timer is hacking or paid for (status $(field "$WORK/pt.json" status): $(field "$WORK/pt.json" reason))" \
	paid_for "$WORK/pt.json" "$WORK/sh.json" "$WORK/sh2.json"

# sabotage_queued.cu made to queue a kernel of about 150 s after timing replies; two ways to
# the same end, each long before the verify's deadline (until session 43 a baseline's wait
# lasted until then, of the order of hours). From the first reply on: the candidate's own next
# batch (its second warm-up one) comes next, its runner's device sync waits for the kernel, and
# it misses the request limit (--timeout 10) and is killed (session 44, an H100: 12 s, 3 of 3).
# From the second on: the reference's warm-up batch comes next, its wait for a quiet GPU runs
# past its patience (the request limit), the candidate's runner is killed and the GPU comes free.
# Either way: timeout, naming the candidate, within two minutes.
for after in 1 2; do
	sed -e 's/^#define HOG_CYCLES .*/#define HOG_CYCLES 300000000000ll/' -e "s/^#define AFTER_TIMING 0/#define AFTER_TIMING $after/" \
		"$STITCH_SRC/tests/redteam/cuda/sabotage_queued.cu" >"$WORK/queued_$after.cu"
	t0=$(date +%s)
	verify "$WORK/q$after.json" t1/topk "$WORK/queued_$after.cu" --timeout 10
	took=$(($(date +%s) - t0))
	check "a kernel of minutes queued from timing reply $after on: timeout (status $(field "$WORK/q$after.json" status): $(field "$WORK/q$after.json" reason))" \
		[ "$(field "$WORK/q$after.json" status)" = timeout ]
	check "...within two minutes (took $took s)" [ "$took" -le 120 ]
done
check "...from the first: the candidate missed the request limit and was killed" \
	grep -Eq "the candidate did not answer within [0-9]+ s and was killed" "$WORK/q1.json"
check "...from the second: a baseline's wait ran out of patience; the GPU came free once the candidate's runner was killed" \
	grep -q "came free once its runner was killed" "$WORK/q2.json"
finish
