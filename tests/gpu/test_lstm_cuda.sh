#!/usr/bin/env bash
# t2/lstm's expert on H = 512 shapes its size sets leave out, where the cluster path chooses its
# rows a cluster by how many clusters fit the GPU at once: B = 1, 8 and 40 take 8 rows a cluster
# (1 to 5 clusters), B = 100 takes 16 where 13 clusters of 8 rows do not fit (7 clusters of 16
# blocks fit an H100 or H200), T from 3 to 20. A copy of the task with those hidden sets, the
# expert verified as any solution is (every set, 3 seeds each); off sm_90 the same sets run the
# other paths.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

mkdir -p "$WORK/tasks/t2"
cp -r "$STITCH_SRC/tasks/t2/lstm" "$WORK/tasks/t2/lstm"
python3 - "$WORK/tasks/t2/lstm/task.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["sizes"]["hidden"] += [{"T": 20, "B": 40, "I": 64, "H": 512}, {"T": 5, "B": 8, "I": 16, "H": 512},
                         {"T": 7, "B": 100, "I": 32, "H": 512}, {"T": 3, "B": 1, "I": 8, "H": 512}]
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
verify "$WORK/lstm.json" "$WORK/tasks/t2/lstm" "$STITCH_SRC/tasks/t2/lstm/expert.cu"
check "the expert on the extra sets: status ok (exit $RC: $(field "$WORK/lstm.json" reason))" \
	[ "$(field "$WORK/lstm.json" status)" = ok ]
python3 - "$WORK/lstm.json" <<'PY' >"$WORK/sets.txt" 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
extra = [c for c in d.get("correctness", []) if c["sizes"].get("H") == 512 and c["sizes"].get("B") in (1, 8, 40, 100)]
print(f"extra {len(extra)} {sum(c['ok'] for c in extra)}")
PY
cat "$WORK/sets.txt"
check "all 4 extra sets ran, 3 seeds each, every one right" grep -qx "extra 12 12" "$WORK/sets.txt"
finish
