#!/usr/bin/env bash
# Real GPT-2 weights for t3/gpt2_forward: scripts/gpt2_hf_weights.py turns a Hugging Face
# checkpoint (Conv1D weights [in, out], one tensor per layer) into the task's params (bf16,
# [out, in], stacked by layer), and `stitch verify --params` runs the task's host reference on
# them. The checkpoint here is a synthetic one of GPT-2 small's exact shapes and names (the real
# one cannot be downloaded in CI); the checks compare every converted tensor with its source and
# the params the solution saw (--dump) with the converted file.
. "$(dirname "$0")/../lib.sh"

PY=
for p in python3 /usr/bin/python3; do
	if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
	echo "SKIP: no python3 with numpy here (scripts/bootstrap --tests installs python3-numpy)"
	exit 77
fi
# The checkpoint (0.5 GB of fp32), its conversion and the dump take about 1.2 GB together.
free_kb=$(df -Pk "$WORK" | awk 'NR == 2 { print $4 }')
if [ "${free_kb:-0}" -lt 1500000 ]; then
	echo "SKIP: about 1.5 GB free is needed in $WORK for GPT-2-sized files; it has $((${free_kb:-0} / 1024)) MB"
	exit 77
fi

# A GPT-2 small checkpoint in Hugging Face's layout, random values of GPT-2-like scales.
"$PY" - "$WORK/hf.safetensors" <<'PY'
import json, struct, sys
import numpy as np
rng = np.random.default_rng(7)
L, C, V, ctx = 12, 768, 50257, 1024
t = {"wte.weight": (V, C), "wpe.weight": (ctx, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
for l in range(L):
    p = f"h.{l}."
    t.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,), p + "ln_2.weight": (C,),
              p + "ln_2.bias": (C,), p + "attn.c_attn.weight": (C, 3 * C),
              p + "attn.c_attn.bias": (3 * C,), p + "attn.c_proj.weight": (C, C),
              p + "attn.c_proj.bias": (C,), p + "mlp.c_fc.weight": (C, 4 * C),
              p + "mlp.c_fc.bias": (4 * C,), p + "mlp.c_proj.weight": (4 * C, C),
              p + "mlp.c_proj.bias": (C,)})
head, blobs, off = {}, [], 0
for name, shape in t.items():
    x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
        x += 1
    b = x.tobytes()
    head["transformer." + name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for b in blobs:
        f.write(b)
PY
check "a synthetic GPT-2 checkpoint in HF layout was written" [ -s "$WORK/hf.safetensors" ]

"$PY" "$STITCH_SRC/scripts/gpt2_hf_weights.py" "$WORK/hf.safetensors" "$WORK/params.safetensors" \
	>"$WORK/conv.out" 2>&1
rc=$?
check "gpt2_hf_weights: exit 0 ($(tail -n 1 "$WORK/conv.out"))" [ "$rc" -eq 0 ]

# Every converted tensor against its source: transposed and stacked where the task says so,
# rounded to bf16 (round to nearest even: within half a bf16 ulp).
"$PY" - "$WORK/hf.safetensors" "$WORK/params.safetensors" >"$WORK/layout.out" 2>&1 <<'PY'
import json, struct, sys
import numpy as np
def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n]); head.pop("__metadata__", None)
    out = {}
    for k, t in head.items():
        b = raw[8 + n + t["data_offsets"][0]: 8 + n + t["data_offsets"][1]]
        if t["dtype"] == "BF16":
            x = (np.frombuffer(b, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            x = np.frombuffer(b, "<f4")
        out[k.replace("transformer.", "")] = x.reshape(t["shape"])
    return out
hf, p = load(sys.argv[1]), load(sys.argv[2])
pairs = [("wte", "wte.weight", False, None), ("wpe", "wpe.weight", False, None),
         ("lnfw", "ln_f.weight", False, None), ("lnfb", "ln_f.bias", False, None)]
for l in (0, 5, 11):
    for ours, theirs, tr in [("qkvw", "attn.c_attn.weight", True), ("qkvb", "attn.c_attn.bias", False),
                             ("attprojw", "attn.c_proj.weight", True), ("attprojb", "attn.c_proj.bias", False),
                             ("fcw", "mlp.c_fc.weight", True), ("fcb", "mlp.c_fc.bias", False),
                             ("fcprojw", "mlp.c_proj.weight", True), ("fcprojb", "mlp.c_proj.bias", False),
                             ("ln1w", "ln_1.weight", False), ("ln1b", "ln_1.bias", False),
                             ("ln2w", "ln_2.weight", False), ("ln2b", "ln_2.bias", False)]:
        pairs.append((ours, f"h.{l}.{theirs}", tr, l))
assert sorted(p) == sorted(["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                            "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]), sorted(p)
for ours, theirs, tr, l in pairs:
    got = p[ours] if l is None else p[ours][l]
    want = hf[theirs].T if tr else hf[theirs]
    assert got.shape == want.shape, (ours, got.shape, want.shape)
    err = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    assert float(err.max()) <= 2.0 ** -8, (ours, l, float(err.max()))
print("all 16 params match their HF source (transposed, stacked, bf16)")
PY
check "converted layout: $(tail -n 1 "$WORK/layout.out")" grep -q "all 16 params match" "$WORK/layout.out"

# The task's host reference on those weights; what it was handed is what the file holds.
verify "$WORK/v.json" t3/gpt2_forward "$STITCH_SRC/tasks/t3/gpt2_forward/reference.c" --no-timing \
	--params "$WORK/params.safetensors" --dump "$WORK/dump.safetensors"
check "verify --params on the converted weights: exit 0 (got $RC; $(field "$WORK/v.json" reason)$(tail -n 1 "$WORK/v.json.err"))" [ "$RC" -eq 0 ]
check "the verdict names the params file" grep -q '"params_file"' "$WORK/v.json"
cmp_out=$("$PY" - "$WORK/params.safetensors" "$WORK/dump.safetensors" 2>&1 <<'PY'
import json, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n]); head.pop("__metadata__", None)
    return {k: raw[8 + n + t["data_offsets"][0]: 8 + n + t["data_offsets"][1]] for k, t in head.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
bad = [k for k in a if a[k] != b.get(k)]
print("params handed to the solution are the file's, byte for byte" if not bad else f"differ: {bad}")
PY
)
check "$cmp_out" [ "$cmp_out" = "params handed to the solution are the file's, byte for byte" ]

"$PY" "$STITCH_SRC/scripts/gpt2_hf_weights.py" "$WORK/v.json" "$WORK/x.safetensors" >/dev/null 2>"$WORK/bad.err"
rc=$?
check "gpt2_hf_weights on a file that is not safetensors: exit 2 (got $rc: $(tail -n 1 "$WORK/bad.err"))" [ "$rc" -eq 2 ]
finish
