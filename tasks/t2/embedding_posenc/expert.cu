/* Expert for t2/embedding_posenc: out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :] in one pass, each
 * output row written once, with the widest accesses the layout allows. The 16-byte path (C % 8 == 0
 * and 16-byte-aligned tables and output, checked on every call: pointers may move) serves the
 * rows by windows of wte: the blocks of window 0 are dispatched first, each scanning its chunk
 * of the tokens for rows whose token falls in the window, then those of window 1, ... At eval the
 * 77 MB table does not fit the 50 MB L2, so gathered in token order most repeats of a token
 * missed it; by windows of 6 MiB every repeat is an L2 hit (0.080 ms against 0.0985 ms in token
 * order on the H200, NOTES.md). A warp does one row at a time: the lanes sweep it in 16-byte
 * pieces of 8 bf16, issuing the loads of up to four pieces from wte and wpe before adding any
 * (float32 add, one rounding to bf16 with round-to-nearest-even, bit-identical to the
 * reference), and store with streaming stores so the output's lines leave the L2 first. Other
 * layouts take one warp per row in token order, with 4-byte pieces (C even, 4-byte alignment)
 * or single elements. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define WARPS 8             /* rows per block */
#define UNROLL 4            /* pieces in flight per lane */

typedef struct {
    int B, T, V, C, maxT;
    int sms; /* the device's SMs: blocks of one window */
    const __nv_bfloat16 *wte, *wpe; /* the harness's, alive until st_free */
} embed_ctx;

// ----------------------------------------------------------------------------
// adds of packed bf16: widen to float32 (exact), add, round once

__device__ __forceinline__ unsigned short add_bf16(unsigned short a, unsigned short b) {
    const float s = __uint_as_float((unsigned)a << 16) + __uint_as_float((unsigned)b << 16);
    return __bfloat16_as_ushort(__float2bfloat16_rn(s));
}

/* two bf16 in one word: element 0 in the low half */
__device__ __forceinline__ unsigned add_bf16x2(unsigned a, unsigned b) {
    const float lo = __uint_as_float(a << 16) + __uint_as_float(b << 16);
    const float hi = __uint_as_float(a & 0xffff0000u) + __uint_as_float(b & 0xffff0000u);
    return (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           ((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}

__device__ __forceinline__ uint4 add_piece(uint4 a, uint4 b) {
    return make_uint4(add_bf16x2(a.x, b.x), add_bf16x2(a.y, b.y), add_bf16x2(a.z, b.z),
                      add_bf16x2(a.w, b.w));
}
__device__ __forceinline__ unsigned add_piece(unsigned a, unsigned b) { return add_bf16x2(a, b); }
__device__ __forceinline__ unsigned short add_piece(unsigned short a, unsigned short b) {
    return add_bf16(a, b);
}

// ----------------------------------------------------------------------------
// kernel

/* One output row by one warp: o = a + b over `pieces` pieces, each lane issuing the loads of up
 * to UNROLL pieces before adding any. Piece is uint4 (8 bf16), unsigned (2) or unsigned short
 * (1). STREAM: streaming stores, so the output's lines are the first the L2 drops. */
template <typename Piece, bool STREAM>
__device__ __forceinline__ void add_row(const Piece *a, const Piece *b, Piece *o, int pieces,
                                        int lane) {
    for (int base = lane; base < pieces; base += UNROLL * 32) {
        Piece va[UNROLL], vb[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const int p = base + 32 * k;
            if (p < pieces) {
                va[k] = a[p];
                vb[k] = b[p];
            }
        }
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const int p = base + 32 * k;
            if (p >= pieces) continue;
            if (STREAM)
                __stcs(o + p, add_piece(va[k], vb[k]));
            else
                o[p] = add_piece(va[k], vb[k]);
        }
    }
}

/* One warp per output row, in token order. */
template <typename Piece>
__global__ void __launch_bounds__(WARPS * 32)
embed_kernel(const int *__restrict__ tokens, const Piece *__restrict__ wte,
             const Piece *__restrict__ wpe, Piece *__restrict__ out, int rows, int T, int pieces) {
    const int row = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const int tok = tokens[row];
    add_row<Piece, false>(wte + (size_t)tok * pieces, wpe + (size_t)(row % T) * pieces,
                          out + (size_t)row * pieces, pieces, lane);
}

#ifndef WINDOW_MB
#define WINDOW_MB 6 /* wte rows a window covers, in MiB */
#endif
#define WBLOCKS_PER_SM 8 /* blocks of one window in flight on each SM */
#define MAX_WINDOWS 64

/* The 16-byte path, by windows of wte: block x serves window x / chunks, so the blocks of window 0
 * are dispatched first. Windows of 4 to 8 MiB measured alike on the H200; 2 MiB and 16 MiB and
 * more were slower (NOTES.md). */
__global__ void __launch_bounds__(WARPS * 32)
embed_window_kernel(const int *__restrict__ tokens, const uint4 *__restrict__ wte,
                    const uint4 *__restrict__ wpe, uint4 *__restrict__ out, int rows, int T,
                    int pieces, int win_rows, int chunks) {
    const int w = blockIdx.x / chunks, ch = blockIdx.x % chunks, lane = threadIdx.x % 32;
    const int lo = w * win_rows, hi = lo + win_rows;
    const int per = (rows + chunks - 1) / chunks;
    const int r0 = ch * per, r1 = min(rows, r0 + per);
    for (int base = r0 + (threadIdx.x / 32) * 32; base < r1; base += WARPS * 32) {
        const int r = base + lane;
        const int tok = r < r1 ? tokens[r] : -1;
        unsigned mine = __ballot_sync(0xffffffffu, tok >= lo && tok < hi);
        while (mine) {
            const int k = __ffs(mine) - 1;
            mine &= mine - 1;
            const int row = base + k, t = __shfl_sync(0xffffffffu, tok, k);
            add_row<uint4, true>(wte + (size_t)t * pieces, wpe + (size_t)(row % T) * pieces,
                                 out + (size_t)row * pieces, pieces, lane);
        }
    }
}

// ----------------------------------------------------------------------------
// ABI

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "embedding_posenc expert: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const char *what, st_dtype dtype, int ndim, int64_t d0,
                 int64_t d1, int64_t d2) {
    int ok = t->dtype == dtype && t->ndim == ndim && t->shape[0] == d0 && t->shape[1] == d1 &&
             (ndim == 2 || t->shape[2] == d2) && t->data != NULL;
    if (!ok) fprintf(stderr, "embedding_posenc expert: %s: wrong dtype or shape\n", what);
    return !ok;
}

static int aligned(const void *p, unsigned bytes) {
    return ((uintptr_t)p & (bytes - 1)) == 0;
}

extern "C" void st_free(void *p) {
    free(p);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    int64_t B, T, V, C, maxT;
    if (cfg_get(cfg, "B", &B) || cfg_get(cfg, "T", &T) || cfg_get(cfg, "V", &V) ||
        cfg_get(cfg, "C", &C) || cfg_get(cfg, "maxT", &maxT))
        return 1;
    /* rows and pieces are counted in int */
    if (n_params != 2 || B < 1 || T < 1 || V < 1 || C < 1 || T > maxT || B * T > INT32_MAX ||
        C > INT32_MAX || V > INT32_MAX || maxT > INT32_MAX ||
        check(&params[0], "wte", ST_BF16, 2, V, C, 0) || check(&params[1], "wpe", ST_BF16, 2, maxT, C, 0)) {
        fprintf(stderr, "embedding_posenc expert: bad sizes or params\n");
        return 1;
    }
    embed_ctx *c = (embed_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    c->B = (int)B;
    c->T = (int)T;
    c->V = (int)V;
    c->C = (int)C;
    c->maxT = (int)maxT;
    c->wte = (const __nv_bfloat16 *)params[0].data;
    c->wpe = (const __nv_bfloat16 *)params[1].data;
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        fprintf(stderr, "embedding_posenc expert: cannot query the device's SMs\n");
        free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const embed_ctx *c = (const embed_ctx *)p;
    if (!c || n_in != 1 || n_out != 1) return 1;
    if (check(&in[0], "tokens", ST_I32, 2, c->B, c->T, 0) ||
        check(&out[0], "out", ST_BF16, 3, c->B, c->T, c->C))
        return 1;
    const int *tokens = (const int *)in[0].data;
    void *o = out[0].data;
    const int rows = c->B * c->T;
    const unsigned blocks = (unsigned)((rows + WARPS - 1) / WARPS);
    /* rows start on a piece boundary only if C is a multiple of the piece and all three bases are */
    const int64_t win_rows = ((int64_t)WINDOW_MB << 20) / ((int64_t)c->C * 2);
    const int64_t wins = win_rows > 0 ? (c->V + win_rows - 1) / win_rows : 0;
    /* every block scans its tokens once per window: past MAX_WINDOWS that scan would cost more
     * than the L2 hits save */
    if (c->C % 8 == 0 && aligned(c->wte, 16) && aligned(c->wpe, 16) && aligned(o, 16) &&
        c->sms > 0 && wins > 0 && wins <= MAX_WINDOWS) {
        int chunks = c->sms * WBLOCKS_PER_SM;
        const int need = (rows + WARPS * 32 - 1) / (WARPS * 32);
        chunks = chunks < need ? chunks : need;
        embed_window_kernel<<<(unsigned)(wins * chunks), WARPS * 32, 0, stream>>>(
            tokens, (const uint4 *)c->wte, (const uint4 *)c->wpe, (uint4 *)o, rows, c->T, c->C / 8,
            (int)win_rows, chunks);
    } else if (c->C % 8 == 0 && aligned(c->wte, 16) && aligned(c->wpe, 16) && aligned(o, 16))
        embed_kernel<uint4><<<blocks, WARPS * 32, 0, stream>>>(
            tokens, (const uint4 *)c->wte, (const uint4 *)c->wpe, (uint4 *)o, rows, c->T, c->C / 8);
    else if (c->C % 2 == 0 && aligned(c->wte, 4) && aligned(c->wpe, 4) && aligned(o, 4))
        embed_kernel<unsigned><<<blocks, WARPS * 32, 0, stream>>>(
            tokens, (const unsigned *)c->wte, (const unsigned *)c->wpe, (unsigned *)o, rows, c->T, c->C / 2);
    else
        embed_kernel<unsigned short><<<blocks, WARPS * 32, 0, stream>>>(
            tokens, (const unsigned short *)c->wte, (const unsigned short *)c->wpe,
            (unsigned short *)o, rows, c->T, c->C);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "embedding_posenc expert: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
