/* Expert for t2/lstm: the input projection for all time steps in one TF32 cuBLAS GEMM (Gx[T*B, 4H]
 * = x·W_ih^T, the half of the FLOPs that does not depend on the recurrence), then the T dependent
 * steps. Where the whole grid can be resident and a block's W_hh columns fit in shared memory (the
 * eval shape on an H200), the steps run in one cooperative kernel: each block loads its 32 gate
 * columns of W_hh into shared memory once, keeps its cells' c in registers, and passes a grid-wide
 * barrier between steps instead of a launch (1.62x the graph of steps on the H200, session 43); 16
 * warps, four of which split each piece of the step's product by k, so a warp's chain of dependent
 * mma steps is a quarter of the product (1.04-1.07x the 8 warps of before, session 44); h_t is
 * kept in fp16 between steps (fp16 has TF32's 10 mantissa bits and |h| < 1, so the product's
 * operands are the same for half the bytes each block reads from L2 a step: 1.07x, session 45).
 * Otherwise each step is one fused kernel, replayed from a CUDA graph captured in st_init. A step
 * kernel computes h_{t-1}·W_hh^T for a tile of 32 batch rows by 8 hidden units, i.e. the i, f, g
 * and o columns of those units together, on TF32 mma.sync with fp32 accumulators, and finishes the
 * cell in its epilogue (Gx + bias + product, sigmoid/tanh, c and h), so each step is one launch
 * and the [B, 4H] gates never touch memory. W_hh is re-laid out once in st_init (the four gate
 * rows of a unit tile adjacent, pre-rounded to TF32, zero-padded) and h and c live in padded
 * buffers of the context, so every load of the step's reduction is an aligned 16-byte cp.async.
 * Input and output pointers change between calls, so the graph never sees them: st_run copies h0
 * and c0 into the state buffers and writes the addresses of h_seq and c_final into a small device
 * table that the step kernels read. For H = 512 on sm_90 and later (the eval shape), a third path
 * takes precedence: batch rows are independent, so a cluster of 16 blocks runs the whole
 * recurrence of 8 or 16 of them (as many clusters as the batch needs fitting at once) with W_hh
 * in registers (fp16, TF32's mantissa) and h passed between its blocks through distributed shared
 * memory (st.async counted by an mbarrier, each h chunk gathered by warp shuffles and sent from
 * registers), no barrier across the grid or the cluster a step, the gates on the MUFU, and
 * step 0's h0 part added into Gx by cuBLAS (lstm_cluster_kernel; 1.5x its first form, which ran
 * 8 clusters in two waves where 7 fit, session 59; the shuffles and MUFU gates 1.11x, session 60). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "lstm expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "lstm expert: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
            #call, (int)s_); return 1; } } while (0)

#define WORKSPACE_BYTES ((size_t)32 << 20)
#define BB 32              /* batch rows per step block */
#define UJ 8               /* hidden units per step block */
#define NC (4 * UJ)        /* GEMM columns per block: i, f, g, o of each unit */
#define KC 32              /* reduction chunk per pipeline stage */
#define KS (KC + 4)        /* smem row stride in floats: conflict-free fragment loads */
#define STAGES 4
#define STEP_THREADS 128   /* 4 warps, 2 x 2 over the 32 x 32 tile */
#define PAIRS ((BB * UJ) / STEP_THREADS) /* (batch row, unit) cells per thread */

/* where this call's outputs are; written by st_run's prep kernel, read by the graph */
typedef struct {
    float *h_seq;
    float *c_final;
} lstm_io;

typedef struct {
    int T, B, I, H, Hpad, Bpad, njt;
    const float *W_ih;          /* owned by the harness, live until st_free */
    float *wp;                  /* [njt*NC, Hpad]: W_hh rows regrouped by unit tile, TF32, zero padded */
    float *bp;                  /* [njt*NC]: b regrouped the same way */
    float *gx;                  /* [T*B, 4H] */
    float *h_state;             /* [2, Bpad, Hpad]: ping-pong, padding stays zero (the persistent
                                 * kernel: h0 in fp32 and the ping-pong in fp16, lstm_persistent_kernel) */
    float *c_state;             /* [Bpad, Hpad] */
    lstm_io *io;                /* device */
    void *workspace;
    cublasHandle_t handle;
    cudaStream_t capture;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    size_t p_smem;              /* the persistent kernel's shared memory; 0: the graph of steps */
    uint4 *cl_frag;             /* the cluster path's W_hh fragments (lstm_cluster_kernel); NULL: not taken */
    int cl_nt;                  /* the cluster path's n8 tiles of batch rows a cluster: 1 or 2 */
    const float *b, *W_hh;      /* the combined bias and W_hh, owned by the harness */
} lstm_ctx;

// ----------------------------------------------------------------------------

__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* D += A·B for one m16n8k8 TF32 tile; A row-major, B column-major fragments */
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
/* fp32 on the MUFU's exp2 and reciprocal (each within 2 ulp): sigmoid_mufu(-inf) = 0, (+inf) = 1,
 * tanh_mufu(+-inf) = +-1; tanh_mufu's absolute error stays near 1e-7 (its relative error near 0
 * is larger, which the cell's absolute tolerance does not see) */
__device__ __forceinline__ float ex2_mufu(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float rcp_mufu(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float sigmoid_mufu(float x) { return rcp_mufu(1.0f + ex2_mufu(-1.4426950409f * x)); }
__device__ __forceinline__ float tanh_mufu(float x) { return fmaf(-2.0f, rcp_mufu(1.0f + ex2_mufu(2.8853900818f * x)), 1.0f); }

// ----------------------------------------------------------------------------
// st_init: regroup W_hh and b so that a block's 32 GEMM columns are contiguous rows

__global__ void regroup_kernel(const float *w_hh, const float *b, float *wp, float *bp, int H,
                               int Hpad, int njt) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)njt * NC * Hpad) return;
    const int row = (int)(i / Hpad), k = (int)(i % Hpad);
    const int jt = row / NC, gate = row % NC / UJ, u = row % UJ;
    const int j = jt * UJ + u;
    const bool valid = j < H;
    float v = 0.0f;
    if (valid && k < H) v = __uint_as_float(to_tf32(w_hh[(int64_t)(gate * H + j) * H + k]));
    wp[i] = v;
    if (k == 0) bp[row] = valid ? b[gate * H + j] : 0.0f;
}

// ----------------------------------------------------------------------------
// st_run, outside the graph: this call's initial state and output addresses

__global__ void prep_kernel(const float *h0, const float *c0, float *h_state, float *c_state,
                            int B, int H, int Hpad, lstm_io *io, float *h_seq, float *c_final) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e == 0) {
        io->h_seq = h_seq;
        io->c_final = c_final;
    }
    if (e >= (int64_t)B * H) return;
    const int b = (int)(e / H), j = (int)(e % H);
    h_state[(int64_t)b * Hpad + j] = h0[e];
    c_state[(int64_t)b * Hpad + j] = c0[e];
}

// ----------------------------------------------------------------------------
// one time step

__global__ void __launch_bounds__(STEP_THREADS)
lstm_step_kernel(int t, int T, int B, int H, int Hpad, const float *__restrict__ gx,
                 const float *__restrict__ wp, const float *__restrict__ bp,
                 const float *__restrict__ h_prev, float *__restrict__ h_next,
                 float *__restrict__ c_state, const lstm_io *__restrict__ io) {
    __shared__ __align__(16) float As[STAGES][BB][KS]; /* h rows (batch) x k */
    __shared__ __align__(16) float Bs[STAGES][NC][KS]; /* gate columns x k */
    __shared__ float Ps[BB][NC + 1];                   /* the block's h·W_hh^T */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 1, wn = warp & 1;          /* 16 batch rows x 16 columns per warp */
    const int g = lane >> 2, tg = lane & 3;
    const int jt = blockIdx.x, b0 = blockIdx.y * BB;
    const float *hsrc = h_prev + (size_t)b0 * Hpad;
    const float *wsrc = wp + (size_t)jt * NC * Hpad;
    const int nk = Hpad / KC;

    auto load_stage = [&](int s, int k0) {
        for (int c = tid; c < BB * (KC / 4); c += STEP_THREADS) {
            const int r = c / (KC / 4), col = (c % (KC / 4)) * 4;
            cp_async16(&As[s][r][col], hsrc + (size_t)r * Hpad + k0 + col);
        }
        for (int c = tid; c < NC * (KC / 4); c += STEP_THREADS) {
            const int r = c / (KC / 4), col = (c % (KC / 4)) * 4;
            cp_async16(&Bs[s][r][col], wsrc + (size_t)r * Hpad + k0 + col);
        }
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nk) load_stage(s, s * KC);
        cp_async_commit();
    }

    /* The epilogue's operands do not depend on the product: fetch them now so that their DRAM
     * latency hides behind the reduction instead of adding to the step. */
    float zin[PAIRS][4], c_prev[PAIRS];
    bool live[PAIRS];
    const float *bias = bp + jt * NC;
#pragma unroll
    for (int q = 0; q < PAIRS; q++) {
        const int e = tid + q * STEP_THREADS, bl = e / UJ, u = e % UJ;
        const int b = b0 + bl, j = jt * UJ + u;
        live[q] = b < B && j < H;
        c_prev[q] = 0.0f;
#pragma unroll
        for (int gate = 0; gate < 4; gate++) zin[q][gate] = 0.0f;
        if (live[q]) {
            const float *z = gx + ((size_t)t * B + b) * 4 * H + j;
#pragma unroll
            for (int gate = 0; gate < 4; gate++) zin[q][gate] = z[(size_t)gate * H] + bias[gate * UJ + u];
            c_prev[q] = c_state[(size_t)b * Hpad + j];
        }
    }

    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    for (int kc = 0; kc < nk; kc++) {
        cp_async_wait<STAGES - 2>(); /* this thread's copies of stage kc have landed */
        __syncthreads();             /* everyone's have, and stage kc-1's buffer is free */
        const int nxt = kc + STAGES - 1;
        if (nxt < nk) load_stage(nxt % STAGES, nxt * KC);
        cp_async_commit();
        const int s = kc % STAGES;
#pragma unroll
        for (int kk = 0; kk < KC; kk += 8) {
            unsigned a[4];
            const int r = wm * 16 + g;
            a[0] = to_tf32(As[s][r][kk + tg]);
            a[1] = to_tf32(As[s][r + 8][kk + tg]);
            a[2] = to_tf32(As[s][r][kk + tg + 4]);
            a[3] = to_tf32(As[s][r + 8][kk + tg + 4]);
#pragma unroll
            for (int ni = 0; ni < 2; ni++) {
                const int n = wn * 16 + ni * 8 + g;
                mma_tf32(acc[ni], a, __float_as_uint(Bs[s][n][kk + tg]),
                         __float_as_uint(Bs[s][n][kk + tg + 4]));
            }
        }
    }
    cp_async_wait<0>();

#pragma unroll
    for (int ni = 0; ni < 2; ni++) {
        const int n = wn * 16 + ni * 8 + tg * 2, r = wm * 16 + g;
        Ps[r][n] = acc[ni][0];
        Ps[r][n + 1] = acc[ni][1];
        Ps[r + 8][n] = acc[ni][2];
        Ps[r + 8][n + 1] = acc[ni][3];
    }
    __syncthreads();

    float *h_seq = io->h_seq + (size_t)t * B * H;
    float *c_final = io->c_final;
#pragma unroll
    for (int q = 0; q < PAIRS; q++) {
        if (!live[q]) continue;
        const int e = tid + q * STEP_THREADS, bl = e / UJ, u = e % UJ;
        const int b = b0 + bl, j = jt * UJ + u;
        const float i = sigmoidf(zin[q][0] + Ps[bl][u]);
        const float f = sigmoidf(zin[q][1] + Ps[bl][UJ + u]);
        const float gc = tanhf(zin[q][2] + Ps[bl][2 * UJ + u]);
        const float o = sigmoidf(zin[q][3] + Ps[bl][3 * UJ + u]);
        const float c = f * c_prev[q] + i * gc;
        const float h = o * tanhf(c);
        c_state[(size_t)b * Hpad + j] = c;
        h_next[(size_t)b * Hpad + j] = h;
        h_seq[(size_t)b * H + j] = h;
        if (t == T - 1) c_final[(size_t)b * H + j] = c;
    }
}

// ----------------------------------------------------------------------------
// all T steps in one cooperative kernel: the block's W_hh columns stay in shared memory, the cell
// state in registers, and a grid-wide barrier replaces the launch between steps

namespace cg = cooperative_groups;

#define P_THREADS 512      /* 16 warps: KSPLIT (k steps mod 4) x 2 x 2 over the 32 x 32 tile */
#define KSPLIT (P_THREADS / 128) /* warps that share a 16 x 16 piece of the tile, by k */
#define P_CELLS (BB * UJ)  /* the block's cells, one a thread; the other threads only multiply */
#define NG 4               /* groups of k chunks in which a step's h tile lands */

/* The step's h tile into shared memory (row stride ws elements), all of it in flight at once in
 * NG groups of chunks, so the product starts on the first group while the others land. */
template <typename TH>
__device__ __forceinline__ void load_h_tile(TH *As, int ws, const TH *hsrc, int Hpad, int nk, int tid) {
    constexpr int V = 16 / (int)sizeof(TH); /* elements a 16-byte copy */
#pragma unroll
    for (int q = 0; q < NG; q++) {
        const int c0k = q * nk / NG, c1k = (q + 1) * nk / NG;
        const int per_row = (c1k - c0k) * (KC / V);
        for (int cc = tid; cc < BB * per_row; cc += P_THREADS) {
            const int r = cc / per_row, col = c0k * KC + (cc % per_row) * V;
            cp_async16(&As[r * ws + col], hsrc + (size_t)r * Hpad + col);
        }
        cp_async_commit();
    }
}

/* An A fragment register: fp32 rounded to TF32, or fp16 widened, which is a TF32 value as it
 * stands (fp16 keeps TF32's 10 mantissa bits) */
__device__ __forceinline__ unsigned a_frag(const float *p) { return to_tf32(*p); }
__device__ __forceinline__ unsigned a_frag(const __half *p) { return __float_as_uint(__half2float(*p)); }

/* This warp's share of the step's product h_{t-1}·W_hh^T over its k steps (k mod KSPLIT), each
 * group of the h tile used once it has landed. */
template <typename TH>
__device__ __forceinline__ void h_product(float (&acc)[2][4], const TH *As, int ws, const float *Ws, int WS,
                                          int nk, int wk, int wm, int wn, int g, int tg) {
#pragma unroll
    for (int q = 0; q < NG; q++) {
        if (q == 0) cp_async_wait<NG - 1>();
        else if (q == 1) cp_async_wait<NG - 2>();
        else if (q == 2) cp_async_wait<NG - 3>();
        else cp_async_wait<0>();
        __syncthreads();
        const int k1 = (q + 1) * nk / NG * KC;
        for (int k = q * nk / NG * KC + wk * 8; k < k1; k += 8 * KSPLIT) {
            unsigned a[4];
            const TH *ar = As + (wm * 16 + g) * ws + k;
            a[0] = a_frag(ar + tg);
            a[1] = a_frag(ar + 8 * ws + tg);
            a[2] = a_frag(ar + tg + 4);
            a[3] = a_frag(ar + 8 * ws + tg + 4);
#pragma unroll
            for (int ni = 0; ni < 2; ni++) {
                const float *wrow = Ws + (wn * 16 + ni * 8 + g) * WS + k;
                mma_tf32(acc[ni], a, __float_as_uint(wrow[tg]), __float_as_uint(wrow[tg + 4]));
            }
        }
    }
}

/* h_state holds, as one float buffer of 2 * state: h0 as given (fp32, any range) in its second
 * half, read by step 0, and the ping-pong of h_t for t >= 1 as fp16 in its first half. h_t =
 * o * tanh(c) lies in (-1, 1), and the product takes its operands at TF32, whose 10 mantissa
 * bits fp16 has too: the same operands for half the bytes each block reads from L2 a step. */
__global__ void __launch_bounds__(P_THREADS, 1)
lstm_persistent_kernel(int T, int B, int H, int Hpad, const float *__restrict__ gx,
                       const float *__restrict__ wp, const float *__restrict__ bp,
                       const float *__restrict__ h0, const float *__restrict__ c0,
                       float *__restrict__ h_state, float *__restrict__ h_seq,
                       float *__restrict__ c_final) {
    extern __shared__ __align__(16) float smem[];
    const int WS = Hpad + 4;                                   /* conflict-free fragment loads */
    float *Ws = smem;                                          /* [NC][WS] */
    float *As = smem + NC * WS;                                /* [BB][WS]: h0's rows (step 0) */
    __half *Ash = (__half *)As;                                /* [BB][WSH]: h_{t-1} (the others) */
    const int WSH = Hpad + 8;                                  /* conflict-free, rows 16-byte aligned */
    float (*Ps)[BB][NC + 1] = (float (*)[BB][NC + 1])(smem + (NC + BB) * WS); /* [KSPLIT] */

    cg::grid_group grid = cg::this_grid();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wk = warp >> 2, wm = (warp >> 1) & 1, wn = warp & 1;
    const int g = lane >> 2, tg = lane & 3;
    const int jt = blockIdx.x, b0 = blockIdx.y * BB;
    const size_t state = (size_t)gridDim.y * BB * Hpad;
    const int nk = Hpad / KC;

    /* the block's 32 gate columns of W_hh, once */
    const float *wsrc = wp + (size_t)jt * NC * Hpad;
    for (int c = tid; c < NC * (Hpad / 4); c += P_THREADS) {
        const int r = c / (Hpad / 4), col = (c % (Hpad / 4)) * 4;
        cp_async16(&Ws[r * WS + col], wsrc + (size_t)r * Hpad + col);
    }
    cp_async_commit();

    /* one cell (batch row, unit) per thread; its c lives in a register for all T steps */
    const int bl = tid / UJ, u = tid % UJ, b = b0 + bl, j = jt * UJ + u;
    const bool live = tid < P_CELLS && b < B && j < H;
    float c = live ? c0[(size_t)b * H + j] : 0.0f;
    float bias[4];
#pragma unroll
    for (int gate = 0; gate < 4; gate++) bias[gate] = bp[jt * NC + gate * UJ + u];
    if (live) h_state[state + (size_t)b * Hpad + j] = h0[(size_t)b * H + j];
    cp_async_wait<0>();
    grid.sync();

    for (int t = 0; t < T; t++) {
        __half *hnext = (__half *)h_state + (size_t)((t + 1) & 1) * state;
        if (t == 0)
            load_h_tile(As, WS, h_state + state + (size_t)b0 * Hpad, Hpad, nk, tid);
        else
            load_h_tile(Ash, WSH, (const __half *)h_state + (size_t)(t & 1) * state + (size_t)b0 * Hpad, Hpad, nk, tid);
        /* the epilogue's operands, fetched while the product runs */
        float zin[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (live) {
            const float *z = gx + ((size_t)t * B + b) * 4 * H + j;
#pragma unroll
            for (int gate = 0; gate < 4; gate++) zin[gate] = __ldcs(z + (size_t)gate * H);
        }
        float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
        if (t == 0)
            h_product(acc, As, WS, Ws, WS, nk, wk, wm, wn, g, tg);
        else
            h_product(acc, Ash, WSH, Ws, WS, nk, wk, wm, wn, g, tg);
        cp_async_wait<0>();
#pragma unroll
        for (int ni = 0; ni < 2; ni++) {
            const int n = wn * 16 + ni * 8 + tg * 2, r = wm * 16 + g;
            Ps[wk][r][n] = acc[ni][0];
            Ps[wk][r][n + 1] = acc[ni][1];
            Ps[wk][r + 8][n] = acc[ni][2];
            Ps[wk][r + 8][n + 1] = acc[ni][3];
        }
        __syncthreads();
        if (live) {
            float pre[4];
#pragma unroll
            for (int gate = 0; gate < 4; gate++) {
                pre[gate] = zin[gate] + bias[gate];
#pragma unroll
                for (int w = 0; w < KSPLIT; w++) pre[gate] += Ps[w][bl][gate * UJ + u];
            }
            const float i = sigmoidf(pre[0]), f = sigmoidf(pre[1]), gc = tanhf(pre[2]), o = sigmoidf(pre[3]);
            c = f * c + i * gc;
            const float h = o * tanhf(c);
            hnext[(size_t)b * Hpad + j] = __float2half_rn(h);
            __stcs(h_seq + ((size_t)t * B + b) * H + j, h);
            if (t == T - 1) c_final[(size_t)b * H + j] = c;
        }
        grid.sync(); /* h_t is everywhere; the stages and Ps are free again */
    }
}

// ----------------------------------------------------------------------------
// The cluster path (H = 512): batch rows are independent, so a step needs only the SMs that
// share a batch group's h to agree, not the whole grid. A cluster of CL_CTAS blocks runs the
// whole recurrence of 8 NT batch rows: block r owns hidden units [32 r, 32 r + 32), i.e. 128 gate
// columns of W_hh, held for all T steps in registers as fp16 mma A fragments (fp16 has TF32's 10
// mantissa bits; a W_hh with a value past fp16's 65504 takes the other paths; h0's part of step
// 0, h0 · W_hh^T, is added into Gx by cuBLAS in TF32 beforehand, so h0 may take any value and the
// kernel starts from h = 0, h_t itself lying in (-1, 1)); z^T = W_slice · h^T by mma.m16n8k16
// (the batch rows are the n side, NT n8 tiles), the cell finishes in the block, and the block's
// 8 NT x 32 fp16 h values go to every block of the cluster by 16-byte st.async stores into their
// shared memory, each completing bytes of the receiver's mbarrier: a step waits for its h and
// nothing else, no cluster barrier. Clusters never wait for each other. NT = 1 where every
// cluster the batch needs fits the GPU at once (cudaOccupancyMaxActiveClusters), else NT = 2:
// an H200 or H100 holds 7 clusters of 16 such blocks, so B = 64 takes 4 clusters of 16 rows
// rather than 8 of 8 in two waves (NOTES.md). 256 NT threads a block: the product's k steps are
// split NT ways across warps, so a warp's mma chain stays 32 / NT steps and a thread one cell.

#define CL_CTAS 16          /* blocks a cluster: one 32-unit slice of H each */
#define CL_H 512            /* the only H this path takes */
#define CL_U (CL_H / CL_CTAS) /* units a block: 32 */
#define CL_M (4 * CL_U)     /* gate columns a block: 128, eight m16 tiles */
#define CL_KS (CL_H / 16)   /* k16 steps of the product: 32 */
#define CL_HS (CL_H + 8)    /* h row stride in halves: conflict-free ldmatrix, rows 16-byte aligned */

/* The block-rank r, warp w, k-step ks, lane fragment of W_hh: the A fragment of
 * mma.m16n8k16.row for rows m = 16 w + (g, g + 8) of the block's gate columns (gate m / 32, unit
 * 32 r + m % 32) and k = 16 ks + 2 tq + (0, 1, 8, 9), g = lane / 4, tq = lane % 4; fp16 pairs,
 * rounded to nearest. One uint4 a (r, w, ks, lane), in that order. */
__global__ void cluster_frag_kernel(const float *__restrict__ w_hh, uint4 *__restrict__ frag,
                                    int *__restrict__ overflow) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= CL_CTAS * 8 * CL_KS * 32) return;
    const int lane = i % 32, ks = i / 32 % CL_KS, w = i / (32 * CL_KS) % 8, r = i / (32 * CL_KS * 8);
    const int g = lane / 4, tq = lane % 4;
    unsigned v[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const int m = 16 * w + g + (q & 1) * 8, k = 16 * ks + 2 * tq + (q >> 1) * 8;
        const int row = (m / CL_U) * CL_H + r * CL_U + m % CL_U;
        const float w0 = w_hh[(size_t)row * CL_H + k], w1 = w_hh[(size_t)row * CL_H + k + 1];
        const __half2 h2 = __floats2half2_rn(w0, w1);
        if (!(fabsf(w0) <= 65504.0f && fabsf(w1) <= 65504.0f)) *overflow = 1; /* NaN too */
        v[q] = *(const unsigned *)&h2;
    }
    frag[i] = make_uint4(v[0], v[1], v[2], v[3]);
}

__device__ __forceinline__ void mma_f16(float (&d)[4], const uint4 &a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void cluster_sync_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

/* 16 bytes into block `rank`'s shared memory at the address `local` has in this block,
 * completing 16 bytes of the transaction count of that block's mbarrier at `bar`'s address */
__device__ __forceinline__ void st_async16(const void *local, const unsigned long long *bar, unsigned rank, uint4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned ra, rb;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
                 : "=r"(ra) : "r"((unsigned)__cvta_generic_to_shared(local)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
                 : "=r"(rb) : "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(rank));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n"
                 :: "r"(ra), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(rb) : "memory");
#endif
}

__device__ __forceinline__ void mbar_init(unsigned long long *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
#endif
}

/* this block's one arrival of the phase, expecting `bytes` from the cluster's st.async */
__device__ __forceinline__ void mbar_expect(unsigned long long *bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ void mbar_wait(unsigned long long *bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("{\n .reg .pred done;\n"
                 "WAIT_%=:\n"
                 " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
                 " @!done bra WAIT_%=;\n}\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(parity) : "memory");
#endif
}

/* h^T's B fragments for k-steps 2i and 2i + 1 (rows of hs: batch rows, k contiguous) */
__device__ __forceinline__ void ldsm_x4(unsigned (&b)[4], const __half *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                 : "r"((unsigned)__cvta_generic_to_shared(p)));
}

/* NT n8 tiles of batch rows and 256 NT threads: warp w takes m16 tile w % 8 of the block's gate
 * columns over k part w / 8 of NT (the product's chain of dependent k steps a warp stays 32 / NT
 * long whatever NT is), the NT partial products meet in shared memory, and each thread finishes
 * one cell (row, unit). */
template <int NT>
__global__ void __launch_bounds__(256 * NT, 1)
lstm_cluster_kernel(int T, int B, const float *__restrict__ gx, const uint4 *__restrict__ frag,
                    const float *__restrict__ bias, const float *__restrict__ c0,
                    float *__restrict__ h_seq, float *__restrict__ c_final) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 /* clusters: empty elsewhere, and never chosen */
    constexpr int ROWS = 8 * NT;       /* batch rows a cluster: the mma's n side */
    constexpr int ZS = ROWS + 1;       /* z row stride in floats: conflict-free epilogue reads */
    constexpr int THREADS = 256 * NT;  /* one cell (row, unit) a thread */
    constexpr int KW = CL_KS / NT;     /* k16 steps a warp */
    constexpr int NA = 4 / NT;         /* accumulator sets a warp: 4 chains of 8 / NT mmas an n8 tile */
    /* dynamic shared memory (cluster_smem bytes): past 48 KB at NT = 2 */
    extern __shared__ __align__(16) unsigned char cl_smem[];
    __half(*hs)[ROWS][CL_HS] = (__half(*)[ROWS][CL_HS])cl_smem;         /* [2]: h_{t-1} by parity */
    float(*zs)[CL_M][ZS] = (float(*)[CL_M][ZS])(hs + 2);                 /* [NT]: partial z^T */
    unsigned long long *full = (unsigned long long *)(zs + NT);          /* [2]: hs[p] has arrived */
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tq = lane & 3;
    const int mt = warp % 8, kh = warp / 8;
    const int row0 = (int)(blockIdx.x / CL_CTAS) * ROWS;

    uint4 a[KW]; /* this warp's m16 tile of W_slice, its k part */
    const uint4 *fp = frag + ((size_t)(rank * 8 + mt) * CL_KS + kh * KW) * 32 + lane;
#pragma unroll
    for (int ks = 0; ks < KW; ks++) a[ks] = fp[ks * 32];

    /* the thread's cell: batch row bl of the cluster's rows, unit u of the block's */
    const int bl = tid / CL_U, u = tid % CL_U, b = row0 + bl, j = (int)rank * CL_U + u;
    const bool live = b < B;
    float c = live ? c0[(size_t)b * CL_H + j] : 0.0f, zin[4], bs[4];
#pragma unroll
    for (int gate = 0; gate < 4; gate++) {
        bs[gate] = bias[gate * CL_H + j];
        zin[gate] = live ? gx[(size_t)b * 4 * CL_H + gate * CL_H + j] : 0.0f;
    }
    /* step 0's product is in Gx already (st_run): it starts from h = 0 */
    for (int e = tid; e < ROWS * CL_HS / 8; e += THREADS) ((uint4 *)&hs[0][0][0])[e] = make_uint4(0u, 0u, 0u, 0u);
    if (tid == 0) {
        mbar_init(&full[0]);
        mbar_init(&full[1]);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_sync_all(); /* every block runs, its barriers set, before anyone writes into it */

    for (int t = 0; t < T; t++) {
        const int p = t & 1;
        /* hs[p] is h_{t-1} from all 16 blocks: buffer p's ((t - 1) / 2)-th fill. Every block
         * sent its part only after its own product of step t - 1, so hs[p ^ 1], read then, is
         * free for this step's sends too: no other barrier a step. */
        if (t > 0) mbar_wait(&full[p], (unsigned)((t - 1) >> 1) & 1u);
        if (t + 1 < T && tid == 0) mbar_expect(&full[p ^ 1], CL_CTAS * ROWS * CL_U * (unsigned)sizeof(__half));
        float acc[NA][NT][4] = {};
#pragma unroll
        for (int i = 0; i < KW / 2; i++) {
#pragma unroll
            for (int n = 0; n < NT; n++) {
                unsigned bf[4];
                ldsm_x4(bf, &hs[p][8 * n + (lane & 7)][(lane >> 3) * 8 + 16 * (kh * KW + 2 * i)]);
                mma_f16(acc[(2 * i) % NA][n], a[2 * i], bf[0], bf[1]);
                mma_f16(acc[(2 * i + 1) % NA][n], a[2 * i + 1], bf[2], bf[3]);
            }
        }
        const int m = 16 * mt + g;
#pragma unroll
        for (int n = 0; n < NT; n++) {
            float d[4];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                d[q] = acc[0][n][q];
#pragma unroll
                for (int e = 1; e < NA; e++) d[q] += acc[e][n][q];
            }
            zs[kh][m][8 * n + 2 * tq] = d[0];
            zs[kh][m][8 * n + 2 * tq + 1] = d[1];
            zs[kh][m + 8][8 * n + 2 * tq] = d[2];
            zs[kh][m + 8][8 * n + 2 * tq + 1] = d[3];
        }
        __syncthreads();
        float pre[4];
#pragma unroll
        for (int gate = 0; gate < 4; gate++) {
            float z = zs[0][gate * CL_U + u][bl];
#pragma unroll
            for (int q = 1; q < NT; q++) z += zs[q][gate * CL_U + u][bl];
            pre[gate] = (z + zin[gate]) + bs[gate];
        }
        const float i = sigmoid_mufu(pre[0]), f = sigmoid_mufu(pre[1]), gc = tanh_mufu(pre[2]),
                    o = sigmoid_mufu(pre[3]);
        c = f * c + i * gc;
        const float h = o * tanh_mufu(c);
        /* lanes 8 g .. 8 g + 7 hold one 16-byte chunk (row bl, 8 units): every lane of the eight
         * gathers it by shuffles and sends it to two of the 16 blocks. The shuffles meet the whole
         * warp past its reads of zs, and every warp sends to every block, so a block that has
         * all of h_t knows the zs of step t read everywhere: no barrier before the sends. */
        const unsigned hb = __half_as_ushort(__float2half_rn(h));
        const unsigned pair = hb | (__shfl_down_sync(0xffffffffu, hb, 1) << 16); /* kept at even lanes */
        const int g8 = lane & ~7;
        const uint4 chunk = make_uint4(__shfl_sync(0xffffffffu, pair, g8), __shfl_sync(0xffffffffu, pair, g8 + 2),
                                       __shfl_sync(0xffffffffu, pair, g8 + 4), __shfl_sync(0xffffffffu, pair, g8 + 6));
        if (t + 1 == T) {
            if (live) {
                __stcs(h_seq + ((size_t)t * B + b) * CL_H + j, h);
                c_final[(size_t)b * CL_H + j] = c;
            }
            break;
        }
#pragma unroll
        for (int s = 0; s < 2; s++)
            st_async16(&hs[p ^ 1][bl][(int)rank * CL_U + (u & ~7)], &full[p ^ 1], (unsigned)((lane & 7) + 8 * s), chunk);
        if (live) {
            __stcs(h_seq + ((size_t)t * B + b) * CL_H + j, h);
#pragma unroll
            for (int gate = 0; gate < 4; gate++)
                zin[gate] = __ldcs(gx + ((size_t)(t + 1) * B + b) * 4 * CL_H + gate * CL_H + j);
        }
    }
    cluster_sync_all(); /* no block leaves with its own st.async stores still in flight */
#endif
}

// ----------------------------------------------------------------------------

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "lstm expert: size '%s' missing from the config\n", name);
    return 1;
}

static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1,
                        int64_t d2) {
    const int64_t d[3] = {d0, d1, d2};
    int ok = t->dtype == ST_F32 && t->ndim == ndim && t->data != NULL &&
             (uintptr_t)t->data % sizeof(float) == 0;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == d[i];
    if (!ok) fprintf(stderr, "lstm expert: %s: wrong dtype, shape or alignment\n", what);
    return !ok;
}

extern "C" void st_free(void *p) {
    lstm_ctx *ctx = (lstm_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing destroy here would only hide the real error. */
    if (ctx->exec) cudaGraphExecDestroy(ctx->exec);
    if (ctx->graph) cudaGraphDestroy(ctx->graph);
    if (ctx->capture) cudaStreamDestroy(ctx->capture);
    if (ctx->handle) cublasDestroy(ctx->handle);
    cudaFree(ctx->wp);
    cudaFree(ctx->bp);
    cudaFree(ctx->gx);
    cudaFree(ctx->h_state);
    cudaFree(ctx->c_state);
    cudaFree(ctx->io);
    cudaFree(ctx->workspace);
    cudaFree(ctx->cl_frag);
    free(ctx);
}

/* The T step launches, recorded once. Step t reads h_state[t % 2] and writes h_state[(t+1) % 2]. */
static int capture_steps(lstm_ctx *ctx) {
    const size_t state = (size_t)ctx->Bpad * ctx->Hpad;
    const dim3 grid((unsigned)ctx->njt, (unsigned)(ctx->Bpad / BB));
    CUDA_CHECK(cudaStreamBeginCapture(ctx->capture, cudaStreamCaptureModeThreadLocal));
    for (int t = 0; t < ctx->T; t++) {
        lstm_step_kernel<<<grid, STEP_THREADS, 0, ctx->capture>>>(
            t, ctx->T, ctx->B, ctx->H, ctx->Hpad, ctx->gx, ctx->wp, ctx->bp,
            ctx->h_state + (size_t)(t & 1) * state, ctx->h_state + (size_t)((t + 1) & 1) * state,
            ctx->c_state, ctx->io);
    }
    /* a failed launch inside the capture shows up here or in EndCapture; end it either way */
    const cudaError_t launch = cudaGetLastError();
    const cudaError_t end = cudaStreamEndCapture(ctx->capture, &ctx->graph);
    CUDA_CHECK(launch);
    CUDA_CHECK(end);
    CUDA_CHECK(cudaGraphInstantiate(&ctx->exec, ctx->graph, 0));
    return 0;
}

/* The persistent kernel when its grid fits on the device at once (a cooperative launch needs
 * that) and a block's W_hh columns fit in shared memory; otherwise the graph of step kernels. */
static int pick_persistent(lstm_ctx *ctx) {
    int dev, sms, coop, optin, per_sm = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const size_t smem = sizeof(float) * ((size_t)(NC + BB) * (ctx->Hpad + 4) + KSPLIT * (size_t)BB * (NC + 1));
    ctx->p_smem = 0;
    if (!coop || smem > (size_t)optin) return 0;
    CUDA_CHECK(cudaFuncSetAttribute(lstm_persistent_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, lstm_persistent_kernel, P_THREADS, smem));
    if ((int64_t)per_sm * sms >= (int64_t)ctx->njt * (ctx->Bpad / BB)) ctx->p_smem = smem;
    return 0;
}

/* lstm_cluster_kernel<nt>'s shared memory: hs, zs, full */
static size_t cluster_smem(int nt) {
    return (size_t)2 * 8 * nt * CL_HS * sizeof(__half) + (size_t)nt * CL_M * (8 * nt + 1) * sizeof(float) +
           2 * sizeof(unsigned long long);
}

/* lstm_cluster_kernel<nt>'s launch for a batch of B rows */
static cudaLaunchConfig_t cluster_config(int B, int nt, cudaStream_t stream, cudaLaunchAttribute *attr) {
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3((unsigned)(CL_CTAS * ((B + 8 * nt - 1) / (8 * nt))));
    lc.blockDim = dim3((unsigned)(256 * nt));
    lc.dynamicSmemBytes = cluster_smem(nt);
    lc.stream = stream;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = CL_CTAS;
    attr->val.clusterDim.y = attr->val.clusterDim.z = 1;
    lc.attrs = attr;
    lc.numAttrs = 1;
    return lc;
}

/* How many clusters of lstm_cluster_kernel<NT> fit the device at once; 0 where none does. */
template <int NT>
static int cluster_room(int B, cudaStream_t stream) {
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t lc = cluster_config(B, NT, stream, &attr);
    int clusters = 0;
    if (cudaFuncSetAttribute(lstm_cluster_kernel<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)lc.dynamicSmemBytes) != cudaSuccess ||
        cudaFuncSetAttribute(lstm_cluster_kernel<NT>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveClusters(&clusters, lstm_cluster_kernel<NT>, &lc) != cudaSuccess) {
        (void)cudaGetLastError(); /* a device without 16-block clusters: the other paths */
        return 0;
    }
    return clusters;
}

/* The fragments, and whether W_hh fits fp16 (1) or not (0). */
static int make_fragments(lstm_ctx *ctx, const float *w_hh, cudaStream_t stream, int *fits) {
    const int n = CL_CTAS * 8 * CL_KS * 32;
    int *overflow, host_overflow = 0;
    CUDA_CHECK(cudaMalloc(&ctx->cl_frag, (size_t)n * sizeof(uint4)));
    CUDA_CHECK(cudaMalloc(&overflow, sizeof(int)));
    cudaError_t e = cudaMemsetAsync(overflow, 0, sizeof(int), stream);
    if (e == cudaSuccess) {
        cluster_frag_kernel<<<(n + 255) / 256, 256, 0, stream>>>(w_hh, ctx->cl_frag, overflow);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&host_overflow, overflow, sizeof(int), cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    const cudaError_t f = cudaFree(overflow);
    CUDA_CHECK(e);
    CUDA_CHECK(f);
    *fits = !host_overflow;
    return 0;
}

/* The cluster path (lstm_cluster_kernel) where H is its 512, the build has the kernel (sm_90 and
 * later), a cluster of CL_CTAS blocks fits the device and every W_hh value fits fp16; its W_hh
 * fragments are made here. */
static int pick_cluster(lstm_ctx *ctx, cudaStream_t stream) {
    cudaFuncAttributes fa;
    int dev, major, fits = 0;
    if (ctx->H != CL_H) return 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaFuncGetAttributes(&fa, lstm_cluster_kernel<1>));
    if (major < 9 || fa.binaryVersion < 90) return 0;
    /* 8 rows a cluster where every cluster fits at once; else 16, for fewer waves */
    const int room1 = cluster_room<1>(ctx->B, stream), room2 = cluster_room<2>(ctx->B, stream);
    if (room1 >= (ctx->B + 7) / 8) ctx->cl_nt = 1;
    else if (room2 >= 1) ctx->cl_nt = 2;
    else if (room1 >= 1) ctx->cl_nt = 1;
    else return 0;
    if (make_fragments(ctx, ctx->W_hh, stream, &fits)) return 1;
    if (!fits) { /* a weight fp16 cannot hold: the TF32 paths */
        CUDA_CHECK(cudaFree(ctx->cl_frag));
        ctx->cl_frag = NULL;
    }
    return 0;
}

/* What the persistent kernel and the graph of step kernels need beyond Gx: W_hh and b regrouped
 * by unit tile, the padded h and c state, the table of output addresses. */
static int init_step_state(lstm_ctx *ctx, const st_tensor *params, cudaStream_t stream) {
    const size_t state = (size_t)ctx->Bpad * ctx->Hpad;
    const int64_t n_wp = (int64_t)ctx->njt * NC * ctx->Hpad;
    CUDA_CHECK(cudaMalloc(&ctx->wp, (size_t)n_wp * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->bp, (size_t)ctx->njt * NC * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->h_state, 2 * state * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->c_state, state * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->io, sizeof(lstm_io)));
    /* the padding rows and columns are read by the MMAs and never written: keep them zero */
    CUDA_CHECK(cudaMemsetAsync(ctx->h_state, 0, 2 * state * sizeof(float), stream));
    CUDA_CHECK(cudaMemsetAsync(ctx->c_state, 0, state * sizeof(float), stream));
    regroup_kernel<<<(unsigned)((n_wp + 255) / 256), 256, 0, stream>>>(
        (const float *)params[1].data, (const float *)params[2].data, ctx->wp, ctx->bp, ctx->H,
        ctx->Hpad, ctx->njt);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

static int init_ctx(lstm_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params,
                    cudaStream_t stream) {
    int64_t T, B, I, H;
    if (cfg_get(cfg, "T", &T) || cfg_get(cfg, "B", &B) || cfg_get(cfg, "I", &I) || cfg_get(cfg, "H", &H))
        return 1;
    /* cuBLAS and the kernels take int dimensions */
    if (T < 1 || B < 1 || I < 1 || H < 1 || T * B > INT32_MAX || 4 * H > INT32_MAX ||
        (B + BB) * (H + KC) > INT32_MAX || B / BB >= 65535) {
        fprintf(stderr, "lstm expert: sizes out of range\n");
        return 1;
    }
    if (n_params != 3) {
        fprintf(stderr, "lstm expert: expected 3 params, got %d\n", n_params);
        return 1;
    }
    if (check_tensor(&params[0], "W_ih", 2, 4 * H, I, 0) || check_tensor(&params[1], "W_hh", 2, 4 * H, H, 0) ||
        check_tensor(&params[2], "b", 1, 4 * H, 0, 0))
        return 1;
    ctx->T = (int)T; ctx->B = (int)B; ctx->I = (int)I; ctx->H = (int)H;
    ctx->Hpad = (int)((H + KC - 1) / KC * KC);
    ctx->Bpad = (int)((B + BB - 1) / BB * BB);
    ctx->njt = (int)((H + UJ - 1) / UJ);
    ctx->W_ih = (const float *)params[0].data;
    ctx->b = (const float *)params[2].data;
    ctx->W_hh = (const float *)params[1].data;

    CUDA_CHECK(cudaMalloc(&ctx->gx, (size_t)T * B * 4 * H * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    if (pick_cluster(ctx, stream)) return 1;
    if (!ctx->cl_frag && init_step_state(ctx, params, stream)) return 1;
    /* st_run may get another stream: everything above must be done before st_init returns */
    CUDA_CHECK(cudaStreamSynchronize(stream));

    CUBLAS_CHECK(cublasCreate(&ctx->handle));
    if (ctx->cl_frag) return 0;
    if (pick_persistent(ctx)) return 1;
    if (ctx->p_smem) return 0;
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->capture, cudaStreamNonBlocking));
    return capture_steps(ctx);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    *out_ctx = NULL;
    lstm_ctx *ctx = (lstm_ctx *)calloc(1, sizeof(lstm_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params, stream)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    lstm_ctx *ctx = (lstm_ctx *)p;
    if (n_in != 3 || n_out != 2) {
        fprintf(stderr, "lstm expert: expected 3 inputs and 2 outputs, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int T = ctx->T, B = ctx->B, I = ctx->I, H = ctx->H;
    if (check_tensor(&in[0], "x", 3, T, B, I) || check_tensor(&in[1], "h0", 2, B, H, 0) ||
        check_tensor(&in[2], "c0", 2, B, H, 0) || check_tensor(&out[0], "h_seq", 3, T, B, H) ||
        check_tensor(&out[1], "c_final", 2, B, H, 0))
        return 1;
    const float one = 1.0f, zero = 0.0f;

    /* Gx[T*B, 4H] = x·W_ih^T: column-major Gx^T = W_ih·x^T, and row-major W_ih[4H, I] is
     * W_ih^T in column-major form, so it is transposed back */
    CUBLAS_CHECK(cublasSetStream(ctx->handle, stream));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->handle, ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasGemmEx(ctx->handle, CUBLAS_OP_T, CUBLAS_OP_N, 4 * H, T * B, I, &one,
                              ctx->W_ih, CUDA_R_32F, I, in[0].data, CUDA_R_32F, I, &zero, ctx->gx,
                              CUDA_R_32F, 4 * H, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));

    if (ctx->cl_frag) {
        /* step 0's h0 · W_hh^T into Gx's first B rows, in TF32 from fp32 h0, whatever its range */
        CUBLAS_CHECK(cublasGemmEx(ctx->handle, CUBLAS_OP_T, CUBLAS_OP_N, 4 * H, B, H, &one, ctx->W_hh,
                                  CUDA_R_32F, H, in[1].data, CUDA_R_32F, H, &one, ctx->gx, CUDA_R_32F,
                                  4 * H, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t lc = cluster_config(B, ctx->cl_nt, stream, &attr);
        CUDA_CHECK(cudaLaunchKernelEx(&lc, ctx->cl_nt == 1 ? lstm_cluster_kernel<1> : lstm_cluster_kernel<2>, T,
                                      B, (const float *)ctx->gx, (const uint4 *)ctx->cl_frag, ctx->b,
                                      (const float *)in[2].data, (float *)out[0].data, (float *)out[1].data));
        return 0;
    }
    if (ctx->p_smem) {
        int Tv = T, Bv = B, Hv = H, Hpad = ctx->Hpad;
        const float *gx = ctx->gx, *wp = ctx->wp, *bp = ctx->bp, *h0 = (const float *)in[1].data,
                    *c0 = (const float *)in[2].data;
        float *hs = ctx->h_state, *h_seq = (float *)out[0].data, *c_final = (float *)out[1].data;
        void *args[] = {&Tv, &Bv, &Hv, &Hpad, &gx, &wp, &bp, &h0, &c0, &hs, &h_seq, &c_final};
        CUDA_CHECK(cudaLaunchCooperativeKernel((const void *)lstm_persistent_kernel,
                                               dim3((unsigned)ctx->njt, (unsigned)(ctx->Bpad / BB)),
                                               dim3(P_THREADS), args, ctx->p_smem, stream));
        return 0;
    }
    const int64_t cells = (int64_t)B * H;
    prep_kernel<<<(unsigned)((cells + 255) / 256), 256, 0, stream>>>(
        (const float *)in[1].data, (const float *)in[2].data, ctx->h_state, ctx->c_state, B, H,
        ctx->Hpad, ctx->io, (float *)out[0].data, (float *)out[1].data);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaGraphLaunch(ctx->exec, stream));
    return 0;
}
