#!/usr/bin/env python3
"""Tests of scripts/vendor_baselines.py that need no GPU: every suite task is either mapped to a
PyTorch op or left out with a reason, the shape arithmetic of task.json, the device file name
(the same rule as src/task/vendor.c), the fastest backend's choice, the JSON document and the
table, `--list`, and the stored files of bench/vendor (each named for its device, timed at
today's eval sizes). Where python has torch (CPU only is fine), every builder also runs once on
its task's small size set (`--smoke`); without torch that part is skipped and says so.

    test_vendor_baselines.py SRC_DIR      (prints 'N passed, N failed')
"""
import glob
import io
import json
import os
import subprocess
import sys

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                      os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "scripts"))
import vendor_baselines as vb  # noqa: E402

passed = failed = 0


def check(what, cond):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}")


def raises(fn, exc):
    try:
        fn()
    except exc:
        return True
    return False


tasks_dir = os.path.join(SRC, "tasks")
tasks = [vb.load_task(d) for d in vb.find_tasks(tasks_dir, [])]
ids = [t["id"] for t in tasks]
check("the suite has tasks", len(ids) >= 30)
cov, left, unknown = vb.plan(ids)
check(f"every task is covered or left out (unknown: {unknown})", not unknown)
check("no task both covered and left out", not set(vb.COVERED) & set(vb.LEFT_OUT))
check("the table names no task the suite lacks",
      set(vb.COVERED) | set(vb.LEFT_OUT) <= set(ids))
check("every covered task has a builder", all(b in vb.BUILDERS for _, _, b in cov))
check("every left-out task has a reason", all(len(why) > 20 for _, why in left))
for must in ("t1/conv2d", "t2/attention_causal", "t4/flash_attention", "t1/radix_sort",
             "t1/topk", "t2/lstm", "t1/gemm_bf16", "t1/fft", "t1/spmv_csr", "t4/gemm_fp8"):
    check(f"{must} is covered", must in vb.COVERED)

# shapes
s = {"nx": 128, "ny": 128, "nz": 128, "rows": 10, "deg": 16, "range": 7}
check("integer expression", vb.eval_expr("rows*deg", s) == 160)
check("cg's nnz", vb.eval_expr("7*nx*ny*nz - 2*(nx*ny + ny*nz + nx*nz) + 2*(nx*ny*nz/8)", s) ==
      7 * 128 ** 3 - 2 * 3 * 128 ** 2 + 2 * (128 ** 3 // 8))
check("division truncates toward zero like C", vb.eval_expr("-7/2", s) == -3)
check("unary minus on a size", vb.eval_expr("-range", s) == -7)
check("numbers pass through", vb.eval_expr(5, s) == 5)
check("names outside the sizes are refused", raises(lambda: vb.eval_expr("foo+1", s), vb.Usage))
check("calls are refused", raises(lambda: vb.eval_expr("__import__('os')", s), vb.Usage))
check("attributes are refused", raises(lambda: vb.eval_expr("rows.real", s), vb.Usage))
fa = next(t for t in tasks if t["id"] == "t4/flash_attention")
spec = vb.tensor_specs(fa)
check("flash_attention's Q at the eval size", spec["Q"]["shape"] == [4, 16, 4096, 128])
check("its dtype", spec["Q"]["dtype"] == "bf16" and spec["O"]["role"] == "outputs")
cg = next(t for t in tasks if t["id"] == "t3/cg")
check("cg's specs evaluate", vb.tensor_specs(cg)["val"]["shape"][0] > 7 * 128 ** 3 - 10 ** 6)
check("every task's specs evaluate at eval and small",
      all(vb.tensor_specs(vb.load_task(t["dir"], st)) for t in tasks for st in ("eval", "small")))
check("shape text", vb.shape_text(fa) == "B4 H16 T4096")

# device file names: the same as st_vendor_slug (tests/unit/test_bench.c)
check("slug", vb.device_slug("NVIDIA H200") == "NVIDIA_H200")
check("slug trims", vb.device_slug("  host CPU (AMD EPYC) ") == "host_CPU_AMD_EPYC")
check("slug of nothing", vb.device_slug("((()))") == "unknown")

# the fastest backend, the document, the table
be = {"flash": {"ms": 0.9, "samples": 100}, "cudnn": {"ms": 0.5, "samples": 100},
      "math": {"error": "RuntimeError: no"}, "nan": {"ms": float("nan")}}
check("fastest backend", vb.pick_fastest(be)[0] == "cudnn")
check("no backend ran", vb.pick_fastest({"a": {"error": "x"}}) == (None, None))
row = {"ms": 0.5, "samples": 100, "op": "sdpa", "backend": "cudnn", "set": "eval",
       "sizes": fa["eval"], "shape": vb.shape_text(fa), "backends": be}
doc = vb.assemble("NVIDIA H200", {"torch": "2.11"}, {"t4/flash_attention": row},
                  dict(left), {}, "2026-01-01T00:00:00Z")
check("document: format, device, tasks", doc["format"] == vb.FORMAT and doc["device"] ==
      "NVIDIA H200" and doc["tasks"]["t4/flash_attention"]["set"] == "eval")
check("document is JSON", json.loads(json.dumps(doc))["torch"] == "2.11")
out = io.StringIO()
vb.print_table([("t4/flash_attention", row)], dict(left), {"t1/x": "no"}, out)
text = out.getvalue()
check("table: the winner", "t4/flash_attention" in text and "cudnn" in text and "0.5000" in text)
check("table: a failed backend", "failed" in text and "math" in text)
check("table: left out with the reason", "t3/bfs" in text and "left out" in text)

# the stored files (bench/vendor/*.json): what `stitch bench` reads on each GPU model must name
# its device by the file's name, time only suite tasks at their present eval sizes (a task whose
# sizes changed makes its figure stale), and hold a positive median for the backend it names
by_id = {t["id"]: t for t in tasks}
stored = sorted(glob.glob(os.path.join(SRC, "bench", "vendor", "*.json")))
check("bench/vendor holds the stored files", len(stored) >= 2)
for path in stored:
    base = os.path.basename(path)
    with open(path) as f:
        doc = json.load(f)
    check(f"{base}: its format", doc.get("format") == vb.FORMAT)
    check(f"{base}: named for its device", vb.device_slug(doc.get("device", "")) + ".json" == base)
    for tid, e in doc.get("tasks", {}).items():
        check(f"{base}: {tid} is a suite task", tid in by_id)
        if tid not in by_id:
            continue
        check(f"{base}: {tid} timed at the eval sizes of today",
              e.get("set") == "eval" and e.get("sizes") == by_id[tid]["eval"])
        check(f"{base}: {tid}'s median is its backend's",
              e.get("ms", 0) > 0 and e["backends"][e["backend"]]["ms"] == e["ms"])

# --list runs without torch
p = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "vendor_baselines.py"),
                    "--tasks-dir", tasks_dir, "--list"], capture_output=True, text=True)
check(f"--list: exit 0 ({p.stderr.strip()[-200:]})", p.returncode == 0)
check("--list names ops and reasons", "F.conv2d" in p.stdout and "left out" in p.stdout)
p = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "vendor_baselines.py"),
                    "--tasks-dir", "/nonexistent", "--list"], capture_output=True, text=True)
check("a missing suite is exit 2", p.returncode == 2)

# every builder once on the CPU, where torch exists
try:
    import torch
except ImportError:
    torch = None
if torch is None:
    print(f"SKIP (part): {sys.executable} has no torch: the builders are not run (Debian's "
          "python3-torch, scripts/bootstrap --tests, runs them on the CPU)")
else:
    small = [vb.load_task(t["dir"], "small") for t in tasks]
    res = vb.smoke(torch, small, io.StringIO())
    for tid, r in res.items():
        err = r.get("!", "")
        # an old torch lacks some types (float8): that is no bug of the builder
        check(f"{tid}: the builder runs ({err})", not err or err.startswith("AttributeError"))
    ran = [tid for tid, r in res.items() if "ok" in r.values()]
    for must in ("t1/conv2d", "t1/softmax", "t1/topk", "t1/radix_sort", "t1/scan", "t2/lstm",
                 "t2/moe_router", "t2/rope_qkv", "t2/softmax_xent", "t1/histogram"):
        check(f"{must} runs on the CPU with torch {torch.__version__}", must in ran)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
