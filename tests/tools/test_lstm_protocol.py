#!/usr/bin/env python3
"""Host-only model check of the h exchange of t2/lstm's cluster path (lstm_cluster_kernel<NT>
in tasks/t2/lstm/expert.cu once bench/variants/t2-lstm-cluster-auto is adopted: the st.async
version), for a machine without a GPU.

    test_lstm_protocol.py [seed]

A cluster of 16 blocks runs T steps. Each block owns two h buffers hs[0], hs[1] and two
mbarriers full[0], full[1] (arrival count 1). Step t, p = t & 1: wait full[p] for parity
((t-1) >> 1) & 1 (t > 0); arrive.expect_tx on full[p^1] for 16 parts (t + 1 < T); read hs[p]
(h_{t-1}; at t = 0 the zeros the block wrote before the first cluster barrier); at t + 1 == T
stop; else st.async its part of h_t into every block's hs[p^1], each chunk completing tx on that
block's full[p^1]. A cluster barrier before the loop and after it.
The blocks are coroutines and every chunk an in-flight message that lands (data, then
complete_tx) whenever a random scheduler picks it; per-run delivery rates and block speeds skew
the schedules. The mbarrier is the PTX ISA's: a signed tx-count (chunks may land before the
expect_tx), a phase completes when no arrival is pending and tx-count is 0, and try_wait.parity
sees only the parity of the current phase. Checks, failing at once:
  (a) every read of hs[p] at step t sees all 16 parts of h_{t-1}, at its start and its end;
  (b) no chunk lands in a slot whose content its receiver has still to read (or is reading);
  (c) every phase completes with its whole fill in the buffer, and a waiter for fill k finds the
      barrier k or k+1 phases on (else the parity-only wait is fooled);
  (d) no deadlock, no chunk to an uninitialised barrier or an exited block, none left over.
MUTATIONS are broken kernels each sweep must catch; BENIGN are changes it must pass. Mirrors the
kernel's index expressions by hand: keep them in step with its loop. About 12 s on one core.
"""
import random
import sys

CTAS = 16   # CL_CTAS
MUTATION = None
MUTATIONS = {
    'one-buffer': "every step reads and sends through hs[0] (the barriers still alternate)",
    'parity-off': "the wait's parity off by one",
    'expect-15': "expect_tx for 15 parts (the block's send to itself left out)",
    'no-start-sync': "no cluster barrier between the mbarrier init and the loop",
}
BENIGN = {
    'expect-after-sends': "expect_tx after the step's sends (tx-count goes negative meanwhile)",
    'no-end-sync': "no cluster barrier after the loop (checked: no block exits with a chunk "
                   "to it in flight; the senders' side is not modelled)",
}


class Fail(Exception):
    pass


def check(cond, msg):
    """msg: a string, or on hot paths a lambda making it (formatted only on failure)"""
    if not cond:
        raise Fail(msg if isinstance(msg, str) else msg())


class MBar:
    """One mbarrier: arrival count 1, signed tx-count, phases counted in `done`."""
    def __init__(s, on_complete): s.live = False; s.on_complete = on_complete
    def init(s): s.live = True; s.pending = 1; s.tx = 0; s.done = 0
    def expect(s, tx):
        check(s.live and s.pending == 1, "expect_tx on an uninitialised or arrived-on mbarrier")
        s.tx += tx; s.pending -= 1; s.update()
    def complete_tx(s, n):
        check(s.live, "complete_tx on an uninitialised mbarrier")
        s.tx -= n; s.update()
    def update(s):
        if s.pending == 0 and s.tx == 0:
            s.on_complete(s.done); s.done += 1; s.pending = 1
    def ready(s, parity): return (s.done & 1) != parity


def simulate(T, seed, chunks=2):
    """One cluster, T steps; each block's part of h travels to each block as `chunks` chunks."""
    rnd = random.Random(seed)
    deliver_p = rnd.choice((0.05, 0.3, 0.7, 0.95))
    speed = [rnd.choice((1, 1, 1, 10)) for _ in range(CTAS)]    # a few blocks run far ahead
    # hs[j][q][sender*chunks + c]: the h version held (None: garbage) and whether it was read
    ver = [[[None] * (CTAS * chunks) for _ in range(2)] for _ in range(CTAS)]
    read = [[[True] * (CTAS * chunks) for _ in range(2)] for _ in range(CTAS)]
    def completion(j, q):
        def done(n):   # fill n of hs[q] is h_v, v = 2n + 1 - q (sent at steps 1, 3.. or 0, 2..)
            v = 2 * n + 1 - q
            check(ver[j][q].count(v) == len(ver[j][q]), lambda: f"block {j} full[{q}] phase "
                  f"{n} completes before all of h_{v} landed: {ver[j][q]}")
            dirty[0] = True
        return done
    full = [[MBar(completion(j, q)) for q in range(2)] for j in range(CTAS)]
    inflight = []       # (receiver, buffer, slot, version)
    blocked = [None] * CTAS     # a block's wait condition while it waits
    dirty = [True]              # some block may have blocked or been released: redo `live`
    exited = [False] * CTAS
    sync = dict(arrived=0, gen=0)

    def cluster_sync(j):
        g = sync['gen']; sync['arrived'] += 1
        if sync['arrived'] == CTAS: sync['arrived'] = 0; sync['gen'] += 1; dirty[0] = True
        blocked[j] = lambda: sync['gen'] > g; dirty[0] = True
        while not blocked[j](): yield
        blocked[j] = None

    def wait(j, bar, parity, k):
        blocked[j] = lambda: bar.ready(parity); dirty[0] = True
        while True:
            # (c): phases k - 1 or k + 2 on would fool the parity test either way
            check(k <= bar.done <= k + 1, lambda: f"block {j} waits for fill {k}, "
                                                 f"barrier at {bar.done}")
            if bar.ready(parity): break
            yield
        blocked[j] = None

    def read_h(j, q, t):
        for ph in ("start", "end"):
            check(ver[j][q].count(t - 1) == len(ver[j][q]), lambda:
                  f"block {j} step {t} reads hs[{q}] at its {ph}: {ver[j][q]}, not all h_{t-1}")
            if ph == "start": yield
        read[j][q] = [True] * (CTAS * chunks)

    def send(j, q, t):
        dsts = list(range(CTAS)); rnd.shuffle(dsts)
        for d in dsts:   # 256 threads issue them; the order they land in is the scheduler's
            for c in range(chunks):
                inflight.append((d, q, j * chunks + c, t))
            yield

    def block(j):
        bufs = lambda p: 0 if MUTATION == 'one-buffer' else p
        for s in range(CTAS * chunks): ver[j][0][s] = -1; read[j][0][s] = False  # h_{-1} = 0
        full[j][0].init(); full[j][1].init()
        if MUTATION != 'no-start-sync': yield from cluster_sync(j)
        parts = 15 if MUTATION == 'expect-15' else CTAS
        for t in range(T):
            p = t & 1
            if t > 0:
                par = ((t - 1) >> 1) & 1
                if MUTATION == 'parity-off': par ^= 1
                yield from wait(j, full[j][p], par, (t - 1) >> 1)
            late = MUTATION == 'expect-after-sends'
            if t + 1 < T and not late: full[j][p ^ 1].expect(parts * chunks)
            yield                                   # the product's mma on hs[p]
            yield from read_h(j, bufs(p), t)
            if t + 1 == T: break
            yield                                   # the epilogue, __syncthreads
            yield from send(j, bufs(p ^ 1), t)
            if late: full[j][p ^ 1].expect(parts * chunks)
        if MUTATION != 'no-end-sync': yield from cluster_sync(j)
        check(not any(m[0] == j for m in inflight), f"block {j} exits with chunks to it in flight")
        exited[j] = True

    procs = {j: block(j) for j in range(CTAS)}
    while procs or inflight:
        if dirty[0]:    # the blocks that can run, and their speeds as cumulative weights
            live = [j for j in procs if blocked[j] is None or blocked[j]()]
            cum = [sum(speed[i] for i in live[:n + 1]) for n in range(len(live))]
            dirty[0] = False
        if inflight and (not live or rnd.random() < deliver_p):
            i = rnd.randrange(len(inflight))
            inflight[i], inflight[-1] = inflight[-1], inflight[i]
            d, q, s, v = inflight.pop()
            check(not exited[d], lambda: f"a chunk lands in block {d} after it exited")
            # (b): the slot's old content must have been read (h_{v-2} at step v - 1)
            check(read[d][q][s], lambda: f"h_{v} from block {s // chunks} lands in block {d}'s "
                                         f"hs[{q}] over h_{ver[d][q][s]}, still unread")
            ver[d][q][s] = v; read[d][q][s] = False
            full[d][q].complete_tx(1)
            continue
        check(live, lambda: f"deadlock at T={T}: blocks {sorted(procs)} all wait, "
                            f"nothing in flight")
        j = rnd.choices(live, cum_weights=cum)[0]
        try: next(procs[j])
        except StopIteration: del procs[j]; dirty[0] = True
    check(all(exited), "not every block exited")


def sweep(seed, per_t, ts=range(1, 14)):
    """per_t runs for each T, schedules drawn from `seed`; returns the number of runs."""
    rnd = random.Random(seed)
    runs = 0
    for T in ts:
        for _ in range(per_t):
            simulate(T, rnd.getrandbits(32), chunks=rnd.choice((1, 2)))
            runs += 1
    return runs


def main():
    global MUTATION
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    try:
        runs = sweep(seed, 30)
        for extra in (seed + 1000, seed + 2000):   # a few other seeds, fewer runs each
            runs += sweep(extra, 2)
    except Fail as e:
        print(f"lstm protocol FAILED (seed {seed}): {e}")
        return 1
    for MUTATION, what in BENIGN.items():
        try:
            sweep(seed, 4)
        except Fail as e:
            print(f"lstm protocol: benign change '{MUTATION}' ({what}) fails: {e}")
            return 1
    caught = 0
    for MUTATION, what in MUTATIONS.items():
        try:
            sweep(seed, 6, ts=range(2, 14))
            print(f"lstm protocol: mutation NOT caught: '{MUTATION}' ({what})")
        except Fail as e:
            caught += 1
            print(f"  mutation caught: {MUTATION:14s} {str(e)[:80]}")
    MUTATION = None
    if caught < len(MUTATIONS):
        return 1
    print(f"lstm protocol: {runs} runs (T 1..13) clean; {len(BENIGN)} benign changes clean; "
          f"{caught} mutations caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
