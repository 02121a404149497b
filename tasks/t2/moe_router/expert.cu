/* Expert for t2/moe_router: a routed top-2 mixture of experts that does only the useful GEMM
 * work. One kernel computes each token's router logits (a warp per token), picks its two experts
 * and their gates; a single-block kernel counts the tokens per expert and gives every (token,
 * expert) pair a stable slot, grouping the pairs by expert; a gather kernel copies each token's
 * row into its two slots. Each expert's group starts on a multiple of CHUNK rows, so the groups
 * are whole chunks of one expert each, and the scan also writes each chunk's weight pointer: one
 * pointer-array batched cuBLAS GEMM of a bound on the chunk count (2T/CHUNK + E, known at
 * st_init) then does every group without the host learning the group sizes (no copy, no event
 * wait, no host wake-up between the gather and the GEMM). Chunks past the last group compute
 * rows nobody reads. A last kernel reads each token's two results and writes the gate-weighted
 * sum. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "moe_router expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "moe_router expert: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
            #call, (int)s_); return 1; } } while (0)

#define WORKSPACE_BYTES ((size_t)32 << 20)
#define CHUNK 128        /* rows of one batched GEMM problem; groups are padded to a multiple */
#define MAX_EXPERTS 64
#define ROUTER_WARPS 8   /* tokens per router block */
#define SCAN_THREADS 1024
#define THREADS 256

typedef __nv_bfloat16 bf16;

typedef struct {
    int T, C, F, E;
    const bf16 *Wr, *W;   /* owned by the harness, live until st_free (W: or w_copy) */
    bf16 *w_copy;         /* W with each expert 16-byte aligned, where the harness's is not */
    size_t w_step;        /* elements from one expert's weights to the next */
    int2 *sel;            /* [T] the two experts of each token, larger logit first */
    float2 *gate;         /* [T] their gates */
    int2 *slot;           /* [T] the rows of x_perm / y_perm that hold them */
    int *offsets;         /* [E + 1] group starts (device), multiples of CHUNK */
    int chunks;           /* batched problems: a bound on sum over e of ceil(n_e / CHUNK) */
    bf16 *x_perm;         /* [chunks * CHUNK, C] token rows grouped by expert */
    bf16 *y_perm;         /* [chunks * CHUNK, F] their expert outputs */
    const void **w_ptr;   /* [chunks] device: the weights of each chunk's expert (the scan's) */
    const void **x_ptr;   /* [chunks] device: chunk c's rows of x_perm (fixed) */
    void **y_ptr;         /* [chunks] device: and of y_perm (fixed) */
    void *workspace;
    cublasHandle_t handle;
    cudaStream_t bound;   /* the stream the handle was last set to */
} moe_ctx;

/* ------------------------------------------------------------------------------------------ */
/* routing */

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* A warp's token t from each lane's partial logits: warp sums, then (lane 0) top 2 with the lower
 * index winning ties and the gates g_a = 1 / (1 + e^(l_b - l_a)), g_b = 1 - g_a up to rounding:
 * the softmax of the two logits. The task's inputs make the fp32 logits exact in any order, so
 * every lane agrees bit for bit. */
template <int EMAX>
__device__ __forceinline__ void route_write(float (&acc)[EMAX], int E, int t, int lane,
                                            int2 *__restrict__ sel, float2 *__restrict__ gate) {
#pragma unroll
    for (int e = 0; e < EMAX; e++)
        if (e < E) acc[e] = warp_sum(acc[e]);
    if (lane != 0) return;
    /* fixed-index scans keep acc in registers (a dynamic index would spill it) */
    float va = acc[0];
    int a = 0;
#pragma unroll
    for (int e = 1; e < EMAX; e++)
        if (e < E && acc[e] > va) { va = acc[e]; a = e; }
    float vb = 0.0f;
    int b = -1;
#pragma unroll
    for (int e = 0; e < EMAX; e++)
        if (e < E && e != a && (b < 0 || acc[e] > vb)) { vb = acc[e]; b = e; }
    const float r = expf(vb - va); /* <= 1 */
    sel[t] = make_int2(a, b);
    gate[t] = make_float2(1.0f / (1.0f + r), r / (1.0f + r));
}

/* One warp per token: lane-strided dot products against the E router columns (kept in EMAX
 * registers), then route_write. */
template <int EMAX, bool VEC>
__global__ void __launch_bounds__(32 * ROUTER_WARPS)
router_kernel(const bf16 *__restrict__ x, const bf16 *__restrict__ Wr, int T, int C, int E,
              int2 *__restrict__ sel, float2 *__restrict__ gate) {
    const int t = blockIdx.x * ROUTER_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (t >= T) return; /* whole warps leave; no block barrier follows */
    const bf16 *xt = x + (size_t)t * C;
    float acc[EMAX];
#pragma unroll
    for (int e = 0; e < EMAX; e++) acc[e] = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float xv = __bfloat162float(xt[c]);
        if (VEC) { /* E a multiple of 8: a channel's router row in 16-byte loads, a warp's 512 B contiguous */
            const uint4 *w = (const uint4 *)(Wr + (size_t)c * E);
#pragma unroll
            for (int g = 0; g < EMAX / 8; g++)
                if (8 * g < E) {
                    const uint4 wr = __ldg(w + g);
                    const bf16 *wh = (const bf16 *)&wr;
#pragma unroll
                    for (int q = 0; q < 8; q++) acc[8 * g + q] += xv * __bfloat162float(wh[q]);
                }
        } else {
            const bf16 *w = Wr + (size_t)c * E;
#pragma unroll
            for (int e = 0; e < EMAX; e++)
                if (e < E) acc[e] += xv * __bfloat162float(__ldg(w + e));
        }
    }
    route_write<EMAX>(acc, E, t, lane, sel, gate);
}

#define RS_WARPS 16 /* tokens a staged router block takes at once */
#define RS_MAX_J 8  /* chunks of 256 channels a token: C up to 2048 */

/* The router where E = 8, C is a multiple of 256 up to 2048 and x and Wr are 16-byte aligned (the
 * eval's shape): Wr is staged in shared memory so that the row of channel 256 j + 8 L + q sits at
 * [(8 j + q) * 32 + L], and lane L loads its 8 channels of each chunk j of a token's x in one
 * 16-byte load, every chunk before any product: one DRAM round trip a token instead of one per 32
 * channels, and a warp's reads of Wr for one (j, q) are 512 contiguous bytes (no bank conflict;
 * read from global memory, lane L's 8 rows 128 bytes apart touched 32 lines a load). */
__global__ void __launch_bounds__(32 * RS_WARPS)
router_staged_kernel(const bf16 *__restrict__ x, const bf16 *__restrict__ Wr, int T, int C,
                     int2 *__restrict__ sel, float2 *__restrict__ gate) {
    extern __shared__ uint4 swr[]; /* [C]: a channel's 8 router weights */
    const int J = C / 256, lane = threadIdx.x % 32;
    const uint4 *w4 = (const uint4 *)Wr;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        swr[(8 * (c >> 8) + (c & 7)) * 32 + ((c >> 3) & 31)] = __ldg(w4 + c);
    __syncthreads();
    for (int t = blockIdx.x * RS_WARPS + threadIdx.x / 32; t < T; t += gridDim.x * RS_WARPS) {
        const uint4 *xt = (const uint4 *)(x + (size_t)t * C) + lane;
        uint4 xv[RS_MAX_J];
#pragma unroll
        for (int j = 0; j < RS_MAX_J; j++)
            if (j < J) xv[j] = __ldg(xt + 32 * j);
        float acc[8];
#pragma unroll
        for (int e = 0; e < 8; e++) acc[e] = 0.0f;
#pragma unroll
        for (int j = 0; j < RS_MAX_J; j++) {
            if (j >= J) continue;
            const bf16 *xh = (const bf16 *)&xv[j];
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const float xq = __bfloat162float(xh[q]);
                const uint4 wr = swr[(8 * j + q) * 32 + lane];
                const bf16 *wh = (const bf16 *)&wr;
#pragma unroll
                for (int e = 0; e < 8; e++) acc[e] += xq * __bfloat162float(wh[e]);
            }
        }
        route_write<8>(acc, 8, t, lane, sel, gate);
    }
}

/* One block; warp w takes a contiguous run of 32-token chunks. The pairs routed to expert e get
 * consecutive slots from offsets[e], in token order (a token's two experts differ): deterministic
 * groups. Pass 1 counts each warp's pairs per expert by ballots, the block then turns the counts
 * into each warp's first slot per expert, and pass 2 ranks each pair inside its chunk. Two reads
 * of sel, coalesced, instead of one strided read per expert. Each group starts on a multiple of
 * CHUNK, and w_ptr[c] gets the weights of the expert whose group holds chunk c. */
__global__ void __launch_bounds__(SCAN_THREADS)
route_scan_kernel(const int2 *__restrict__ sel, int T, int E, int2 *__restrict__ slot,
                  int *__restrict__ offsets, const bf16 *__restrict__ W, size_t w_step,
                  const void **__restrict__ w_ptr, int n_chunks) {
    __shared__ int wbase[SCAN_THREADS / 32][MAX_EXPERTS]; /* counts, then first slots */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = SCAN_THREADS / 32;
    const int chunks = (T + 31) / 32, per = (chunks + nwarps - 1) / nwarps;
    const int c0 = min(chunks, warp * per), c1 = min(chunks, c0 + per);
    int cnt_lo = 0, cnt_hi = 0; /* lane l: the counts of experts l and l + 32 */
    for (int c = c0; c < c1; c++) {
        const int t = c * 32 + lane;
        const int2 s = t < T ? sel[t] : make_int2(-1, -1);
        for (int e = 0; e < E; e++) {
            const int n = __popc(__ballot_sync(0xffffffffu, s.x == e || s.y == e));
            if (lane == e) cnt_lo += n;
            if (lane + 32 == e) cnt_hi += n;
        }
    }
    if (lane < E) wbase[warp][lane] = cnt_lo;
    if (lane + 32 < E) wbase[warp][lane + 32] = cnt_hi;
    __syncthreads();
    if (threadIdx.x < (unsigned)E) { /* exclusive scan over the warps, per expert */
        const int e = threadIdx.x;
        int run = 0;
        for (int w = 0; w < nwarps; w++) {
            const int v = wbase[w][e];
            wbase[w][e] = run;
            run += v;
        }
        offsets[e] = run; /* the group's size for now */
    }
    __syncthreads();
    if (threadIdx.x == 0) { /* sizes to starts, each rounded up to whole chunks, over <= 64 experts */
        int run = 0;
        for (int e = 0; e < E; e++) {
            const int v = offsets[e];
            offsets[e] = run;
            run += (v + CHUNK - 1) / CHUNK * CHUNK;
        }
        offsets[E] = run;
    }
    __syncthreads();
    /* chunk c belongs to the expert whose group holds row c * CHUNK; past the last group, expert
     * 0's weights on rows nobody reads */
    for (int c = threadIdx.x; c < n_chunks; c += SCAN_THREADS) {
        int e = 0;
        while (e < E && offsets[e + 1] <= c * CHUNK) e++;
        w_ptr[c] = W + (size_t)(e < E ? e : 0) * w_step;
    }
    for (int e = threadIdx.x; e < nwarps * E; e += SCAN_THREADS) wbase[e / E][e % E] += offsets[e % E];
    __syncthreads();
    const unsigned below = (1u << lane) - 1u;
    for (int c = c0; c < c1; c++) {
        const int t = c * 32 + lane;
        const int2 s = t < T ? sel[t] : make_int2(-1, -1);
        int2 p = make_int2(0, 0);
        for (int e = 0; e < E; e++) {
            const unsigned m = __ballot_sync(0xffffffffu, s.x == e || s.y == e);
            const int at = wbase[warp][e] + __popc(m & below);
            if (s.x == e) p.x = at;
            if (s.y == e) p.y = at;
            __syncwarp(); /* every lane has read wbase[warp][e] */
            if (lane == 0) wbase[warp][e] += __popc(m);
            __syncwarp();
        }
        if (t < T) slot[t] = p;
    }
}

/* x_perm[slot] = x[t] for both slots of every token. VEC: 16-byte chunks (C % 8 == 0 and x
 * aligned; x_perm rows then are too). */
template <bool VEC>
__global__ void __launch_bounds__(THREADS)
gather_kernel(const bf16 *__restrict__ x, const int2 *__restrict__ slot, bf16 *__restrict__ x_perm,
              int T, int C) {
    const int per_row = VEC ? C / 8 : C;
    const int64_t total = (int64_t)T * per_row;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / per_row), j = (int)(i % per_row);
        const int2 s = slot[t];
        if (VEC) {
            const uint4 v = __ldg((const uint4 *)(x + (size_t)t * C) + j);
            ((uint4 *)(x_perm + (size_t)s.x * C))[j] = v;
            ((uint4 *)(x_perm + (size_t)s.y * C))[j] = v;
        } else {
            const bf16 v = x[(size_t)t * C + j];
            x_perm[(size_t)s.x * C + j] = v;
            x_perm[(size_t)s.y * C + j] = v;
        }
    }
}

/* out[t] = g_lo * y_perm[slot_lo] + g_hi * y_perm[slot_hi], lo/hi by expert index (the order
 * the dense reference adds them in). VEC: 16-byte chunks (F % 8 == 0 and out aligned). */
template <bool VEC>
__global__ void __launch_bounds__(THREADS)
combine_kernel(const bf16 *__restrict__ y_perm, const int2 *__restrict__ sel,
               const int2 *__restrict__ slot, const float2 *__restrict__ gate,
               bf16 *__restrict__ out, int T, int F) {
    const int per_row = VEC ? F / 8 : F;
    const int64_t total = (int64_t)T * per_row;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / per_row), j = (int)(i % per_row);
        const int2 s = sel[t], p = slot[t];
        const float2 g = gate[t];
        const bool first_lo = s.x < s.y;
        const int p_lo = first_lo ? p.x : p.y, p_hi = first_lo ? p.y : p.x;
        const float g_lo = first_lo ? g.x : g.y, g_hi = first_lo ? g.y : g.x;
        if (VEC) {
            const uint4 ul = __ldg((const uint4 *)(y_perm + (size_t)p_lo * F) + j);
            const uint4 uh = __ldg((const uint4 *)(y_perm + (size_t)p_hi * F) + j);
            __nv_bfloat162 bl[4], bh[4], br[4]; /* memcpy, not pointer casts: no aliasing */
            memcpy(bl, &ul, sizeof(ul));
            memcpy(bh, &uh, sizeof(uh));
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 fl = __bfloat1622float2(bl[k]), fh = __bfloat1622float2(bh[k]);
                br[k] = __floats2bfloat162_rn(fmaf(g_hi, fh.x, g_lo * fl.x), fmaf(g_hi, fh.y, g_lo * fl.y));
            }
            uint4 r;
            memcpy(&r, br, sizeof(r));
            ((uint4 *)(out + (size_t)t * F))[j] = r;
        } else {
            const float yl = __bfloat162float(y_perm[(size_t)p_lo * F + j]);
            const float yh = __bfloat162float(y_perm[(size_t)p_hi * F + j]);
            out[(size_t)t * F + j] = __float2bfloat16(fmaf(g_hi, yh, g_lo * yl));
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* launch helpers */

static unsigned int grid_for(int64_t items) {
    int64_t b = (items + THREADS - 1) / THREADS;
    return (unsigned int)(b < 1 ? 1 : b > 65535 * 32 ? 65535 * 32 : b); /* grid-stride beyond */
}

static cudaError_t launch_router(const moe_ctx *c, const bf16 *x, cudaStream_t s) {
    if (c->E == 8 && c->C % 256 == 0 && c->C <= 256 * RS_MAX_J &&
        (((uintptr_t)x | (uintptr_t)c->Wr) & 15) == 0) {
        const int64_t blocks = (c->T + RS_WARPS - 1) / RS_WARPS;
        router_staged_kernel<<<(unsigned int)(blocks < 65535 ? blocks : 65535), 32 * RS_WARPS,
                               (size_t)c->C * 16, s>>>(x, c->Wr, c->T, c->C, c->sel, c->gate);
        return cudaGetLastError();
    }
    const unsigned int grid = (unsigned int)((c->T + ROUTER_WARPS - 1) / ROUTER_WARPS);
    const int block = 32 * ROUTER_WARPS;
    const bool vec = c->E % 8 == 0 && ((uintptr_t)c->Wr & 15) == 0;
#define ROUTER(n, v) router_kernel<n, v><<<grid, block, 0, s>>>(x, c->Wr, c->T, c->C, c->E, c->sel, c->gate)
#define ROUTERS(n) do { if (vec) ROUTER(n, true); else ROUTER(n, false); } while (0)
    if (c->E <= 8) ROUTERS(8);
    else if (c->E <= 16) ROUTERS(16);
    else if (c->E <= 32) ROUTERS(32);
    else ROUTERS(64);
#undef ROUTERS
#undef ROUTER
    return cudaGetLastError();
}

/* ------------------------------------------------------------------------------------------ */
/* ABI */

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "moe_router expert: size '%s' missing from the config\n", name);
    return 1;
}

/* dims beyond ndim are ignored; bf16 pointers must be at least 2-byte aligned */
static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1,
                        int64_t d2) {
    int ok = t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim < 2 || t->shape[1] == d1) && (ndim < 3 || t->shape[2] == d2) &&
             t->data != NULL && ((uintptr_t)t->data & 1) == 0;
    if (!ok) fprintf(stderr, "moe_router expert: %s: wrong dtype, shape or pointer\n", what);
    return !ok;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" void st_free(void *p) {
    moe_ctx *ctx = (moe_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    if (ctx->handle) cublasDestroy(ctx->handle);
    cudaFree(ctx->workspace);
    cudaFree(ctx->w_ptr);
    cudaFree(ctx->w_copy);
    cudaFree(ctx->x_ptr);
    cudaFree(ctx->y_ptr);
    cudaFree(ctx->sel);
    cudaFree(ctx->gate);
    cudaFree(ctx->slot);
    cudaFree(ctx->offsets);
    cudaFree(ctx->x_perm);
    cudaFree(ctx->y_perm);
    free(ctx);
}

static int init_ctx(moe_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    int64_t T, C, F, E;
    if (cfg_get(cfg, "T", &T) || cfg_get(cfg, "C", &C) || cfg_get(cfg, "F", &F) || cfg_get(cfg, "E", &E))
        return 1;
    /* slots (2T) and cuBLAS dimensions are int */
    if (T <= 0 || C <= 0 || F <= 0 || E < 2 || E > MAX_EXPERTS ||
        T > (INT32_MAX - MAX_EXPERTS * CHUNK) / 2 ||
        C > INT32_MAX || F > INT32_MAX) {
        fprintf(stderr, "moe_router expert: sizes out of range (2 <= E <= %d)\n", MAX_EXPERTS);
        return 1;
    }
    ctx->T = (int)T;
    ctx->C = (int)C;
    ctx->F = (int)F;
    ctx->E = (int)E;
    if (n_params != 2) {
        fprintf(stderr, "moe_router expert: expected 2 params, got %d\n", n_params);
        return 1;
    }
    if (check_tensor(&params[0], "Wr", 2, C, E, 0) || check_tensor(&params[1], "W", 3, E, C, F)) return 1;
    ctx->Wr = (const bf16 *)params[0].data;
    ctx->W = (const bf16 *)params[1].data;
    /* the batched GEMM reads its pointers on the device, where cuBLAS cannot check their
     * alignment: every expert's weights start on 16 bytes, in a padded copy if need be */
    ctx->w_step = (size_t)(C * F + 7) / 8 * 8;
    if (ctx->w_step != (size_t)(C * F) || !aligned16(ctx->W)) {
        CUDA_CHECK(cudaMalloc(&ctx->w_copy, sizeof(bf16) * ctx->w_step * (size_t)E));
        CUDA_CHECK(cudaMemcpy2D(ctx->w_copy, sizeof(bf16) * ctx->w_step, ctx->W, sizeof(bf16) * (size_t)(C * F),
                                sizeof(bf16) * (size_t)(C * F), (size_t)E, cudaMemcpyDeviceToDevice));
        ctx->W = ctx->w_copy;
    }
    CUDA_CHECK(cudaMalloc(&ctx->sel, sizeof(int2) * (size_t)T));
    CUDA_CHECK(cudaMalloc(&ctx->gate, sizeof(float2) * (size_t)T));
    CUDA_CHECK(cudaMalloc(&ctx->slot, sizeof(int2) * (size_t)T));
    CUDA_CHECK(cudaMalloc(&ctx->offsets, sizeof(int) * (size_t)(E + 1)));
    /* each group wastes under one chunk: sum ceil(n_e / CHUNK) <= (2T + E (CHUNK - 1)) / CHUNK */
    const int64_t chunks = (2 * T + E * (CHUNK - 1)) / CHUNK;
    ctx->chunks = (int)chunks;
    CUDA_CHECK(cudaMalloc(&ctx->x_perm, sizeof(bf16) * (size_t)(chunks * CHUNK * C)));
    CUDA_CHECK(cudaMalloc(&ctx->y_perm, sizeof(bf16) * (size_t)(chunks * CHUNK * F)));
    CUDA_CHECK(cudaMalloc(&ctx->w_ptr, sizeof(void *) * (size_t)chunks));
    CUDA_CHECK(cudaMalloc(&ctx->x_ptr, sizeof(void *) * (size_t)chunks));
    CUDA_CHECK(cudaMalloc(&ctx->y_ptr, sizeof(void *) * (size_t)chunks));
    void **host = (void **)malloc(sizeof(void *) * (size_t)chunks);
    if (!host) {
        fprintf(stderr, "moe_router expert: no host memory for %lld chunk pointers\n", (long long)chunks);
        return 1;
    }
    for (int64_t c = 0; c < chunks; c++) host[c] = ctx->x_perm + (size_t)(c * CHUNK * C);
    cudaError_t err = cudaMemcpy(ctx->x_ptr, host, sizeof(void *) * (size_t)chunks, cudaMemcpyHostToDevice);
    for (int64_t c = 0; err == cudaSuccess && c < chunks; c++) host[c] = ctx->y_perm + (size_t)(c * CHUNK * F);
    if (err == cudaSuccess)
        err = cudaMemcpy(ctx->y_ptr, host, sizeof(void *) * (size_t)chunks, cudaMemcpyHostToDevice);
    free(host);
    CUDA_CHECK(err);
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasCreate(&ctx->handle));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    moe_ctx *ctx = (moe_ctx *)calloc(1, sizeof(moe_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    moe_ctx *ctx = (moe_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "moe_router expert: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int T = ctx->T, C = ctx->C, F = ctx->F, E = ctx->E;
    if (check_tensor(&in[0], "x", 2, T, C, 0) || check_tensor(&out[0], "out", 2, T, F, 0)) return 1;
    const bf16 *x = (const bf16 *)in[0].data;
    bf16 *y = (bf16 *)out[0].data;

    CUDA_CHECK(launch_router(ctx, x, stream));
    route_scan_kernel<<<1, SCAN_THREADS, 0, stream>>>(ctx->sel, T, E, ctx->slot, ctx->offsets, ctx->W,
                                                      ctx->w_step, ctx->w_ptr, ctx->chunks);
    CUDA_CHECK(cudaGetLastError());
    if (C % 8 == 0 && aligned16(x))
        gather_kernel<true><<<grid_for((int64_t)T * (C / 8)), THREADS, 0, stream>>>(x, ctx->slot, ctx->x_perm, T, C);
    else
        gather_kernel<false><<<grid_for((int64_t)T * C), THREADS, 0, stream>>>(x, ctx->slot, ctx->x_perm, T, C);
    CUDA_CHECK(cudaGetLastError());
    if (ctx->bound != stream || ctx->bound == NULL) {
        /* setting the stream resets the workspace: both, only when the stream changes */
        CUBLAS_CHECK(cublasSetStream(ctx->handle, stream));
        CUBLAS_CHECK(cublasSetWorkspace(ctx->handle, ctx->workspace, WORKSPACE_BYTES));
        ctx->bound = stream;
    }
    /* row-major y_chunk[CHUNK, F] = x_chunk[CHUNK, C] . W[e][C, F], i.e. column-major
     * y^T = W[e]^T . x^T: operands swapped, untransposed */
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmBatchedEx(ctx->handle, CUBLAS_OP_N, CUBLAS_OP_N, F, CHUNK, C, &one,
                                     ctx->w_ptr, CUDA_R_16BF, F, ctx->x_ptr, CUDA_R_16BF, C, &zero,
                                     ctx->y_ptr, CUDA_R_16BF, F, ctx->chunks, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));

    if (F % 8 == 0 && aligned16(y))
        combine_kernel<true><<<grid_for((int64_t)T * (F / 8)), THREADS, 0, stream>>>(
            ctx->y_perm, ctx->sel, ctx->slot, ctx->gate, y, T, F);
    else
        combine_kernel<false><<<grid_for((int64_t)T * F), THREADS, 0, stream>>>(
            ctx->y_perm, ctx->sel, ctx->slot, ctx->gate, y, T, F);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
