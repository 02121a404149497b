/* Expert for t3/mc_option: Monte-Carlo prices of European calls under geometric Brownian motion
 * with nothing stored per path. A block takes a chunk of one option's paths; each thread draws its
 * normals from a hand-written Philox4x32-7 (counter = option, thread, round: no state to load or
 * initialise), turns each pair of uniforms into two normals by Box-Muller and each normal into an
 * antithetic pair of paths (Z and -Z), so one Philox call feeds eight paths. The special functions
 * are the special-function unit's approximations, one MUFU operation each (lg2, sqrt, sin, cos, and
 * ex2 with rcp for the antithetic partner), since that unit is the task's roof; the accurate forms
 * cost twice the time (tasks/t3/mc_option/NOTES.md). A thread whose 128 paths all exist takes a
 * loop without per-path bounds that sums max(e, K/A) and takes K/A off once at the end (issue
 * slots, not the MUFU, were binding alongside it: 1.18x on the H200, session 43; seven Philox
 * rounds instead of ten another 1.07x, session 44). Payoffs are
 * summed in registers, the block's sum is reduced with warp shuffles and written to a
 * per-(option, chunk) slot; a second kernel adds each option's slots in a fixed order
 * (deterministic) and discounts. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define THREADS 256
#define PATHS_PER_THREAD 128
#define PATHS_PER_BLOCK (THREADS * PATHS_PER_THREAD)
#define MAX_GRID_Y 65535
#define SEED_LO 0x7105f00du
#define SEED_HI 0x5eed0f0bu

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "mc_option expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct {
    int n;
    long long paths;
    unsigned chunks; /* blocks per option */
    double *slots;   /* [n, chunks] */
} mc_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "mc_option expert: size '%s' missing from the config\n", name);
    return 1;
}

// ----------------------------------------------------------------------------
// Philox4x32-7 (Salmon, Moraes, Dror and Shaw, SC 2011: seven rounds are the fewest they found
// to pass TestU01's BigCrush for every key; cuRAND's ten add a margin). A round is four integer
// instructions (two IMAD.WIDE, two LOP3: the fixed key's schedule folds into immediates) of the
// unchecked loop's issue slots per eight paths, which share the schedulers with the MUFU's 128
// clocks: 86 slots with seven rounds against 98 with ten (1.07x, SOL 0.82: NOTES.md).

__device__ __forceinline__ uint4 philox(uint4 c, uint2 key) {
#pragma unroll
    for (int round = 0; round < 7; round++) {
        const unsigned lo0 = 0xD2511F53u * c.x, hi0 = __umulhi(0xD2511F53u, c.x);
        const unsigned lo1 = 0xCD9E8D57u * c.z, hi1 = __umulhi(0xCD9E8D57u, c.z);
        c = make_uint4(hi1 ^ c.y ^ key.x, lo1, hi0 ^ c.w ^ key.y, lo0);
        key.x += 0x9E3779B9u;
        key.y += 0xBB67AE85u;
    }
    return c;
}

/* the special-function unit's approximations, one MUFU operation each (no range fix-ups) */
__device__ __forceinline__ float ex2a(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float lg2a(float x) { float y; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float sqrta(float x) { float y; asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float sina(float x) { float y; asm("sin.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float cosa(float x) { float y; asm("cos.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float rcpa(float x) { float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
/* 22 random bits as a float in (1, 2) without a conversion: the exponent of 1.0, the bits as the
 * mantissa and its lowest bit set, so that 2 - m is in (0, 1) and its log finite */
__device__ __forceinline__ float bits_1_2(unsigned x) { return __int_as_float(0x3f800001u | (x >> 9)); }

/* The four normals (times vol2) of path group `group` of option o: one Philox call, two
 * Box-Muller pairs. -2 ln u = -2 ln 2 * lg2 u, folded with vol2^2 into c2; the angle 2 pi (m - 1.5)
 * in [-pi, pi), where sin.approx is accurate. Each normal makes two paths (z, -z). */
__device__ __forceinline__ void draw_normals(unsigned long long group, int o, float c2, float z[4]) {
    const uint4 x = philox(make_uint4((unsigned)group, (unsigned)(group >> 32), (unsigned)o, 0u),
                           make_uint2(SEED_LO, SEED_HI));
    const unsigned u[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int pair = 0; pair < 2; pair++) {
        const float rad = sqrta(c2 * lg2a(2.0f - bits_1_2(u[2 * pair])));
        const float ang = fmaf(bits_1_2(u[2 * pair + 1]), 6.2831853072f, -9.4247779608f);
        z[2 * pair] = rad * cosa(ang);
        z[2 * pair + 1] = rad * sina(ang);
    }
}

// ----------------------------------------------------------------------------
// kernels

/* Block (chunk, option): paths [chunk * PATHS_PER_BLOCK, ...) of the option, PATHS_PER_THREAD per
 * thread in antithetic pairs; the last chunk and the last pair of an odd path count are cut by
 * `paths`. Options beyond gridDim.y are taken grid-stride. */
__global__ void __launch_bounds__(THREADS)
paths_kernel(const float *__restrict__ s0, const float *__restrict__ k, const float *__restrict__ r,
             const float *__restrict__ sigma, const float *__restrict__ t, double *__restrict__ slots, int n,
             long long paths) {
    __shared__ double warp_sums[THREADS / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int o = blockIdx.y; o < n; o += gridDim.y) {
        const float vol = sigma[o] * sqrtf(t[o]);
        const float mu = (r[o] - 0.5f * sigma[o] * sigma[o]) * t[o];
        /* S_T = A * 2^(vol2 * z), A = S0 e^mu; payoff A * max(e - K/A, 0), A applied at the end */
        const float a = s0[o] * expf(mu), ka = k[o] / a, vol2 = vol * 1.4426950409f;
        /* vol2 * z as one product: r cos with r = sqrt(-2 ln u * vol2^2) */
        const float c2 = -1.3862943611f * vol2 * vol2;
        const long long first = (long long)blockIdx.x * PATHS_PER_BLOCK + (long long)threadIdx.x * PATHS_PER_THREAD;
        /* paths this thread may take, rounded down to whole pairs; an odd last path is done alone */
        const long long left = paths - first;
        const int mine = left <= 0 ? 0 : left >= PATHS_PER_THREAD ? PATHS_PER_THREAD : (int)left;
        float sum = 0.0f;
        double offset = 0.0; /* what the unchecked loop's max(e, K/A) added beyond the payoffs */
        if (mine == PATHS_PER_THREAD) {
            /* every path of the thread is taken: no bounds, and max(e, K/A) summed with the
             * K/A of each path taken off once at the end (one FMNMX and one FADD a path) */
            for (int call = 0; call < PATHS_PER_THREAD / 8; call++) {
                float z[4];
                draw_normals((unsigned long long)(first / 8) + call, o, c2, z);
#pragma unroll
                for (int h = 0; h < 4; h++) {
                    const float e = ex2a(z[h]);
                    sum += fmaxf(e, ka);
                    sum += fmaxf(rcpa(e), ka);
                }
            }
            offset = (double)PATHS_PER_THREAD * ka;
        } else {
            for (int call = 0; call * 8 < mine; call++) {
                /* counter: (path group, option, 0, 0); distinct for every option and group of 8 paths */
                float z[4];
                draw_normals((unsigned long long)(first / 8) + call, o, c2, z);
#pragma unroll
                for (int h = 0; h < 4; h++) {
                    const int base = call * 8 + h * 2; /* this normal's two paths */
                    const float e = ex2a(z[h]);
                    if (base < mine) sum += fmaxf(e - ka, 0.0f);
                    if (base + 1 < mine) sum += fmaxf(rcpa(e) - ka, 0.0f);
                }
            }
        }
        double s = ((double)sum - offset) * a;
        for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) warp_sums[warp] = s;
        __syncthreads();
        if (warp == 0) {
            s = lane < THREADS / 32 ? warp_sums[lane] : 0.0;
            for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
            if (lane == 0) slots[(size_t)o * gridDim.x + blockIdx.x] = s;
        }
        __syncthreads(); /* warp_sums is reused for the next option */
    }
}

__global__ void price_kernel(const double *__restrict__ slots, const float *__restrict__ r,
                             const float *__restrict__ t, float *__restrict__ price, int n, unsigned chunks,
                             long long paths) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= n) return;
    double s = 0.0;
    for (unsigned c = 0; c < chunks; c++) s += slots[(size_t)o * chunks + c];
    price[o] = (float)(exp(-(double)r[o] * t[o]) * s / (double)paths);
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    mc_ctx *c = (mc_ctx *)p;
    if (!c) return;
    cudaFree(c->slots);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n, paths;
    if (cfg_get(cfg, "n_opt", &n) || cfg_get(cfg, "paths", &paths)) return 1;
    const int64_t chunks = paths < 1 ? 0 : (paths + PATHS_PER_BLOCK - 1) / PATHS_PER_BLOCK;
    /* the Philox counter holds 8 * 2^64 paths per option; the grid's x dimension the chunks */
    if (n_params != 0 || n < 1 || paths < 1 || n > INT32_MAX || chunks > INT32_MAX) {
        fprintf(stderr, "mc_option expert: bad sizes\n");
        return 1;
    }
    mc_ctx *c = (mc_ctx *)calloc(1, sizeof(mc_ctx));
    if (!c) return 1;
    c->n = (int)n;
    c->paths = paths;
    c->chunks = (unsigned)chunks;
    if (cudaMalloc(&c->slots, sizeof(double) * (size_t)n * (size_t)chunks) != cudaSuccess) {
        st_free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const mc_ctx *c = (const mc_ctx *)p;
    if (n_in != 5 || n_out != 1) return 1;
    for (int i = 0; i < 5; i++)
        if (in[i].dtype != ST_F32 || in[i].ndim != 1 || in[i].shape[0] != c->n || !in[i].data) return 1;
    if (out[0].dtype != ST_F32 || out[0].ndim != 1 || out[0].shape[0] != c->n || !out[0].data) return 1;
    const float *s0 = (const float *)in[0].data, *k = (const float *)in[1].data, *r = (const float *)in[2].data,
                *sigma = (const float *)in[3].data, *t = (const float *)in[4].data;
    const dim3 grid(c->chunks, c->n < MAX_GRID_Y ? c->n : MAX_GRID_Y);
    paths_kernel<<<grid, THREADS, 0, stream>>>(s0, k, r, sigma, t, c->slots, c->n, c->paths);
    CUDA_CHECK(cudaGetLastError());
    price_kernel<<<(c->n + THREADS - 1) / THREADS, THREADS, 0, stream>>>(c->slots, r, t, (float *)out[0].data,
                                                                       c->n, c->chunks, c->paths);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
