#!/usr/bin/env python3
"""Convert GPT-2 weights from Hugging Face's layout into the params of t3/gpt2_forward.

Input: a Hugging Face GPT-2 checkpoint as safetensors (`model.safetensors` of `gpt2`, keys like
`h.0.attn.c_attn.weight`, with or without a `transformer.` prefix). Its linear layers are Conv1D
modules that store weights as [in, out]; the task (like llm.c and nn.Linear) wants [out, in], and
wants the per-layer tensors stacked with the layer first. Output: a safetensors file with the
task's 16 params in bf16 (wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw,
fcb, fcprojw, fcprojb, lnfw, lnfb), for `stitch verify --params OUT t3/gpt2_forward SOLUTION`.

Needs numpy only (no torch). bf16 is made from float32 by round-to-nearest-even.
"""
import argparse
import json
import re
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


class Fail(Exception):
    pass


def read_safetensors(path):
    """name -> float32 array (F32, F16, F64 and BF16 tensors)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise Fail(f"{path}: {e.strerror}") from None
    if len(raw) < 8:
        raise Fail(f"{path}: not a safetensors file (shorter than its header length)")
    n = struct.unpack("<Q", raw[:8])[0]
    try:
        head = json.loads(raw[8:8 + n])
    except ValueError:
        raise Fail(f"{path}: not a safetensors file (its header is not JSON)") from None
    head.pop("__metadata__", None)
    data, out = raw[8 + n:], {}
    for name, t in head.items():
        a, b = t["data_offsets"]
        if t["dtype"] == "BF16":
            u = np.frombuffer(data[a:b], dtype="<u2").astype(np.uint32) << 16
            x = u.view(np.float32)
        elif t["dtype"] in DTYPES:
            x = np.frombuffer(data[a:b], dtype=np.dtype(DTYPES[t["dtype"]]).newbyteorder("<"))
        else:
            continue  # e.g. the bool/uint8 causal-mask buffers of old checkpoints
        out[name] = x.astype(np.float32).reshape(t["shape"])
    return out


def to_bf16(x):
    """float32 array -> uint16 bf16 bits, round to nearest even (NaN kept quiet)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    r[nan] = 0x7FC0
    return r


def write_safetensors(path, tensors, metadata):
    head, blobs, off = {"__metadata__": metadata}, [], 0
    for name, bits in tensors:
        b = bits.tobytes()
        head[name] = {"dtype": "BF16", "shape": list(bits.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def convert(hf):
    """The task's params (name, float32 array) from the HF tensors."""
    w = {re.sub(r"^transformer\.", "", k): v for k, v in hf.items()}

    def get(name):
        if name not in w:
            raise Fail(f"the checkpoint has no tensor '{name}' (is it GPT-2?)")
        return w[name]
    layers = sorted({int(m.group(1)) for k in w for m in [re.match(r"h\.(\d+)\.", k)] if m})
    if not layers or layers != list(range(len(layers))):
        raise Fail("the checkpoint has no layers h.0 ... h.N")
    wte, wpe = get("wte.weight"), get("wpe.weight")
    V, C = wte.shape

    def stack(fmt, transpose=False):
        xs = [get(fmt.format(l)) for l in layers]
        return np.stack([x.T if transpose else x for x in xs])
    params = [
        ("wte", wte), ("wpe", wpe),
        ("ln1w", stack("h.{}.ln_1.weight")), ("ln1b", stack("h.{}.ln_1.bias")),
        ("qkvw", stack("h.{}.attn.c_attn.weight", True)), ("qkvb", stack("h.{}.attn.c_attn.bias")),
        ("attprojw", stack("h.{}.attn.c_proj.weight", True)),
        ("attprojb", stack("h.{}.attn.c_proj.bias")),
        ("ln2w", stack("h.{}.ln_2.weight")), ("ln2b", stack("h.{}.ln_2.bias")),
        ("fcw", stack("h.{}.mlp.c_fc.weight", True)), ("fcb", stack("h.{}.mlp.c_fc.bias")),
        ("fcprojw", stack("h.{}.mlp.c_proj.weight", True)),
        ("fcprojb", stack("h.{}.mlp.c_proj.bias")),
        ("lnfw", get("ln_f.weight")), ("lnfb", get("ln_f.bias")),
    ]
    L = len(layers)
    want = {"wte": (V, C), "qkvw": (L, 3 * C, C), "attprojw": (L, C, C), "fcw": (L, 4 * C, C),
            "fcprojw": (L, C, 4 * C), "qkvb": (L, 3 * C), "fcb": (L, 4 * C), "lnfw": (C,)}
    for name, x in params:
        if name in want and x.shape != want[name]:
            raise Fail(f"{name}: shape {list(x.shape)} after conversion, expected "
                       f"{list(want[name])}: not a GPT-2 layout")
    return params, {"L": L, "C": C, "V": V, "context": wpe.shape[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="exit: 0 written, 2 bad input")
    ap.add_argument("checkpoint", help="Hugging Face GPT-2 model.safetensors")
    ap.add_argument("out", help="safetensors file to write (the task's params, bf16)")
    args = ap.parse_args()
    params, dims = convert(read_safetensors(args.checkpoint))
    meta = {"source": args.checkpoint, "layout": "t3/gpt2_forward params (llm.c order, [out, in])"}
    meta.update({k: str(v) for k, v in dims.items()})
    write_safetensors(args.out, [(n, to_bf16(x)) for n, x in params], meta)
    print(f"wrote {args.out}: L={dims['L']} C={dims['C']} V={dims['V']} context "
          f"{dims['context']}; use it with `stitch verify --params {args.out} t3/gpt2_forward ...`")
    if dims["L"] != 12 or dims["C"] != 768 or dims["V"] != 50257 or dims["context"] != 1024:
        print("note: t3/gpt2_forward's size sets are GPT-2 small (L=12 C=768 V=50257, context "
              "1024); stitch will refuse params of other shapes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Fail as e:
        print(f"gpt2_hf_weights: {e}", file=sys.stderr)
        sys.exit(2)
