#!/usr/bin/env python3
"""Compare stitch's GPT-2 small forward (task t3/gpt2_forward) with PyTorch on the same GPU.

Input: a safetensors file written by `stitch verify ... --dump FILE`: every param of the task by
its task name (wte, wpe, ln1w, ..., lnfb; bf16, llm.c layout, Linear weights [out, in] stacked
per layer), the `tokens` (int32 [B,T]) of seed 1 on the timed set and the `logits` (bf16
[B,T,V]) the verified solution gave for them, and __metadata__ with the sizes (B, T, L, C, NH,
V) and task, set, solution.

1. Builds the same model as a plain nn.Module (nn.Embedding, nn.LayerNorm, nn.Linear,
   scaled_dot_product_attention(is_causal=True), tanh GELU, output tied to wte), loads the
   weights and checks its logits against the file's: NMSE, max abs diff, top-token agreement
   (the task's own rule). Fails if NMSE > 2e-3 or agreement < 0.99.
2. Times eager and torch.compile forwards at the file's B, T in bf16 the way stitch times: a
   write of >= 2x the L2 before every call (cold L2), CUDA events around the call only, warm-up
   first (compile not timed), then at least --min-samples samples and --min-time seconds; reports
   median, q1, q3 and (q3 - q1) / median. Checks compiled logits against eager (NMSE).
   --compile-runs N compiles and times N times from scratch (dynamo reset, inductor's caches
   off, so each run autotunes anew): the table shows the fastest, every run is printed and kept
   in the JSON, since max-autotune's choices and so its time can differ between compiles.
3. With --stitch BIN --expert PATH, runs `BIN verify --json --sets eval --seeds 1 TASK PATH` in
   the same run (after the torch timings; with --dump before them, writing the --tensors file
   too) and prints torch and stitch side by side as a Markdown table, with the expert's SOL
   fraction and its CUPTI timeline (launches per forward, GPU busy %) from the verdict.

--cpu: correctness only, on the CPU, computing in fp32 from the bf16 weights (no timings).
"""
import argparse
import json
import math
import mmap
import os
import struct
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PARAMS = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
          "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
SIZES = ["B", "T", "L", "C", "NH", "V"]
NMSE_MAX, AGREE_MIN, TOP_TOL = 2e-3, 0.99, 0.02


class Fail(Exception):
    """Bad input or environment: message printed, exit 2."""


def expected_shapes(s):
    L, C, V, B, T = s["L"], s["C"], s["V"], s["B"], s["T"]
    return {"wte": [V, C], "wpe": [1024, C], "ln1w": [L, C], "ln1b": [L, C],
            "qkvw": [L, 3 * C, C], "qkvb": [L, 3 * C], "attprojw": [L, C, C],
            "attprojb": [L, C], "ln2w": [L, C], "ln2b": [L, C], "fcw": [L, 4 * C, C],
            "fcb": [L, 4 * C], "fcprojw": [L, C, 4 * C], "fcprojb": [L, C], "lnfw": [C],
            "lnfb": [C], "tokens": [B, T], "logits": [B, T, V]}


def read_safetensors(path):
    """(tensors, metadata) with a reader of our own: u64 header length, JSON header, raw data."""
    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32,
              "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8}
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        if len(mm) < 8:
            raise Fail(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (n,) = struct.unpack("<Q", mm[:8])
        if 8 + n > len(mm):
            raise Fail(f"{path}: not a safetensors file (header length {n} beyond the end)")
        try:
            header = json.loads(bytes(mm[8:8 + n]))
        except ValueError as e:
            raise Fail(f"{path}: bad safetensors header: {e}") from None
        meta, out = header.pop("__metadata__", None) or {}, {}
        for name, h in header.items():
            if h["dtype"] not in dtypes:
                raise Fail(f"{path}: tensor {name}: unsupported dtype {h['dtype']}")
            b, e = h["data_offsets"]
            dt = dtypes[h["dtype"]]
            raw = bytearray(mm[8 + n + b:8 + n + e])  # a copy: aligned and writable
            t = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
            out[name] = t.reshape(h["shape"])
    return out, meta


def load_dump(path):
    if not os.path.isfile(path):
        raise Fail(f"{path}: no such file (write one with `stitch verify ... --dump {path}`)")
    try:
        from safetensors import safe_open
    except ImportError:
        tensors, meta = read_safetensors(path)
    else:
        try:
            with safe_open(path, framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        except Exception as e:  # noqa: BLE001 - the package's own error types vary by version
            raise Fail(f"{path}: not a readable safetensors file: {e}") from None
    try:
        sizes = {k: int(meta[k]) for k in SIZES}
    except KeyError as e:
        raise Fail(f"{path}: __metadata__ lacks the size {e}") from None
    except ValueError as e:
        raise Fail(f"{path}: __metadata__ has a size that is not an integer: {e}") from None
    if sizes["C"] % sizes["NH"]:
        raise Fail(f"{path}: C={sizes['C']} is not a multiple of NH={sizes['NH']}")
    shapes = expected_shapes(sizes)
    missing = [k for k in shapes if k not in tensors]
    if missing:
        raise Fail(f"{path}: missing tensors: {', '.join(missing)}")
    for k, want in shapes.items():
        t, dt = tensors[k], torch.int32 if k == "tokens" else torch.bfloat16
        if list(t.shape) != want:
            raise Fail(f"{path}: {k} has shape {list(t.shape)}, the sizes in __metadata__ "
                       f"({', '.join(f'{s}={sizes[s]}' for s in SIZES)}) give {want}")
        if t.dtype != dt:
            raise Fail(f"{path}: {k} is {t.dtype}, expected {dt}")
    tok = tensors["tokens"]
    if tok.numel() and (tok.min() < 0 or tok.max() >= sizes["V"]):
        raise Fail(f"{path}: tokens outside [0, V={sizes['V']})")
    if sizes["T"] > 1024:
        raise Fail(f"{path}: T={sizes['T']} exceeds the context of 1024")
    return tensors, sizes, meta


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.nh = NH
        self.ln1, self.ln2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
        self.qkv, self.attproj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(B, T, self.nh, C // self.nh).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(HD)
        x = x + self.attproj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L, C, NH, V):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(1024, C)
        self.h = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C, eps=1e-5)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        return F.linear(self.lnf(x), self.wte.weight)  # tied output projection, no bias

    def load_task_params(self, p):
        """Copy the task's stacked llm.c-layout params into the modules."""
        sd = {"wte.weight": p["wte"], "wpe.weight": p["wpe"],
              "lnf.weight": p["lnfw"], "lnf.bias": p["lnfb"]}
        for l in range(len(self.h)):
            for m in ("ln1", "qkv", "attproj", "ln2", "fc", "fcproj"):  # task names m+"w", m+"b"
                sd[f"h.{l}.{m}.weight"], sd[f"h.{l}.{m}.bias"] = p[m + "w"][l], p[m + "b"][l]
        self.load_state_dict(sd, strict=True)


def compare(got, want, chunk_rows=256):
    """NMSE (fp64), max abs diff and top-token agreement of got vs want ([N, V] views)."""
    got, want = got.reshape(-1, got.shape[-1]), want.reshape(-1, want.shape[-1])
    err = ref = 0.0
    maxdiff, agree = 0.0, 0
    for i in range(0, got.shape[0], chunk_rows):
        g, w = got[i:i + chunk_rows].double(), want[i:i + chunk_rows].double()
        d = g - w
        err += float((d * d).sum())
        ref += float((w * w).sum())
        m = float(d.abs().max())
        maxdiff = math.nan if math.isnan(m) else max(maxdiff, m)  # a NaN sticks
        top = w.max(dim=1).values
        mine = w.gather(1, g.argmax(dim=1, keepdim=True)).squeeze(1)  # want's score of got's top
        agree += int((mine >= top - TOP_TOL * top.abs().clamp(min=1.0)).sum())
    if math.isnan(err) or math.isnan(ref):
        nmse = math.nan
    else:
        nmse = err / ref if ref > 0 else (0.0 if err == 0 else math.inf)
    return {"nmse": nmse, "max_abs_diff": maxdiff, "agreement": agree / max(1, got.shape[0])}


def time_cold(fn, flush, warmup, min_samples, min_time_s, max_samples):
    """Median/q1/q3 of CUDA-event times of fn() with the L2 flushed before each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ms, total = [], 0.0
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while len(ms) < max_samples and (len(ms) < min_samples or total < min_time_s * 1e3):
        flush.zero_()
        s.record()
        fn()
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
        total += ms[-1]
    ms.sort()
    q = lambda f: ms[min(len(ms) - 1, int(f * (len(ms) - 1) + 0.5))]  # noqa: E731
    med, q1, q3 = q(0.5), q(0.25), q(0.75)
    return {"median_ms": med, "q1_ms": q1, "q3_ms": q3, "spread": (q3 - q1) / med,
            "min_ms": ms[0], "samples": len(ms)}


def time_compiled(model, tokens, eager, want, args, tm, run):
    """One torch.compile of model from scratch (the run-th): its compile time, logits checks and
    cold-L2 timing."""
    if run > 0:
        import torch._inductor.config as inductor_config
        torch._dynamo.reset()
        # a cached autotune would replay the first run's choices instead of making its own
        if hasattr(inductor_config, "force_disable_caches"):
            inductor_config.force_disable_caches = True
    cmodel = torch.compile(model, mode=args.compile_mode)
    t0 = time.perf_counter()
    out = cmodel(tokens)
    torch.cuda.synchronize()
    r = {"compile_s": time.perf_counter() - t0, "vs_eager": compare(out, eager),
         "vs_stitch": compare(out, want)}
    r["good"] = r["vs_eager"]["nmse"] <= NMSE_MAX
    print(f"torch.compile ({args.compile_mode}, run {run + 1}) in {r['compile_s']:.1f} s; vs eager "
          f"NMSE {r['vs_eager']['nmse']:.3e} {'ok' if r['good'] else 'FAIL'}; vs stitch NMSE "
          f"{r['vs_stitch']['nmse']:.3e}")
    del out
    r["timing"] = tm(lambda: cmodel(tokens))
    return r


def run_stitch(args, dump=None):
    """Verify and time the expert with stitch; its verdict's figures (expert = the candidate)."""
    cmd = [args.stitch, "verify", "--json", "--sets", "eval", "--seeds", "1"]
    cmd += ["--dump", dump] if dump else []
    cmd += [args.task, args.expert]
    print("running: " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        v = json.loads(p.stdout)
    except ValueError:
        raise Fail(f"stitch verify exited {p.returncode} without a JSON verdict:\n"
                   f"{p.stderr[-3000:]}") from None
    t = v.get("timing") or {}

    def stats(role):
        r = t.get(role) or {}
        if not r.get("median_ms"):
            return None
        out = {k: r.get(k) for k in ("median_ms", "q1_ms", "q3_ms", "samples")}
        out["spread"] = (r["q3_ms"] - r["q1_ms"]) / r["median_ms"] if "q3_ms" in r else None
        return out
    if v.get("status") != "ok":
        print(f"stitch verify: status {v.get('status')}: {v.get('reason', '')}\n"
              f"{p.stderr[-2000:]}", file=sys.stderr)
    # The expert's SOL fraction and its CUPTI timeline of one forward (the verdict's profile).
    summ = ((v.get("profile") or {}).get("summary")) or {}
    prof = {k: summ.get(k) for k in ("launches", "busy_pct", "gaps_us", "n_gaps", "span_us",
                                     "kernel_us", "memcpys", "syncs")} if summ else None
    return {"command": cmd, "exit": p.returncode, "status": v.get("status"),
            "reason": v.get("reason"), "sizes": t.get("sizes"), "expert": stats("candidate"),
            "reference": stats("reference"), "sol_fraction": (v.get("sol") or {}).get("fraction"),
            "sol": v.get("sol"), "profile": prof}


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="exit: 0 all checks pass; 1 a check failed (torch vs stitch logits, compiled vs "
               "eager, or the expert's verdict is not ok); 2 bad input or no CUDA device")
    ap.add_argument("--tensors", required=True, metavar="FILE",
                    help="safetensors dump from `stitch verify ... --dump FILE`")
    ap.add_argument("--cpu", action="store_true",
                    help="correctness only, on the CPU in fp32 compute (no timings, no stitch run)")
    ap.add_argument("--stitch", metavar="BIN", help="stitch binary to time the expert with")
    ap.add_argument("--expert", metavar="PATH", help="the solution stitch verifies and times")
    ap.add_argument("--dump", action="store_true",
                    help="run stitch first with --dump FILE (FILE: --tensors), so that one "
                         "verify writes the tensors (the expert's logits) and times")
    ap.add_argument("--task", default="t3/gpt2_forward",
                    help="task id for stitch verify (default: %(default)s)")
    ap.add_argument("--json", metavar="OUT", help="write every figure to this JSON file")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs", metavar="MODE",
                    help="torch.compile mode (default: %(default)s)")
    ap.add_argument("--compile-runs", type=int, default=1, metavar="N",
                    help="fresh torch.compile runs to time, the fastest in the table "
                         "(default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=5, metavar="N",
                    help="untimed calls before sampling, after compiling (default: %(default)s)")
    ap.add_argument("--min-samples", type=int, default=50, metavar="N",
                    help="timed samples at least (default: %(default)s)")
    ap.add_argument("--min-time", type=float, default=2.0, metavar="S",
                    help="seconds of timed GPU time at least (default: %(default)s)")
    ap.add_argument("--max-samples", type=int, default=5000, metavar="N",
                    help="timed samples at most (default: %(default)s)")
    ap.add_argument("--flush-mib", type=int, default=256, metavar="MIB",
                    help="L2 flush written before every timed call; raised to 2x the device's "
                         "L2 when that is larger (default: %(default)s)")
    args = ap.parse_args()
    if bool(args.stitch) != bool(args.expert):
        ap.error("--stitch and --expert go together")
    if args.dump and not args.stitch:
        ap.error("--dump needs --stitch and --expert")
    if args.compile_runs < 1:
        ap.error("--compile-runs must be at least 1")
    if args.cpu and args.stitch:
        ap.error("--stitch times on the GPU: leave out --cpu")
    if args.stitch and not os.access(args.stitch, os.X_OK):
        raise Fail(f"--stitch {args.stitch}: not an executable file")
    if args.expert and not os.path.isfile(args.expert):
        raise Fail(f"--expert {args.expert}: no such file")
    if not args.cpu and not torch.cuda.is_available():
        raise Fail("no CUDA device visible to torch (torch.cuda.is_available() is False); "
                   "use --cpu for a correctness-only check")

    stitch = None
    if args.dump:
        before = os.stat(args.tensors).st_mtime_ns if os.path.exists(args.tensors) else None
        stitch = run_stitch(args, dump=args.tensors)
        if not os.path.exists(args.tensors) or os.stat(args.tensors).st_mtime_ns == before:
            raise Fail(f"stitch verify (status {stitch['status']}) did not write {args.tensors}")
    tensors, sz, meta = load_dump(args.tensors)
    dev = torch.device("cpu" if args.cpu else "cuda")
    dtype = torch.float32 if args.cpu else torch.bfloat16
    # The task asks for fp32 accumulation: no reduced-precision split-K reductions in cuBLAS.
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    res = {"file": args.tensors, "sizes": sz, "task": meta.get("task"), "set": meta.get("set"),
           "solution": meta.get("solution"), "torch": torch.__version__,
           "device": "cpu" if args.cpu else torch.cuda.get_device_name(), "compute": str(dtype),
           "compile_mode": None if args.no_compile else args.compile_mode}
    print(f"dump: task {res['task']} set {res['set']} solution {res['solution']}; "
          + " ".join(f"{k}={sz[k]}" for k in SIZES) + f"; torch {torch.__version__} on "
          f"{res['device']} ({'fp32' if args.cpu else 'bf16'} compute)")

    with torch.device("meta"):
        model = GPT2(sz["L"], sz["C"], sz["NH"], sz["V"])
    model = model.to_empty(device=dev).to(dtype)
    model.load_task_params({k: tensors[k].to(dev, dtype) for k in PARAMS})
    model.eval()
    tokens = tensors["tokens"].to(dev, torch.int64)
    want = tensors["logits"].to(dev)
    ok = True
    with torch.no_grad():
        eager = model(tokens)
        res["eager_vs_stitch"] = c = compare(eager, want)
        good = c["nmse"] <= NMSE_MAX and c["agreement"] >= AGREE_MIN
        ok &= good
        print(f"torch eager vs stitch logits: NMSE {c['nmse']:.3e}  max|diff| "
              f"{c['max_abs_diff']:.4g}  top-token agreement {100 * c['agreement']:.2f}%  "
              f"{'ok' if good else 'FAIL'} (need NMSE <= {NMSE_MAX}, agreement >= {AGREE_MIN})")
        if not args.cpu:
            props = torch.cuda.get_device_properties(dev)
            l2 = getattr(props, "L2_cache_size", 0) or 0
            nbytes = max(args.flush_mib << 20, 2 * l2)
            flush = torch.empty(nbytes // 4, dtype=torch.int32, device=dev)
            tm = lambda f: time_cold(f, flush, args.warmup, args.min_samples,  # noqa: E731
                                     args.min_time, args.max_samples)
            res["eager"] = tm(lambda: model(tokens))
            if not args.no_compile:
                runs = [time_compiled(model, tokens, eager, want, args, tm, r)
                        for r in range(args.compile_runs)]
                ok &= all(r["good"] for r in runs)
                best = min(runs, key=lambda r: r["timing"]["median_ms"])
                res["compile_s"] = best["compile_s"]
                res["compiled_vs_eager"] = best["vs_eager"]
                res["compiled_vs_stitch"] = best["vs_stitch"]
                res["compiled"] = best["timing"]
                res["compiled_runs"] = [{"compile_s": r["compile_s"], "vs_eager": r["vs_eager"],
                                         **r["timing"]} for r in runs]
                if len(runs) > 1:
                    print("torch.compile runs, median ms: " + ", ".join(
                        f"{r['timing']['median_ms']:.3f}" for r in runs) + " (the fastest below)")
            for k in ("eager", "compiled"):
                if k in res:
                    r = res[k]
                    print(f"{k}: median {r['median_ms']:.3f} ms (q1 {r['q1_ms']:.3f}, q3 "
                          f"{r['q3_ms']:.3f}, spread {100 * r['spread']:.1f}%, {r['samples']} "
                          f"samples, cold L2 {nbytes >> 20} MiB flush)")
            del flush, eager, want, model
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    if args.stitch:
        res["stitch"] = st = stitch or run_stitch(args)
        ok &= st["status"] == "ok"
        if st["sizes"] and any(st["sizes"].get(k) != sz[k] for k in ("B", "T")):
            print(f"note: stitch timed B={st['sizes'].get('B')} T={st['sizes'].get('T')}, "
                  f"torch B={sz['B']} T={sz['T']} (the dump's sizes)")
    if not args.cpu:
        print_table(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    print("result: " + ("ok" if ok else "FAIL"))
    return 0 if ok else 1


def print_table(res):
    """The Markdown table of every median, and the expert's speedups into res."""
    st = res.get("stitch") or {}
    mode = res.get("compile_mode") or "not run"
    rows = [("torch eager", res.get("eager")), (f"torch.compile ({mode})", res.get("compiled")),
            ("stitch reference", st.get("reference")),
            (f"stitch expert ({st.get('status', 'not run')})", st.get("expert"))]
    ex = (st.get("expert") or {}).get("median_ms")
    f = lambda r, k: f"{r[k]:.3f}" if r and r.get(k) is not None else "-"  # noqa: E731
    print(f"\nGPT-2 forward, B={res['sizes']['B']} T={res['sizes']['T']}, {res['device']}, "
          "cold L2\n\n| | median ms | q1 ms | q3 ms | spread | expert speedup |\n"
          "|---|---:|---:|---:|---:|---:|")
    res["speedup"] = {}
    for (name, r), key in zip(rows, ("eager", "compile", "reference", "expert")):
        sp = r["median_ms"] / ex if r and ex else None
        res["speedup"][f"expert_vs_{key}"] = sp
        spread = f"{100 * r['spread']:.1f}%" if r and r.get("spread") is not None else "-"
        print(f"| {name} | {f(r, 'median_ms')} | {f(r, 'q1_ms')} | {f(r, 'q3_ms')} | {spread} | "
              f"{f'{sp:.2f}x' if sp else '-'} |")
    del res["speedup"]["expert_vs_expert"]
    if st.get("sol_fraction"):
        print(f"\nexpert SOL fraction {st['sol_fraction']:.3f} (floor "
              f"{st['sol']['floor_ms']:.3f} ms for {st['sol']['flops'] / 1e12:.3f} TFLOP)")
    pr = st.get("profile")
    if pr:
        print(f"expert timeline (CUPTI, one forward): {pr['launches']} kernel launches, GPU busy "
              f"{pr['busy_pct']:.1f}% of {pr['span_us']:.0f} us, {pr['n_gaps']} gaps "
              f"{pr['gaps_us']:.0f} us, {pr['memcpys']} memcpys, {pr['syncs']} syncs")
    print()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Fail as e:
        print(f"gpt2_compare: {e}", file=sys.stderr)
        sys.exit(2)
