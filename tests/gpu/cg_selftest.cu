/* Self-test of t3/cg/expert.cu on matrices and buffers the task's generator never makes: col_idx,
 * val and x off their 16-byte alignment (the 4-byte copies and the scalar update), rows of
 * hundreds of entries (tiles too long for the shared buffers, read from global memory, and the
 * loop past a row's first 8 entries), and odd grids; besides the task's own structure (the
 * 7-point stencil plus long-range pairs). It includes the solution file itself and runs it
 * through st_init/st_run, x poisoned with NaN first, and checks ||b - A x|| / ||b|| <= 1e-5 in
 * double, as the task's validator does. Prints PASS/FAIL per case; exit 0 when all pass, 1 when
 * one fails, 2 on a CUDA or setup error. With the argument `bench`, then times st_run at the eval
 * size (128^3), the median of 20 calls each after a 256 MiB write that flushes the L2, and the
 * expert's pieces alone, 61 times each in a cooperative kernel of its grid: the grid barrier, the
 * grid-wide sum, the sparse-product sweep and the update sweep (tasks/t3/cg/NOTES.md).
 * tests/gpu/test_cg_cuda.sh builds and runs it; by hand (repo root):
 *   nvcc -std=c++17 -arch=sm_90a -Iinclude -o /tmp/cgs tests/gpu/cg_selftest.cu && /tmp/cgs bench */
#include "../../tasks/t3/cg/expert.cu"
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "selftest_check.h"

struct csr {
    int n = 0;
    std::vector<int> row_ptr, col;
    std::vector<float> val, b;
};

static long long formula_nnz(long long nx, long long ny, long long nz) {
    const long long n = nx * ny * nz;
    return 7 * n - 2 * (nx * ny + ny * nz + nx * nz) + 2 * (n / 8);
}

/* A weighted graph Laplacian plus a positive shift from an edge list: symmetric, strictly
 * diagonally dominant, so SPD; rows sorted by column. */
static csr from_edges(int n, const std::vector<std::pair<int, int>> &edges, float shift_lo, float shift_hi,
                      std::mt19937 &g) {
    std::uniform_real_distribution<float> w(0.5f, 1.5f), shift(shift_lo, shift_hi);
    std::vector<std::vector<std::pair<int, float>>> rows(n);
    std::vector<double> diag(n, 0.0);
    for (auto [a, c] : edges) {
        const float x = w(g);
        rows[a].push_back({c, -x});
        rows[c].push_back({a, -x});
        diag[a] += x;
        diag[c] += x;
    }
    csr m;
    m.n = n;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int i = 0; i < n; i++) {
        rows[i].push_back({i, (float)(diag[i] + shift(g))});
        std::sort(rows[i].begin(), rows[i].end());
        m.row_ptr.push_back((int)m.col.size());
        for (auto &e : rows[i]) {
            m.col.push_back(e.first);
            m.val.push_back(e.second);
        }
        m.b.push_back(nd(g));
    }
    m.row_ptr.push_back((int)m.col.size());
    return m;
}

/* The task's structure: the 7-point stencil of the grid plus n/8 long-range pairs that are not
 * grid neighbours. */
static csr stencil(int nx, int ny, int nz, std::mt19937 &g) {
    const int n = nx * ny * nz;
    std::vector<std::pair<int, int>> e;
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                const int i = (z * ny + y) * nx + x;
                if (x + 1 < nx) e.push_back({i, i + 1});
                if (y + 1 < ny) e.push_back({i, i + nx});
                if (z + 1 < nz) e.push_back({i, i + nx * ny});
            }
    std::set<std::pair<int, int>> grid(e.begin(), e.end());
    std::vector<int> perm(n);
    for (int i = 0; i < n; i++) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), g);
    const int pairs = n / 8;
    for (int k = 0; k < pairs; k++) {
        /* a grid neighbour as partner: swap in one from the unused tail */
        for (int tries = 0; grid.count({std::min(perm[2 * k], perm[2 * k + 1]),
                                        std::max(perm[2 * k], perm[2 * k + 1])}) && tries < 100; tries++)
            std::swap(perm[2 * k + 1], perm[2 * pairs + (int)(g() % (unsigned)(n - 2 * pairs))]);
        e.push_back({perm[2 * k], perm[2 * k + 1]});
    }
    return from_edges(n, e, 0.01f, 0.1f, g); /* the task's shift */
}

/* As many edges as the stencil's formula gives the grid (st_run checks the count), four of the
 * vertices joined to `hub` others each, the rest random pairs: a hub's row makes its tile longer
 * than a shared buffer holds (256 rows of 7 entries and 800 more against 2304). */
static csr hubs(int nx, int ny, int nz, int hub, std::mt19937 &g) {
    const int n = nx * ny * nz;
    const long long want = (formula_nnz(nx, ny, nz) - n) / 2;
    std::set<std::pair<int, int>> seen;
    std::vector<std::pair<int, int>> e;
    auto add = [&](int a, int c) {
        if (a == c) return;
        std::pair<int, int> p = {std::min(a, c), std::max(a, c)};
        if (seen.insert(p).second) e.push_back(p);
    };
    for (int h = 0; h < 4; h++)
        for (int k = 0; (long long)e.size() < want && k < hub; k++) add(h * (n / 4), (int)(g() % (unsigned)n));
    while ((long long)e.size() < want) add((int)(g() % (unsigned)n), (int)(g() % (unsigned)n));
    /* a larger shift: a hub's row raises the top of the spectrum, and plain CG in float needs the
     * condition number near the task's (hundreds to a few thousand) to reach the bound */
    return from_edges(n, e, 1.0f, 2.0f, g);
}

static double residual(const csr &m, const std::vector<float> &x) {
    double rr = 0, bb = 0;
    for (int i = 0; i < m.n; i++) {
        if (!std::isfinite(x[i])) return INFINITY;
        double t = m.b[i];
        for (int k = m.row_ptr[i]; k < m.row_ptr[i + 1]; k++) t -= (double)m.val[k] * x[m.col[k]];
        rr += t * t;
        bb += (double)m.b[i] * m.b[i];
    }
    return std::sqrt(rr / bb);
}

/* Device copies of a matrix, each array `skew` floats past a 16-byte boundary. */
struct dev {
    char *rp = nullptr, *ci = nullptr, *va = nullptr, *b = nullptr, *x = nullptr;
    st_tensor in[4], out[1];
};

static void *up(char **base, const void *src, size_t bytes, int skew) {
    CK(cudaMalloc(base, bytes + 16));
    char *p = *base + 4 * skew;
    if (src) CK(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
    return p;
}

static void dev_init(dev &d, const csr &m, int skew) {
    const size_t nnz = m.col.size();
    d.in[0] = {"row_ptr", ST_I32, 1, {m.n + 1}, up(&d.rp, m.row_ptr.data(), 4 * (m.n + 1), 0)};
    d.in[1] = {"col_idx", ST_I32, 1, {(int64_t)nnz}, up(&d.ci, m.col.data(), 4 * nnz, skew)};
    d.in[2] = {"val", ST_F32, 1, {(int64_t)nnz}, up(&d.va, m.val.data(), 4 * nnz, skew)};
    d.in[3] = {"b", ST_F32, 1, {m.n}, up(&d.b, m.b.data(), 4 * m.n, 0)};
    d.out[0] = {"x", ST_F32, 1, {m.n}, up(&d.x, nullptr, 4 * m.n, skew)};
}

static void dev_free(dev &d) {
    for (char *p : {d.rp, d.ci, d.va, d.b, d.x}) cudaFree(p);
}

static void *init(int nx, int ny, int nz, cudaStream_t s) {
    const char *names[] = {"nx", "ny", "nz"};
    int64_t vals[] = {nx, ny, nz};
    st_config cfg = {3, names, vals};
    void *ctx = nullptr;
    if (st_init(&cfg, nullptr, 0, s, &ctx)) {
        fprintf(stderr, "st_init failed for %d x %d x %d\n", nx, ny, nz);
        exit(2);
    }
    return ctx;
}

static int run_case(const char *what, int nx, int ny, int nz, int skew, int hub) {
    std::mt19937 g(nx * 7919 + ny * 31 + nz + hub);
    const csr m = hub ? hubs(nx, ny, nz, hub, g) : stencil(nx, ny, nz, g);
    if ((long long)m.col.size() != formula_nnz(nx, ny, nz)) {
        fprintf(stderr, "%s: the generator made %zu entries, the task's formula %lld\n", what, m.col.size(),
                formula_nnz(nx, ny, nz));
        exit(2);
    }
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void *ctx = init(nx, ny, nz, s);
    dev d;
    dev_init(d, m, skew);
    CK(cudaMemset(d.out[0].data, 0xff, 4 * (size_t)m.n)); /* NaN */
    const int rc = st_run(ctx, d.in, 4, d.out, 1, s);
    CK(cudaStreamSynchronize(s));
    std::vector<float> x(m.n);
    CK(cudaMemcpy(x.data(), d.out[0].data, 4 * (size_t)m.n, cudaMemcpyDeviceToHost));
    const double res = rc ? INFINITY : residual(m, x);
    int longest = 0;
    for (int i = 0; i < m.n; i++) longest = std::max(longest, m.row_ptr[i + 1] - m.row_ptr[i]);
    const bool ok = rc == 0 && res <= 1e-5;
    printf("%s %s: n %d, nnz %zu, longest row %d, residual %.3g%s\n", ok ? "PASS" : "FAIL", what, m.n,
           m.col.size(), longest, res, rc ? " (st_run failed)" : "");
    dev_free(d);
    st_free(ctx);
    CK(cudaStreamDestroy(s));
    return ok ? 0 : 1;
}

// ----------------------------------------------------------------------------
// bench: st_run at the eval size, then the expert's pieces alone

#define PIECE_ITERS 61

__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM) piece_barrier(int iters) {
    cg::grid_group grid = cg::this_grid();
    for (int i = 0; i < iters; i++) grid.sync();
}

__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM) piece_sum(double *slots, int iters) {
    cg::grid_group grid = cg::this_grid();
    __shared__ double red[WARPS + 1];
    int parity = 0;
    double t = 0;
    for (int i = 0; i < iters; i++) t += grid_sum(grid, 1.0, slots, parity, red);
    if (t < 0) slots[0] = t; /* keeps the sums */
}

__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
piece_product(const int *__restrict__ row_ptr, const int *__restrict__ col, const float *__restrict__ val,
              const float *r, float *p0, float *p1, float *ap, int n, int nnz, int iters) {
    cg::grid_group grid = cg::this_grid();
    extern __shared__ int4 tile_buf[];
    int *scol;
    float *sval;
    tile_buffers(tile_buf, &scol, &sval);
    double t = 0;
    for (int it = 0; it < iters; it++) {
        t += sweep_product(row_ptr, col, val, r, it & 1 ? p1 : p0, it & 1 ? p0 : p1, ap, 0.5f, false, n, nnz,
                           true, scol, sval);
        grid.sync();
    }
    if (t == 12345.0) ap[0] = 1.0f; /* keeps the sums */
}

__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
piece_update(float *x, float *r, const float *p, const float *ap, int n, int iters) {
    cg::grid_group grid = cg::this_grid();
    double t = 0;
    for (int it = 0; it < iters; it++) {
        t += sweep_update(x, r, p, ap, 1e-7f, n, true);
        grid.sync();
    }
    if (t == 12345.0) x[0] = 1.0f;
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static void bench() {
    const int e = 128;
    std::mt19937 g(1);
    const csr m = stencil(e, e, e, g);
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void *ctx = init(e, e, e, s);
    dev d;
    dev_init(d, m, 0);
    char *flush;
    const size_t flush_bytes = 256u << 20;
    CK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int k = 0; k < 20; k++) {
        CK(cudaMemsetAsync(flush, k, flush_bytes, s));
        CK(cudaEventRecord(e0, s));
        if (st_run(ctx, d.in, 4, d.out, 1, s)) exit(2);
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
    }
    std::vector<float> x(m.n);
    CK(cudaMemcpy(x.data(), d.out[0].data, 4 * (size_t)m.n, cudaMemcpyDeviceToHost));
    printf("bench: 128^3 (n %d, nnz %zu): st_run median %.3f ms of 20, residual %.3g\n", m.n, m.col.size(),
           median(ms), residual(m, x));
    cg_ctx *c = (cg_ctx *)ctx;
    int iters = PIECE_ITERS, n = m.n, nnz = (int)m.col.size();
    const int *rp = (const int *)d.in[0].data, *ci = (const int *)d.in[1].data;
    const float *va = (const float *)d.in[2].data;
    float *xo = (float *)d.out[0].data;
    CK(cudaFuncSetAttribute(piece_product, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM_BYTES));
    auto piece = [&](const void *k, void **args, size_t smem, const char *what) {
        std::vector<float> t;
        for (int rep = 0; rep < 5; rep++) {
            CK(cudaEventRecord(e0, s));
            CK(cudaLaunchCooperativeKernel(k, dim3(c->blocks), dim3(THREADS), args, smem, s));
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            float v;
            CK(cudaEventElapsedTime(&v, e0, e1));
            t.push_back(v);
        }
        printf("bench: %-28s %7.2f us each (%d blocks)\n", what, median(t) * 1e3 / iters, c->blocks);
    };
    void *a_barrier[] = {&iters};
    piece((const void *)piece_barrier, a_barrier, 0, "grid barrier");
    void *a_sum[] = {&c->slots, &iters};
    piece((const void *)piece_sum, a_sum, 0, "grid-wide sum");
    void *a_product[] = {&rp, &ci, &va, &c->r, &c->p0, &c->p1, &c->ap, &n, &nnz, &iters};
    piece((const void *)piece_product, a_product, SMEM_BYTES, "sparse product sweep + barrier");
    void *a_update[] = {&xo, &c->r, &c->p0, &c->ap, &n, &iters};
    piece((const void *)piece_update, a_update, 0, "update sweep + barrier");
    cudaFree(flush);
    dev_free(d);
    st_free(ctx);
}

int main(int argc, char **argv) {
    int fails = 0;
    fails += run_case("the task's structure, 32^3", 32, 32, 32, 0, 0);
    fails += run_case("col_idx, val and x 4 bytes off 16", 32, 32, 32, 1, 0);
    fails += run_case("col_idx, val and x 12 bytes off 16", 37, 29, 31, 3, 0);
    fails += run_case("rows of 800 entries (tiles read from global memory)", 24, 24, 24, 0, 800);
    fails += run_case("rows of 800 entries, misaligned", 24, 24, 24, 1, 800);
    fails += run_case("one row", 1, 1, 1, 0, 0);
    fails += run_case("a line of 1000", 1000, 1, 1, 0, 0);
    fails += run_case("fewer rows than a tile", 5, 4, 3, 0, 0);
    printf("%s: %d case(s) failed\n", fails ? "FAIL" : "PASS", fails);
    if (!fails && argc > 1 && std::string(argv[1]) == "bench") bench();
    return fails ? 1 : 0;
}
