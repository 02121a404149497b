"""The trivial-answer audit of an imported program's tolerances (docs/kernelbench.md).

A tolerance copied from KernelBench can admit an answer that does no work: softmax over 32768
columns has every output near 3e-5, under an atol of 1e-4, so all zeros pass. For each output,
the answers a do-nothing program can give (all zeros, the output's mean everywhere, the first
input of the same shape passed through, another seed's expected output) are judged as the
verifier judges (src/task/compare.c: every element within atol + rtol*|want|, or the NMSE bound;
a NaN never passes). Where one passes, the tolerance is tightened in two steps, each taken only
if the step before still admits a trivial answer: atol scaled to the output's magnitude (rtol
times its root mean square), then a relative-L2 bound (NMSE <= rtol^2). Where the expected
output itself does not depend on the input (constant, or the same for two seeds), no tolerance
can tell a trivial answer from a right one: the output is called degenerate and the task is
flagged, not refused (the import keeps the program; `stitch verify` flags its verdicts).
The opposite failure: a tolerance tighter than the reference's own rounding rejects an exact
answer (level2/18's fp32 reference is up to 2e-4 off under atol = rtol = 1e-4). Given the
outputs computed in float64 on the same inputs, a tolerance the float32 reference itself fails
against them is widened to twice what it needs; a trivial answer that then passes is recorded,
and the output called degenerate (the task cannot tell it from the reference's rounding).
Used by kb_import.py at import time and by kb_audit.py over a KernelBench checkout.
"""
import math


CHUNK = 1 << 24  # elements judged at a time: KernelBench's own sizes reach gigabytes


def chunks(*ts):
    """The tensors flattened and cut at the same offsets, each piece in float64: one tuple a
    chunk (a whole output in float64 could take more memory than the machine has)."""
    flat = [t.reshape(-1) for t in ts]
    for at in range(0, flat[0].numel(), CHUNK):
        yield tuple(f[at:at + CHUNK].double() for f in flat)


def judge(torch, got, want, tol):
    """True when `got` passes as `want` under `tol` ({atol, rtol} or {nmse})."""
    if got.shape != want.shape:
        return False
    err = norm = 0.0
    for gc, wc in chunks(got, want):
        if not bool(torch.isfinite(gc).all()):
            return False
        d = gc - wc
        if "nmse" in tol:
            err += float((d * d).sum())
            norm += float((wc * wc).sum())
        elif not bool((d.abs() <= tol["atol"] + tol["rtol"] * wc.abs()).all()):
            return False
    if "nmse" in tol:
        return (err / norm if norm > 0 else (math.inf if err > 0 else 0.0)) <= tol["nmse"]
    return True


def trivial_answers(torch, y, xs, other):
    """(name, tensor) for each answer a program doing no work could give for output y, made one
    at a time (each is as large as the output)."""
    yield "zeros", torch.zeros_like(y)
    if y.is_floating_point() and y.numel() > 1:  # a scalar's mean is the answer itself
        total = sum(float(c.sum()) for c, in chunks(y))
        yield "mean", torch.full_like(y, total / max(y.numel(), 1))
    if xs and xs[0].shape == y.shape:
        yield "passthrough", xs[0].to(y.dtype)
    if other is not None:
        yield "other_seed", other


def admitted(torch, y, xs, other, tol):
    return [name for name, t in trivial_answers(torch, y, xs, other) if judge(torch, t, y, tol)]


def degenerate(torch, y, other):
    """Why no tolerance can help for output y, or None."""
    if y.numel() == 0:
        return "the output is empty"
    if y.numel() > 1 and bool((y == y.reshape(-1)[0]).all()):
        return "the expected output is one constant on this input"
    if other is not None and other.shape == y.shape and bool(torch.equal(other, y)):
        return "the expected output is the same for two seeds' inputs"
    return None


def tighten(torch, y, tol):
    """The next tolerance step for output y after `tol` admitted a trivial answer, or None."""
    if "nmse" in tol:
        return None
    sq = sum(float((c ** 2).sum()) for c, in chunks(y))
    rms = math.sqrt(sq / y.numel()) if y.numel() else 0.0
    # rounded before the comparison: a step that rounds up would come back as itself forever
    scaled = float("%.3g" % (tol["rtol"] * rms))
    if tol["atol"] > scaled and y.is_floating_point():
        return {"atol": scaled, "rtol": tol["rtol"]}
    if y.is_floating_point() and tol["rtol"] > 0:
        return {"nmse": float("%.3g" % (tol["rtol"] ** 2))}
    return None


def widen(torch, y, exact, tol):
    """(wider tolerance, how far y is from exact) when the reference y fails `tol` against the
    float64 result `exact`, else None: twice what y needs, so another correct order of the same
    sums passes too."""
    if exact is None or exact.shape != y.shape or judge(torch, y, exact, tol):
        return None
    need = err = norm = 0.0
    for gc, wc in chunks(y, exact):
        d = gc - wc
        if "nmse" in tol:
            err += float((d * d).sum())
            norm += float((wc * wc).sum())
        else:
            need = max(need, float((d.abs() - tol["rtol"] * wc.abs()).max()))
    if "nmse" in tol:
        off = err / norm if norm > 0 else math.inf
        return ({"nmse": float("%.3g" % (4 * off))} if math.isfinite(off) else None), off
    return {"atol": float("%.3g" % (2 * need)), "rtol": tol["rtol"]}, need


def audit(torch, xs, ys, others, tols, exact=None):
    """Audit every output: ys the expected outputs of one seed, others those of a second seed
    (or None), tols their tolerances, exact the outputs of the same seed in float64 (or None).
    Returns (tolerances to use, record for task.json)."""
    record = {"answers": ["zeros", "nan", "mean", "passthrough", "other_seed"],
              "admitted": {}, "changed": {}, "widened": {}, "degenerate": {},
              "still_admitted": {}}
    final = []
    for i, (y, tol) in enumerate(zip(ys, tols)):
        other = others[i] if others else None
        name = f"y{i}"
        got = admitted(torch, y, xs, other, tol)
        if got:
            record["admitted"][name] = got
        why = degenerate(torch, y, other) if got else None
        if why:
            record["degenerate"][name] = why
            record["still_admitted"][name] = got
            final.append(tol)
            continue
        new = tol
        while got:
            step = tighten(torch, y, new)
            if step is None:
                record["degenerate"][name] = (
                    "the output equals the first input on the recorded input distribution (the "
                    "operation is the identity there, e.g. ReLU of non-negative inputs)"
                    if got == ["passthrough"] else
                    "no tolerance step rejects " + ", ".join(got) +
                    " (the output barely depends on the input)")
                record["still_admitted"][name] = got
                break
            new = step
            got = admitted(torch, y, xs, other, new)
        if new is not tol:
            record["changed"][name] = {"from": tol, "to": new,
                                       "why": ", ".join(record["admitted"][name]) +
                                       " passed the copied tolerance"}
        final.append(attainable(torch, record, name, y, xs, other,
                                exact[i] if exact else None, new))
    return final, record


def attainable(torch, record, name, y, xs, other, exact, tol):
    """`tol`, or wider where the reference y itself fails it against the float64 result (both
    recorded); a trivial answer the wider tolerance admits makes the output degenerate."""
    got = widen(torch, y, exact, tol)
    if got is None or got[0] is None:
        return tol
    wider, off = got
    record["widened"][name] = {
        "from": tol, "to": wider,
        "why": "the float32 reference is %.3g off the float64 result (%s) on seed 1" %
               (off, "relative L2" if "nmse" in tol else "beyond rtol")}
    still = admitted(torch, y, xs, other, wider)
    if still and name not in record["degenerate"]:
        record["still_admitted"][name] = still
        record["degenerate"][name] = ("a trivial answer (" + ", ".join(still) + ") is within the "
                                      "float32 reference's own rounding error")
    return wider
