#!/usr/bin/env bash
# Every task of the bundled suite loads, and where it ships a host (C) reference, that reference
# passes `stitch verify --backend host` against itself on the small set: the task.json, its
# generators, its task.c hooks and semantic validator all work end to end without a GPU. Tasks
# with a host expert are covered by host/test_pipeline's bench run as well.
. "$(dirname "$0")/../lib.sh"

"$STITCH" tasks --json >"$WORK/tasks.json" 2>"$WORK/tasks.err"
check "stitch tasks loads the suite ($(tail -n 1 "$WORK/tasks.err"))" [ $? -eq 0 ]
n=$(grep -c '"id"' "$WORK/tasks.json")
check "the suite has at least 32 tasks ($n)" [ "$n" -ge 32 ]
for tier in 1 2 3 4; do
	c=$(grep -c "\"id\": \"t$tier/" "$WORK/tasks.json")
	check "tier $tier has tasks ($c)" [ "$c" -ge 1 ]
done
for dir in "$STITCH_SRC"/tasks/t*/*/; do
	id=${dir%/}
	id=${id#"$STITCH_SRC"/tasks/}
	for f in task.json reference.cu NOTES.md; do
		check "$id has $f" [ -f "$dir/$f" ]
	done
	check "$id has an expert" bash -c "ls '$dir'/expert*.cu >/dev/null 2>&1"
	[ -f "$dir/reference.c" ] || continue
	"$STITCH" verify --json "${FAST[@]}" --no-timing "$id" "$dir/reference.c" \
		>"$WORK/v.json" 2>"$WORK/v.err"
	rc=$?
	[ "$rc" -le 1 ] && verdicts_keep "$WORK/v.json"
	check "$id: host reference verifies ok (exit $rc: $(field "$WORK/v.json" reason)$(tail -n 1 "$WORK/v.err"))" \
		[ "$rc" -eq 0 ]
done
finish
