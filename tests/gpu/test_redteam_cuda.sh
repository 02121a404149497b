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

# sabotage_queued.cu made to queue a kernel of about 150 s after each timing reply: a baseline's
# wait for the GPU runs past its patience (--timeout 10: 10 s), the candidate's runner is killed,
# the GPU comes free, and the verdict is timeout, long before the verify's deadline (until
# session 43 the wait lasted until then, of the order of hours).
sed -e 's/^#define HOG_CYCLES .*/#define HOG_CYCLES 300000000000ll/' -e 's/^#define AFTER_TIMING 0/#define AFTER_TIMING 1/' \
	"$STITCH_SRC/tests/redteam/cuda/sabotage_queued.cu" >"$WORK/queued_long.cu"
t0=$(date +%s)
verify "$WORK/ql.json" t1/topk "$WORK/queued_long.cu" --timeout 10
took=$(($(date +%s) - t0))
check "a kernel of minutes queued after a timing reply: timeout (status $(field "$WORK/ql.json" status): $(field "$WORK/ql.json" reason))" \
	[ "$(field "$WORK/ql.json" status)" = timeout ]
check "...named as the candidate's queued work, freed by killing its runner" \
	grep -q "came free once its runner was killed" "$WORK/ql.json"
check "...within two minutes (took $took s)" [ "$took" -le 120 ]
finish
