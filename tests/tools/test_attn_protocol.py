#!/usr/bin/env python3
"""Host-only checks of the sm_90a attention kernels' control logic (the Hopper paths of
t2/attention_causal/expert.cu and t4/flash_attention/expert.cu), for a machine without a GPU.

    test_attn_protocol.py

1. Protocol: one block's two consumer warpgroups and its load issuer as coroutines under random
   interleavings. The issuer is one of:
   - t2: a producer warp's lane waiting for each buffer in turn (ISSUER = None; the consumers
     wait for V_{n-1} after the ping-pong turn);
   - t4's default build (HP_PRODUCER_WG 1, ISSUER = 'P'): a producer warpgroup's thread doing
     nothing but pump loads in order (hp_producer, hp_pump), the consumers waiting for K_n and
     V_{n-1} before the turn;
   - t4 with HP_PRODUCER_WG=0 (ISSUER = 1, or 0 with HP_ISSUER=0): the first thread of a
     consumer warpgroup, pumping loads in order while its warpgroup waits for tiles and after it
     releases a K tile (hp_pump, hp_wait2), never blocking on a busy buffer.
   All with mbarriers of real parity semantics (a waiter two phases behind hangs),
   TMA completions arriving asynchronously and in any order, the FA3 ping-pong named barriers,
   and buffer hazards (a TMA into a buffer some warpgroup still reads, or a warpgroup reading a
   buffer that holds another tile, fails). Work items announced through the Q buffers' slots,
   from the static snake order or from a global counter shared with other blocks (modelled as
   random gaps), the end announced by a slot; 1-3 stages, 1-2 Q buffers, several grid sizes,
   ragged T. Deadlock, dangling named-barrier arrivals and hazards fail.
2. Algorithm: the consumer's pipelined order (S_n issued, O rescaled by alpha_{n-1}, then
   P_{n-1}·V_{n-1}; the diagonal tile masked; zero rows past T) in double precision against exact
   causal attention on ragged T.
3. Mutations: broken variants of t4's folded issuer (MUTATIONS) must each fail somewhere in a
   sweep, so the model can catch the bugs it is meant to catch.
Mirrors the kernels' index expressions by hand: keep them in step with hp_producer (t2's, and
t4's pump loop), hp_pump/hp_issue_q/hp_wait2 (t4), hp_consumer, hp_consumer_item and hp_fetch.
A warpgroup is one coroutine (its warps only meet at wgmma and the named barriers, so splitting
them would add no waits). Exit 0 when everything passes (about 8 s on one core).
"""
import math
import random
import sys

S = 2            # HP_STAGES (main() sweeps 1-3)
QB = 2           # Q buffers, hp_cfg::QBUFS (main() sweeps 1-2)
PINGPONG = True  # HP_PINGPONG
ISSUER = None    # None: t2's producer warp; t4: 0 or 1, the warpgroup whose thread issues, or 'P'
MUTATION = None  # a deliberately broken t4 variant (see MUTATIONS)
MUTATIONS = {
    'no-pump-in-waits': "the issuer pumps only after its K releases, not while waiting",
    'blocking-empty': "the issuer waits for a busy buffer instead of returning",
    'no-empty-check': "loads issued without checking that the buffer was released",
    'end-not-announced': "the end is never put in a slot",
}


class MBar:
    def __init__(s, count): s.count=count; s.pending=count; s.tx=0; s.done=0
    def arrive(s, tx=0):
        s.pending -= 1; s.tx += tx; assert s.pending >= 0, "too many arrivals"; s.check()
    def complete_tx(s, b):
        s.tx -= b; assert s.tx >= 0; s.check()
    def check(s):
        if s.pending == 0 and s.tx == 0: s.done += 1; s.pending = s.count
    def ready(s, parity): return (s.done & 1) != parity

class NBar:
    def __init__(s): s.arrived=0; s.gen=0
    def arrive(s):
        s.arrived += 1
        if s.arrived == 2: s.arrived = 0; s.gen += 1
        return s.gen

def hp_item(r, blk, G): return r*G + ((G-1-blk) if r & 1 else blk)

def simulate(n_items, BH, n_qblocks, blk, G, seed, dynamic):
    """One block (blk of G). dynamic: the global counter, other blocks taking random items in
    between; else the static snake order. Items decode as in hp_decode with hpg = BH."""
    rnd = random.Random(seed)
    full_q=[MBar(1) for _ in range(QB)]; empty_q=[MBar(8) for _ in range(QB)]
    full_k=[MBar(1) for _ in range(S)]; full_v=[MBar(1) for _ in range(S)]
    empty_k=[MBar(8) for _ in range(S)]; empty_v=[MBar(8) for _ in range(S)]
    nb = {1: NBar(), 2: NBar()}
    content = {}            # buffer -> tile id landed
    users = {}              # buffer -> set of (wg) currently reading
    inflight = []           # pending TMA: (buffer, tile, bar)
    slot = [None] * QB      # the shared-memory item slots
    counter = [0]
    def fetch(r):
        if dynamic:
            counter[0] += rnd.choice((0, 0, 1, 2, G))  # other blocks' fetches in between
            item = counter[0]; counter[0] += 1
            return min(item, n_items)
        item = hp_item(r, blk, G)
        return item if item < n_items else n_items
    def wait(bar, par):
        while not bar.ready(par): yield
    def tma(buf, tile, bar, nbytes=1):
        assert not users.get(buf), f"TMA overwrites {buf} while read by {users[buf]}"
        bar.arrive(tx=nbytes); content[buf] = None; inflight.append((buf, tile, bar, nbytes))
        yield
    def producer():
        x = 0; qi = 0
        while True:
            qs, quse = qi % QB, qi // QB
            if quse > 0: yield from wait(empty_q[qs], (quse-1) & 1)
            item = fetch(qi)
            slot[qs] = item
            if item >= n_items:
                full_q[qs].arrive(); return
            qb = n_qblocks - 1 - item // BH
            yield from tma(('Q', qs), ('Q', qi), full_q[qs])
            for n in range(qb + 2):   # K_0, K_1, V_0, K_2, V_1, ..., V_qb
                if n <= qb:
                    xk = x + n; st, use = xk % S, xk // S
                    if use > 0: yield from wait(empty_k[st], (use-1) & 1)
                    yield from tma(('K', st), ('K', xk), full_k[st])
                if n > 0:
                    xv = x + n - 1; st, use = xv % S, xv // S
                    if use > 0: yield from wait(empty_v[st], (use-1) & 1)
                    yield from tma(('V', st), ('V', xv), full_v[st])
            x += qb + 1; qi += 1
    # t4: the issuer's state and pump (hp_issuer, hp_pump, hp_issue_q)
    I = dict(on=ISSUER is not None, claim=None, nt=0, step=0, x=0, qi=0)
    def issue(buf, tile, bar, nbytes=1):
        assert not users.get(buf), f"TMA overwrites {buf} while read by {users[buf]}"
        bar.arrive(tx=nbytes); content[buf] = None; inflight.append((buf, tile, bar, nbytes))
    def free(bar, par):
        """mbar_test of an empty barrier: the buffer's previous use released by all 8 warps."""
        if MUTATION == 'no-empty-check': return True
        return bar.ready(par)
    def pump():
        while I['on']:
            if I['step'] == 0:
                qs, quse = I['qi'] % QB, I['qi'] // QB
                if quse > 0 and not free(empty_q[qs], (quse-1) & 1): return False
                if MUTATION == 'end-not-announced' and I['claim'] >= n_items:
                    I['on'] = False; return True
                slot[qs] = I['claim']
                if I['claim'] >= n_items:
                    full_q[qs].arrive(); I['on'] = False; return True
                I['nt'] = n_qblocks - I['claim'] // BH
                issue(('Q', qs), ('Q', I['qi']), full_q[qs]); I['step'] = 1
                continue
            nt, st_ = I['nt'], I['step']
            if st_ > 2 * nt:   # claim the next item, then return (the atomic's latency)
                I['claim'] = fetch(I['qi'] + 1); I['x'] += nt; I['qi'] += 1; I['step'] = 0
                return True
            k = st_ == 1 or (st_ % 2 == 0 and st_ < 2 * nt)
            n = st_ // 2 if k else (nt - 1 if st_ == 2 * nt else st_ // 2 - 1)
            xt = I['x'] + n; st, use_ = xt % S, xt // S
            if use_ > 0 and not free((empty_k if k else empty_v)[st], (use_-1) & 1): return False
            kv = 'K' if k else 'V'
            issue((kv, st), (kv, xt), (full_k if k else full_v)[st])
            I['step'] += 1
        return True
    def pump_blocking():
        """'blocking-empty': the pump waits for each busy buffer (a yielding generator)."""
        while I['on']:
            before = (I['step'], I['qi'])
            done = pump()
            if done or not I['on']: return
            if (I['step'], I['qi']) == before:
                yield  # spin on the busy buffer
    def wait_c(iss, pairs):
        """hp_wait2: a consumer's wait for barrier phases; the issuer pumps while waiting."""
        if not (iss and I['on']) or MUTATION == 'no-pump-in-waits':
            for bar, par in pairs: yield from wait(bar, par)
            return
        while True:
            if MUTATION == 'blocking-empty': yield from pump_blocking()
            else: pump()
            if all(bar.ready(par) for bar, par in pairs): return
            yield
    def use(buf, expect, wg):
        assert content.get(buf) == expect, \
            f"wg{wg} reads {buf}={content.get(buf)} expected {expect}"
        users.setdefault(buf, set()).add(wg)
    def release(buf, wg, bar):
        users[buf].discard(wg)
        for _ in range(4): bar.arrive()   # 4 warps of this warpgroup
    def nsync(idx):
        g = nb[idx].arrive()
        while nb[idx].gen < g: yield
    def pumper():
        """t4 with HP_PRODUCER_WG: hp_producer."""
        I['claim'] = fetch(0)
        while I['on']:
            pump(); yield
    def consumer(wg):
        folded = ISSUER is not None   # t4's consumer code
        iss = folded and wg == ISSUER
        # t4 waits for V_{n-1} before the turn, so the issuer never enters the turn with a tile
        # the other warpgroup needs unissued. (With MUTATION 'v-wait-after-turn', t2's order,
        # the sweeps pass too: the greedy pump has always issued V_{n-1} by then; the kernel
        # keeps the order that does not depend on that argument.)
        v_first = folded and MUTATION != 'v-wait-after-turn'
        if iss: I['claim'] = fetch(0)
        if PINGPONG and wg == 1: nb[1].arrive()
        x = 0; qi = 0
        while True:
            qs = qi % QB
            yield from wait_c(iss, [(full_q[qs], (qi // QB) & 1)])
            item = slot[qs]
            if item >= n_items: break
            qb = n_qblocks - 1 - item // BH; nt = qb + 1
            use(('Q', qs), ('Q', qi), wg)
            st = x % S
            yield from wait_c(iss, [(full_k[st], (x//S) & 1)])
            if PINGPONG: yield from nsync(1 + wg)
            use(('K', st), ('K', x), wg)
            if PINGPONG: nb[2 - wg].arrive()
            yield
            release(('K', st), wg, empty_k[st])
            if nt == 1: release(('Q', qs), wg, empty_q[qs])
            for n in range(1, nt):
                xn = x + n; xp = xn - 1; st, pst = xn % S, xp % S
                if v_first:
                    yield from wait_c(iss, [(full_k[st], (xn//S) & 1), (full_v[pst], (xp//S) & 1)])
                    use(('V', pst), ('V', xp), wg)
                else:
                    yield from wait_c(iss, [(full_k[st], (xn//S) & 1)])
                if PINGPONG: yield from nsync(1 + wg)
                use(('K', st), ('K', xn), wg)
                if not v_first:
                    yield from wait_c(iss, [(full_v[pst], (xp//S) & 1)])
                    use(('V', pst), ('V', xp), wg)
                if PINGPONG: nb[2 - wg].arrive()
                yield
                release(('K', st), wg, empty_k[st])
                if n == nt - 1: release(('Q', qs), wg, empty_q[qs])
                if iss and I['on'] and MUTATION != 'blocking-empty': pump()
                if iss and MUTATION == 'blocking-empty': yield from pump_blocking()
                yield
                release(('V', pst), wg, empty_v[pst])
            xl = x + nt - 1
            yield from wait_c(iss, [(full_v[xl % S], (xl//S) & 1)])
            use(('V', xl % S), ('V', xl), wg)
            yield
            release(('V', xl % S), wg, empty_v[xl % S])
            x += nt; qi += 1
        if PINGPONG and wg == 0: yield from nsync(1)
    procs = {'C0': consumer(0), 'C1': consumer(1)}
    if ISSUER is None: procs['P'] = producer()
    if ISSUER == 'P': procs['P'] = pumper()
    steps = 0
    while procs or inflight:
        steps += 1
        # the longest passing run takes ~2,600 steps: 40x that is a hang (and keeps the
        # mutations, which all end here, quick)
        if steps > 10**5: raise Exception("deadlock/livelock")
        choices = list(procs) + (['TMA'] if inflight else [])
        c = rnd.choice(choices)
        if c == 'TMA':
            buf, tile, bar, nb_ = inflight.pop(rnd.randrange(len(inflight)))
            content[buf] = tile; bar.complete_tx(nb_)
            continue
        try: next(procs[c])
        except StopIteration: del procs[c]
    # dangling named-barrier arrivals
    assert nb[1].arrived == 0 and nb[2].arrived == 0, \
        f"dangling arrivals {nb[1].arrived} {nb[2].arrived}"
    return steps


def algorithm(T, D=8, BM=128, BN=128):
    """Worst |O - O_exact| of the consumer's pipelined online softmax over all rows < T."""
    rnd = random.Random(T)
    Q, K, V = ([[rnd.gauss(0, sd) for _ in range(D)] for _ in range(T)] for sd in (1.5, 1.5, 1.0))
    scale = 1 / math.sqrt(D)
    sl = scale * 1.4426950408889634
    kz = lambda M, j: M[j] if j < T else [0.0] * D  # TMA zero fill past T
    worst = 0.0
    for qb in range((T + BM - 1) // BM):
        nt = qb + 1
        for row in range(qb * BM, qb * BM + BM):
            q = Q[row] if row < T else [0.0] * D
            S = lambda n: [sum(a * b for a, b in zip(q, kz(K, n * BN + c))) for c in range(BN)]
            def soft(s, m, l, diag, key0):
                if diag:
                    s = [(-math.inf if key0 + c > row else x) for c, x in enumerate(s)]
                mnew = max(m, max(s) * sl)
                mu = 0.0 if mnew == -math.inf else mnew
                alpha = 2 ** (m - mu) if m != -math.inf else 0.0
                p = [2 ** (x * sl - mu) if x != -math.inf else 0.0 for x in s]
                return p, mnew, l * alpha + sum(p), alpha
            pv = lambda o, p, n: [o[d] + sum(p[c] * kz(V, n * BN + c)[d] for c in range(BN))
                                  for d in range(D)]
            o = [0.0] * D
            p, m, l, alpha = soft(S(0), -math.inf, 0.0, nt == 1, 0)
            for n in range(1, nt):
                s = S(n)
                o = pv([x * alpha for x in o], p, n - 1)
                p, m, l, alpha = soft(s, m, l, n == nt - 1, n * BN)
            o = [x / l for x in pv([x * alpha for x in o], p, nt - 1)]
            if row >= T:
                continue
            w = [sum(a * b for a, b in zip(Q[row], K[j])) * scale for j in range(row + 1)]
            mx = max(w)
            e = [math.exp(x - mx) for x in w]
            ref = [sum(e[j] * V[j][d] for j in range(row + 1)) / sum(e) for d in range(D)]
            worst = max(worst, max(abs(a - b) for a, b in zip(o, ref)))
    return worst


def sweep(issuers, pingpongs, seeds=3):
    """Every stage count, Q buffer count, size, grid, block and schedule; returns the count."""
    global S, QB, ISSUER, PINGPONG
    cases = 0
    for ISSUER in issuers:
        for PINGPONG in pingpongs:
            for S, QB in ((1, 1), (2, 1), (2, 2), (3, 1), (3, 2)):
                for (T, BH) in [(1, 1), (77, 3), (128, 1), (129, 2), (300, 2), (1000, 3), (600, 5)]:
                    nq = (T + 127) // 128
                    n_items = nq * BH
                    for G in sorted({1, 2, 3, n_items}):
                        for blk in range(min(G, n_items)):
                            for seed in range(seeds):
                                for dynamic in (False, True):
                                    simulate(n_items, BH, nq, blk, G, seed, dynamic)
                                    cases += 1
    return cases


def mutations():
    """Each broken t4 variant must fail somewhere in a sweep (deadlock, hazard, dangling
    arrival); returns how many did not."""
    global MUTATION
    missed = 0
    for MUTATION, what in MUTATIONS.items():
        try:
            sweep((0, 1), (True, False), seeds=2)
            print("mutation NOT caught: %s (%s)" % (MUTATION, what))
            missed += 1
        except (AssertionError, Exception) as e:
            print("mutation caught: %-18s %s: %s" % (MUTATION, type(e).__name__, str(e)[:60]))
    MUTATION = None
    return missed


def main():
    cases = sweep((None,), (True,))
    print("protocol, producer warp (t2): %d simulations pass (stages 1-3, 1-2 Q buffers, "
          "ping-pong on)" % cases)
    for iss, what in (('P', "a producer warpgroup's thread (t4, the default HP_PRODUCER_WG=1)"),
                      (1, "warpgroup 1's first thread (t4, HP_PRODUCER_WG=0)"),
                      (0, "warpgroup 0's first thread (t4, HP_PRODUCER_WG=0 HP_ISSUER=0)")):
        cases = sweep((iss,), (True, False))
        print("protocol, loads issued by %s: %d simulations pass (stages 1-3, 1-2 Q buffers, "
              "ping-pong on and off)" % (what, cases))
    bad = mutations()
    for T in (1, 77, 128, 129, 200, 300):
        w = algorithm(T)
        print("algorithm T=%d: max |diff| %.2g" % (T, w))
        bad += w > 1e-9
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
