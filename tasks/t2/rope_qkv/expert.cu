/* Expert for t2/rope_qkv: the QKV projection as cuBLASLt matmuls whose epilogue adds the bias
 * (so what they write is written once, in bf16), then one kernel that reads the q and k columns
 * once and writes q and k in their [H, T, D] head layout, rotated (rotate-half RoPE, cos/sin from
 * a table built in st_init from the sizes alone). v needs the head layout but no rotation, and a
 * strided-batched matmul writes that layout itself (batch h: head h's D columns of W against all
 * of x, into v's [T, D] block h), so v skips the intermediate: one matmul writes q and k as
 * [T, 2C], the pass moves 67 MB instead of 100 at eval, and the v matmul runs on a side stream
 * beside the q/k matmul and the memory-bound pass instead of before them (forked before the q/k
 * matmul, so the pass still follows that matmul by its programmatic launch with no event
 * between, and joined before st_run returns, so all work stays ordered on the caller's stream;
 * on an H100 1.075x the one-matmul form, 1.009-1.043x forked after the q/k matmul, NOTES.md).
 * The rotation pairs element i with i + D/2 of the same head, so a thread takes 8 consecutive
 * dims from each half (two 16-byte loads, two 16-byte stores). The pass is a programmatic dependent launch: its
 * blocks are placed while the matmul ends and wait for its writes. When D % 16 != 0, a pointer
 * is not 16-byte aligned or cuBLASLt offers no algorithm for the two split shapes, one matmul
 * writes all of [T, 3C] and the pass copies v too (16-byte copies; element-wise, plainly
 * launched, when D % 16 != 0 or an output is not 16-byte aligned). The v matmul's algorithm is
 * the heuristic's first; the others' (the rule was measured on the 3C matmul): on a GPU with at
 * least 4 TB/s of DRAM bandwidth (the H200), the heuristic's first 128x128-tile candidate, else
 * its first; elsewhere its first. On the H200 the 128x128 tile with the programmatic launch took
 * 0.1600 ms against 0.1649; on an H100 the first candidate (256x128 there) took 0.1716 ms
 * against the 128x128 one's 0.1850 (NOTES.md). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "rope_qkv expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "rope_qkv expert: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
            #call, (int)s_); return 1; } } while (0)

#define WORKSPACE_BYTES ((size_t)32 << 20)
#define ROPE_THETA 10000.0
#define THREADS 256
#define N_TRY 8 /* heuristic candidates considered */
/* the tile the matmul's algorithm should have where DRAM is fast: at eval 3 % faster than the
 * heuristic's top pick on the H200, 7.7 % slower on an H100 (3.35 TB/s); solutions may not time
 * candidates themselves, so the rule reads the device's peak bandwidth */
#define WANT_TILE CUBLASLT_MATMUL_TILE_128x128
#define WANT_TILE_MIN_GBS 4000.0

typedef __nv_bfloat16 bf16;

/* A matmul's shape in column-major terms: D[m, T] (leading dimension ldd) =
 * A[m, C] (leading dimension lda) · x^T[C, T] + bias[m], `batch` times, A, D and the bias moving
 * a_step, d_step and a_step elements a batch (A's rows are the bias's index) and x^T shared. */
typedef struct {
    int64_t m, lda, ldd;
    int32_t batch;
    int64_t a_step, d_step;
} gemm_shape;

/* One planned matmul of a gemm_shape, its A being rows of W^T (W's columns). */
typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    unsigned int align; /* byte alignment of x this algorithm was chosen for; 0: none found */
} lt_gemm;

typedef struct {
    int64_t T, H, D, C;
    const bf16 *W;         /* owned by the harness, live until st_free */
    bf16 *qkv;             /* [T, 3C], or [T, 2C] on the split path; bias already added */
    float *cos_t, *sin_t;  /* [T, D/2] */
    void *workspace;
    cublasLtHandle_t lt;
    lt_gemm fast, safe;    /* for x aligned as the layouts allow, and for any bf16 pointer */
    int pdl;               /* the device takes programmatic dependent launches (sm_90 on) */
    /* the split path (16-byte path only): q and k into qkv [T, 2C], v straight into its output
     * on a side stream, which needs its own workspace since it runs beside the first */
    int split;             /* all of the below was set up */
    lt_gemm qk, vh;        /* q and k; v by heads (batched) */
    void *workspace_v;
    cudaStream_t side;
    cudaEvent_t ev_fork, ev_join;
} rope_ctx;

/* ------------------------------------------------------------------------------------------ */
/* the split/rotate pass */

/* memcpy between register values instead of pointer casts: no aliasing questions, and the
 * compiler turns it into plain register moves */
__device__ __forceinline__ void unpack8(uint4 u, float f[8]) {
    __nv_bfloat162 p[4];
    memcpy(p, &u, sizeof(u));
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 t = __bfloat1622float2(p[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}

__device__ __forceinline__ uint4 pack8(const float f[8]) {
    __nv_bfloat162 p[4];
#pragma unroll
    for (int i = 0; i < 4; i++) p[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    uint4 u;
    memcpy(&u, p, sizeof(u));
    return u;
}

/* Work items of token t, ordered so that neighbouring threads touch neighbouring memory:
 * [0, C/16) q chunk pairs, [C/16, C/8) k chunk pairs, then with_v [C/8, C/4) v chunks. A chunk
 * pair is dims [8j, 8j+8) and [D/2 + 8j, D/2 + 8j + 8) of one head. Rows of qkv hold q, k and,
 * with_v, v (3C elements; else 2C and v is not touched). Needs D % 16 == 0, 16-byte aligned
 * pointers, and C % 8 == 0 for the rows of qkv (implied by D % 16 == 0). */
__global__ void __launch_bounds__(THREADS)
rope_split_vec_kernel(const bf16 *__restrict__ qkv, const float *__restrict__ cos_t,
                      const float *__restrict__ sin_t, bf16 *__restrict__ q,
                      bf16 *__restrict__ k, bf16 *__restrict__ v, int T, int H, int D,
                      int with_v) {
    const int C = H * D, half = D / 2;
    const int pairs = C / 16;              /* per token, for q and for k */
    const int per_token = with_v ? C / 4 : C / 8;
    const int64_t row_len = (with_v ? 3 : 2) * (int64_t)C;
    const int64_t total = (int64_t)T * per_token;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* launched as a programmatic dependent of the matmul: wait for its writes (a no-op when
     * launched plainly) */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < total;
         it += (int64_t)gridDim.x * blockDim.x) {
        const int t = (int)(it / per_token), w = (int)(it % per_token);
        const bf16 *row = qkv + t * row_len;
        if (w < 2 * pairs) {
            const int s = w / pairs, pw = w % pairs; /* s: 0 = q, 1 = k */
            const int h = pw / (half / 8), j = pw % (half / 8);
            const bf16 *src = row + s * C + h * D + 8 * j;
            float a[8], b[8], c[8], sn[8];
            unpack8(*(const uint4 *)src, a);
            unpack8(*(const uint4 *)(src + half), b);
            const float4 *c4 = (const float4 *)(cos_t + (size_t)t * half + 8 * j);
            const float4 *s4 = (const float4 *)(sin_t + (size_t)t * half + 8 * j);
#pragma unroll
            for (int q4 = 0; q4 < 2; q4++) {
                const float4 cv = __ldg(c4 + q4), sv = __ldg(s4 + q4);
                c[4 * q4] = cv.x, c[4 * q4 + 1] = cv.y, c[4 * q4 + 2] = cv.z, c[4 * q4 + 3] = cv.w;
                sn[4 * q4] = sv.x, sn[4 * q4 + 1] = sv.y, sn[4 * q4 + 2] = sv.z, sn[4 * q4 + 3] = sv.w;
            }
            float lo[8], hi[8];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                lo[i] = a[i] * c[i] - b[i] * sn[i];
                hi[i] = b[i] * c[i] + a[i] * sn[i];
            }
            bf16 *dst = (s == 0 ? q : k) + ((size_t)h * T + t) * D + 8 * j;
            *(uint4 *)dst = pack8(lo);
            *(uint4 *)(dst + half) = pack8(hi);
        } else {
            const int vw = w - 2 * pairs; /* chunk index within the v columns */
            const int h = vw / (D / 8), j = vw % (D / 8);
            *(uint4 *)(v + ((size_t)h * T + t) * D + 8 * j) =
                *(const uint4 *)(row + 2 * C + h * D + 8 * j);
        }
    }
}

/* Element-wise version for any even D and 2-byte aligned pointers: items of token t are
 * [0, C/2) q pairs, [C/2, C) k pairs, [C, 2C) v elements. */
__global__ void __launch_bounds__(THREADS)
rope_split_scalar_kernel(const bf16 *__restrict__ qkv, const float *__restrict__ cos_t,
                         const float *__restrict__ sin_t, bf16 *__restrict__ q,
                         bf16 *__restrict__ k, bf16 *__restrict__ v, int T, int H, int D) {
    const int C = H * D, half = D / 2;
    const int per_token = 2 * C;
    const int64_t total = (int64_t)T * per_token;
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < total;
         it += (int64_t)gridDim.x * blockDim.x) {
        const int t = (int)(it / per_token), w = (int)(it % per_token);
        const bf16 *row = qkv + (size_t)t * 3 * C;
        if (w < C) {
            const int s = w / (C / 2), pw = w % (C / 2);
            const int h = pw / half, i = pw % half;
            const bf16 *src = row + s * C + h * D;
            const float a = __bfloat162float(src[i]), b = __bfloat162float(src[i + half]);
            const float c = cos_t[(size_t)t * half + i], sn = sin_t[(size_t)t * half + i];
            bf16 *dst = (s == 0 ? q : k) + ((size_t)h * T + t) * D;
            dst[i] = __float2bfloat16(a * c - b * sn);
            dst[i + half] = __float2bfloat16(b * c + a * sn);
        } else {
            const int vw = w - C, h = vw / D, d = vw % D;
            v[((size_t)h * T + t) * D + d] = row[2 * C + vw];
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* cuBLASLt plan */

/* The device's peak DRAM bandwidth in GB/s from its memory clock and bus width (double data
 * rate); 0 where the driver does not say. */
static double dram_gbs(void) {
    int dev = 0, khz = 0, bits = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess) {
        cudaGetLastError(); /* an attribute the driver lacks is no error of ours */
        return 0.0;
    }
    return 2.0 * khz * 1e3 * (bits / 8.0) / 1e9;
}

/* Row-major qkv[T, 3C] = x[T, C] · W[C, 3C] + b, seen column-major, is
 * qkv^T[3C, T] = W^T[3C, C] · x^T[C, T] + b: the row-major buffers already are W^T, x^T and
 * qkv^T in column-major form (leading dimensions 3C, C, 3C), and the epilogue's bias runs along
 * D's rows, our 3C columns, which is where bqkv belongs. Some of W's columns are a block of
 * W^T's rows with the same leading dimension 3C: the q/k matmul takes rows [0, 2C) into a
 * [T, 2C] buffer, and batch h of the v matmul rows [2C + hD, 2C + hD + D) into a column-major
 * [D, T] with leading dimension D, which is v's row-major [T, D] block of head h. `align` is
 * what the heuristic may assume of every pointer; the leading dimensions limit it too (see
 * st_init). D serves as C too (beta is 0). The batch attributes are set only for a batch, so
 * the single matmuls are planned exactly as without them. */
static int make_layouts(lt_gemm *g, const gemm_shape *s, int64_t T, int64_t C) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->a, CUDA_R_16BF, (uint64_t)s->m, (uint64_t)C, s->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->b, CUDA_R_16BF, (uint64_t)C, (uint64_t)T, C));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->d, CUDA_R_16BF, (uint64_t)s->m, (uint64_t)T, s->ldd));
    if (s->batch == 1) return 0;
    const cublasLtMatrixLayout_t lay[3] = {g->a, g->b, g->d};
    const int64_t step[3] = {s->a_step, 0, s->d_step}; /* every batch multiplies all of x^T */
    for (int i = 0; i < 3; i++) {
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(lay[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &s->batch, sizeof(s->batch)));
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(lay[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                      &step[i], sizeof(step[i])));
    }
    return 0;
}

/* tile_rule: prefer WANT_TILE where DRAM is fast (measured for the 3C matmul); else the first
 * usable candidate. */
static int plan_gemm(cublasLtHandle_t lt, lt_gemm *g, const gemm_shape *s, int64_t T, int64_t C,
                     const void *bias, unsigned int align, bool tile_rule) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    g->align = align;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    /* bias type defaults to D's type (bf16), which is what bqkv is */
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    if (s->batch > 1) /* the bias is indexed by A's rows, so it moves with A */
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                                                    &s->a_step, sizeof(s->a_step)));
    if (make_layouts(g, s, T, C)) return 1;

    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WORKSPACE_BYTES;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref,
        CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    const cublasLtMatmulPreferenceAttributes_t align_attrs[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    uint32_t a32 = align;
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, align_attrs[i], &a32, sizeof(a32));
    cublasLtMatmulHeuristicResult_t res[N_TRY];
    int n_res = 0, pick = -1;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(lt, g->desc, g->a, g->b, g->d, g->d, pref, N_TRY, res, &n_res);
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(st);
    const uint32_t want =
        tile_rule && dram_gbs() >= WANT_TILE_MIN_GBS ? (uint32_t)WANT_TILE : UINT32_MAX;
    for (int i = 0; i < n_res; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > WORKSPACE_BYTES) continue;
        uint32_t tile = 0;
        size_t written = 0;
        CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID,
                                                          &tile, sizeof(tile), &written));
        if (pick < 0) pick = i;
        if (tile == want) {
            pick = i;
            break;
        }
    }
    if (pick < 0) {
        fprintf(stderr, "rope_qkv expert: no cuBLASLt algorithm for T=%lld C=%lld, %lld rows x %d "
                "(alignment %u)\n", (long long)T, (long long)C, (long long)s->m, (int)s->batch, align);
        return 1;
    }
    g->algo = res[pick].algo;
    return 0;
}

static void gemm_free(lt_gemm *g) {
    if (g->a) cublasLtMatrixLayoutDestroy(g->a);
    if (g->b) cublasLtMatrixLayoutDestroy(g->b);
    if (g->d) cublasLtMatrixLayoutDestroy(g->d);
    if (g->desc) cublasLtMatmulDescDestroy(g->desc);
}

/* ------------------------------------------------------------------------------------------ */
/* ABI */

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "rope_qkv expert: size '%s' missing from the config\n", name);
    return 1;
}

/* dims beyond ndim are ignored; bf16 pointers must be at least 2-byte aligned */
static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1,
                        int64_t d2) {
    int ok = t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim < 2 || t->shape[1] == d1) && (ndim < 3 || t->shape[2] == d2) &&
             t->data != NULL && ((uintptr_t)t->data & 1) == 0;
    if (!ok) fprintf(stderr, "rope_qkv expert: %s: wrong dtype, shape or pointer\n", what);
    return !ok;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" void st_free(void *p) {
    rope_ctx *ctx = (rope_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing destroy here would only hide the real error. */
    gemm_free(&ctx->fast);
    gemm_free(&ctx->safe);
    gemm_free(&ctx->qk);
    gemm_free(&ctx->vh);
    if (ctx->lt) cublasLtDestroy(ctx->lt);
    if (ctx->side) cudaStreamDestroy(ctx->side);
    if (ctx->ev_fork) cudaEventDestroy(ctx->ev_fork);
    if (ctx->ev_join) cudaEventDestroy(ctx->ev_join);
    cudaFree(ctx->qkv);
    cudaFree(ctx->cos_t);
    cudaFree(ctx->sin_t);
    cudaFree(ctx->workspace);
    cudaFree(ctx->workspace_v);
    free(ctx);
}

/* cos/sin of t * 10000^(-2i/D), computed in double once and stored in fp32: it depends on the
 * sizes only, like a framework's rotary cache */
static int build_table(rope_ctx *ctx) {
    const int64_t half = ctx->D / 2, n = ctx->T * half;
    float *hc = (float *)malloc(sizeof(float) * (size_t)n), *hs = (float *)malloc(sizeof(float) * (size_t)n);
    if (!hc || !hs) {
        free(hc);
        free(hs);
        fprintf(stderr, "rope_qkv expert: out of host memory for the rotary table\n");
        return 1;
    }
    for (int64_t i = 0; i < half; i++) {
        const double theta = pow(ROPE_THETA, -2.0 * (double)i / (double)ctx->D);
        for (int64_t t = 0; t < ctx->T; t++) {
            hc[t * half + i] = (float)cos((double)t * theta);
            hs[t * half + i] = (float)sin((double)t * theta);
        }
    }
    cudaError_t e = cudaMemcpy(ctx->cos_t, hc, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(ctx->sin_t, hs, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice);
    free(hc);
    free(hs);
    CUDA_CHECK(e);
    return 0;
}

/* The split path's plans, second workspace, side stream and events. Only a CUDA error is fatal:
 * a split plan that fails (no algorithm for its shape, a cuBLAS status on the way) leaves
 * ctx->split at 0, and every call takes the one-matmul path. */
static int init_split(rope_ctx *ctx, const void *bias) {
    const int64_t T = ctx->T, H = ctx->H, D = ctx->D, C = ctx->C;
    if (D % 16) return 0; /* only the pass's 16-byte form can leave v out */
    const gemm_shape qk = {2 * C, 3 * C, 2 * C, 1, 0, 0};
    const gemm_shape vh = {D, 3 * C, D, (int32_t)H, D, T * D}; /* batch h: head h of v */
    const unsigned int align = ctx->fast.align; /* 16, as C % 16 == 0 */
    if (plan_gemm(ctx->lt, &ctx->qk, &qk, T, C, bias, align, true) ||
        plan_gemm(ctx->lt, &ctx->vh, &vh, T, C, (const bf16 *)bias + 2 * C, align, false)) {
        fprintf(stderr, "rope_qkv expert: no split plan, so v goes through the intermediate\n");
        return 0;
    }
    CUDA_CHECK(cudaMalloc(&ctx->workspace_v, WORKSPACE_BYTES));
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->side, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&ctx->ev_fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&ctx->ev_join, cudaEventDisableTiming));
    ctx->split = 1;
    return 0;
}

static int init_ctx(rope_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "H", &ctx->H) || cfg_get(cfg, "D", &ctx->D)) return 1;
    ctx->C = ctx->H * ctx->D;
    /* the kernels index tokens and columns with int */
    if (ctx->T <= 0 || ctx->H <= 0 || ctx->D <= 0 || ctx->D % 2 || 3 * ctx->C > INT32_MAX ||
        ctx->T > INT32_MAX) {
        fprintf(stderr, "rope_qkv expert: sizes out of range (D must be even)\n");
        return 1;
    }
    if (n_params != 2) {
        fprintf(stderr, "rope_qkv expert: expected 2 params, got %d\n", n_params);
        return 1;
    }
    if (check_tensor(&params[0], "Wqkv", 2, ctx->C, 3 * ctx->C, 0) ||
        check_tensor(&params[1], "bqkv", 1, 3 * ctx->C, 0, 0))
        return 1;
    ctx->W = (const bf16 *)params[0].data;
    const size_t table = (size_t)(ctx->T * (ctx->D / 2)) * sizeof(float);
    CUDA_CHECK(cudaMalloc(&ctx->qkv, (size_t)(ctx->T * 3 * ctx->C) * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&ctx->cos_t, table));
    CUDA_CHECK(cudaMalloc(&ctx->sin_t, table));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasLtCreate(&ctx->lt));
    int dev, major = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    ctx->pdl = major >= 9;
    /* Rows of x and qkv are C and 3C elements apart: only when C % 8 == 0 can every row of every
     * operand sit on a 16-byte boundary. The weight, bias and workspace come aligned; x may
     * not, so a second plan for 2-byte alignment covers any x. */
    unsigned int align = 16;
    while (align > 2 && (ctx->C * 2) % align) align /= 2;
    const gemm_shape all = {3 * ctx->C, 3 * ctx->C, 3 * ctx->C, 1, 0, 0};
    if (plan_gemm(ctx->lt, &ctx->fast, &all, ctx->T, ctx->C, params[1].data, align, true)) return 1;
    if (align > 2 && plan_gemm(ctx->lt, &ctx->safe, &all, ctx->T, ctx->C, params[1].data, 2, true)) {
        /* not fatal: only a misaligned x would need it, and st_run says so if one comes */
        ctx->safe.align = 0;
    }
    if (init_split(ctx, params[1].data)) return 1;
    return build_table(ctx);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    rope_ctx *ctx = (rope_ctx *)calloc(1, sizeof(rope_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

/* d = a · x + bias as planned in g (alpha 1, beta 0, d also as C), with its own workspace */
static int run_gemm(const rope_ctx *ctx, const lt_gemm *g, const bf16 *a, const bf16 *x, bf16 *d,
                    void *workspace, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(ctx->lt, g->desc, &one, a, g->a, x, g->b, &zero, d, g->d, d, g->d,
                                &g->algo, workspace, WORKSPACE_BYTES, stream));
    return 0;
}

/* The split path's matmuls: v into its output on the side stream, forked before the q/k matmul
 * into qkv [T, 2C] on `stream`, so the two matmuls share the GPU and the pass follows the q/k
 * matmul directly (its programmatic launch). Waiting for the fork is all the ordering
 * the v matmul needs: it writes only this call's v (prepared on `stream` before the call) and its
 * own workspace, and the side stream's earlier work was joined into `stream` by the last call. */
static int run_split_matmuls(const rope_ctx *ctx, const bf16 *x, bf16 *v, cudaStream_t stream) {
    CUDA_CHECK(cudaEventRecord(ctx->ev_fork, stream));
    CUDA_CHECK(cudaStreamWaitEvent(ctx->side, ctx->ev_fork, 0));
    if (run_gemm(ctx, &ctx->vh, ctx->W + 2 * ctx->C, x, v, ctx->workspace_v, ctx->side)) return 1;
    if (run_gemm(ctx, &ctx->qk, ctx->W, x, ctx->qkv, ctx->workspace, stream)) return 1;
    CUDA_CHECK(cudaEventRecord(ctx->ev_join, ctx->side));
    return 0;
}

/* The pass over the intermediate: 16-byte items as a programmatic dependent of the matmul before
 * it (v too when with_v), or element-wise over q, k and v. */
static int launch_pass(const rope_ctx *ctx, bf16 *q, bf16 *k, bf16 *v, bool vec, int with_v,
                       cudaStream_t stream) {
    const int64_t T = ctx->T, H = ctx->H, D = ctx->D, C = ctx->C;
    const int64_t items = vec ? T * (with_v ? C / 4 : C / 8) : T * 2 * C;
    int64_t blocks = (items + THREADS - 1) / THREADS;
    if (blocks > 65535 * 64) blocks = 65535 * 64; /* grid-stride loop beyond */
    if (vec) {
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t lc = {};
        lc.gridDim = dim3((unsigned int)blocks);
        lc.blockDim = dim3(THREADS);
        lc.stream = stream;
        lc.attrs = &attr;
        lc.numAttrs = ctx->pdl ? 1 : 0;
        CUDA_CHECK(cudaLaunchKernelEx(&lc, rope_split_vec_kernel, (const bf16 *)ctx->qkv,
                                      (const float *)ctx->cos_t, (const float *)ctx->sin_t, q, k, v,
                                      (int)T, (int)H, (int)D, with_v));
    } else
        rope_split_scalar_kernel<<<(unsigned int)blocks, THREADS, 0, stream>>>(
            ctx->qkv, ctx->cos_t, ctx->sin_t, q, k, v, (int)T, (int)H, (int)D);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    rope_ctx *ctx = (rope_ctx *)p;
    if (n_in != 1 || n_out != 3) {
        fprintf(stderr, "rope_qkv expert: expected 1 input and 3 outputs, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int64_t T = ctx->T, H = ctx->H, D = ctx->D, C = ctx->C;
    if (check_tensor(&in[0], "x", 2, T, C, 0) || check_tensor(&out[0], "q", 3, H, T, D) ||
        check_tensor(&out[1], "k", 3, H, T, D) || check_tensor(&out[2], "v", 3, H, T, D))
        return 1;
    const bf16 *x = (const bf16 *)in[0].data;
    bf16 *q = (bf16 *)out[0].data, *k = (bf16 *)out[1].data, *v = (bf16 *)out[2].data;

    /* x arrives fresh on every call: take the fast plan only when it is aligned as planned */
    const lt_gemm *g = ((uintptr_t)x % ctx->fast.align) == 0 ? &ctx->fast : &ctx->safe;
    if (g->align == 0) {
        fprintf(stderr, "rope_qkv expert: x is only %u-byte aligned and no cuBLASLt algorithm "
                "was found for that\n", (unsigned int)((uintptr_t)x & 15));
        return 1;
    }
    const bool vec = D % 16 == 0 && aligned16(q) && aligned16(k) && aligned16(v);
    /* the split plans assume x as aligned as the fast plan does */
    const bool split = vec && ctx->split && g == &ctx->fast;
    if (split ? run_split_matmuls(ctx, x, v, stream)
              : run_gemm(ctx, g, ctx->W, x, ctx->qkv, ctx->workspace, stream))
        return 1;
    if (launch_pass(ctx, q, k, v, vec, !split, stream)) return 1;
    /* the call's work ends on its stream: after the pass is queued, so it runs beside the v matmul */
    if (split) CUDA_CHECK(cudaStreamWaitEvent(stream, ctx->ev_join, 0));
    return 0;
}
