#!/usr/bin/env python3
"""The tolerance audit over a KernelBench checkout: how many programs admit a trivial answer.

For every program of the chosen levels (KB_DIR/level1 ... level3, as in KernelBench's
repository), on the GPU when there is one: build the model as `stitch import` does, run two
seeds' inputs, and judge the trivial answers of scripts/kb_tol.py (all zeros, the mean, the
first input passed through, the other seed's output; NaN never passes) under KernelBench's own
tolerance (atol = rtol = 1e-2), under the tolerance an import copies (kb_import.py's), and under
what the import keeps after its audit (which must admit none, unless the output is degenerate and
the task is flagged; like the import, it widens a tolerance the float32 reference itself misses
against the model run in float64). Prints one row per program and the totals; --json writes them.
Usage: scripts/kb_audit.py KB_DIR [--levels 1,2,3] [--only SUBSTRING] [--shard I/N] [--json FILE]
       scripts/kb_audit.py --merge A.json B.json ... [--json FILE]   (counts over shards)
Exit: 0 when no import admits a trivial answer unflagged, 1 otherwise, 3 without torch.
"""
import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb_import  # noqa: E402
import kb_tol  # noqa: E402

KB_TOL = {"atol": 1e-2, "rtol": 1e-2}  # KernelBench's eval: torch.allclose(atol=1e-02, rtol=1e-02)


def audit_program(torch, path, device):
    mod = kb_import.load_program(path)
    torch.manual_seed(kb_import.INIT_SEED)
    model = mod.Model(*mod.get_init_inputs()).to(device)
    xs = kb_import.seeded_inputs(torch, mod, 1001, device)
    ys = kb_import.run_model(torch, model, xs, "seed 1")
    xo = kb_import.seeded_inputs(torch, mod, 1000 + kb_import.CHECK_SEED, device)
    yo = kb_import.run_model(torch, model, xo, "the check seed")
    del xo
    row = {"kb": {}}
    for i, y in enumerate(ys):
        got = kb_tol.admitted(torch, y, xs, yo[i], KB_TOL)
        if got:
            row["kb"][f"y{i}"] = got
    copied = [kb_import.tolerance(kb_import.stitch_dtype(torch, y, f"y{i}")) for i, y in enumerate(ys)]
    exact = kb_import.float64_outputs(torch, model, xs, ys, device)
    _, record = kb_tol.audit(torch, xs, ys, yo, copied, exact=exact)  # as the import keeps it
    row["copied"] = record["admitted"]
    row["after"] = record["still_admitted"]
    row["changed"] = record["changed"]
    row["widened"] = record["widened"]
    row["degenerate"] = record["degenerate"]
    return row


def counts(rows, seconds):
    ok = [r for r in rows.values() if "error" not in r]
    return {
        "programs": len(rows),
        "ran": len(ok),
        "errors": len(rows) - len(ok),
        "kb_tolerance_admits_trivial": sum(1 for r in ok if r["kb"]),
        "kb_tolerance_admits_zeros": sum(1 for r in ok if any("zeros" in v for v in r["kb"].values())),
        "copied_tolerance_admits_trivial": sum(1 for r in ok if r["copied"]),
        "tightened_at_import": sum(1 for r in ok if r["changed"]),
        # rows of runs before the float64 check have no "widened"
        "widened_at_import": sum(1 for r in ok if r.get("widened")),
        "degenerate": sum(1 for r in ok if r["degenerate"]),
        "import_admits_trivial_unflagged": sum(1 for r in ok if r["after"] and not r["degenerate"]),
        "seconds": seconds,
    }


def write_json(path, rows, seconds):
    # rewritten after every program, so a run cut short still leaves what it measured
    with open(path + ".tmp", "w") as fh:
        json.dump({"counts": counts(rows, seconds), "programs": rows}, fh, indent=1)
    os.replace(path + ".tmp", path)


def report(rows, seconds, path):
    count = counts(rows, seconds)
    print("kb_audit: " + ", ".join(f"{k} {v}" for k, v in count.items()), flush=True)
    if path:
        write_json(path, rows, seconds)
    return 1 if count["import_admits_trivial_unflagged"] else 0


def merge(paths, out):
    """Counts over the rows of several runs' --json files (shards of one audit)."""
    rows, seconds = {}, 0.0
    for p in paths:
        with open(p) as fh:
            d = json.load(fh)
        rows.update(d["programs"])
        seconds = max(seconds, d["counts"]["seconds"])  # shards run side by side
    return report(rows, seconds, out)


def shard_of(spec):
    try:
        i, n = (int(v) for v in spec.split("/"))
    except ValueError:
        i = n = 0
    if n < 1 or not 0 <= i < n:
        raise SystemExit(f"kb_audit: --shard wants I/N with 0 <= I < N, not '{spec}'")
    return i, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kb_dir", nargs="?")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--only", default="")
    ap.add_argument("--shard", default="0/1", help="I/N: every N-th program from the I-th (runs side by side)")
    ap.add_argument("--json", help="write rows and counts here (rewritten after every program)")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="count the rows of these --json files instead")
    a = ap.parse_args()
    if a.merge:
        return merge(a.merge, a.json)
    if not a.kb_dir:
        ap.error("KB_DIR is required (or --merge)")
    shard, shards = shard_of(a.shard)
    try:
        import torch
    except ImportError:
        print("kb_audit: no PyTorch for this python3", file=sys.stderr)
        return 3
    kb_import.DTYPES = kb_import.dtype_table(torch)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    files = []
    for lv in a.levels.split(","):
        files += sorted(glob.glob(os.path.join(a.kb_dir, f"level{lv.strip()}", "*.py")))
    files = [f for f in files if a.only in f][shard::shards]
    if not files:
        print(f"kb_audit: no programs under {a.kb_dir}/level{{{a.levels}}}", file=sys.stderr)
        return 2
    rows, t0 = {}, time.perf_counter()
    print(f"kb_audit: {len(files)} programs on {device}", flush=True)
    for f in files:
        key = os.path.relpath(f, a.kb_dir)
        t = time.perf_counter()
        try:
            row = audit_program(torch, f, device)
        except Exception as e:  # one program's failure is a row, not the end of the report
            row = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        row["s"] = round(time.perf_counter() - t, 2)
        rows[key] = row
        if device == "cuda":
            torch.cuda.empty_cache()
        show = row.get("error") or "; ".join(
            f"{k}: {v}" for k, v in (("KernelBench tol admits", row["kb"]),
                                      ("copied tol admits", row["copied"]),
                                      ("after audit admits", row["after"]),
                                      ("widened", row["widened"]),
                                      ("degenerate", row["degenerate"])) if v) or "no trivial answer passes"
        print(f"{key:60s} {row['s']:6.2f} s  {show}", flush=True)
        if a.json:
            write_json(a.json, rows, round(time.perf_counter() - t0, 1))
    return report(rows, round(time.perf_counter() - t0, 1), a.json)


if __name__ == "__main__":
    sys.exit(main())
