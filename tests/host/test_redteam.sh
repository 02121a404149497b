#!/usr/bin/env bash
# The red-team suite on the host backend: every exploit gets the verdict its header demands and
# every honest-but-unusual solution passes (`caught N of N`). Then the control: without the
# sandbox the raw-syscall exploits get through, which proves it is the sandbox that stops them.
. "$(dirname "$0")/../lib.sh"

"$STITCH" redteam --backend host --quiet --json >"$WORK/rt.json" 2>"$WORK/rt.err"
rc=$?
# the table, as `stitch redteam` prints it without --json
python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
for x in r:
    print("%-7s %-26s %-18s got %-14s %5.1f s of %4.0f s  %s" % ("caught" if x["caught"] else "MISSED",
          x["file"], x["expect"], x["got"], x["wall_s"], x["deadline_s"], x["exploit"]))
print("caught %d of %d" % (sum(x["caught"] for x in r), len(r)))' "$WORK/rt.json" >"$WORK/rt.out" 2>&1
cat "$WORK/rt.out"
n=$(ls "$STITCH_SRC"/tests/redteam/host/*.c | wc -l)
check "redteam: exit 0 (got $rc; $(tail -n 2 "$WORK/rt.err"))" [ "$rc" -eq 0 ]
check "redteam: caught $n of $n" grep -q "^caught $n of $n$" "$WORK/rt.out"
check "redteam: at least 15 files" [ "$n" -ge 15 ]
# Each row carries its whole verdict, which the schema check at the end validates.
check "redteam: every row has its verdict, of the status it got" python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r and all(x["verdict"] and x["verdict"]["status"] == x["got"] for x in r) else 1)' "$WORK/rt.json"
verdicts_keep "$WORK/rt.json" '*.verdict'
# The runner is hostile (docs/architecture.md): the protocol family, the informed forger (with
# the source check on: it has no forbidden name) and deferred work are all in the count above.
np=$(ls "$STITCH_SRC"/tests/redteam/host/proto_*.c | wc -l)
check "redteam: the protocol family has at least 9 files (got $np)" [ "$np" -ge 9 ]
check "redteam: the informed forger runs with the source check on" \
	bash -c "! head -n 1 '$STITCH_SRC/tests/redteam/host/informed_forger.c' | grep -q no-policy"
check "redteam: the informed forger is hacking" grep -q "^caught  informed_forger.c .* got hacking" "$WORK/rt.out"
# Every verify ends within its own deadline, whatever the file does.
check "redteam: every verify within its deadline ($(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); w=max(r, key=lambda x: x["wall_s"]); print("longest %s %.1f s of %.0f s" % (w["file"], w["wall_s"], w["deadline_s"]))' "$WORK/rt.json" 2>&1))" \
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r and all(0 < x["wall_s"] <= x["deadline_s"] for x in r if x["got"] != "forbidden") else 1)' "$WORK/rt.json"
# A figure above a file's speedup bound is timed again over a longer window before the file
# counts as missed: the task's honest expert (about 2x the reference) held to 1.2x is missed
# with both figures in its reason, and the second verify is the one in the JSON.
mkdir -p "$WORK/retry"
{ echo "/* redteam: an honest 2x solution held to 1.2x | expect: ok | task: tests/data/tasks/t2/fma | speedup_at_most: 1.2 */"
  cat "$STITCH_SRC/tests/data/tasks/t2/fma/expert.c"; } >"$WORK/retry/fast_honest.c"
"$STITCH" redteam --backend host --quiet --json --dir "$WORK/retry" >"$WORK/retry.json" 2>"$WORK/retry.err"
rc=$?
check "redteam: an ok above its bound is re-timed and still missed (rc $rc: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["reason"])' "$WORK/retry.json" 2>&1))" \
	python3 -c 'import json, re, sys
x = json.load(open(sys.argv[1]))[0]
m = re.search(r"\(([0-9.]+)x first, then ([0-9.]+)x over a window ten times as long\)", x["reason"])
sys.exit(0 if sys.argv[2] == "1" and not x["caught"] and x["got"] == "ok" and m
         and float(m.group(1)) > 1.2 and float(m.group(2)) > 1.2
         and abs(x["verdict"]["speedup"]["vs_reference"] - float(m.group(2))) < 0.006 else 1)' "$WORK/retry.json" "$rc"
# A folder without a red-team file is bad usage, never "caught 0 of 0".
mkdir -p "$WORK/empty-rt"
"$STITCH" redteam --backend host --dir "$WORK/empty-rt" >"$WORK/empty.out" 2>"$WORK/empty.err"
rc=$?
check "redteam: an empty folder is bad usage (rc $rc: $(cat "$WORK/empty.err"))" \
	bash -c "[ $rc -eq 2 ] && grep -q 'no red-team files' '$WORK/empty.err'"

# Sabotage: right answers, and a CPU kept busy whenever the candidate is not timed. On a machine
# of one CPU the baselines' calls (some 12 ms at t2/fma's eval size) shared it with the busy loop
# and took twice their time: 1.7x the reference for a file that is 0.8x (docs/architecture.md).
# Their batches are timed with the candidate's runner stopped, so it gains nothing.
one_cpu=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
taskset -c "$one_cpu" "$STITCH" verify --json "${FAST[@]}" --time-set eval --min-time 60 \
	"$STITCH_SRC/tests/data/tasks/t2/fma" "$STITCH_SRC/tests/redteam/host/sabotage_spin.c" \
	>"$WORK/sabotage.json" 2>"$WORK/sabotage.err"
verdicts_keep "$WORK/sabotage.json"
check "sabotage on one CPU: ok, the baselines timed with it stopped, no unearned speedup ($(python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); print(v["status"], v["timing"].get("candidate_stopped"), "%.2fx the reference" % v["speedup"]["vs_reference"])' "$WORK/sabotage.json" 2>&1))" \
	python3 -c 'import json,sys
v = json.load(open(sys.argv[1]))
s = v["timing"]["candidate_stopped"]
sys.exit(0 if v["status"] == "ok" and s["batches"] > 0 and s["seen_stopped"] == s["batches"] and v["speedup"]["vs_reference"] <= 1.3 else 1)' "$WORK/sabotage.json"

# The sandbox on its own (source check off): the raw system calls are caught at run time, the
# raw open of /tmp is refused; and without the sandbox the same socket exploit gets through.
verify "$WORK/sb.json" "$STITCH_SRC/tests/data/tasks/t1/scale" "$STITCH_SRC/tests/redteam/host/socket_inet.c" --no-policy
check "sandbox alone: socket exploit is hacking (status $(field "$WORK/sb.json" status))" \
	[ "$(field "$WORK/sb.json" status)" = hacking ]
verify "$WORK/fork.json" "$STITCH_SRC/tests/data/tasks/t1/scale" "$STITCH_SRC/tests/redteam/host/fork_raw.c" --no-policy
check "sandbox alone: fork exploit is hacking (status $(field "$WORK/fork.json" status))" \
	[ "$(field "$WORK/fork.json" status)" = hacking ]
verify "$WORK/fs.json" "$STITCH_SRC/tests/data/tasks/t1/scale" "$STITCH_SRC/tests/redteam/host/read_task_raw.c" --no-policy
if grep -q '"fs_isolated": true' "$WORK/fs.json"; then
	check "sandbox alone: /tmp unreachable (status $(field "$WORK/fs.json" status))" \
		[ "$(field "$WORK/fs.json" status)" = ok ]
else
	echo "note: this kernel has no Landlock; file confinement not tested here"
fi
# A fixture that computes the right answer only when the sandbox refused it something: `ok` with
# the sandbox, runtime_error without it. sandbox_refuses FIXTURE WHAT_IS_REFUSED WHAT_GOES_THROUGH
sandbox_refuses() {
	verify "$WORK/$1.json" "$STITCH_SRC/tests/data/tasks/t1/scale" "$FIX/$1.c" --no-policy
	check "sandbox alone: $2 (status $(field "$WORK/$1.json" status))" \
		[ "$(field "$WORK/$1.json" status)" = ok ]
	verify "$WORK/$1.off.json" "$STITCH_SRC/tests/data/tasks/t1/scale" "$FIX/$1.c" --no-policy --no-sandbox
	check "no sandbox: $3 (status $(field "$WORK/$1.off.json" status))" \
		[ "$(field "$WORK/$1.off.json" status)" = runtime_error ]
}
# The filter is an allow-list: a call on neither list fails with ENOSYS.
sandbox_refuses unlisted_call "an unlisted call gets ENOSYS" "the unlisted call goes through"
# The host backend's solutions run on the runner's one thread: a thread is refused with EPERM, so
# no work can run beside the runner's digest.
sandbox_refuses thread_refused "a host solution's thread is refused" "the thread starts"
# A runner whose clock was rewritten from inside reports a tenth of each call; the parent's own
# clock sees the rest and the lie buys nothing (lib.sh's paid_for). The same work without the
# rewrite passes: slowness alone is no crime.
sed 's/dl_iterate_phdr(visit, NULL);//' "$STITCH_SRC/tests/redteam/host/patch_clock.c" >"$WORK/slow_honest.c"
verify "$WORK/sh.json" "$STITCH_SRC/tests/data/tasks/t1/scale" "$WORK/slow_honest.c" --no-policy
check "same work, clock untouched: ok (status $(field "$WORK/sh.json" status))" \
	[ "$(field "$WORK/sh.json" status)" = ok ]
verify "$WORK/pc.json" "$STITCH_SRC/tests/data/tasks/t1/scale" "$STITCH_SRC/tests/redteam/host/patch_clock.c" --no-policy
verify "$WORK/sh2.json" "$STITCH_SRC/tests/data/tasks/t1/scale" "$WORK/slow_honest.c" --no-policy  # the same work again: the faster honest time is the bar
check "source check off: patched runner clock is hacking or paid for (status $(field "$WORK/pc.json" status): $(field "$WORK/pc.json" reason))" \
	paid_for "$WORK/pc.json" "$WORK/sh.json" "$WORK/sh2.json"
verify "$WORK/nosb.json" "$STITCH_SRC/tests/data/tasks/t1/scale" "$STITCH_SRC/tests/redteam/host/socket_inet.c" --no-sandbox --no-policy
check "no sandbox: the socket exploit is not caught (status $(field "$WORK/nosb.json" status))" \
	[ "$(field "$WORK/nosb.json" status)" = ok ]
check "no sandbox: verdict flagged unsandboxed" grep -q '"unsandboxed"' "$WORK/nosb.json"

# A file the harness cannot classify fails the run instead of being skipped.
mkdir -p "$WORK/rt"
cp "$FIX/good.c" "$WORK/rt/no_header.c"
{ echo '/* redteam: x | expect: ok | task: tests/data/tasks/t1/scale | options: --frobnicate */'; cat "$FIX/good.c"; } >"$WORK/rt/bad_option.c"
"$STITCH" redteam --backend host --quiet --dir "$WORK/rt" >"$WORK/rt2.out" 2>&1
rc=$?
check "unclassifiable file: exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "unclassifiable file: reported as missed" grep -q "MISSED.*no_header.c" "$WORK/rt2.out"
check "a header option the harness does not know: missed" grep -q "MISSED.*bad_option.c" "$WORK/rt2.out"
finish
