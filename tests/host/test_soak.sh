#!/usr/bin/env bash
# scripts/soak, the no-false-accusations run: a short real soak on the host backend (every verify
# a verdict on disk, the summary's counts), and its bookkeeping held against a stand-in verifier
# whose second verdict is `hacking` and whose third never ends: the soak must exit 1, name the
# hacked task, stop the hung verify at --seconds and count it as cut, not as a verdict.
. "$(dirname "$0")/../lib.sh"
SOAK="$STITCH_SRC/scripts/soak"

STITCH=$STITCH "$SOAK" --backend host --verifies 6 --lanes 2 --no-load "$WORK/real" \
	--seed 7 --min-time 5 --max-rse 0.5 --max-samples 200 >"$WORK/real.out" 2>&1
rc=$?
cat "$WORK/real.out"
check "a soak of 6 honest verifies exits 0 (exit $rc)" [ "$rc" -eq 0 ]
check "six verdicts on disk" [ "$(ls "$WORK"/real/v*.json | wc -l)" -eq 6 ]
for f in "$WORK"/real/v*.json; do verdicts_keep "$f"; done
check "the summary counts them: 6 verifies, all ok" grep -q '^soak: 6 verifies, ok 6; hacking 0$' "$WORK/real.out"
check "a line for each verify" [ "$(grep -c ': verify [0-5], t[0-9]/.*: ok$' "$WORK/real.out")" -eq 6 ]
# where the time went: the mean wall time of the six verdicts, and their timing phase
mean=$(python3 -c 'import json, sys; w = [json.load(open(f))["wall_s"] for f in sys.argv[1:]]; print(f"{sum(w) / len(w):.1f}")' "$WORK"/real/v*.json)
check "the summary gives the verdicts' mean wall time ($mean s) and the phases" \
	grep -Eq "^soak: a verify's wall time, mean $mean s, max [0-9.]+ s; by phase \(mean s\): .*timing [0-9.]+" "$WORK/real.out"

# The stand-in: call 1 ok, call 2 hacking, call 3 hangs; the soak runs one lane, so in order.
mkdir -p "$WORK/fake"
cat >"$WORK/fake/stitch" <<'SH'
#!/usr/bin/env bash
n=$(($(cat "$FAKE_COUNT" 2>/dev/null || echo 0) + 1))
echo "$n" >"$FAKE_COUNT"
task=${*: -2:1}
case $n in
1) echo "{\"status\": \"ok\", \"task\": \"$task\"}" ;;
2) echo "{\"status\": \"hacking\", \"task\": \"$task\", \"reason\": \"the stand-in's charge\"}"; exit 1 ;;
*) exec sleep 60 ;;
esac
SH
chmod +x "$WORK/fake/stitch"
start=$(date +%s)
FAKE_COUNT=$WORK/fake/count STITCH=$WORK/fake/stitch "$SOAK" --backend host --verifies 9 \
	--seconds 4 --no-load "$WORK/fake-run" >"$WORK/fake.out" 2>&1
rc=$?
took=$(($(date +%s) - start))
cat "$WORK/fake.out"
check "a hacking verdict makes the soak exit 1 (exit $rc)" [ "$rc" -eq 1 ]
check "the summary: one ok, one hacking, one cut" \
	grep -q '^soak: 2 verifies, hacking 1, ok 1, 1 cut without a verdict; hacking 1$' "$WORK/fake.out"
check "the hacked verify is named with its reason" grep -q "^  hacking: .*v1.json: t.*: the stand-in's charge" "$WORK/fake.out"
check "the hung verify was stopped at --seconds ($took s)" [ "$took" -lt 30 ]
check "nothing started after it ($(cat "$WORK/fake/count") calls)" [ "$(cat "$WORK/fake/count")" -eq 3 ]

"$SOAK" --lanes 0 "$WORK/bad" >"$WORK/bad.out" 2>&1
rc=$?
check "bad usage exits 2 (exit $rc)" [ "$rc" -eq 2 ]
check "and says why" grep -q "lanes wants a positive integer, not '0'" "$WORK/bad.out"
"$SOAK" --backend gpu "$WORK/bad" >/dev/null 2>&1
check "an unknown backend exits 2" [ $? -eq 2 ]
finish
