/* Self-test of t1/topk/expert.cu on rows the task's size sets never draw: constant rows and rows
 * of three values (more candidates than the buffer holds, so the persistent kernel's general
 * path), such rows interleaved with random ones in one call (a block's hand-over between the two
 * paths), signed zeros, widths that leave threads without elements, more rows than persistent
 * blocks, misaligned rows, and the widths and k just past the persistent kernel's limits. It
 * includes the solution file itself and runs it through st_init/st_run against a host sort of
 * the same total order, the outputs poisoned with NaN first. Prints PASS/FAIL per case; exit 0
 * when all pass, 1 on a mismatch, 2 on a CUDA or setup error. With the argument `bench`, then
 * times st_run at the eval size (8192 x 8192, k = 64), the median of 50 calls, each after a
 * 256 MiB write that flushes the L2; `bench-only` times without the cases.
 * tests/gpu/test_topk_cuda.sh builds and runs it; by hand (repo root):
 *   nvcc -std=c++17 -arch=sm_90a -Iinclude -o /tmp/tks tests/gpu/topk_selftest.cu
 *   /tmp/tks bench
 * (-DNBUF=2 or -DTOPK_TMA=0 build the expert's other pipelines: two rows in flight a block, and
 * cp.async instead of the bulk copy on sm_90.) */
#include "../../tasks/t1/topk/expert.cu"
#include <algorithm>
#include <string>
#include <vector>

#include "selftest_check.h"

static uint64_t host_key(float v, int col) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (u == 0x80000000u) u = 0u;
    const uint32_t vk = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((uint64_t)vk << 32) | (0xffffffffu - (uint32_t)col);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}

enum row_kind { RANDOM, CONSTANT, THREE, ZEROS, MIXED };

static float element(row_kind kind, int r, int cols) {
    switch (kind) {
    case CONSTANT: return 5.0f;
    case THREE: return (float)(rnd() % 3);
    case ZEROS: return (rnd() & 1) ? -0.0f : ((rnd() % 64) ? 0.0f : (float)(rnd() % 7) - 3.0f);
    case MIXED:
        if (r % 3 == 1) return 5.0f;
        if (r % 3 == 2) return (float)(rnd() % 3);
        /* fall through */
    case RANDOM:
    default: return (float)((int)(rnd() % (16u * (unsigned)cols)) - 8 * cols);
    }
}

/* One call at rows x cols, k, on x shifted by `shift` floats from an aligned allocation. */
static int run_case(const char *name, row_kind kind, int rows, int cols, int k, int shift) {
    std::vector<float> x((size_t)rows * cols);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) x[(size_t)r * cols + j] = element(kind, r, cols);
    float *dx, *dv;
    int *di;
    CK(cudaMalloc(&dx, (x.size() + 4) * sizeof(float)));
    CK(cudaMalloc(&dv, (size_t)rows * k * sizeof(float)));
    CK(cudaMalloc(&di, (size_t)rows * k * sizeof(int)));
    CK(cudaMemcpy(dx + shift, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemset(dv, 0xff, (size_t)rows * k * sizeof(float)));
    CK(cudaMemset(di, 0xff, (size_t)rows * k * sizeof(int)));
    const char *names[3] = {"rows", "cols", "k"};
    int64_t vals[3] = {rows, cols, k};
    st_config cfg = {3, names, vals};
    void *ctx = NULL;
    if (st_init(&cfg, NULL, 0, 0, &ctx) != 0) {
        printf("FAIL %s: st_init refused rows %d cols %d k %d\n", name, rows, cols, k);
        return 1;
    }
    st_tensor in = {"x", ST_F32, 2, {rows, cols}, dx + shift};
    st_tensor out[2] = {{"values", ST_F32, 2, {rows, k}, dv},
                        {"indices", ST_I32, 2, {rows, k}, di}};
    const int rc = st_run(ctx, &in, 1, out, 2, 0);
    CK(cudaDeviceSynchronize());
    st_free(ctx);
    std::vector<float> v((size_t)rows * k);
    std::vector<int> idx((size_t)rows * k);
    CK(cudaMemcpy(v.data(), dv, v.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(idx.data(), di, idx.size() * sizeof(int), cudaMemcpyDeviceToHost));
    CK(cudaFree(dx));
    CK(cudaFree(dv));
    CK(cudaFree(di));
    if (rc != 0) {
        printf("FAIL %s: st_run returned %d\n", name, rc);
        return 1;
    }
    std::vector<uint64_t> keys(cols);
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < cols; j++) keys[j] = host_key(x[(size_t)r * cols + j], j);
        std::partial_sort(keys.begin(), keys.begin() + k, keys.end(), std::greater<uint64_t>());
        for (int i = 0; i < k; i++) {
            const int col = (int)(0xffffffffu - (uint32_t)keys[i]);
            const float want = x[(size_t)r * cols + col], got = v[(size_t)r * k + i];
            if (idx[(size_t)r * k + i] != col || !(got == want)) {
                printf("FAIL %s: row %d place %d: got (%g, %d), want (%g, %d)\n", name, r, i,
                       got, idx[(size_t)r * k + i], want, col);
                return 1;
            }
        }
    }
    printf("PASS %s (rows %d cols %d k %d shift %d)\n", name, rows, cols, k, shift);
    return 0;
}

/* Median of 50 timed calls at the eval size, each after an L2 flush. */
static void bench(void) {
    const int rows = 8192, cols = 8192, k = 64;
    const size_t n = (size_t)rows * cols, flush_bytes = 256u << 20;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) x[i] = element(RANDOM, 0, cols);
    float *dx, *dv;
    int *di;
    char *flush;
    CK(cudaMalloc(&dx, n * sizeof(float)));
    CK(cudaMalloc(&dv, (size_t)rows * k * sizeof(float)));
    CK(cudaMalloc(&di, (size_t)rows * k * sizeof(int)));
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    const char *names[3] = {"rows", "cols", "k"};
    int64_t vals[3] = {rows, cols, k};
    st_config cfg = {3, names, vals};
    void *ctx = NULL;
    if (st_init(&cfg, NULL, 0, 0, &ctx) != 0) exit(2);
    st_tensor in = {"x", ST_F32, 2, {rows, cols}, dx};
    st_tensor out[2] = {{"values", ST_F32, 2, {rows, k}, dv},
                        {"indices", ST_I32, 2, {rows, k}, di}};
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int i = 0; i < 55; i++) {
        CK(cudaMemsetAsync(flush, i, flush_bytes, 0));
        CK(cudaEventRecord(a, 0));
        if (st_run(ctx, &in, 1, out, 2, 0) != 0) exit(2);
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        if (i >= 5) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double gb = (4.0 * n + 8.0 * rows * k) / 1e9;
    printf("bench: 8192 x 8192, k 64: median %.4f ms (%.2f TB/s of x and the answer), min %.4f\n",
           ms[ms.size() / 2], gb / ms[ms.size() / 2], ms[0]);
    st_free(ctx);
}

int main(int argc, char **argv) {
    if (argc > 1 && std::string(argv[1]) == "bench-only") {
        bench();
        return 0;
    }
    int fails = 0;
    fails += run_case("random, eval width", RANDOM, 2000, 8192, 64, 0);
    fails += run_case("random, k 128", RANDOM, 700, 8192, 128, 0);
    fails += run_case("constant rows (general path)", CONSTANT, 300, 8192, 64, 0);
    fails += run_case("three values, k 128 (general path)", THREE, 300, 8192, 128, 0);
    fails += run_case("constant, random, three values interleaved", MIXED, 1500, 8192, 64, 0);
    fails += run_case("signed zeros", ZEROS, 400, 4096, 100, 0);
    fails += run_case("threads without elements", RANDOM, 900, 12, 5, 0);
    fails += run_case("four columns, k = cols", RANDOM, 50, 4, 4, 0);
    fails += run_case("more rows than blocks, narrow", RANDOM, 20000, 1024, 100, 0);
    fails += run_case("fewer rows than SMs", MIXED, 5, 8188, 128, 0);
    fails += run_case("misaligned rows", RANDOM, 300, 8192, 64, 1);
    fails += run_case("past the pipelined width", MIXED, 300, 8196, 64, 0);
    fails += run_case("past the pipelined k", RANDOM, 300, 8192, 129, 0);
    fails += run_case("odd width", MIXED, 300, 3001, 64, 0);
    printf("%s: %d case(s) failed\n", fails ? "FAIL" : "PASS", fails);
    if (!fails && argc > 1 && std::string(argv[1]) == "bench") bench();
    return fails ? 1 : 0;
}
