#!/usr/bin/env python3
"""Turn a KernelBench-format PyTorch program into a stitch task folder.

`stitch import kernelbench FILE.py` runs this helper; it is the one place where stitch needs
PyTorch (with kb_reference.py, the live reference a verify starts). It loads FILE.py (a
`Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`), builds the model under a fixed seed in
the mode it is constructed in (KernelBench does not call .eval(): BatchNorm uses batch
statistics), and writes into OUT:

  task.json                  sizes, tensors, tolerances, cost, policy, baselines, and "data":
                             the digest of the params, the seed count, where the reference is
  model.py                   the program as given (the reference; the agents read it too)

and with --store seeds (for a verify on a machine without torch) the tensors too:

  data/params.safetensors    every state_dict entry by name (params and buffers)
  data/seed<k>.safetensors   inputs x0.. and expected outputs y0.. of correctness seed k
  data/check.safetensors     one more seed, kept for checking a timed call after timing

On a GPU it also times PyTorch eager and torch.compile with a cold L2 (medians) and records
them as the task's baselines. Exit status: 0 done, 2 bad input (the program), 3 environment.
"""
import argparse
import ctypes
import hashlib
import importlib.util
import json
import math
import os
import re
import statistics
import sys
import time

import kb_tol

INIT_SEED = 42          # the seed Model(*get_init_inputs()) is built under
SEED_BASE = 1000        # the import's seed k is drawn under SEED_BASE + k
CHECK_SEED = 9001       # the timed-call check's inputs (never a correctness seed)


class BadInput(Exception):
    pass


def log(msg):
    print("import: " + msg, file=sys.stderr, flush=True)


def load_program(path):
    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location("kb_program", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # the program itself is broken: say where
        raise BadInput(f"{path}: loading the program failed: {type(e).__name__}: {e}")
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(mod, n)]
    if missing:
        raise BadInput(f"{path}: not a KernelBench program: no {', '.join(missing)} "
                       "(it needs class Model(nn.Module), get_inputs() and get_init_inputs())")
    return mod


DTYPES = None


def dtype_table(torch):
    return {
        torch.float32: ("f32", "F32"), torch.float16: ("f16", "F16"),
        torch.bfloat16: ("bf16", "BF16"), torch.float64: ("f64", "F64"),
        torch.int32: ("i32", "I32"), torch.int64: ("i64", "I64"),
        torch.int8: ("i8", "I8"), torch.uint8: ("u8", "U8"), torch.bool: ("u8", "U8"),
    }


def stitch_dtype(torch, t, what):
    if t.layout != torch.strided:
        raise BadInput(f"{what}: {t.layout} tensors are not supported (dense tensors only)")
    if t.dtype not in DTYPES:
        raise BadInput(f"{what}: dtype {t.dtype} is not supported (float32, float16, bfloat16, "
                       "float64, int32, int64, int8, uint8, bool)")
    return DTYPES[t.dtype][0]


def shape_of(t):
    return list(t.shape) if t.dim() else [1]   # stitch has no 0-dim tensors


def tensor_bytes(torch, t):
    """A tensor's bytes as stored: contiguous, on the host, bool as uint8; returned as the host
    tensor and a view of its memory (no copy: KernelBench's tensors reach gigabytes), valid while
    that tensor lives."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    n = t.numel() * t.element_size()
    return t, (memoryview((ctypes.c_char * n).from_address(t.data_ptr())) if n else b"")


def params_sha256(torch, state):
    """One digest over every state_dict entry (name, dtype, shape, bytes, in order): the import
    records it, and the live reference (kb_reference.py) rebuilds the model and refuses to judge
    anything if its params come out otherwise (another torch, an edited program)."""
    h = hashlib.sha256()
    for name, t in state:
        t, data = tensor_bytes(torch, t)
        h.update(json.dumps([name, DTYPES[t.dtype][1], shape_of(t)]).encode())
        h.update(data)
    return h.hexdigest()


def write_safetensors(torch, path, tensors, meta, durable=True):
    """tensors: list of (name, tensor). Wider elements first keeps each one aligned. `durable`
    syncs the file to disk (a task's files); the live reference's seeds live for one verify."""
    items = sorted(tensors, key=lambda nt: -nt[1].element_size())
    header, off = {}, 0
    for name, t in items:
        dtype = torch.uint8 if t.dtype == torch.bool else t.dtype
        n = t.numel() * t.element_size()
        header[name] = {"dtype": DTYPES[dtype][1], "shape": shape_of(t),
                        "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {k: str(v) for k, v in meta.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for _, t in items:
            write_tensor(torch, f, t)
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)


STAGE_BYTES = 32 << 20
MAX_PARAMS = 1024  # as src/verify/verify_int.h: KernelBench's largest model has 626
_stage = []


def write_tensor(torch, f, t):
    """One tensor's bytes into f. A device tensor goes through two pinned halves of one host
    buffer, one copied into while the other is written: `.cpu()` into pageable memory and then a
    write took twice as long, and a seed of KernelBench's sizes is gigabytes on the verify's
    critical path (the live reference)."""
    if not t.is_cuda:
        t, data = tensor_bytes(torch, t)
        f.write(data)
        return
    src = t.detach().contiguous()
    if src.dtype == torch.bool:
        src = src.to(torch.uint8)
    flat = src.reshape(-1).view(torch.uint8)
    if not _stage:
        _stage.append(torch.empty(STAGE_BYTES, dtype=torch.uint8, pin_memory=True))
    half = STAGE_BYTES // 2
    bufs = (_stage[0][:half], _stage[0][half:])
    done = (torch.cuda.Event(), torch.cuda.Event())
    n = flat.numel()
    starts = list(range(0, n, half))

    def fetch(i):
        a = starts[i]
        m = min(half, n - a)
        bufs[i % 2][:m].copy_(flat[a:a + m], non_blocking=True)
        done[i % 2].record()
        return m

    sizes = [fetch(0)] if starts else []
    for i in range(len(starts)):
        if i + 1 < len(starts):
            sizes.append(fetch(i + 1))
        done[i % 2].synchronize()
        b = bufs[i % 2]
        f.write(memoryview((ctypes.c_char * sizes[i]).from_address(b.data_ptr())))


def as_outputs(torch, y):
    ys = list(y) if isinstance(y, (tuple, list)) else [y]
    for i, t in enumerate(ys):
        if not isinstance(t, torch.Tensor):
            raise BadInput(f"forward() result {i} is a {type(t).__name__}, not a tensor")
    return [t.detach() for t in ys]


def free_bytes(torch, device):
    if device == "cuda":
        torch.cuda.empty_cache()
        return torch.cuda.mem_get_info()[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def memory_note(torch, device):
    if device == "cuda":
        free, total = free_bytes(torch, device), torch.cuda.mem_get_info()[1]
        return f"the GPU has {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"
    return f"the host has {free_bytes(torch, device) / 2**30:.1f} GiB available"


def refuse_if_oom(torch, e, what, device):
    """A program that cannot fit is refused (exit 2) with the numbers, not a traceback: raises
    BadInput when `e` is an allocation failure, else returns."""
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    msg = str(e)
    if not ((oom is not None and isinstance(e, oom)) or "out of memory" in msg or
            "can't allocate memory" in msg):
        return
    m = re.search(r"[Tt]ried to allocate ([0-9.]+ ?[KMGT]i?B|\d+ bytes)", msg)
    need = f" ({m.group(1)} asked for at once)" if m else ""
    raise BadInput(f"{what} does not fit in memory{need}: {memory_note(torch, device)}") from None


class Inputs(list):
    """get_inputs() as tensors, the form a task stores and a solution receives. A Python number
    among them (KernelBench's `s = 3.14` of a matrix-scalar product) becomes a one-element
    tensor, and its position is in `scalars`: the model gets the number back (args()), since it
    may use it as Python (a loop count, a dim), and timed calls keep it constant."""

    def __init__(self, items, scalars=()):
        super().__init__(items)
        self.scalars = frozenset(scalars)

    def args(self):
        return [x.item() if i in self.scalars else x for i, x in enumerate(self)]


def model_args(xs):
    return xs.args() if isinstance(xs, Inputs) else list(xs)


def scalar_tensor(torch, x, i, device):
    """A Python int or float input as a [1] tensor of the dtype torch gives a number."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise BadInput(f"get_inputs()[{i}] is a {type(x).__name__} ({x!r}); stitch tasks take "
                       "tensors and Python numbers only (put constants into get_init_inputs())")
    dtype = torch.int64 if isinstance(x, int) else torch.get_default_dtype()
    return torch.tensor([x], dtype=dtype, device=device)


def seeded_inputs(torch, mod, seed, device):
    """get_inputs() under `seed`. On a GPU the tensors are drawn there (torch's default device):
    KernelBench's own sizes reach gigabytes, which the CPU's generator takes seconds to draw."""
    torch.manual_seed(seed)
    xs = None
    if device == "cuda" and hasattr(torch.device("cuda"), "__enter__"):
        try:
            with torch.device("cuda"):
                xs = mod.get_inputs()
        except Exception as e:  # a program that draws on the CPU on purpose: as written
            refuse_if_oom(torch, e, "get_inputs()", device)
            torch.manual_seed(seed)
    if xs is None:
        try:
            xs = mod.get_inputs()
        except Exception as e:
            refuse_if_oom(torch, e, "get_inputs()", device)
            raise BadInput(f"get_inputs() failed: {type(e).__name__}: {e}")
    if not isinstance(xs, (list, tuple)):
        raise BadInput(f"get_inputs() returned a {type(xs).__name__}, expected a list")
    out, scalars = [], []
    for i, x in enumerate(xs):
        if not isinstance(x, torch.Tensor):
            out.append(scalar_tensor(torch, x, i, device))
            scalars.append(i)
            continue
        stitch_dtype(torch, x, f"get_inputs()[{i}]")
        try:
            out.append(x.to(device))
        except Exception as e:
            refuse_if_oom(torch, e, f"get_inputs()[{i}] on the {device}", device)
            raise
    return Inputs(out, scalars)


def build_model(torch, mod, device):
    """Model(*get_init_inputs()) under INIT_SEED, moved to `device`, and its state_dict as it
    was built (name, tensor); the import and the live reference build it the same way."""
    torch.manual_seed(INIT_SEED)
    try:
        init = mod.get_init_inputs()
        model = mod.Model(*init)
    except Exception as e:
        refuse_if_oom(torch, e, "Model(*get_init_inputs())", "cpu")
        raise BadInput(f"building Model(*get_init_inputs()) failed: {type(e).__name__}: {e}")
    if not isinstance(model, torch.nn.Module):
        raise BadInput("Model is not a torch.nn.Module")
    state = [(k, v.detach().clone()) for k, v in model.state_dict().items()]
    if len(state) > MAX_PARAMS:
        raise BadInput(f"{len(state)} params (state_dict entries): more than the {MAX_PARAMS} a "
                       "verify takes (MAX_PARAMS in src/verify/verify_int.h)")
    for k, v in state:
        stitch_dtype(torch, v, f"state_dict entry '{k}'")
    try:
        model = model.to(device)
    except Exception as e:
        refuse_if_oom(torch, e, f"the model's params on the {device}", device)
        raise
    return model, state


def seed_tensors(xs, ys):
    """A seed's tensors by the names a task gives them: inputs x0.., outputs y0.."""
    return [(f"x{i}", x) for i, x in enumerate(xs)] + [(f"y{i}", y) for i, y in enumerate(ys)]


def run_model(torch, model, xs, what):
    try:
        with torch.no_grad():
            return as_outputs(torch, model(*model_args(xs)))
    except BadInput:
        raise
    except Exception as e:
        refuse_if_oom(torch, e, f"the model's run on {what}",
                      "cuda" if any(x.is_cuda for x in xs) else "cpu")
        raise BadInput(f"the model failed to run on {what}: {type(e).__name__}: {e}")


def float64_outputs(torch, model, xs, ys, device):
    """The model's outputs in float64 on the same inputs (a copy of the model), to see how far
    the float32 reference is from the exact result (kb_tol.attainable); None where a model or
    an input will not run in float64, or would not fit (said, not fatal)."""
    import copy
    tensors = list(model.state_dict().values()) + list(xs) + list(ys)
    need = 4 * sum(t.numel() * t.element_size() for t in tensors)  # float64 copies, activations
    if need > free_bytes(torch, device):
        log(f"the float64 check of the reference is left out: it would take about "
            f"{need / 2**30:.1f} GiB; {memory_note(torch, device)}")
        return None
    try:
        m64 = copy.deepcopy(model).double()
        args = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                for x in model_args(xs)]
        with torch.no_grad():
            return as_outputs(torch, m64(*args))
    except Exception as e:  # out of memory, an op without float64: the check is left out
        log(f"the float64 check of the reference is left out: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:160] if str(e) else ''}")
        return None
    finally:
        m64 = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def check_deterministic(torch, model, xs, ys):
    """Refuses a model with random ops (dropout in train mode, torch.rand in forward): two runs on
    the same inputs must agree. Bit for bit is too strict on a GPU, where some library kernels
    (cuDNN's 3-D transposed convolutions) sum in a varying order, which a normalisation after
    them can amplify: a difference under a tenth of the output's tolerance is summation order,
    not randomness (dropout moves outputs by their own size). Returns the largest difference
    seen (0.0 when the runs are identical)."""
    for name, m in model.named_modules():
        p = getattr(m, "p", None)
        if m.training and "Dropout" in type(m).__name__ and p:
            raise BadInput(f"the model is not deterministic: {type(m).__name__} '{name}' with "
                           f"p={p} is in train mode (KernelBench runs the model as constructed; "
                           "set p=0 or call self.eval() in __init__)")
    again = run_model(torch, model, xs, "a second run of seed 1")
    worst = 0.0
    for i, (a, b) in enumerate(zip(ys, again)):
        if torch.equal(a, b):
            continue
        diff = (a.double() - b.double()).abs()
        tol = tolerance(DTYPES[a.dtype][0]) if a.dtype in DTYPES else {"atol": 0, "rtol": 0}
        allowed = 0.1 * (tol["atol"] + tol["rtol"] * a.double().abs())
        if not a.is_floating_point() or bool((diff > allowed).any()):
            raise BadInput(f"the model is not deterministic: output {i} differs between two runs "
                           f"on the same inputs (max abs difference {diff.max().item():.3g}, "
                           "beyond summation order): random ops in forward()?")
        worst = max(worst, diff.max().item())
    return worst


def tolerance(dtype_name):
    if dtype_name in ("f16", "bf16"):
        return {"atol": 1e-2, "rtol": 1e-2}
    if dtype_name in ("f32", "f64"):
        return {"atol": 1e-4, "rtol": 1e-4}
    return {"atol": 0, "rtol": 0}


def timing_init(torch, x):
    """How the verifier draws fresh inputs for timed calls: the seed-1 input's range."""
    if not x.is_floating_point():
        lo, hi = int(x.min().item()), int(x.max().item())
        return {"dist": "randint", "lo": lo, "hi": hi + 1}
    xd = x.double()
    lo, hi = xd.min().item(), xd.max().item()
    if lo >= 0:
        return {"dist": "uniform", "lo": lo, "hi": hi if hi > lo else lo + 1}
    std = xd.std().item() if x.numel() > 1 else 1.0
    return {"dist": "normal", "mean": xd.mean().item(), "std": std if std > 0 else 1.0}


def count_flops(torch, model, xs):
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            model(*model_args(xs))
        return int(fc.get_total_flops())
    except Exception:
        return None


def time_cold(torch, fn, budget_s=1.0):
    """Median ms of fn() with L2 flushed before each call (CUDA events)."""
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    est = max(time.perf_counter() - t0, 1e-5)
    n = int(min(max(budget_s / (est + 2e-4), 20), 500))
    times = []
    for _ in range(n):
        flush.zero_()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), n


def baselines(torch, model, xs, compile_mode):
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "method": "CUDA events, L2 flushed (256 MiB written) before each call, median"}
    with torch.no_grad():
        args = model_args(xs)
        ms, n = time_cold(torch, lambda: model(*args))
        out["eager_ms"], out["eager_samples"] = ms, n
        log(f"PyTorch eager: {ms:.4f} ms (median of {n})")
        if compile_mode == "none":
            return out
        try:
            t0 = time.perf_counter()
            cm = torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
            cm(*args)
            torch.cuda.synchronize()
            out["compile_s"] = time.perf_counter() - t0
            ms, n = time_cold(torch, lambda: cm(*args))
            out["compile_ms"], out["compile_samples"] = ms, n
            out["compile_mode"] = compile_mode
            log(f"torch.compile ({compile_mode}): {ms:.4f} ms (median of {n}; compiled in "
                f"{out['compile_s']:.1f} s)")
        except Exception as e:
            out["compile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            log(f"torch.compile failed: {out['compile_error']}")
    return out


def describe(name, level, mode, batchnorm, params, inputs, outputs, source):
    def line(t):
        number = t.get("init", {}).get("dist") == "const"
        return (f"  {t['name']} [{', '.join(str(d) for d in t['shape'])}] {t['dtype']}" +
                (f" (the Python number forward() takes, {t['init']['value']:g}, as a one-element "
                 "tensor)" if number else ""))

    def rule(o):
        if "nmse" in o["tol"]:
            return (f"{o['name']}: sum |got - want|^2 <= {o['tol']['nmse']:g} * sum |want|^2 "
                    "(relative L2)")
        return f"{o['name']}: |got - want| <= {o['tol']['atol']:g} + {o['tol']['rtol']:g}*|want|"
    tol = "; ".join(rule(o) for o in outputs)
    parts = [
        f"KernelBench level {level} program '{name}', imported by stitch. Implement the forward "
        "pass of the PyTorch Model below as a standalone CUDA program (solution ABI v1; no "
        "PyTorch, no Python). The model runs exactly as constructed: it is in "
        f"{mode} mode" + (" (BatchNorm normalises with the batch's own statistics)"
                          if mode == "train" and batchnorm else "") + ".",
        "st_init receives the model's state_dict, in this order and by these names "
        "(device memory, read-only):" if params else "The model has no parameters.",
        *[line(p) for p in params],
        "st_run receives the inputs of forward(), in order:", *[line(x) for x in inputs],
        "and writes the outputs, in order (a tuple result gives y0, y1, ...):",
        *[line(y) for y in outputs],
        f"Correctness: {tol} (an absolute bound holds for every element). Output buffers are "
        "poisoned before every call; "
        "input pointers and contents change between calls, so compute everything on every call.",
        "The program:", "```python", source.rstrip(), "```",
    ]
    return "\n".join(parts)


def main():
    global DTYPES
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("program")
    ap.add_argument("--out", required=True)
    # stitch import works out the name and the level (src/cli/cmd_import.c) and passes both
    ap.add_argument("--name", required=True)
    ap.add_argument("--level", type=int, required=True)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode for the baseline: default, max-autotune, "
                    "max-autotune-no-cudagraphs, reduce-overhead; none skips it")
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--store", default="none", choices=["none", "seeds"],
                    help="none: no tensor on disk, the verify rebuilds the params and draws "
                    "its seeds through the program (kb_reference.py); seeds: the params and "
                    "every seed's inputs and outputs in data/ (for a verify without torch)")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("import: error: no PyTorch for this python3 (%s); install torch or point "
              "STITCH_PYTHON at a python that has it" % sys.executable, file=sys.stderr)
        return 3
    DTYPES = dtype_table(torch)
    started = time.perf_counter()
    try:
        if not 1 <= a.seeds <= 20:
            raise BadInput("--seeds must be between 1 and 20")
        level, name = a.level, a.name
        if not 1 <= level <= 4:
            raise BadInput("--level must be 1 to 4")
        device = a.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            print("import: error: --device cuda, but torch sees no GPU", file=sys.stderr)
            return 3
        # fp32 means fp32: no TF32 in the expected outputs or in the baselines
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        with open(a.program, encoding="utf-8") as f:
            source = f.read()
        mod = load_program(a.program)
        model, state = build_model(torch, mod, device)
        mode = "train" if model.training else "eval"
        if a.store == "seeds":
            os.makedirs(os.path.join(a.out, "data"), exist_ok=True)

        seeds = []
        xs1 = ys1 = ys_other = None
        # Without stored seeds the import needs seed 1 (the checks, the audit) and the kept-back
        # seed (the audit's other-seed answer) only: the verify draws its own.
        drawn = range(1, a.seeds + 1) if a.store == "seeds" else [1]
        for k in list(drawn) + [CHECK_SEED]:
            xs = seeded_inputs(torch, mod, SEED_BASE + k, device)
            ys = run_model(torch, model, xs, f"seed {k}")
            if k == 1:
                xs1, ys1 = xs, ys
                run_to_run = check_deterministic(torch, model, xs, ys)
                for i, y in enumerate(ys):
                    stitch_dtype(torch, y, f"forward() output {i}")
                    if y.is_floating_point() and not torch.isfinite(y).all():
                        raise BadInput(f"forward() output {i} has NaN or Inf on seed 1")
            if k == CHECK_SEED:
                ys_other = ys
            if a.store != "seeds":
                continue
            fname = "check.safetensors" if k == CHECK_SEED else f"seed{k}.safetensors"
            write_safetensors(torch, os.path.join(a.out, "data", fname), seed_tensors(xs, ys),
                              {"seed": SEED_BASE + k, "program": name})
            if k != CHECK_SEED:
                seeds.append("data/" + fname)
        peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
        if a.store == "seeds":
            write_safetensors(torch, os.path.join(a.out, "data", "params.safetensors"), state,
                              {"program": name, "init_seed": INIT_SEED})
            data = {"params": "data/params.safetensors", "seeds": seeds,
                    "check": "data/check.safetensors", "reference": "model.py"}
        else:
            data = {"reference": "model.py", "seeds": a.seeds}
        data["params_sha256"] = params_sha256(torch, state)

        def spec(nm, t):
            return {"name": nm, "dtype": stitch_dtype(torch, t, nm), "shape": shape_of(t)}
        params = [spec(k, v) for k, v in state]
        inputs = [dict(spec(f"x{i}", x), init={"dist": "const", "value": x.item()}
                       if i in xs1.scalars else timing_init(torch, x)) for i, x in enumerate(xs1)]
        tols, tol_record = kb_tol.audit(torch, xs1, ys1, ys_other,
                                        [tolerance(stitch_dtype(torch, y, f"y{i}"))
                                         for i, y in enumerate(ys1)],
                                        exact=float64_outputs(torch, model, xs1, ys1, device))
        for nm, c in tol_record["changed"].items():
            log(f"{name}: {nm}: tolerance {c['from']} -> {c['to']}: {c['why']}")
        for nm, c in tol_record["widened"].items():
            log(f"{name}: {nm}: tolerance widened {c['from']} -> {c['to']}: {c['why']}")
        for nm, why in tol_record["degenerate"].items():
            log(f"{name}: {nm}: degenerate: {why}; every verdict of this task is flagged "
                "degenerate_task")
        outputs = [dict(spec(f"y{i}", y), tol=tols[i]) for i, y in enumerate(ys1)]
        nbytes = sum(t.numel() * t.element_size() for _, t in state) + \
            sum(t.numel() * t.element_size() for t in xs1 + ys1)
        flops = count_flops(torch, model, xs1)
        widest = max((t.dtype for t in ys1 if t.is_floating_point()),
                     key=lambda d: torch.finfo(d).bits, default=torch.float32)
        unit = {"f16": "fp16", "bf16": "bf16", "f64": "fp64"}.get(DTYPES[widest][0], "fp32")
        task = {
            "name": name,
            "tier": min(level, 3),
            "description": describe(name, level, mode,
                                    any("BatchNorm" in type(m).__name__ for m in model.modules()),
                                    params, inputs, outputs, source),
            "sizes": {"eval": {}},
            "params": params,
            "inputs": inputs,
            "outputs": outputs,
            "validator": None,
            "cost": {"flops": flops or 0, "bytes": nbytes, "unit": unit},
            "policy": {"mode": "engineering", "libraries": ["cublas", "cublasLt"]},
            "archs": ["sm_80", "sm_90a", "sm_100a"],
            "data": data,
            "source": {"kind": "kernelbench", "file": "model.py", "level": level,
                       "sha256": hashlib.sha256(source.encode()).hexdigest(),
                       "mode": mode, "imported_on": device, "torch": torch.__version__,
                       "flops_counted": flops is not None, "tol_audit": tol_record,
                       "run_to_run_max_diff": run_to_run,
                       "peak_gpu_bytes": peak},
        }
        import_s = time.perf_counter() - started
        task["source"]["import_s"] = round(import_s, 3)
        if device == "cuda" and not a.no_baselines:
            task["baselines"] = baselines(torch, model, xs1, a.compile_mode)
        with open(os.path.join(a.out, "model.py"), "w", encoding="utf-8") as f:
            f.write(source)
        tmp = os.path.join(a.out, "task.json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(task, f, indent=1)
            f.write("\n")
        os.replace(tmp, os.path.join(a.out, "task.json"))
        log(f"{name}: {len(params)} params, {len(inputs)} inputs, {len(outputs)} outputs, "
            f"{a.seeds} seeds + check on {device}; import {import_s:.2f} s (without "
            "torch.compile)")
        return 0
    except BadInput as e:
        print(f"import: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # an allocation anywhere else: refused with the numbers, not a trace
        try:
            refuse_if_oom(torch, e, "the import", "cuda" if torch.cuda.is_available() else "cpu")
        except BadInput as b:
            print(f"import: error: {b}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
