/* Self-test of t3/bfs/expert.cu: the task's own graphs (its generator, tasks/t3/bfs/task.c, at
 * each size set) and graphs it never draws: a star searched from its centre (one hub of every
 * edge) and from a leaf, a path of 3000 levels (as many grid barriers), an isolated source, a
 * dense graph whose every row is a hub. Each search is compared with a host BFS and the task's
 * own validator. Prints PASS/FAIL per case; exit 0 when all pass, 1 on a mismatch, 2 on a CUDA
 * or setup error. With the argument `bench`, then times st_run at the eval size on the graphs of
 * seeds 1, 2 and 3 (the median of 20 calls each, each after a 256 MiB write that flushes the L2).
 * Built with -DBFS_SELFTEST_TRACE, the argument `trace` prints seed 1's search traced phase by
 * phase instead (BFS_TRACE: the time from one grid barrier to the next, the frontier each level
 * expanded). The hook can change the kernel's register allocation, and so its occupancy (in
 * session 56 it gave the lane-pass expert 62 registers against the 48 of `stitch verify`'s
 * build): time only the build without it. tests/gpu/test_bfs_cuda.sh builds and runs both; by hand (repo root):
 *   nvcc -std=c++17 -arch=sm_90a -Iinclude -o /tmp/bfs tests/gpu/bfs_selftest.cu tasks/t3/bfs/task.c
 *   /tmp/bfs bench
 * (-DBFS_EXPERT='"/abs/path/variant.cu"' builds it around another file of the same task.) */
#include <cstdint>

#ifdef BFS_SELFTEST_TRACE
/* The trace: block 0's thread 0 stamps the global timer after each grid barrier. */
#define TRACE_MAX 8192
__device__ unsigned long long trace_ns[TRACE_MAX];
__device__ int trace_phase[TRACE_MAX], trace_level[TRACE_MAX];
__device__ long long trace_frontier[TRACE_MAX];
__device__ int trace_n;
__device__ void trace_stamp(int phase, int lvl, long long frontier) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    const int i = trace_n;
    if (i < TRACE_MAX) {
        trace_ns[i] = t;
        trace_phase[i] = phase;
        trace_level[i] = lvl;
        trace_frontier[i] = frontier;
        trace_n = i + 1;
    }
}
#define BFS_TRACE(phase, lvl, frontier) trace_stamp(phase, lvl, frontier)
#endif

/* -DBFS_EXPERT='"file.cu"' tests and traces another solution of the task (a variant) */
#ifndef BFS_EXPERT
#define BFS_EXPERT "../../tasks/t3/bfs/expert.cu"
#endif
#include BFS_EXPERT
#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "selftest_check.h"
#include "stitch/task_hooks.h"

struct graph {
    int n = 0, deg = 0, source = 0;
    std::vector<int> row_ptr, col;
};

/* The task's sizes (n, deg) as an st_config, for st_init and the task's hooks. */
struct graph_sizes {
    const char *names[2] = {"n", "deg"};
    int64_t values[2];
    st_config cfg;
    graph_sizes(int n, int deg) : values{n, deg}, cfg{2, names, values} {}
    graph_sizes(const graph_sizes &) = delete; /* cfg points into this object */
};

/* CSR of an undirected edge list, padded to exactly n * deg entries (the task's contract) with
 * repeats of its first edges: duplicate edges are allowed and change no distance. */
static graph from_edges(int n, int deg, int source, std::vector<std::pair<int, int>> e) {
    const size_t want = (size_t)n * deg / 2, have = e.size();
    for (size_t i = 0; e.size() < want; i++) e.push_back(e[i % have]);
    std::vector<std::vector<int>> rows(n);
    for (auto [a, b] : e) {
        rows[a].push_back(b);
        rows[b].push_back(a);
    }
    graph g;
    g.n = n;
    g.deg = deg;
    g.source = source;
    for (int v = 0; v < n; v++) {
        std::sort(rows[v].begin(), rows[v].end());
        g.row_ptr.push_back((int)g.col.size());
        g.col.insert(g.col.end(), rows[v].begin(), rows[v].end());
    }
    g.row_ptr.push_back((int)g.col.size());
    return g;
}

/* The task's own graph at size (n, deg) from a seed. */
static bool task_graph(int n, int deg, uint64_t seed, graph &g) {
    g.n = n;
    g.deg = deg;
    g.row_ptr.assign((size_t)n + 1, 0);
    g.col.assign((size_t)n * deg, 0);
    const graph_sizes sz(n, deg);
    st_tensor t[3] = {{"row_ptr", ST_I32, 1, {n + 1}, g.row_ptr.data()},
                      {"col_idx", ST_I32, 1, {(int64_t)n * deg}, g.col.data()},
                      {"source", ST_I32, 1, {1}, &g.source}};
    char msg[256] = "";
    if (st_task_generate(&sz.cfg, seed, t, 3, msg, sizeof msg)) {
        fprintf(stderr, "generator: %s\n", msg);
        return false;
    }
    return true;
}

static std::vector<int> host_bfs(const graph &g) {
    std::vector<int> level(g.n, -1), q = {g.source};
    level[g.source] = 0;
    for (size_t h = 0; h < q.size(); h++)
        for (int j = g.row_ptr[q[h]]; j < g.row_ptr[q[h] + 1]; j++)
            if (level[g.col[j]] < 0) {
                level[g.col[j]] = level[q[h]] + 1;
                q.push_back(g.col[j]);
            }
    return level;
}

struct dev_graph {
    int *row_ptr = nullptr, *col = nullptr, *source = nullptr, *level = nullptr;
    st_tensor in[3], out[1];
    void *ctx = nullptr;
};

static void dev_load(const graph &g, dev_graph &d) {
    CK(cudaMalloc(&d.row_ptr, 4 * g.row_ptr.size()));
    CK(cudaMalloc(&d.col, 4 * g.col.size()));
    CK(cudaMalloc(&d.source, 4));
    CK(cudaMalloc(&d.level, 4 * (size_t)g.n));
    CK(cudaMemcpy(d.row_ptr, g.row_ptr.data(), 4 * g.row_ptr.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.col, g.col.data(), 4 * g.col.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.source, &g.source, 4, cudaMemcpyHostToDevice));
    d.in[0] = {"row_ptr", ST_I32, 1, {g.n + 1}, d.row_ptr};
    d.in[1] = {"col_idx", ST_I32, 1, {(int64_t)g.col.size()}, d.col};
    d.in[2] = {"source", ST_I32, 1, {1}, d.source};
    d.out[0] = {"level", ST_I32, 1, {g.n}, d.level};
    const graph_sizes sz(g.n, g.deg);
    if (st_init(&sz.cfg, nullptr, 0, 0, &d.ctx)) {
        fprintf(stderr, "st_init failed (n %d deg %d)\n", g.n, g.deg);
        exit(2);
    }
}

static void dev_free(dev_graph &d) {
    st_free(d.ctx);
    cudaFree(d.row_ptr);
    cudaFree(d.col);
    cudaFree(d.source);
    cudaFree(d.level);
}

static void search(dev_graph &d) {
    if (st_run(d.ctx, d.in, 3, d.out, 1, 0)) {
        fprintf(stderr, "st_run failed\n");
        exit(2);
    }
    CK(cudaDeviceSynchronize());
}

/* One search against the host BFS and the task's validator; the output is poisoned first. */
static int run_case(const char *name, const graph &g) {
    dev_graph d;
    dev_load(g, d);
    CK(cudaMemset(d.level, 0x7f, 4 * (size_t)g.n));
    search(d);
    std::vector<int> got(g.n);
    CK(cudaMemcpy(got.data(), d.level, 4 * (size_t)g.n, cudaMemcpyDeviceToHost));
    dev_free(d);
    const std::vector<int> want = host_bfs(g);
    int bad = -1, levels = 0;
    for (int v = 0; v < g.n; v++) {
        if (got[v] != want[v] && bad < 0) bad = v;
        levels = std::max(levels, want[v] + 1);
    }
    const graph_sizes sz(g.n, g.deg);
    const st_tensor in[3] = {{"row_ptr", ST_I32, 1, {g.n + 1}, (void *)g.row_ptr.data()},
                             {"col_idx", ST_I32, 1, {(int64_t)g.col.size()}, (void *)g.col.data()},
                             {"source", ST_I32, 1, {1}, (void *)&g.source}};
    const st_tensor out[1] = {{"level", ST_I32, 1, {g.n}, got.data()}};
    char msg[512] = "";
    const int invalid = st_task_validate(&sz.cfg, in, 3, out, out, 1, msg, sizeof msg);
    if (bad >= 0 || invalid) {
        printf("FAIL %s: n %d deg %d levels %d: ", name, g.n, g.deg, levels);
        if (bad >= 0) printf("level[%d] = %d, want %d; ", bad, got[bad], want[bad]);
        printf("validator: %s\n", invalid ? msg : "ok");
        return 1;
    }
    printf("PASS %s: n %d deg %d levels %d\n", name, g.n, g.deg, levels);
    return 0;
}

static double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

#ifdef BFS_SELFTEST_TRACE
static const char *phase_name(int p) {
    switch (p) {
    case BFS_PHASE_INIT: return "init";
    case BFS_PHASE_TO_BOTTOM_UP: return "to bitmap";
    case BFS_PHASE_TO_TOP_DOWN: return "to queues";
    case BFS_PHASE_TOP_DOWN: return "top-down";
    case BFS_PHASE_BOTTOM_UP_WIDE: return "bottom-up wide";
    case BFS_PHASE_BOTTOM_UP: return "bottom-up";
    }
    return "?";
}

/* One search of g traced from the kernel's start (the first stamp ends the init phase), printed
 * phase by phase, after a call that warms up and a write that flushes the L2. */
static void trace_search(const graph &g) {
    dev_graph d;
    dev_load(g, d);
    search(d);
    const size_t flush_bytes = 256u << 20;
    void *flush;
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemset(flush, 1, flush_bytes));
    CK(cudaFree(flush));
    const int zero = 0;
    CK(cudaMemcpyToSymbol(trace_n, &zero, sizeof zero));
    search(d);
    int n;
    CK(cudaMemcpyFromSymbol(&n, trace_n, sizeof n));
    std::vector<unsigned long long> ns(n);
    std::vector<int> phase(n), lvl(n);
    std::vector<long long> fr(n);
    CK(cudaMemcpyFromSymbol(ns.data(), trace_ns, sizeof(unsigned long long) * n));
    CK(cudaMemcpyFromSymbol(phase.data(), trace_phase, sizeof(int) * n));
    CK(cudaMemcpyFromSymbol(lvl.data(), trace_level, sizeof(int) * n));
    CK(cudaMemcpyFromSymbol(fr.data(), trace_frontier, sizeof(long long) * n));
    printf("trace: phase         level   frontier   us (barrier to barrier; init: from the first stamp)\n");
    for (int i = 0; i < n; i++)
        printf("trace: %-13s %5d %10lld %8.1f\n", phase_name(phase[i]), lvl[i], fr[i],
               i ? (ns[i] - ns[i - 1]) * 1e-3 : 0.0);
    if (n) printf("trace: %d barriers, %.1f us from the first to the last\n", n, (ns[n - 1] - ns[0]) * 1e-3);
    dev_free(d);
}
#endif

/* st_run's median over 20 calls on g, each after a 256 MiB write that flushes the L2. */
static void bench(const graph &g, uint64_t seed) {
    dev_graph d;
    dev_load(g, d);
    const size_t flush_bytes = 256u << 20;
    void *flush;
    CK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int rep = 0; rep < 21; rep++) { /* the first call warms up */
        CK(cudaMemset(flush, rep, flush_bytes));
        CK(cudaEventRecord(e0, 0));
        if (st_run(d.ctx, d.in, 3, d.out, 1, 0)) exit(2);
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (rep > 0) ms.push_back(t);
    }
    printf("bench: n %d deg %d seed %llu: st_run median %.4f ms of %zu (cold L2), %d blocks\n", g.n, g.deg,
           (unsigned long long)seed, median(ms), ms.size(), ((bfs_ctx *)d.ctx)->blocks);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(flush));
    dev_free(d);
}

int main(int argc, char **argv) {
    int fails = 0;
    const int sets[][2] = {{1000, 4}, {100003, 6}, {65536, 2}, {2097152, 16}};
    graph eval;
    for (auto &s : sets) {
        graph g;
        if (!task_graph(s[0], s[1], 1, g)) return 2;
        fails += run_case("the task's graph", g);
        if (s[0] == 2097152) eval = std::move(g);
    }
    std::mt19937 rng(7);
    std::vector<std::pair<int, int>> e;
    const int ns = 100000;
    for (int v = 1; v < ns; v++) e.push_back({0, v});
    fails += run_case("a star from its centre (one hub)", from_edges(ns, 2, 0, e));
    fails += run_case("a star from a leaf", from_edges(ns, 2, 777, e));
    e.clear();
    for (int v = 1; v < 3000; v++) e.push_back({v - 1, v});
    fails += run_case("a path of 3000 levels", from_edges(3000, 2, 0, e));
    e.clear();
    for (int v = 2; v < 5000; v++) e.push_back({v - 1, v});
    fails += run_case("an isolated source", from_edges(5000, 2, 0, e));
    e.clear();
    const int nd = 4096, dd = 512;
    while (e.size() < (size_t)nd * dd / 2) {
        const int a = (int)(rng() % nd), b = (int)(rng() % nd);
        if (a != b) e.push_back({a, b});
    }
    fails += run_case("every row a hub (degree ~512)", from_edges(nd, dd, 5, e));
    printf("%s: %d case(s) failed\n", fails ? "FAIL" : "PASS", fails);
    const std::string mode = argc > 1 ? argv[1] : "";
    if (fails || (mode != "bench" && mode != "trace")) return fails ? 1 : 0;
    if (mode == "trace") {
#ifdef BFS_SELFTEST_TRACE
        trace_search(eval);
        return 0;
#else
        fprintf(stderr, "trace: not built in (build with -DBFS_SELFTEST_TRACE)\n");
        return 2;
#endif
    }
    /* the time moves with the graph and source by tens of percent: three seeds' graphs */
    bench(eval, 1);
    for (uint64_t seed = 2; seed <= 3; seed++) {
        graph g;
        if (!task_graph(2097152, 16, seed, g)) return 2;
        bench(g, seed);
    }
    return 0;
}
