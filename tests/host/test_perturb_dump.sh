#!/usr/bin/env bash
# The metamorphic check and --dump on the host backend, with the prefix test task (y = inclusive
# prefix sum of x, so y[i] may depend on x[0..i] only): a correct solution passes it; one whose
# outputs carry a trace of a later input, well within the tolerance, fails it and is named; and
# --dump writes the params, inputs and outputs of the timed set as a safetensors file whose
# contents match what the task says.
. "$(dirname "$0")/../lib.sh"

PREFIX="$STITCH_SRC/tests/data/tasks/t1/prefix"

verify "$WORK/good.json" "$PREFIX" "$FIX/prefix_good.c" --sets small,eval,hidden --time-set eval \
	--dump "$WORK/dump.safetensors"
check "prefix_good: exit 0 (got $RC; $(field "$WORK/good.json" reason))" [ "$RC" -eq 0 ]
n=$(grep -c '"check": "perturbed"' "$WORK/good.json")
check "prefix_good: the metamorphic check ran on all 3 size sets ($n)" [ "$n" -eq 3 ]
check "prefix_good: and passed every time" [ "$(grep -A1 '"check": "perturbed"' "$WORK/good.json" | grep -c '"ok": true')" -eq 3 ]

verify "$WORK/leak.json" "$PREFIX" "$FIX/prefix_leak.c"
check "prefix_leak: status incorrect ($(field "$WORK/leak.json" reason))" \
	[ "$(field "$WORK/leak.json" status)" = incorrect ]
check "prefix_leak: exit 1 (got $RC)" [ "$RC" -eq 1 ]
check "prefix_leak: the reason names the metamorphic check" grep -q 'metamorphic check.*changed when' "$WORK/leak.json"

# The dump: header, metadata and data, read with nothing but the format's definition.
python3 - "$WORK/dump.safetensors" >"$WORK/dump.out" 2>&1 <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
meta = head.pop("__metadata__")
assert meta["task"] == "t1/prefix" and meta["set"] == "eval" and meta["n"] == "4096", meta
assert meta["solution"].endswith("prefix_good.c"), meta
assert sorted(head) == ["x", "y"], head
data = raw[8 + n:]
def f32(name):
    t = head[name]
    assert t["dtype"] == "F32" and t["shape"] == [4096], t
    a, b = t["data_offsets"]
    return struct.unpack("<4096f", data[a:b])
x, y = f32("x"), f32("y")
acc, worst = 0.0, 0.0
for xi, yi in zip(x, y):
    acc += xi
    worst = max(worst, abs(acc - yi))
assert worst < 1e-3, worst
assert len(set(x)) > 4000, "x is not random"
print("dump ok: x, y of 4096 elements, y = prefix sum of x within", worst)
PY
rc=$?
check "--dump: the file holds x and y of the eval set, y the prefix sum of x ($(tail -n 1 "$WORK/dump.out"))" [ "$rc" -eq 0 ]

# The reference as the candidate: its inputs are the ones the metamorphic run changes.
verify "$WORK/ref.json" "$PREFIX" "$PREFIX/reference.c" --time-set eval --dump "$WORK/ref.safetensors"
check "reference as candidate: exit 0 (got $RC)" [ "$RC" -eq 0 ]
python3 - "$WORK/ref.safetensors" >"$WORK/ref.out" 2>&1 <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
data = raw[8 + n:]
x = struct.unpack("<4096f", data[slice(*head["x"]["data_offsets"])])
y = struct.unpack("<4096f", data[slice(*head["y"]["data_offsets"])])
acc = 0.0
for i, (xi, yi) in enumerate(zip(x, y)):
    acc += xi
    assert abs(acc - yi) < 1e-3, (i, acc, yi)
print("reference dump ok")
PY
check "reference as candidate: the dump pairs y with the x that made it ($(tail -n 1 "$WORK/ref.out"))" [ $? -eq 0 ]

"$STITCH" verify "${FAST[@]}" --dump "$WORK/no/such/dir/d.safetensors" "$PREFIX" "$FIX/prefix_good.c" \
	>/dev/null 2>"$WORK/nodir.err"
rc=$?
check "--dump into a missing folder: exit 2 before any work (got $rc: $(tail -n 1 "$WORK/nodir.err"))" [ "$rc" -eq 2 ]
finish
