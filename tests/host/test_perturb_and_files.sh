#!/usr/bin/env bash
# The metamorphic check, --dump and --params on the host backend. With the prefix test task
# (y = inclusive prefix sum of x, so y[i] may depend on x[0..i] only): a correct solution passes
# the check; one whose outputs carry a trace of a later input, well within the tolerance, fails it
# and is named; --dump writes the inputs and outputs of the timed set as a safetensors file whose
# contents match what the task says. With the scale test task (y = 2x + b, b a param): --params
# takes b from a file (a --dump file too), and a file without b, or with the wrong dtype or shape,
# is bad input.
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
# --params, on the scale task: y = 2x + b with b from the file.
mkst() { # mkst FILE NAME DTYPE SHAPE VALUES...: a safetensors file with one tensor
	python3 - "$@" <<'PY'
import json, struct, sys
path, name, dtype, shape = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
vals = [float(v) for v in sys.argv[5:]]
fmt = {"F32": "f", "F64": "d"}[dtype]
data = struct.pack("<%d%s" % (len(vals), fmt), *vals)
head = json.dumps({name: {"dtype": dtype, "shape": shape, "data_offsets": [0, len(data)]}}).encode()
head += b" " * (-len(head) % 8)
open(path, "wb").write(struct.pack("<Q", len(head)) + head + data)
PY
}
mkst "$WORK/b.safetensors" b F32 '[1]' 0.25
verify "$WORK/params.json" "$TASK" "$FIX/good.c" --params "$WORK/b.safetensors" --dump "$WORK/scale.safetensors"
check "--params: good.c ok with b from the file (exit $RC; $(field "$WORK/params.json" reason))" [ "$RC" -eq 0 ]
python3 - "$WORK/scale.safetensors" >"$WORK/scale.out" 2>&1 <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
data = raw[8 + n:]
get = lambda k: struct.unpack("<%df" % head[k]["shape"][0], data[slice(*head[k]["data_offsets"])])
(b,), x, y = get("b"), get("x"), get("y")
assert b == 0.25, b
assert all(abs(yi - (2 * xi + 0.25)) < 1e-6 for xi, yi in zip(x, y))
print("b = 0.25 reached the solution: y = 2x + 0.25 over", len(y), "elements")
PY
check "--params: $(tail -n 1 "$WORK/scale.out")" grep -q "reached the solution" "$WORK/scale.out"
verify "$WORK/params2.json" "$TASK" "$FIX/good.c" --params "$WORK/scale.safetensors"
check "--params with a --dump file (its x and y ignored): exit 0 (got $RC)" [ "$RC" -eq 0 ]

bad_params() { # bad_params DESCRIPTION MESSAGE FILE
	"$STITCH" verify "${FAST[@]}" --params "$3" "$TASK" "$FIX/good.c" >/dev/null 2>"$WORK/bp.err"
	local rc=$?
	check "--params $1: exit 2 (got $rc)" [ "$rc" -eq 2 ]
	check "--params $1: says '$2' ($(tail -n 1 "$WORK/bp.err"))" grep -q -- "$2" "$WORK/bp.err"
}
mkst "$WORK/c.safetensors" c F32 '[1]' 1
bad_params "without b" "no tensor 'b'" "$WORK/c.safetensors"
mkst "$WORK/b64.safetensors" b F64 '[1]' 1
bad_params "with b as f64" "b is f64 in the file; the task needs f32" "$WORK/b64.safetensors"
mkst "$WORK/b2.safetensors" b F32 '[2]' 1 2
bad_params "with b of shape [2]" "b has shape \[2\] in the file; set small needs \[1\]" "$WORK/b2.safetensors"
bad_params "that does not exist" "no/such" "$WORK/no/such.safetensors"
# A byte copy of a task's host expert (a .c) is flagged as a copy, as one of a .cu is.
cp "$STITCH_SRC/tasks/t1/softmax/expert.c" "$WORK/excopy.c"
"$STITCH" verify --json "${FAST[@]}" --no-timing t1/softmax "$WORK/excopy.c" >"$WORK/excopy.json" 2>/dev/null
verdicts_keep "$WORK/excopy.json"
check "a copy of the host expert: flagged near_copy_of_expert" grep -q '"near_copy_of_expert"' "$WORK/excopy.json"
finish
