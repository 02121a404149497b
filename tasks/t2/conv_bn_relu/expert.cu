/* Expert for t2/conv_bn_relu: the convolution as an implicit GEMM on the bf16 tensor cores, with
 * the batch norm folded away and the ReLU in the epilogue. st_init folds gamma/sqrt(var + eps)
 * into a zero-padded copy of the filter, [Kpad, Rpad] with R = 9*C taps per output channel, and
 * beta - mean*scale into a per-channel bias; it also tabulates, for every tap, its offset in x
 * from the output pixel, so the kernel never divides by 9, 3 or W in its main loop. One block
 * computes 128 output pixels (GEMM rows; a tile may straddle images) by up to 128 channels: it
 * gathers its im2col slice of x straight from NCHW into shared memory (each thread owns one
 * pixel and a 9-bit mask of the taps that fall inside the image, so padding is a predicate),
 * streams the filter in with cp.async, double-buffers both, and runs mma.sync m16n8k16 with fp32
 * accumulators. The epilogue adds the bias, applies ReLU, rounds to bf16 and goes through shared
 * memory so that each warp stores 32 consecutive pixels of one channel. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "conv_bn_relu expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define BM 128            /* output pixels per block */
#define BK 32             /* taps per pipeline stage */
#define NT 256            /* threads per block: 8 warps */
#define A_LD (BM + 8)     /* As is [BK][A_LD]: the 8 bf16 of slack put ldmatrix rows on distinct banks */
#define B_LD (BK + 8)     /* Bs is [BN][B_LD] */
#define C_LD (BM + 8)     /* the epilogue's Cs is [BN][C_LD] */
#define KPAD 128          /* filter rows are padded to the widest channel tile */
#define A_KSTEP (NT / BM) /* a thread gathers every A_KSTEP-th tap row of a stage */
#define A_PER_THREAD (BM * BK / NT)

typedef struct {
    int N, C, K, H, W, HW, M, R, Rpad, Kpad;
    int bn;               /* channel tile: 32, 64 or 128 */
    __nv_bfloat16 *wf;    /* [Kpad, Rpad] folded filter, zero padded */
    float *bias;          /* [Kpad] folded bias, zero padded */
    int2 *ktab;           /* [Rpad]: {offset in x from the output pixel, tap bit r*3+s (9: padding)} */
} cbr_ctx;

// ----------------------------------------------------------------------------
// PTX wrappers (sm_80 and later)

__device__ __forceinline__ unsigned smem_u32(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                        unsigned &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_trans(unsigned addr, unsigned &r0, unsigned &r1,
                                              unsigned &r2, unsigned &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ----------------------------------------------------------------------------
// st_init: fold the batch norm into the filter

__global__ void fold_kernel(const __nv_bfloat16 *w, const float *gamma, const float *beta,
                            const float *mean, const float *var, const float *eps,
                            __nv_bfloat16 *wf, float *bias, int K, int R, int Kpad, int Rpad) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)Kpad * Rpad) return;
    const int k = (int)(i / Rpad), kk = (int)(i % Rpad);
    const float scale = k < K ? gamma[k] / sqrtf(var[k] + eps[0]) : 0.0f;
    const float v = k < K && kk < R ? __bfloat162float(w[(int64_t)k * R + kk]) * scale : 0.0f;
    wf[i] = __float2bfloat16(v);
    if (kk == 0) bias[k] = k < K ? beta[k] - mean[k] * scale : 0.0f;
}

// ----------------------------------------------------------------------------
// the fused kernel

/* Warps tile the block's 128 x BN output as WARPS_M x WARPS_N, each warp 16*MI pixels by 32
 * channels (4 n8 tiles), so BN = 128, 64, 32 gives warp tiles of 64x32, 32x32, 16x32. */
template <int BN>
__global__ void __launch_bounds__(NT, 2)
conv_bn_relu_kernel(const unsigned short *__restrict__ x, const __nv_bfloat16 *__restrict__ wf,
                    const float *__restrict__ bias, const int2 *__restrict__ ktab,
                    __nv_bfloat16 *__restrict__ y, int M, int HW, int H, int W, int C, int K,
                    int Rpad) {
    constexpr int WARPS_N = BN / 32, WARPS_M = 8 / WARPS_N, MI = BM / (16 * WARPS_M);
    constexpr int A_STAGE = BK * A_LD, B_STAGE = BN * B_LD; /* in bf16 elements */
    constexpr int AB_BYTES = 2 * (A_STAGE + B_STAGE) * 2, C_BYTES = BN * C_LD * 2;
    constexpr int SMEM_BYTES = AB_BYTES > C_BYTES ? AB_BYTES : C_BYTES;
    __shared__ __align__(128) unsigned char smem[SMEM_BYTES];
    unsigned short *As = (unsigned short *)smem;  /* [2][BK][A_LD]: tap-major, pixels contiguous */
    unsigned short *Bs = As + 2 * A_STAGE;        /* [2][BN][B_LD]: channel-major, taps contiguous */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;

    /* The gather: this thread's pixel is fixed for the whole reduction. Taps that fall outside
     * the image (and every tap of a pixel past M) are masked off and read as zero. */
    const int a_m = tid % BM, a_k = tid / BM;
    const int p = m0 + a_m;
    unsigned mask = 0;
    const unsigned short *xp = x;
    if (p < M) {
        const int img = p / HW, hw = p - img * HW, h = hw / W, w = hw - h * W;
        xp = x + (size_t)img * C * HW + hw;
#pragma unroll
        for (int r = 0; r < 3; r++)
#pragma unroll
            for (int s = 0; s < 3; s++)
                if (h + r - 1 >= 0 && h + r - 1 < H && w + s - 1 >= 0 && w + s - 1 < W)
                    mask |= 1u << (r * 3 + s);
    }
    unsigned short ra[A_PER_THREAD];

    auto load_a = [&](int k0) {
#pragma unroll
        for (int j = 0; j < A_PER_THREAD; j++) {
            const int2 e = __ldg(ktab + k0 + a_k + A_KSTEP * j); /* the same for the whole warp */
            ra[j] = (mask >> e.y) & 1u ? __ldg(xp + e.x) : (unsigned short)0;
        }
    };
    auto store_a = [&](int buf) {
        unsigned short *dst = As + buf * A_STAGE + a_m;
#pragma unroll
        for (int j = 0; j < A_PER_THREAD; j++) dst[(a_k + A_KSTEP * j) * A_LD] = ra[j];
    };
    auto load_b = [&](int buf, int k0) {
        for (int c = tid; c < BN * (BK / 8); c += NT) {
            const int row = c / (BK / 8), col = (c % (BK / 8)) * 8;
            cp_async16(smem_u32(Bs + buf * B_STAGE + row * B_LD + col),
                       wf + (size_t)(n0 + row) * Rpad + k0 + col);
        }
        cp_async_commit();
    };

    float acc[MI][4][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;

    const int KT = Rpad / BK;
    load_b(0, 0);
    load_a(0);
    store_a(0);
    cp_async_wait_all();
    __syncthreads();

    for (int kt = 0; kt < KT; kt++) {
        const int cur = kt & 1;
        const bool more = kt + 1 < KT;
        /* next stage's loads are in flight while this stage's MMAs run */
        if (more) {
            load_b(cur ^ 1, (kt + 1) * BK);
            load_a((kt + 1) * BK);
        }
        const unsigned short *as = As + cur * A_STAGE, *bs = Bs + cur * B_STAGE;
#pragma unroll
        for (int ks = 0; ks < BK; ks += 16) {
            /* B: x4 gives b0/b1 of two n8 tiles; lanes 0-7, 8-15, 16-23, 24-31 address
             * (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) */
            unsigned bfr[4][2];
#pragma unroll
            for (int nj = 0; nj < 2; nj++) {
                const int nrow = warp_n * 32 + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
                const int kcol = ks + ((lane >> 3) & 1) * 8;
                ldsm_x4(smem_u32(bs + nrow * B_LD + kcol), bfr[2 * nj][0], bfr[2 * nj][1],
                        bfr[2 * nj + 1][0], bfr[2 * nj + 1][1]);
            }
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                /* A is stored k-major, so .trans turns its 8x8 blocks into row-major fragments:
                 * lanes address (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15) */
                unsigned af[4];
                const int krow = ks + (lane & 7) + ((lane >> 4) << 3);
                const int mcol = warp_m * (MI * 16) + mi * 16 + ((lane >> 3) & 1) * 8;
                ldsm_x4_trans(smem_u32(as + krow * A_LD + mcol), af[0], af[1], af[2], af[3]);
#pragma unroll
                for (int ni = 0; ni < 4; ni++) mma_bf16(acc[mi][ni], af, bfr[ni][0], bfr[ni][1]);
            }
        }
        if (more) store_a(cur ^ 1);
        cp_async_wait_all();
        __syncthreads();
    }

    /* epilogue: bias + ReLU + bf16 into Cs[channel][pixel] (the loop's last barrier freed the
     * stage buffers), then each thread stores its own pixel for every other channel row */
    unsigned short *Cs = (unsigned short *)smem;
#pragma unroll
    for (int ni = 0; ni < 4; ni++) {
        const int n = warp_n * 32 + ni * 8 + (lane & 3) * 2;
        const float b0 = __ldg(bias + n0 + n), b1 = __ldg(bias + n0 + n + 1);
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
            const int m = warp_m * (MI * 16) + mi * 16 + (lane >> 2);
            Cs[n * C_LD + m] = __bfloat16_as_ushort(__float2bfloat16(fmaxf(acc[mi][ni][0] + b0, 0.0f)));
            Cs[(n + 1) * C_LD + m] = __bfloat16_as_ushort(__float2bfloat16(fmaxf(acc[mi][ni][1] + b1, 0.0f)));
            Cs[n * C_LD + m + 8] = __bfloat16_as_ushort(__float2bfloat16(fmaxf(acc[mi][ni][2] + b0, 0.0f)));
            Cs[(n + 1) * C_LD + m + 8] = __bfloat16_as_ushort(__float2bfloat16(fmaxf(acc[mi][ni][3] + b1, 0.0f)));
        }
    }
    __syncthreads();
    if (p < M) {
        const int img = p / HW, hw = p - img * HW;
        unsigned short *yp = (unsigned short *)y + (size_t)img * K * HW + hw;
        const int n_end = K - n0 < BN ? K - n0 : BN;
        for (int nl = a_k; nl < n_end; nl += A_KSTEP) yp[(size_t)(n0 + nl) * HW] = Cs[nl * C_LD + a_m];
    }
}

// ----------------------------------------------------------------------------

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "conv_bn_relu expert: size '%s' missing from the config\n", name);
    return 1;
}

static int check_tensor(const st_tensor *t, const char *what, st_dtype dt, int ndim, int64_t d0,
                        int64_t d1, int64_t d2, int64_t d3) {
    const int64_t d[4] = {d0, d1, d2, d3};
    int ok = t->dtype == dt && t->ndim == ndim && t->data != NULL &&
             (uintptr_t)t->data % (dt == ST_F32 ? 4 : 2) == 0;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == d[i];
    if (!ok) fprintf(stderr, "conv_bn_relu expert: %s: wrong dtype, shape or alignment\n", what);
    return !ok;
}

extern "C" void st_free(void *p) {
    cbr_ctx *ctx = (cbr_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    cudaFree(ctx->wf);
    cudaFree(ctx->bias);
    cudaFree(ctx->ktab);
    free(ctx);
}

static int init_ctx(cbr_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params,
                    cudaStream_t stream) {
    int64_t N, C, K, H, W;
    if (cfg_get(cfg, "N", &N) || cfg_get(cfg, "C", &C) || cfg_get(cfg, "K", &K) ||
        cfg_get(cfg, "H", &H) || cfg_get(cfg, "W", &W))
        return 1;
    /* 32-bit pixel and tap offsets inside the kernel; the grid's y dimension holds K / 32 */
    if (N < 1 || C < 1 || K < 1 || H < 1 || W < 1 || N * H * W > INT32_MAX - BM ||
        C * H * W + W > INT32_MAX || 9 * C > INT32_MAX - BK || K > 65535 * 32) {
        fprintf(stderr, "conv_bn_relu expert: sizes out of range\n");
        return 1;
    }
    if (n_params != 6) {
        fprintf(stderr, "conv_bn_relu expert: expected 6 params, got %d\n", n_params);
        return 1;
    }
    if (check_tensor(&params[0], "weight", ST_BF16, 4, K, C, 3, 3) ||
        check_tensor(&params[1], "gamma", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[2], "beta", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[3], "running_mean", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[4], "running_var", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[5], "eps", ST_F32, 1, 1, -1, -1, -1))
        return 1;
    ctx->N = (int)N; ctx->C = (int)C; ctx->K = (int)K; ctx->H = (int)H; ctx->W = (int)W;
    ctx->HW = (int)(H * W);
    ctx->M = (int)(N * H * W);
    ctx->R = (int)(9 * C);
    ctx->Rpad = (ctx->R + BK - 1) / BK * BK;
    ctx->Kpad = (ctx->K + KPAD - 1) / KPAD * KPAD;
    ctx->bn = K <= 32 ? 32 : K <= 64 ? 64 : 128;

    CUDA_CHECK(cudaMalloc(&ctx->wf, (size_t)ctx->Kpad * ctx->Rpad * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&ctx->bias, (size_t)ctx->Kpad * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->ktab, (size_t)ctx->Rpad * sizeof(int2)));

    int2 *tab = (int2 *)malloc((size_t)ctx->Rpad * sizeof(int2));
    if (!tab) return 1;
    for (int kk = 0; kk < ctx->Rpad; kk++) {
        if (kk < ctx->R) {
            const int c = kk / 9, r = kk % 9 / 3, s = kk % 3;
            tab[kk] = make_int2(c * ctx->HW + (r - 1) * ctx->W + (s - 1), r * 3 + s);
        } else {
            tab[kk] = make_int2(0, 9); /* bit 9 is never in a mask: padding reads zero */
        }
    }
    cudaError_t e = cudaMemcpy(ctx->ktab, tab, (size_t)ctx->Rpad * sizeof(int2), cudaMemcpyHostToDevice);
    free(tab);
    CUDA_CHECK(e);

    const int64_t n_fold = (int64_t)ctx->Kpad * ctx->Rpad;
    fold_kernel<<<(unsigned)((n_fold + 255) / 256), 256, 0, stream>>>(
        (const __nv_bfloat16 *)params[0].data, (const float *)params[1].data,
        (const float *)params[2].data, (const float *)params[3].data, (const float *)params[4].data,
        (const float *)params[5].data, ctx->wf, ctx->bias, ctx->K, ctx->R, ctx->Kpad, ctx->Rpad);
    CUDA_CHECK(cudaGetLastError());
    /* st_run may get another stream: the folded filter must be complete before st_init returns */
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    *out_ctx = NULL;
    cbr_ctx *ctx = (cbr_ctx *)calloc(1, sizeof(cbr_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params, stream)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const cbr_ctx *ctx = (const cbr_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "conv_bn_relu expert: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_tensor(&in[0], "x", ST_BF16, 4, ctx->N, ctx->C, ctx->H, ctx->W) ||
        check_tensor(&out[0], "y", ST_BF16, 4, ctx->N, ctx->K, ctx->H, ctx->W))
        return 1;
    const unsigned short *x = (const unsigned short *)in[0].data;
    __nv_bfloat16 *y = (__nv_bfloat16 *)out[0].data;
    const unsigned gx = (unsigned)((ctx->M + BM - 1) / BM);
    const unsigned gy = (unsigned)((ctx->K + ctx->bn - 1) / ctx->bn);
    const dim3 grid(gx, gy);
    if (ctx->bn == 128)
        conv_bn_relu_kernel<128><<<grid, NT, 0, stream>>>(x, ctx->wf, ctx->bias, ctx->ktab, y, ctx->M,
                                                          ctx->HW, ctx->H, ctx->W, ctx->C, ctx->K, ctx->Rpad);
    else if (ctx->bn == 64)
        conv_bn_relu_kernel<64><<<grid, NT, 0, stream>>>(x, ctx->wf, ctx->bias, ctx->ktab, y, ctx->M,
                                                         ctx->HW, ctx->H, ctx->W, ctx->C, ctx->K, ctx->Rpad);
    else
        conv_bn_relu_kernel<32><<<grid, NT, 0, stream>>>(x, ctx->wf, ctx->bias, ctx->ktab, y, ctx->M,
                                                         ctx->HW, ctx->H, ctx->W, ctx->C, ctx->K, ctx->Rpad);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
