#!/usr/bin/env python3
"""The live reference of an imported KernelBench task: the PyTorch program itself, run by one
verify to draw that verify's seeds, so nothing but task.json and model.py need be on disk and
every verify judges on seeds nobody has seen.

`stitch verify` starts it (src/verify/live_ref.c) with one end of a Unix socket pair as --fd and
speaks the runner protocol's framing on it (u32 little-endian length, then JSON): requests
  {"op": "start", "id": N, "seed_base": S}   build Model(*get_init_inputs()) under the import's
                                             seed, check its params against the task's digest,
                                             write them to DIR/params.safetensors
  {"op": "draw", "id": N, "k": K}            get_inputs() under S + K, run the model, write the
                                             inputs x0.. and outputs y0.. to DIR/seed<K>.safetensors
each answered {"id": N, "ok": true, "file": PATH, ...} or {"id": N, "ok": false, "exit": 2|3,
"reason": "..."} (2: the program or the task, 3: the environment). The secret seed base comes in
the first frame, never on the command line. The verify hands the files' tensors to the solutions
through its shared blocks and deletes each file once read. Anything the program prints goes to
stderr (the verify's log of this process).

With --serve PATH it is the warm reference server instead (src/verify/ref_server.c): torch
imported once, a Unix socket at PATH (in a folder only this user can enter), and for each verify
that connects (same user, checked) a forked child that first takes
  {"op": "attach", "id": N, "task_dir": D, "dir": OUT, "log": FILE, "env": {...}}
(its output to FILE, the verify's environment, its own process group; answered with its "pid",
which the verify kills at its end) and then speaks as above. Importing torch took 3-5 s of every
verify; a child starts its device in a fraction of a second. The server exits after --idle
seconds without a verify.
"""
import argparse
import json
import os
import signal
import socket
import struct
import sys
import time

import kb_import as kb

MAX_FRAME = 1 << 20


def recv_frame(sock):
    head = b""
    while len(head) < 4:
        got = sock.recv(4 - len(head))
        if not got:
            return None
        head += got
    n = struct.unpack("<I", head)[0]
    if n > MAX_FRAME:
        raise kb.BadInput(f"a request of {n} bytes from the verify")
    body = b""
    while len(body) < n:
        got = sock.recv(n - len(body))
        if not got:
            return None
        body += got
    return json.loads(body)


def send_frame(sock, obj):
    body = json.dumps(obj, separators=(",", ":")).encode()
    sock.sendall(struct.pack("<I", len(body)) + body)


class Reference:
    def __init__(self, torch, task_dir, out_dir, device):
        self.torch, self.task_dir, self.out_dir, self.device = torch, task_dir, out_dir, device
        self.model = self.mod = None
        self.seed_base = None
        self.import_s = None

    def task(self):
        with open(os.path.join(self.task_dir, "task.json"), encoding="utf-8") as f:
            return json.load(f)

    def fits(self, task):
        """The import's peak of GPU memory against what this GPU has free now: refused with the
        numbers before anything is allocated (exit 3: this machine, not the program)."""
        peak = (task.get("source") or {}).get("peak_gpu_bytes")
        if self.device != "cuda" or not isinstance(peak, (int, float)):
            return
        free, total = self.torch.cuda.mem_get_info()
        if peak > free:
            raise MemoryError(f"the program took {peak / 2**30:.2f} GiB of GPU memory at import; "
                              f"this GPU has {free / 2**30:.2f} GiB free of {total / 2**30:.1f}")

    def start(self, req):
        torch = self.torch
        seed_base = req.get("seed_base")
        if not isinstance(seed_base, int) or not 0 <= seed_base < 2**63:
            raise kb.BadInput("start: seed_base must be an integer in [0, 2^63)")
        task = self.task()
        data = task.get("data") or {}
        src = task.get("source") or {}
        program = os.path.join(self.task_dir, data.get("reference") or src.get("file") or
                               "model.py")
        t0 = time.perf_counter()
        self.fits(task)  # on a GPU, the first call that needs the device: the context starts
        init_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.mod = kb.load_program(program)
        self.model, state = kb.build_model(torch, self.mod, self.device)
        want = data.get("params_sha256")
        got = kb.params_sha256(torch, state)
        if want and got != want:
            raise kb.BadInput(f"{program} no longer builds the params the import recorded "
                              f"(sha256 {got[:12]}... against {want[:12]}...): the program or "
                              f"torch changed (imported with torch {src.get('torch')}, this is "
                              f"{torch.__version__}); import the task again")
        path = os.path.join(self.out_dir, "params.safetensors")
        kb.write_safetensors(torch, path, state, {"init_seed": kb.INIT_SEED}, durable=False)
        self.seed_base = seed_base
        return {"file": path, "params_sha256": got, "checked": bool(want),
                "torch": torch.__version__, "device": self.device, "import_s": self.import_s,
                "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                "init_s": round(init_s, 3), "build_s": round(time.perf_counter() - t0, 3)}

    def draw(self, req):
        k = req.get("k")
        if self.model is None:
            raise kb.BadInput("draw before start")
        if not isinstance(k, int) or not 0 <= k < 2**32:
            raise kb.BadInput("draw: k must be a non-negative integer")
        t0 = time.perf_counter()
        xs = kb.seeded_inputs(self.torch, self.mod, (self.seed_base + k) % 2**63, self.device)
        ys = kb.run_model(self.torch, self.model, xs, f"seed {k}")
        path = os.path.join(self.out_dir, f"seed{k}.safetensors")
        kb.write_safetensors(self.torch, path, kb.seed_tensors(xs, ys), {}, durable=False)
        xs = ys = None
        if self.device == "cuda":
            self.torch.cuda.empty_cache()
        return {"file": path, "draw_s": round(time.perf_counter() - t0, 3)}


def answer(ref, req):
    rid = req.get("id")
    try:
        op = req.get("op")
        if op == "start":
            rep = ref.start(req)
        elif op == "draw":
            rep = ref.draw(req)
        else:
            raise kb.BadInput(f"unknown request {op!r}")
        rep.update(id=rid, ok=True)
        return rep
    except kb.BadInput as e:
        return {"id": rid, "ok": False, "exit": 2, "reason": str(e)}
    except MemoryError as e:
        return {"id": rid, "ok": False, "exit": 3, "reason": str(e)}
    except Exception as e:  # the program's own failure on this seed: said, not a traceback
        first = str(e).splitlines()[0][:300] if str(e) else ""
        return {"id": rid, "ok": False, "exit": 2, "reason": f"{type(e).__name__}: {first}"}


def load_torch():
    """torch, or None; fp32 means fp32, as at import: no TF32 in the expected outputs."""
    try:
        import torch
    except ImportError:
        return None
    kb.DTYPES = kb.dtype_table(torch)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def session(sock, torch, task_dir, out_dir, device, req, import_s):
    """Answer the verify's requests, `req` first, until it closes its end or kills this process."""
    if req is None:
        return 0
    if torch is None:
        send_frame(sock, {"id": req.get("id"), "ok": False, "exit": 3,
                          "reason": f"no PyTorch for {sys.executable}: the task is judged against "
                          "its PyTorch program (install torch, point STITCH_PYTHON at a "
                          "python that has it, or import the task with --store-seeds)"})
        return 3
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    ref = Reference(torch, task_dir, out_dir, device)
    ref.import_s = import_s
    while req is not None:
        send_frame(sock, answer(ref, req))
        req = recv_frame(sock)
    return 0


def attached(conn, torch, device):
    """A server's child: the verify's attach request, then its session."""
    req = recv_frame(conn)
    if req is None or req.get("op") != "attach":
        return 0
    keys = ("task_dir", "dir", "log")
    if not all(isinstance(req.get(k), str) for k in keys) or not isinstance(req.get("env"), dict):
        send_frame(conn, {"id": req.get("id"), "ok": False, "exit": 2, "reason": "bad attach"})
        return 2
    log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.clear()  # CUDA_VISIBLE_DEVICES and the rest are the verify's, read at device start
    os.environ.update({str(k): str(v) for k, v in req["env"].items()})
    send_frame(conn, {"id": req.get("id"), "ok": True, "pid": os.getpid()})
    return session(conn, torch, req["task_dir"], req["dir"], device, recv_frame(conn), None)


def serve(path, idle, device):
    torch = load_torch()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{path}.{os.getpid()}"
    ls.bind(tmp)
    os.chmod(tmp, 0o600)
    ls.listen(64)
    os.replace(tmp, path)  # whole or not at all: a verify never finds a socket nobody serves
    ino = os.stat(path).st_ino
    with open(path + ".pid", "w") as f:
        f.write(f"{os.getpid()}\n")
    ls.settimeout(idle)
    print(f"kb_reference: serving {path} (torch {torch.__version__ if torch else 'missing'}), "
          f"idle limit {idle:g} s", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # through the cleanup below
    try:
        accept_loop(ls, torch, device)
    finally:
        try:  # still ours: another server may have taken the name since
            if os.stat(path).st_ino == ino:
                os.unlink(path)
                os.unlink(path + ".pid")
        except OSError:
            pass
    return 0


def accept_loop(ls, torch, device):
    """Fork a child per verify of this user until the idle limit passes without one."""
    while True:
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            return
        cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", cred)[1] != os.getuid():
            conn.close()
            continue
        if os.fork() == 0:
            ls.close()
            os.setpgid(0, 0)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            conn.settimeout(None)
            try:
                rc = attached(conn, torch, device)
            except BaseException:  # the verify went away or killed the session: nothing to say
                rc = 1
            os._exit(rc)
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("task_dir", nargs="?")
    ap.add_argument("--fd", type=int, help="this end of the verify's socket pair")
    ap.add_argument("--dir", help="where the seed files go (the verify's own)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--serve", metavar="PATH", help="be the warm reference server on PATH")
    ap.add_argument("--idle", type=float, default=600, help="--serve: seconds without a verify "
                    "before the server exits (default 600)")
    a = ap.parse_args()
    os.dup2(2, 1)  # the program's prints stay off any channel the verify reads
    if a.serve:
        return serve(a.serve, a.idle, a.device)
    if a.task_dir is None or a.fd is None or a.dir is None:
        ap.error("task_dir, --fd and --dir are needed (or --serve)")
    sock = socket.socket(fileno=a.fd)
    req = recv_frame(sock)  # the start request: torch loads while the verify compiles
    if req is None:
        return 0
    t0 = time.perf_counter()
    torch = load_torch()
    return session(sock, torch, a.task_dir, a.dir, a.device, req, round(time.perf_counter() - t0, 3))


if __name__ == "__main__":
    sys.exit(main())
