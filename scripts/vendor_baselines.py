#!/usr/bin/env python3
"""Time the vendor (PyTorch) equivalent of every suite task on this GPU: the "best known" bar.

`stitch bench --vendor` runs this helper with the user's python (STITCH_PYTHON, default python3),
as `stitch import kernelbench` runs kb_import.py; it also runs alone:

    python3 scripts/vendor_baselines.py --tasks-dir tasks --out bench/vendor

For every task in the table below it builds the inputs of the task's eval size set from
task.json (shapes, dtypes and distributions; random data, which is all a timing needs), then times
each PyTorch backend of the op the way stitch times a solution: 256 MiB written before every call
(cold L2, as triton.testing.do_bench flushes), CUDA events around the call only, the median of
many calls. The fastest backend sets the task's vendor figure; every backend's figure is kept.
Tasks with no faithful PyTorch equivalent are listed in LEFT_OUT with the reason: an eager loop
of elementwise ops standing in for a solver would be a straw man, not a bar.

It prints a table (task, shape, op, backend, median ms) and writes OUT/<device>.json, the device
name with every run of characters other than letters and digits made one '_' (docs/bench.md,
"The best bar"). A task whose every backend failed is listed (table, file's "failed") and the
run goes on. Without torch or without a CUDA device it says so and exits 3; a bad argument
exits 2. The task table and the shape arithmetic import no torch, so CI tests them
(tests/tools/test_vendor_baselines.py).
"""
import argparse
import ast
import contextlib
import fnmatch
import json
import math
import os
import re
import statistics
import sys
import time

FORMAT = "stitch-vendor-baselines/1"
FLUSH_BYTES = 256 << 20
DEV = "cuda"  # "cpu" for --smoke

# Tasks with no faithful PyTorch equivalent, and why.
LEFT_OUT = {
    "t3/bfs": "PyTorch has no graph search; a frontier loop of eager ops is not a vendor op",
    "t3/cg": "PyTorch has no sparse iterative solver (torch.linalg solves dense systems only); "
             "a Python CG loop over torch.sparse would time the loop, not a library",
    "t3/heat2d": "no stencil or Jacobi op in PyTorch; 100 sweeps of eager slicing would be a "
                 "straw man (5 kernels and 4 passes over the grid per sweep)",
    "t3/kmeans": "PyTorch has no k-means",
    "t3/mc_option": "no Monte-Carlo pricing op in PyTorch (the closed form is forbidden by the "
                    "task)",
    "t3/nbody": "no N-body op in PyTorch; a dense [N, N] eager evaluation is not what a "
                "library offers",
}

# Task -> (the op, one line, and the builder below that makes its candidates).
COVERED = {
    "t1/batched_gemm": ("torch.bmm (bf16, fp32 accumulation)", "gemm"),
    "t1/conv2d": ("F.conv2d 3x3 pad 1, NCHW bf16", "conv2d"),
    "t1/fft": ("torch.fft.fft (cuFFT c2c)", "fft"),
    "t1/gemm_bf16": ("torch.mm (bf16, fp32 accumulation)", "gemm"),
    "t1/gemm_fp16": ("torch.mm (fp16, fp32 accumulation)", "gemm"),
    "t1/gemm_tf32": ("torch.mm (fp32 storage, TF32 tensor cores)", "gemm"),
    "t1/histogram": ("torch.bincount (out-of-range values sent to a spare bin)", "histogram"),
    "t1/layernorm": ("F.layer_norm (fp32)", "layernorm"),
    "t1/radix_sort": ("torch.sort(stable=True) (int64 indices)", "sort"),
    "t1/reduction": ("torch.sum (fp32)", "reduction"),
    "t1/rmsnorm": ("RMSNorm (bf16 in and out)", "rmsnorm"),
    "t1/scan": ("torch.cumsum (int32)", "scan"),
    "t1/softmax": ("torch.softmax (fp32)", "softmax"),
    "t1/spmv_csr": ("torch.sparse_csr_tensor @ x (cuSPARSE SpMV)", "spmv"),
    "t1/topk": ("torch.topk (sorted, int64 indices)", "topk"),
    "t1/transpose": ("x.t().contiguous()", "transpose"),
    "t2/adamw": ("AdamW step (torch.optim, in place)", "adamw"),
    "t2/attention_causal": ("F.scaled_dot_product_attention(is_causal=True)", "sdpa"),
    "t2/conv_bn_relu": ("F.conv2d + batch_norm (inference) + ReLU", "conv_bn_relu"),
    "t2/embedding_posenc": ("F.embedding + positional add", "embedding"),
    "t2/layernorm_residual": ("residual add + F.layer_norm (bf16)", "layernorm_residual"),
    "t2/lstm": ("nn.LSTM (one layer, TF32 allowed)", "lstm"),
    "t2/mlp_gelu": ("addmm + GELU(tanh) + addmm", "mlp_gelu"),
    "t2/moe_router": ("top-2 routing, tokens grouped per expert, expert GEMMs", "moe"),
    "t2/rope_qkv": ("addmm + rotate-half RoPE in eager ops", "rope_qkv"),
    "t2/softmax_xent": ("F.cross_entropy(reduction='none') + mean", "softmax_xent"),
    "t3/gpt2_forward": ("GPT-2 small as nn.Module (SDPA attention), eager", "gpt2"),
    "t4/flash_attention": ("F.scaled_dot_product_attention(is_causal=True)", "sdpa"),
    "t4/gemm_fp8": ("torch._scaled_mm (e4m3, unit scales, no fast accumulation)", "gemm_fp8"),
}


class Usage(Exception):
    """A bad argument or task folder: exit 2."""


class Env(Exception):
    """No torch, no CUDA device, or a file that cannot be written: exit 3."""


def log(msg):
    print("vendor: " + msg, file=sys.stderr, flush=True)


# ---- task.json without torch ------------------------------------------------------------------

_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div,
            ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd, ast.Constant, ast.Name, ast.Load)


def eval_expr(expr, sizes):
    """A shape or bound of task.json: an integer, or an expression over the sizes with + - * /
    ( ) (division is integer division, as in stitch's own evaluator, src/task/expr.c)."""
    if isinstance(expr, bool):
        raise Usage(f"not a number: {expr!r}")
    if isinstance(expr, (int, float)):
        return expr
    try:
        tree = ast.parse(str(expr), mode="eval")
    except SyntaxError:
        raise Usage(f"bad expression {expr!r}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise Usage(f"bad expression {expr!r}: {type(node).__name__} not allowed")

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            if not isinstance(n.value, (int, float)) or isinstance(n.value, bool):
                raise Usage(f"bad expression {expr!r}")
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in sizes:
                raise Usage(f"expression {expr!r}: no size {n.id}")
            return sizes[n.id]
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            return -v if isinstance(n.op, ast.USub) else v
        a, b = ev(n.left), ev(n.right)
        if isinstance(n.op, ast.Add):
            return a + b
        if isinstance(n.op, ast.Sub):
            return a - b
        if isinstance(n.op, ast.Mult):
            return a * b
        if b == 0:
            raise Usage(f"expression {expr!r}: division by zero")
        if isinstance(n.op, ast.Mod):
            return a % b
        if isinstance(a, int) and isinstance(b, int):
            return int(a / b)  # C's truncation toward zero
        return a / b
    return ev(tree)


def load_task(task_dir, size_set="eval"):
    path = os.path.join(task_dir, "task.json")
    try:
        with open(path) as f:
            t = json.load(f)
    except (OSError, ValueError) as e:
        raise Usage(f"{path}: {e}") from None
    tier, name = t.get("tier"), t.get("name")
    if not isinstance(tier, int) or not isinstance(name, str):
        raise Usage(f"{path}: no tier or name")
    t["id"] = f"t{tier}/{name}"
    t["dir"] = task_dir
    ev = (t.get("sizes") or {}).get(size_set)
    if not isinstance(ev, dict):
        raise Usage(f"{path}: no {size_set} size set")
    t["eval"] = {k: eval_expr(v, ev) if not isinstance(v, (int, float)) else v
                 for k, v in ev.items()}
    return t


def tensor_specs(t):
    """name -> {role, dtype, shape (numbers), init} for every param, input and output."""
    out = {}
    for role in ("params", "inputs", "outputs"):
        for x in t.get(role) or []:
            out[x["name"]] = {"role": role, "dtype": x["dtype"],
                              "shape": [int(eval_expr(d, t["eval"])) for d in x["shape"]],
                              "init": x.get("init") or {}}
    return out


def shape_text(t):
    """The eval sizes as one short line, e.g. 'B4 H16 T2048'."""
    return " ".join(f"{k}{v}" for k, v in t["eval"].items())


def find_tasks(root, globs):
    """Task folders under root (<root>/t<N>/<name>/task.json), filtered by id globs."""
    if not os.path.isdir(root):
        raise Usage(f"--tasks-dir {root}: no such folder")
    found = []
    for tier in sorted(os.listdir(root)):
        if not re.fullmatch(r"t\d+", tier):
            continue
        for name in sorted(os.listdir(os.path.join(root, tier))):
            d = os.path.join(root, tier, name)
            if os.path.isfile(os.path.join(d, "task.json")):
                tid = f"{tier}/{name}"
                if not globs or any(fnmatch.fnmatchcase(tid, g) for g in globs):
                    found.append(d)
    return found


def device_slug(name):
    """The file name of a device's figures: runs of other characters than letters and digits
    made one '_', none at either end (src/task/vendor.c does the same)."""
    s = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
    return s or "unknown"


def plan(task_ids):
    """(covered, left_out, unknown) of task ids: covered ones with their (op, builder)."""
    cov, left, unknown = [], [], []
    for tid in task_ids:
        if tid in COVERED:
            cov.append((tid,) + COVERED[tid])
        elif tid in LEFT_OUT:
            left.append((tid, LEFT_OUT[tid]))
        else:
            unknown.append(tid)
    return cov, left, unknown


def pick_fastest(backends):
    """The backend with the lowest median of those that ran: (name, entry) or (None, None)."""
    ok = [(v["ms"], k) for k, v in backends.items() if isinstance(v.get("ms"), (int, float))
          and v["ms"] > 0 and math.isfinite(v["ms"])]
    if not ok:
        return None, None
    ms, name = min(ok)
    return name, backends[name]


def assemble(device, versions, results, left_out, failed, measured):
    """The JSON document OUT/<device>.json holds."""
    doc = {"format": FORMAT, "device": device, "measured": measured,
           "method": "CUDA events around each call, 256 MiB written before every call (cold "
                     "L2), median; the fastest backend is the task's figure",
           "tasks": results, "left_out": left_out, "failed": failed}
    doc.update(versions)
    return doc


def print_table(rows, left, failed, f):
    f.write(f"{'task':<22} {'shape':<34} {'backend':<18} {'median ms':>10}  op\n")
    for tid, r in rows:
        f.write(f"{tid:<22} {r['shape'][:34]:<34} {r['backend']:<18} {r['ms']:>10.4f}  {r['op']}\n")
        for b, e in r["backends"].items():
            if b == r["backend"]:
                continue
            what = f"{e['ms']:>10.4f}" if "ms" in e else "    failed"
            f.write(f"{'':<22} {'':<34} {b:<18} {what}  {e.get('error', '')[:80]}\n")
    for tid, why in failed.items():
        f.write(f"{tid:<22} every backend failed: {why[:200]}\n")
    for tid, why in left.items():
        f.write(f"{tid:<22} left out: {why}\n")


# ---- timing (torch from here on) ------------------------------------------------------------

def time_cold(torch, fn, flush, budget_s, max_calls):
    """Median ms of fn() over cold-L2 calls, as stitch and triton's do_bench time: the flush is
    queued before the start event, events on the current stream around the call only."""
    fn()  # warm-up: plans, autotuning, workspaces, lazy module loading
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        flush.zero_()
        fn()
    torch.cuda.synchronize()
    est = (time.perf_counter() - t0) / 3
    n = int(min(max(budget_s / max(est, 1e-5), 10), max_calls))
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(n)]
    for a, b in ev:
        flush.zero_()
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in ev)
    return {"ms": statistics.median(ms), "samples": n, "q1_ms": ms[n // 4],
            "q3_ms": ms[(3 * n) // 4]}


@contextlib.contextmanager
def numerics(torch, tf32=False, blas=None, cudnn_benchmark=False, cudnn=True):
    """The precision and library switches a candidate runs under, restored afterwards. Reduced-
    precision reductions stay off: the tasks forbid split-K sums through bf16 or fp16."""
    m, c = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (m.allow_tf32, c.allow_tf32, c.benchmark, c.enabled,
             m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction)
    pref = None
    try:
        m.allow_tf32 = c.allow_tf32 = tf32
        c.benchmark, c.enabled = cudnn_benchmark, cudnn
        m.allow_bf16_reduced_precision_reduction = False
        m.allow_fp16_reduced_precision_reduction = False
        if blas:
            pref = torch.backends.cuda.preferred_blas_library()
            torch.backends.cuda.preferred_blas_library(blas)
        yield
    finally:
        (m.allow_tf32, c.allow_tf32, c.benchmark, c.enabled,
         m.allow_bf16_reduced_precision_reduction,
         m.allow_fp16_reduced_precision_reduction) = saved
        if pref is not None:
            torch.backends.cuda.preferred_blas_library(pref)


TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64",
                "i32": "int32", "i64": "int64", "i8": "int8", "u8": "uint8",
                "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}


def make_tensor(torch, spec, sizes, gen):
    """A tensor drawn from the spec's distribution (normal, uniform, randint, const)."""
    dt = getattr(torch, TORCH_DTYPES[spec["dtype"]])
    shape, init = spec["shape"], spec["init"]
    dist = init.get("dist", "normal")
    dev = DEV
    if dist == "randint":
        lo, hi = int(eval_expr(init["lo"], sizes)), int(eval_expr(init["hi"], sizes))
        x = torch.randint(lo, hi, shape, device=dev, dtype=torch.int64, generator=gen)
        return x.to(dt)
    if dist == "const":
        return torch.full(shape, float(init["value"]), device=dev).to(dt)
    if dist == "uniform":
        lo, hi = float(eval_expr(init["lo"], sizes)), float(eval_expr(init["hi"], sizes))
        x = torch.rand(shape, device=dev, generator=gen) * (hi - lo) + lo
    else:  # normal, and the hooks' own distributions where a builder does not say otherwise
        x = torch.randn(shape, device=dev, generator=gen) * float(init.get("std", 1)) + \
            float(init.get("mean", 0))
    return x.to(dt)


class Ctx:
    """What a builder gets: torch, the task, its eval sizes and its tensors by name."""

    def __init__(self, torch, task, seed):
        self.torch, self.task, self.s = torch, task, task["eval"]
        self.specs = tensor_specs(task)
        self.gen = torch.Generator(device=DEV)
        self.gen.manual_seed(seed)
        self._t = {}

    def __getitem__(self, name):
        if name not in self._t:
            self._t[name] = make_tensor(self.torch, self.specs[name], self.s, self.gen)
        return self._t[name]


def cand(backend, fn, ctx=None, **switches):
    """One way to run the op: its name, the call, numerics() switches and, where the backend is
    chosen by a context manager (SDPA's), a function making it: entered around the timing,
    not inside each timed call."""
    return {"backend": backend, "fn": fn, "numerics": switches, "ctx": ctx}


# ---- the builders: each returns the candidates of one task --------------------------------------

def b_gemm(c):
    torch, tid = c.torch, c.task["id"]
    if tid == "t1/batched_gemm":
        A, B = c["A"], c["B"]
        out = torch.empty(c.specs["C"]["shape"], device=DEV, dtype=A.dtype)
        fn = lambda: torch.bmm(A, B, out=out)  # noqa: E731
    else:
        A, B = c["A"], c["B"]
        out = torch.empty(c.specs["C"]["shape"], device=DEV, dtype=A.dtype)
        fn = lambda: torch.mm(A, B, out=out)  # noqa: E731
    tf32 = tid == "t1/gemm_tf32"
    return [cand("cublas", fn, tf32=tf32, blas="cublas"),
            cand("cublaslt", fn, tf32=tf32, blas="cublaslt")]


def b_gemm_fp8(c):
    torch = c.torch
    A, B = c["A"], c["B"]  # A [M, K], B [N, K], both K-major: B.t() is the column-major mat2
    one = torch.ones((), device=DEV, dtype=torch.float32)
    fn = lambda: torch._scaled_mm(A, B.t(), scale_a=one, scale_b=one,  # noqa: E731
                                  out_dtype=torch.bfloat16, use_fast_accum=False)
    return [cand("cublaslt", fn)]


def b_conv2d(c):
    F = c.torch.nn.functional
    x, w = c["x"], c["w"]
    fn = lambda: F.conv2d(x, w, padding=1)  # noqa: E731
    return [cand("cudnn", fn), cand("cudnn-benchmark", fn, cudnn_benchmark=True)]


def b_conv_bn_relu(c):
    torch = c.torch
    F = torch.nn.functional
    x, w = c["x"], c["weight"]
    g, beta, rm, rv = c["gamma"], c["beta"], c["running_mean"], c["running_var"]
    eps = 1e-5
    eager = lambda: F.relu(F.batch_norm(F.conv2d(x, w, padding=1), rm, rv, g, beta,  # noqa
                                        False, 0.0, eps))
    # BN folded into the filter and a bias (the task allows it in st_init)
    scale = g / torch.sqrt(rv + eps)
    wf = (w.float() * scale[:, None, None, None]).to(torch.bfloat16)
    bf = (beta - rm * scale).to(torch.bfloat16)
    folded = lambda: torch.relu_(F.conv2d(x, wf, bf, padding=1))  # noqa: E731
    return [cand("cudnn eager", eager), cand("cudnn-benchmark eager", eager, cudnn_benchmark=True),
            cand("cudnn folded", folded), cand("cudnn-benchmark folded", folded,
                                               cudnn_benchmark=True)]


def b_fft(c):
    torch = c.torch
    xc = torch.view_as_complex(c["x"])  # [batch, n, 2] float32 -> [batch, n] complex64
    return [cand("cufft", lambda: torch.fft.fft(xc, dim=-1))]


def b_histogram(c):
    torch = c.torch
    n, bins = int(c.s["n"]), int(c.s["bins"])
    g = c.gen
    # the hook's data (tasks/t1/histogram/task.c), near enough for a timing: floor(bins*u^2)
    # rotated by an offset, 1 in 32 values out of range
    u = torch.rand(n, device=DEV, generator=g)
    off = int(torch.randint(0, bins, (1,), device=DEV, generator=g).item())
    x = ((bins * u * u).floor().long() + off) % bins
    bad = torch.rand(n, device=DEV, generator=g) < 1 / 32
    junk = torch.randint(-2**31, 2**31 - 1, (n,), device=DEV, generator=g)
    x = torch.where(bad, torch.where(junk.abs() < bins, junk - bins, junk), x).to(torch.int32)

    def fn():
        ok = (x >= 0) & (x < bins)
        return torch.bincount(torch.where(ok, x, bins), minlength=bins + 1)[:bins]
    return [cand("bincount", fn)]


def b_layernorm(c):
    F = c.torch.nn.functional
    x, gamma, beta = c["x"], c["gamma"], c["beta"]
    cols = int(c.s["cols"])
    return [cand("aten", lambda: F.layer_norm(x, (cols,), gamma, beta, 1e-5))]


def b_rmsnorm(c):
    torch = c.torch
    F = torch.nn.functional
    x, w = c["x"], c["w"]
    cols = int(c.s["cols"])
    out = []
    fused = getattr(torch.ops.aten, "_fused_rms_norm", None)
    if fused is not None:  # torch >= 2.8: one kernel, y and rstd
        out.append(cand("aten._fused_rms_norm", lambda: fused(x, [cols], w, 1e-6)))
    if hasattr(F, "rms_norm"):  # y only (rstd, 64 KiB, not written)
        out.append(cand("F.rms_norm", lambda: F.rms_norm(x, (cols,), w, 1e-6)))
    return out


def b_sort(c):
    torch = c.torch
    keys = c["keys"]
    return [cand("torch.sort", lambda: torch.sort(keys, stable=True))]


def b_reduction(c):
    torch = c.torch
    x = c["x"]
    return [cand("torch.sum", lambda: torch.sum(x))]


def b_scan(c):
    torch = c.torch
    x = c["x"]
    return [cand("torch.cumsum", lambda: torch.cumsum(x, 0, dtype=torch.int32))]


def b_softmax(c):
    torch = c.torch
    x = c["x"]
    return [cand("aten", lambda: torch.softmax(x, dim=-1))]


def b_spmv(c):
    torch = c.torch
    rows, cols, deg = int(c.s["rows"]), int(c.s["cols"]), int(c.s["deg"])
    g = c.gen
    # the hook's shape of matrix (tasks/t1/spmv_csr/task.c), near enough for a timing: 1 %
    # empty rows, most of deg/2 .. 3deg/2 entries, 0.1 % of 16deg .. 256deg; half of each
    # row's columns in a band round the diagonal, half anywhere; sorted and distinct
    r = torch.rand(rows, device=DEV, generator=g)
    lens = torch.randint(max(1, deg // 2), 3 * deg // 2 + 1, (rows,), device=DEV, generator=g)
    long_ = torch.randint(16 * deg, 256 * deg + 1, (rows,), device=DEV, generator=g)
    lens = torch.where(r < 0.01, 0, torch.where(r > 0.999, long_, lens)).clamp(max=cols)
    row_of = torch.repeat_interleave(torch.arange(rows, device=DEV), lens)
    nnz = row_of.numel()
    band = torch.randint(-4 * deg, 4 * deg + 1, (nnz,), device=DEV, generator=g)
    anyw = torch.randint(0, cols, (nnz,), device=DEV, generator=g)
    near = torch.rand(nnz, device=DEV, generator=g) < 0.5
    col = torch.where(near, (row_of * cols // rows + band).clamp(0, cols - 1), anyw)
    key = torch.unique(row_of * cols + col)  # sorted, distinct within a row
    row_of, col = key // cols, key % cols
    crow = torch.zeros(rows + 1, device=DEV, dtype=torch.int64)
    crow[1:] = torch.cumsum(torch.bincount(row_of, minlength=rows), 0)
    crow, col = crow.to(torch.int32), col.to(torch.int32)
    vals = torch.randn(col.numel(), device=DEV, generator=g)
    x = c["x"]
    size = (rows, cols)

    import warnings
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    kw = {"check_invariants": False}  # torch >= 2.0; the data are valid by construction
    try:
        torch.sparse_csr_tensor(crow, col, vals, size=size, **kw)
    except TypeError:
        kw = {}

    def fn():  # the structure changes every call in the task: build the wrapper in the call
        A = torch.sparse_csr_tensor(crow, col, vals, size=size, **kw)
        return A @ x
    return [cand("cusparse", fn)]


def b_topk(c):
    torch = c.torch
    x, k = c["x"], int(c.s["k"])
    return [cand("torch.topk", lambda: torch.topk(x, k, dim=1, largest=True, sorted=True))]


def b_transpose(c):
    x = c["x"]
    return [cand("aten copy", lambda: x.t().contiguous())]


def b_adamw(c):
    torch = c.torch
    p, g, m, v = c["p"], c["g"], c["m"], c["v"]
    t = int(c.s["t"])
    hp = dict(lr=1e-3, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8)
    out = []
    fused = getattr(torch, "_fused_adamw_", None)
    if fused is not None:
        step = torch.full((), float(t), device=DEV, dtype=torch.float32)
        out.append(cand("fused", lambda: fused([p], [g], [m], [v], [], [step], amsgrad=False,
                                               maximize=False, **hp)))
    q = torch.nn.Parameter(p.clone())
    q.grad = g
    opt = torch.optim.AdamW([q], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            foreach=True)
    opt.step()  # the state (moments, step) exists from here on
    opt.state[q]["exp_avg"].copy_(m)
    opt.state[q]["exp_avg_sq"].copy_(v)
    out.append(cand("foreach", opt.step))
    return out


def b_sdpa(c):
    torch = c.torch
    F = torch.nn.functional
    names = ("q", "k", "v") if "q" in c.specs else ("Q", "K", "V")
    q, k, v = (c[n] for n in names)
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return [cand("auto", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))]
    out = []
    for name, attr in (("cudnn", "CUDNN_ATTENTION"), ("flash", "FLASH_ATTENTION"),
                       ("efficient", "EFFICIENT_ATTENTION"), ("math", "MATH")):
        be = getattr(SDPBackend, attr, None)
        if be is None:
            continue

        out.append(cand(name, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                        ctx=lambda be=be: sdpa_kernel([be])))
    return out


def b_embedding(c):
    torch = c.torch
    F = torch.nn.functional
    tok, wte, wpe = c["tokens"], c["wte"], c["wpe"]
    T = int(c.s["T"])
    pos = wpe[:T]
    return [cand("aten", lambda: torch.add(F.embedding(tok, wte), pos))]


def b_layernorm_residual(c):
    F = c.torch.nn.functional
    x, res, gamma, beta = c["x"], c["residual"], c["gamma"], c["beta"]
    C = int(c.s["C"])

    def fn():
        h = x + res
        return h, F.layer_norm(h, (C,), gamma, beta, 1e-5)
    return [cand("aten", fn)]


def b_lstm(c):
    torch = c.torch
    I, H = int(c.s["I"]), int(c.s["H"])
    lstm = torch.nn.LSTM(I, H).to(DEV)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(c["W_ih"])
        lstm.weight_hh_l0.copy_(c["W_hh"])
        lstm.bias_ih_l0.copy_(c["b"])
        lstm.bias_hh_l0.zero_()
    lstm.flatten_parameters()
    x, h0, c0 = c["x"], c["h0"].unsqueeze(0), c["c0"].unsqueeze(0)

    def fn():
        with torch.no_grad():
            return lstm(x, (h0, c0))
    return [cand("cudnn", fn, tf32=True), cand("native (no cuDNN)", fn, tf32=True, cudnn=False)]


def b_mlp_gelu(c):
    torch = c.torch
    F = torch.nn.functional
    X, W1, b1, W2, b2 = c["X"], c["W1"], c["b1"], c["W2"], c["b2"]
    eager = lambda: torch.addmm(b2, F.gelu(torch.addmm(b1, X, W1), approximate="tanh"), W2)  # noqa
    out = [cand("cublas eager", eager, blas="cublas"), cand("cublaslt eager", eager,
                                                            blas="cublaslt")]
    act = getattr(torch, "_addmm_activation", None)
    if act is not None:  # cuBLASLt's GELU (tanh) epilogue
        out.append(cand("cublaslt gelu epilogue",
                        lambda: torch.addmm(b2, act(b1, X, W1, use_gelu=True), W2)))
    return out


def b_moe(c):
    torch = c.torch
    T, C, E = int(c.s["T"]), int(c.s["C"]), int(c.s["E"])
    # the hook's x are small multiples of a power of two; any bf16 data times the same
    x = (torch.randn(T, C, device=DEV, generator=c.gen) * 8).round().div(16).to(torch.bfloat16)
    Wr, W = c["Wr"], c["W"]
    Wrf = Wr.float()
    tok2 = torch.arange(T, device=DEV).repeat(2)

    def route():
        lg = torch.mm(x.float(), Wrf)  # fp32 logits (TF32 off), exact for this data
        a = lg.argmax(1)  # the first maximum: ties go to the lower index
        l2 = lg.scatter(1, a[:, None], float("-inf"))
        b = l2.argmax(1)
        ga = torch.sigmoid(lg.gather(1, a[:, None]) - l2.gather(1, b[:, None]))[:, 0]
        ex = torch.cat([a, b])
        order = torch.argsort(ex, stable=True)
        gate = torch.cat([ga, 1 - ga])[order]
        tok = tok2[order]
        counts = torch.bincount(ex, minlength=E)
        return x[tok], tok, gate, counts

    def loop():
        xs, tok, gate, counts = route()
        out = torch.zeros(T, W.shape[2], device=DEV, dtype=torch.float32)
        start = 0
        for e, n in enumerate(counts.tolist()):  # the host learns the counts, as allowed
            if n:
                y = torch.mm(xs[start:start + n], W[e])
                out.index_add_(0, tok[start:start + n], y.float() * gate[start:start + n, None])
            start += n
        return out.to(torch.bfloat16)
    res = [cand("cublas per-expert loop", loop)]
    gmm = getattr(torch, "_grouped_mm", None)
    if gmm is not None:
        def grouped():
            xs, tok, gate, counts = route()
            offs = torch.cumsum(counts, 0, dtype=torch.int32)
            y = gmm(xs, W, offs=offs)
            out = torch.zeros(T, W.shape[2], device=DEV, dtype=torch.float32)
            out.index_add_(0, tok, y.float() * gate[:, None])
            return out.to(torch.bfloat16)
        res.append(cand("torch._grouped_mm", grouped))
    return res


def b_rope_qkv(c):
    torch = c.torch
    T, H, D = int(c.s["T"]), int(c.s["H"]), int(c.s["D"])
    x, W, b = c["x"], c["Wqkv"], c["bqkv"]
    half = D // 2
    theta = torch.pow(10000.0, -2 * torch.arange(half, device=DEV, dtype=torch.float64) / D)
    ang = (torch.arange(T, device=DEV, dtype=torch.float64)[:, None] * theta).float()
    cos, sin = ang.cos(), ang.sin()  # [T, D/2], from the sizes alone (st_init's table)

    def fn():
        qkv = torch.addmm(b, x, W).view(T, 3, H, D).permute(1, 2, 0, 3)  # [3, H, T, D]
        qk = qkv[:2].float()
        u1, u2 = qk[..., :half], qk[..., half:]
        rot = torch.cat([u1 * cos - u2 * sin, u2 * cos + u1 * sin], dim=-1).to(torch.bfloat16)
        return rot[0], rot[1], qkv[2].contiguous()
    return [cand("cublas + aten", fn, blas="cublas"), cand("cublaslt + aten", fn,
                                                           blas="cublaslt")]


def b_softmax_xent(c):
    torch = c.torch
    F = torch.nn.functional
    logits, targets = c["logits"], c["targets"]

    def fn():
        loss = F.cross_entropy(logits, targets.long(), reduction="none")
        return loss, loss.mean()
    return [cand("aten", fn)]


def b_gpt2(c):
    torch = c.torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpt2_compare import GPT2  # the same module scripts/gpu-gpt2 times
    s = {k: int(v) for k, v in c.s.items()}
    model = GPT2(s["L"], s["C"], s["NH"], s["V"]).to(DEV, torch.bfloat16).eval()
    tok = c["tokens"]

    def fn():
        with torch.inference_mode():
            return model(tok)
    return [cand("eager (SDPA auto)", fn)]


BUILDERS = {name[2:]: fn for name, fn in globals().items() if name.startswith("b_")}


# ---- the run --------------------------------------------------------------------------------

def run_task(torch, t, op, builder, flush, budget_s, max_calls):
    c = Ctx(torch, t, seed=1234)
    backends = {}
    try:
        cands = BUILDERS[builder](c)
    except Exception as e:  # noqa: BLE001 -- one task's failure must not stop the others
        return None, f"building the inputs: {type(e).__name__}: {str(e)[:300]}"
    for cd in cands:
        try:
            with numerics(torch, **cd["numerics"]), \
                    (cd["ctx"]() if cd["ctx"] else contextlib.nullcontext()):
                backends[cd["backend"]] = time_cold(torch, cd["fn"], flush, budget_s, max_calls)
        except Exception as e:  # noqa: BLE001 -- a backend that does not apply is recorded
            first = (str(e).strip().splitlines() or [""])[0]
            backends[cd["backend"]] = {"error": f"{type(e).__name__}: {first[:300]}"}
            log(f"{t['id']}: {cd['backend']}: {backends[cd['backend']]['error']}")
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 -- a sticky CUDA error shows in the next backend
                pass
    del cands, c
    torch.cuda.empty_cache()
    name, best = pick_fastest(backends)
    if not name:
        return None, "; ".join(f"{k}: {v.get('error')}" for k, v in backends.items()) or \
            "no backend applies"
    return {"ms": best["ms"], "samples": best["samples"], "op": op, "backend": name,
            "set": "eval", "sizes": t["eval"], "shape": shape_text(t), "backends": backends}, None


def smoke(torch, tasks, f):
    """--smoke: every builder on the task's small size set on the CPU, each backend called once
    (no timing, no file). Where torch exists without a GPU this is the mapping's own test:
    a builder that raises is a bug; a backend that needs CUDA says so and is listed.
    Returns {task: {backend: "ok" or the error}}, a task whose builder raised under "!"."""
    global DEV
    DEV = "cpu"
    out = {}
    for tid, op, builder in plan([t["id"] for t in tasks])[0]:
        t = next(x for x in tasks if x["id"] == tid)
        res = out[tid] = {}
        try:
            cands = BUILDERS[builder](Ctx(torch, t, seed=1))
        except Exception as e:  # noqa: BLE001
            res["!"] = f"{type(e).__name__}: {str(e)[:300]}"
            cands = []
        for cd in cands:
            try:
                cd["fn"]()
                res[cd["backend"]] = "ok"
            except Exception as e:  # noqa: BLE001 -- CUDA-only backends fail here
                first = (str(e).strip().splitlines() or [""])[0]
                res[cd["backend"]] = f"{type(e).__name__}: {first[:200]}"
        f.write(f"{tid:<22} " + "; ".join(f"{k}: {v}" for k, v in res.items()) + "\n")
    return out


def versions(torch):
    v = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        v["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001
        pass
    return v


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="vendor_baselines.py",
        description="Time PyTorch's equivalent of every stitch task on this GPU (cold L2, "
                    "medians, each backend, the fastest kept) and write OUT/<device>.json.")
    ap.add_argument("--tasks-dir", default=None, help="the suite (default: tasks/ beside this "
                    "script's folder)")
    ap.add_argument("--out", default=None, help="folder for <device>.json (default: bench/vendor "
                    "beside the suite)")
    ap.add_argument("--task", action="append", default=[], metavar="GLOB",
                    help="only tasks whose id matches GLOB (repeatable)")
    ap.add_argument("--budget", type=float, default=0.5, metavar="S",
                    help="seconds of timed calls per backend (default 0.5)")
    ap.add_argument("--max-calls", type=int, default=200, metavar="N",
                    help="at most N timed calls per backend (default 200; at least 10 run)")
    ap.add_argument("--list", action="store_true",
                    help="print which tasks are covered (and by what) or left out; no torch")
    ap.add_argument("--smoke", action="store_true",
                    help="run every builder once on the CPU at the small size set (a test "
                         "of the helper where torch has no GPU); no timing, no file")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other tasks' figures of an existing OUT/<device>.json")
    a = ap.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    a.tasks_dir = a.tasks_dir or os.path.join(here, "tasks")
    a.out = a.out or os.path.join(here, "bench", "vendor")
    if a.budget <= 0 or a.max_calls < 10:
        raise Usage("--budget must be > 0 and --max-calls at least 10")
    return a


def list_plan(tasks, f):
    cov, left, unknown = plan([t["id"] for t in tasks])
    for tid, op, _ in cov:
        t = next(x for x in tasks if x["id"] == tid)
        f.write(f"{tid:<22} {shape_text(t)[:34]:<34} {op}\n")
    for tid, why in left:
        f.write(f"{tid:<22} left out: {why}\n")
    for tid in unknown:
        f.write(f"{tid:<22} not in the helper's table (add it to COVERED or LEFT_OUT)\n")
    return 0


def import_torch():
    try:
        import torch
    except ImportError as e:
        raise Env(f"needs python3 with torch ({sys.executable}: {e}); set STITCH_PYTHON to "
                  "a python that has it") from None
    if not torch.cuda.is_available():
        raise Env(f"torch {torch.__version__} sees no CUDA device: vendor baselines are "
                  "GPU timings")
    return torch


def main(argv):
    a = parse_args(argv)
    tasks = [load_task(d, "small" if a.smoke else "eval") for d in find_tasks(a.tasks_dir, a.task)]
    if not tasks:
        raise Usage(f"no task under {a.tasks_dir} matches {a.task or 'anything'}")
    if a.list:
        return list_plan(tasks, sys.stdout)
    if a.smoke:
        try:
            import torch
        except ImportError as e:
            raise Env(f"--smoke needs torch ({sys.executable}: {e})") from None
        res = smoke(torch, tasks, sys.stdout)
        return 1 if any("!" in r for r in res.values()) else 0
    torch = import_torch()
    device = torch.cuda.get_device_name()
    cov, left, unknown = plan([t["id"] for t in tasks])
    for tid in unknown:
        log(f"{tid}: not in the helper's table, skipped (add it to COVERED or LEFT_OUT)")
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=DEV)
    results, failed, rows = {}, {}, []
    t0 = time.perf_counter()
    for tid, op, builder in cov:
        t = next(x for x in tasks if x["id"] == tid)
        t1 = time.perf_counter()
        r, why = run_task(torch, t, op, builder, flush, a.budget, a.max_calls)
        if r:
            results[tid] = r
            rows.append((tid, r))
            log(f"{tid}: {r['ms']:.4f} ms ({r['backend']}; {time.perf_counter() - t1:.1f} s)")
        else:
            failed[tid] = why
            log(f"{tid}: every backend failed: {why}")
    path = os.path.join(a.out, device_slug(device) + ".json")
    left_out = dict(left)
    if a.merge and os.path.isfile(path):
        with open(path) as f:
            old = json.load(f)
        for k, v in (old.get("tasks") or {}).items():
            results.setdefault(k, v)
        for k, v in (old.get("left_out") or {}).items():
            left_out.setdefault(k, v)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = assemble(device, versions(torch), dict(sorted(results.items())), left_out, failed, when)
    try:
        os.makedirs(a.out, exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as e:
        raise Env(f"cannot write {path}: {e}") from None
    print(f"# {device}, torch {doc['torch']}, CUDA {doc['cuda']}: "
          f"{len(results)} tasks timed in {time.perf_counter() - t0:.0f} s")
    print_table(rows, left_out, failed, sys.stdout)
    print(f"# written to {path}")
    if failed:  # the table and the file list them; the others' figures still count
        log(f"{len(failed)} task(s) failed on every backend: {', '.join(failed)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Usage as e:
        log(str(e))
        sys.exit(2)
    except Env as e:
        log(str(e))
        sys.exit(3)
