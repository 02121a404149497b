/* Expert for t3/cg: conjugate gradients from x = 0 in one persistent cooperative kernel. The whole
 * solve (setup, every iteration, the stopping test) runs on the device with grid-wide barriers
 * instead of kernel boundaries, so there are no host round trips and no launch gaps: st_run
 * enqueues one launch and returns. Each iteration has three sweeps: Ap = A p fused with the dot
 * p.Ap; x += alpha p and r -= alpha Ap fused with r.r; p = r + beta p. The sparse product gives
 * each row 8 lanes (rows hold 7 or 8 entries), so a warp reads four rows' entries as one
 * contiguous run. Dot products: per-block double sums written to a slot array, one barrier, then
 * every block adds the slots itself in the same order, so all blocks agree on alpha and beta bit
 * for bit (and the result is deterministic) without a second barrier. Same numerics as the
 * reference: float vectors, double dots, stop at ||r|| <= 1e-6 ||b||. */
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

namespace cg = cooperative_groups;

#define TOL 1e-6
#define MAX_ITER 20000
#define THREADS 512
#define WARPS (THREADS / 32)
#define ROW_LANES 8

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "cg expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct {
    int n, nnz, blocks;
    float *r, *p, *ap; /* [n] each */
    double *slots;     /* [2][blocks]: per-block partial sums, alternating between reductions */
} cg_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "cg expert: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, st_dtype dt, int64_t len) {
    int ok = t->dtype == dt && t->ndim == 1 && t->shape[0] == len && t->data;
    if (!ok) fprintf(stderr, "cg expert: %s: wrong dtype or shape\n", t->name);
    return !ok;
}

// ----------------------------------------------------------------------------
// grid-wide sum

__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum `v` over the whole grid; every thread of every block gets the same value. Slots alternate
 * between calls: the slots of call k are rewritten by call k + 2, after every block has passed the
 * barrier of call k + 1 and so finished reading them. Slots are read through L2 (__ldcg). */
__device__ double grid_sum(cg::grid_group &grid, double v, double *slots, int &parity, double *red) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    double *slot = slots + parity * gridDim.x;
    parity ^= 1;
    v = warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        double t = lane < WARPS ? red[lane] : 0.0;
        t = warp_sum(t);
        if (lane == 0) slot[blockIdx.x] = t;
    }
    grid.sync();
    if (warp == 0) {
        double t = 0.0;
        for (int i = lane; i < (int)gridDim.x; i += 32) t += __ldcg(slot + i);
        t = warp_sum(t);
        if (lane == 0) red[WARPS] = t; /* lane 0's order, the same in every block */
    }
    __syncthreads();
    const double total = red[WARPS];
    __syncthreads(); /* red is reused by the next call */
    return total;
}

// ----------------------------------------------------------------------------

/* Vectors written inside the kernel (x, r, p, ap) are plain pointers: a read-only (non-coherent)
 * load could return a value from before the last barrier. */
__global__ void __launch_bounds__(THREADS)
cg_kernel(const int *__restrict__ row_ptr, const int *__restrict__ col, const float *__restrict__ val,
          const float *__restrict__ b, float *x, float *r, float *p, float *ap, double *slots, int n,
          int max_iter, double tol2) {
    cg::grid_group grid = cg::this_grid();
    __shared__ double red[WARPS + 1];
    int parity = 0;
    const int tid = blockIdx.x * THREADS + threadIdx.x, nthreads = gridDim.x * THREADS;

    double local = 0.0;
    for (int i = tid; i < n; i += nthreads) {
        const float bi = b[i];
        x[i] = 0.0f;
        r[i] = bi;
        p[i] = bi;
        local += (double)bi * bi;
    }
    double rr = grid_sum(grid, local, slots, parity, red);
    const double stop = tol2 * rr;

    /* row groups: 8 consecutive lanes, aligned, so the shuffles stay inside the group even when
     * the other groups of the warp have left the loop */
    const int sub = threadIdx.x % ROW_LANES, group = tid / ROW_LANES, groups = nthreads / ROW_LANES;
    const unsigned mask = 0xffu << (threadIdx.x % 32 / ROW_LANES * ROW_LANES);
    for (int it = 0; it < max_iter && rr > stop; it++) {
        local = 0.0;
        for (int row = group; row < n; row += groups) {
            const int end = row_ptr[row + 1];
            float s = 0.0f;
            for (int k = row_ptr[row] + sub; k < end; k += ROW_LANES) s = fmaf(val[k], p[col[k]], s);
            s += __shfl_xor_sync(mask, s, 4);
            s += __shfl_xor_sync(mask, s, 2);
            s += __shfl_xor_sync(mask, s, 1);
            if (sub == 0) {
                ap[row] = s;
                local += (double)p[row] * s;
            }
        }
        const double pap = grid_sum(grid, local, slots, parity, red);
        const float alpha = (float)(rr / pap);

        local = 0.0;
        for (int i = tid; i < n; i += nthreads) {
            x[i] = fmaf(alpha, p[i], x[i]);
            const float ri = fmaf(-alpha, ap[i], r[i]);
            r[i] = ri;
            local += (double)ri * ri;
        }
        const double rr_new = grid_sum(grid, local, slots, parity, red);
        const float beta = (float)(rr_new / rr);
        rr = rr_new;
        if (rr <= stop) break; /* x is done; every block takes the same decision */

        for (int i = tid; i < n; i += nthreads) p[i] = fmaf(beta, p[i], r[i]);
        grid.sync();
    }
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    cg_ctx *c = (cg_ctx *)p;
    if (!c) return;
    cudaFree(c->r);
    cudaFree(c->p);
    cudaFree(c->ap);
    cudaFree(c->slots);
    free(c);
}

static int init_ctx(cg_ctx *c) {
    int dev, sms, coop, per_sm;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    if (!coop) {
        fprintf(stderr, "cg expert: the device cannot launch cooperative kernels\n");
        return 1;
    }
    /* a cooperative grid must be resident all at once: exactly what fits */
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cg_kernel, THREADS, 0));
    if (per_sm < 1) {
        fprintf(stderr, "cg expert: the kernel does not fit on an SM\n");
        return 1;
    }
    c->blocks = per_sm * sms;
    const size_t bytes = sizeof(float) * (size_t)c->n;
    CUDA_CHECK(cudaMalloc(&c->r, bytes));
    CUDA_CHECK(cudaMalloc(&c->p, bytes));
    CUDA_CHECK(cudaMalloc(&c->ap, bytes));
    CUDA_CHECK(cudaMalloc(&c->slots, sizeof(double) * 2 * (size_t)c->blocks));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t nx, ny, nz;
    if (cfg_get(cfg, "nx", &nx) || cfg_get(cfg, "ny", &ny) || cfg_get(cfg, "nz", &nz)) return 1;
    if (n_params != 0 || nx < 1 || ny < 1 || nz < 1 || nx * ny * nz > INT32_MAX / 8) {
        fprintf(stderr, "cg expert: bad sizes\n");
        return 1;
    }
    cg_ctx *c = (cg_ctx *)calloc(1, sizeof(cg_ctx));
    if (!c) return 1;
    const int64_t n = nx * ny * nz;
    c->n = (int)n;
    c->nnz = (int)(7 * n - 2 * (nx * ny + ny * nz + nx * nz) + 2 * (n / 8));
    if (init_ctx(c)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    cg_ctx *c = (cg_ctx *)ctx;
    int n = c->n;
    if (n_in != 4 || n_out != 1 || check(&in[0], ST_I32, n + 1) || check(&in[1], ST_I32, c->nnz) ||
        check(&in[2], ST_F32, c->nnz) || check(&in[3], ST_F32, n) || check(&out[0], ST_F32, n))
        return 1;
    const int *row_ptr = (const int *)in[0].data, *col = (const int *)in[1].data;
    const float *val = (const float *)in[2].data, *b = (const float *)in[3].data;
    float *x = (float *)out[0].data;
    int max_iter = MAX_ITER;
    double tol2 = TOL * TOL;
    void *args[] = {(void *)&row_ptr, (void *)&col, (void *)&val, (void *)&b, (void *)&x, (void *)&c->r,
                    (void *)&c->p, (void *)&c->ap, (void *)&c->slots, (void *)&n, (void *)&max_iter,
                    (void *)&tol2};
    CUDA_CHECK(cudaLaunchCooperativeKernel((const void *)cg_kernel, dim3(c->blocks), dim3(THREADS), args, 0,
                                           stream));
    return 0;
}
