#!/usr/bin/env python3
"""Tests of scripts/kb_tol.py, the import's trivial-answer audit, on the CPU: a copied tolerance
that admits all zeros is tightened until zeros fail; an identity on the recorded inputs and a
constant output are called degenerate; and an output that barely depends on its input, whose
scaled atol rounds up at three digits, ends (it once looped forever: level3/3_DeepNarrowMLP and
level3/12_VGG19 never finished their audit). Needs python3 with torch (CPU is enough): re-runs
itself under STITCH_PYTHON or /usr/bin/python3 when this python lacks it, else says SKIP.

    test_kb_tol.py SRC_DIR      (prints 'N passed, N failed')
"""
import os
import signal
import sys

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                      os.path.join(os.path.dirname(__file__), "..", ".."))
try:
    import torch
except ImportError:
    for py in (os.environ.get("STITCH_PYTHON"), "/usr/bin/python3"):
        if py and os.path.exists(py) and os.path.realpath(py) != os.path.realpath(sys.executable) \
                and not os.environ.get("KB_TOL_REEXEC"):
            os.environ["KB_TOL_REEXEC"] = "1"
            os.execv(py, [py, __file__, SRC])
    print("SKIP: no python3 with torch here (scripts/bootstrap --tests installs python3-torch)")
    sys.exit(0)
sys.path.insert(0, os.path.join(SRC, "scripts"))
import kb_tol  # noqa: E402

passed = failed = 0


def check(what, cond):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}")


def audit_within(seconds, xs, ys, others, tols):
    """kb_tol.audit, or None when it does not end within `seconds`."""
    def late(signum, frame):
        raise TimeoutError
    signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        return kb_tol.audit(torch, xs, ys, others, tols)
    except TimeoutError:
        return None
    finally:
        signal.alarm(0)


KB = {"atol": 1e-2, "rtol": 1e-2}
g = torch.Generator().manual_seed(7)

# softmax over many columns: every output near 1/n, under KernelBench's atol
x = torch.randn(8, 4096, generator=g)
y = torch.softmax(x, dim=1)
yo = torch.softmax(torch.randn(8, 4096, generator=g), dim=1)
check("zeros pass the copied tolerance of a wide softmax", "zeros" in kb_tol.admitted(torch, y, [x], yo, KB))
got = audit_within(20, [x], [y], [yo], [KB])
check("the audit of a wide softmax ends", got is not None)
if got:
    tols, rec = got
    check("its tolerance is tightened", rec["changed"].get("y0", {}).get("to") == tols[0] and tols[0] != KB)
    check("zeros fail the tightened tolerance", not kb_tol.judge(torch, torch.zeros_like(y), y, tols[0]))
    check("the right answer passes the tightened tolerance", kb_tol.judge(torch, y, y, tols[0]))
    check("nothing trivial is still admitted", not rec["still_admitted"] and not rec["degenerate"])

# ReLU of non-negative inputs is the identity there: degenerate, flagged
u = torch.rand(64, 64, generator=g)
got = audit_within(20, [u], [torch.relu(u)], [torch.relu(torch.rand(64, 64, generator=g))], [KB])
rec = got[1] if got else {"degenerate": {}, "still_admitted": {}}
check("the audit of an identity ends", got is not None)
check("an identity on the recorded inputs is degenerate", "y0" in rec["degenerate"])
check("an identity keeps passthrough admitted", rec["still_admitted"].get("y0") == ["passthrough"])

# a constant output
c = torch.full((32,), 0.5)
got = audit_within(20, [u], [c], [c.clone()], [KB])
check("a constant output is degenerate", got is not None and "one constant" in got[1]["degenerate"].get("y0", ""))

# an output that barely depends on the input, where rtol * rms = 1.2367e-05 rounds up to 1.24e-05
base = 0.0012367
yb = base + 1e-9 * torch.randn(4096, generator=g, dtype=torch.float64)
ob = base + 1e-9 * torch.randn(4096, generator=g, dtype=torch.float64)
step = kb_tol.tighten(torch, yb, KB)
check("the first step scales atol to the output", step is not None and "atol" in step)
check("a step that rounds up is not taken twice", kb_tol.tighten(torch, yb, step) != step)
got = audit_within(20, [u], [yb], [ob], [KB])
check("the audit of an output that barely depends on its input ends", got is not None)
if got:
    check("that output is called degenerate", "barely depends" in got[1]["degenerate"].get("y0", ""))

# a float32 reference that misses its own tolerance against float64 (level2/18: up to 2e-4 off
# under atol = rtol = 1e-4 on outputs near 0.025): widened to twice what it needs, zeros still out
exact = -0.025 + 0.01 * torch.randn(1024, generator=g, dtype=torch.float64)
ref = (exact + 1.5e-4 * torch.randn(1024, generator=g, dtype=torch.float64)).float()
other = (-0.025 + 0.01 * torch.randn(1024, generator=g, dtype=torch.float64)).float()
x = torch.randn(1024, 8, generator=g)
F32 = {"atol": 1e-4, "rtol": 1e-4}
check("the reference fails its copied tolerance against float64", not kb_tol.judge(torch, ref, exact, F32))
tols, rec = kb_tol.audit(torch, [x], [ref], [other], [F32], exact=[exact])
check("that tolerance is widened and recorded", rec["widened"].get("y0", {}).get("to") == tols[0])
check("the reference passes the widened tolerance", kb_tol.judge(torch, ref, exact, tols[0]))
check("with room: twice what it needs", tols[0]["atol"] > 1.9 * (
    float(((ref.double() - exact).abs() - 1e-4 * exact.abs()).max())))
check("zeros still fail the widened tolerance", not kb_tol.judge(torch, torch.zeros_like(ref), ref, tols[0]))
check("not degenerate", not rec["degenerate"])
tols, rec = kb_tol.audit(torch, [x], [ref], [other], [F32])
check("without float64 outputs nothing is widened", tols[0] == F32 and not rec["widened"])
tols, rec = kb_tol.audit(torch, [x], [exact.float()], [other], [F32], exact=[exact])
check("a reference within its tolerance is not widened", tols[0] == F32 and not rec["widened"])
# a reference whose rounding is as large as the output: the widened tolerance admits zeros
tiny = 1e-6 * torch.randn(256, generator=g, dtype=torch.float64)
noisy = (tiny + 1e-4 * torch.randn(256, generator=g, dtype=torch.float64)).float()
tols, rec = kb_tol.audit(torch, [x], [noisy], [None], [F32], exact=[tiny])
check("a trivial answer within the reference's rounding makes the output degenerate",
      "rounding error" in rec["degenerate"].get("y0", ""))

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
