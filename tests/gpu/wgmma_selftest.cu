/* Self-test of the sm_90a attention path (the "Hopper path") of t4/flash_attention/expert.cu
 * (D = 128, the default) or, with -DSELFTEST_D=64, of t2/attention_causal/expert.cu, written to
 * isolate layout bugs in one GPU run. It includes the solution file itself, so it exercises
 * exactly the kernel's helpers: (1) the TMA tile load (3-D tensor map, 128-byte swizzle, zero
 * fill past T) followed by the SS wgmma S = Q·K^T with the kernel's K-major descriptors, both
 * warpgroups' Q rows; (2) the RS wgmma O = P·V with P built from an accumulator-layout register
 * set by the kernel's S-to-P conversion and V as the N-major B operand; (3) the whole solution
 * through st_init/st_run against a host double-precision causal attention on ragged sizes,
 * output poisoned with NaN first. Prints PASS/FAIL per case with the first mismatching index;
 * exit 0 when all pass, 1 on a mismatch, 2 on a CUDA or setup error. With the argument `bench`,
 * then times st_run at the eval size on both paths (bench()).
 * tests/gpu/test_attention_cuda.sh builds and runs both; by hand (repo root, on an H100/H200;
 * -D switches of the expert, e.g. -DHP_PRODUCER_WG=0, pass through):
 *   nvcc -std=c++17 -arch=sm_90a -Iinclude -o /tmp/wst tests/gpu/wgmma_selftest.cu && /tmp/wst bench
 *   nvcc -std=c++17 -arch=sm_90a -Iinclude -DSELFTEST_D=64 -o /tmp/wst64 tests/gpu/wgmma_selftest.cu \
 *     && /tmp/wst64 bench */
#ifndef SELFTEST_D
#define SELFTEST_D 128
#endif
#if SELFTEST_D == 128
#include "../../tasks/t4/flash_attention/expert.cu"
#else
#include "../../tasks/t2/attention_causal/expert.cu"
#endif
#include <stdio.h>
#include <algorithm>
#include <vector>

#define DD SELFTEST_D

#include "selftest_check.h"

static float bf(float x) { return __bfloat162float(__float2bfloat16(x)); }

/* Deterministic pseudo-normal-ish values, exactly representable in bf16. */
static uint32_t rng = 12345u;
static float urand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xFFFF) / 65536.0f;
}
static float rnd(float scale) { return bf((urand() + urand() + urand() - 1.5f) * 2.0f * scale); }

/* (1) + (2) in one kernel: 256 threads = the two consumer warpgroups, thread 0 plays the
 * producer. Head `head` of a [2, T, D] tensor, tile rows row0 .. row0+127.
 * S_out[128][128]: Q rows x K rows; O_out[128][D] = P_in[128][128] · V tile. */
template <int D>
__global__ void st_tile_kernel(const __grid_constant__ CUtensorMap tq,
                               const __grid_constant__ CUtensorMap tk,
                               const __grid_constant__ CUtensorMap tv, int row0, int head,
                               const float *P_in, float *S_out, float *O_out) {
#if HP_DEVICE
    typedef hp_cfg<D> C;
    extern __shared__ unsigned char hp_smem[];
    const uint32_t raw = hp_u32(hp_smem), base = (raw + 1023u) & ~1023u;
    const uint32_t bar = base + C::OFF_BAR;
    const uint32_t sq = base, sk = base + C::OFF_K, sv = base + C::OFF_V;
    if (threadIdx.x == 0) {
        mbar_init(bar, 3); /* three arrive.expect_tx, one per tile */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        /* one barrier phase for all three tiles */
        hp_load_tile<D>(sq, &tq, row0, head, bar);
        hp_load_tile<D>(sk, &tk, row0, head, bar);
        hp_load_tile<D>(sv, &tv, row0, head, bar);
    }
    mbar_wait(bar, 0);
    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
    const int t = threadIdx.x % 128, lane = t % 32, g = lane / 4, tq4 = lane % 4;
    float s[64];
#pragma unroll
    for (int r = 0; r < 64; r++) s[r] = 0.0f;
    wgmma_fence();
    hp_mma_qk<D>(s, sq + wg * 64 * 128, sk);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(s);
    /* accumulator layout: register 4c + 2i + j = row 16*warp + g + 8i, column 8c + 2*tq + j */
#pragma unroll
    for (int r = 0; r < 64; r++) {
        const int row = wg * 64 + (t / 32) * 16 + g + 8 * ((r / 2) & 1);
        const int col = 8 * (r / 4) + 2 * tq4 + (r & 1);
        S_out[row * 128 + col] = s[r];
        s[r] = P_in[row * 128 + col]; /* P in the layout the softmax leaves it in */
    }
    uint32_t p[8][4];
    hp_s_to_p(s, p);
    float o[D / 2];
#pragma unroll
    for (int r = 0; r < D / 2; r++) o[r] = 0.0f;
    wgmma_fence();
    hp_mma_pv<D>(o, p, sv);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs_u(p);
#pragma unroll
    for (int r = 0; r < D / 2; r++) {
        const int row = wg * 64 + (t / 32) * 16 + g + 8 * ((r / 2) & 1);
        const int col = 8 * (r / 4) + 2 * tq4 + (r & 1);
        O_out[row * D + col] = o[r];
    }
#endif
}

static int report(const char *name, const std::vector<float> &got, const std::vector<float> &want,
                  double atol, double rtol) {
    size_t bad = 0, first = (size_t)-1;
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); i++) {
        const double d = fabs((double)got[i] - want[i]);
        const bool ok = d <= atol + rtol * fabs((double)want[i]);  /* NaN fails */
        if (d > worst || d != d) worst = d;
        if (!ok) {
            if (bad == 0) first = i;
            bad++;
        }
    }
    if (bad == 0) {
        printf("PASS %-44s max|diff| %.3g over %zu\n", name, worst, got.size());
        return 0;
    }
    printf("FAIL %-44s %zu of %zu bad, first index %zu: got %g want %g\n", name, bad, got.size(),
           first, got[first], want[first]);
    return 1;
}

/* Cases 1 and 2 on head 1 of a [2, T, D] tensor, tile at row0. */
static int tile_case(hp_encode_fn enc, int T, int row0) {
    const int BH = 2, head = 1;
    const size_t n = (size_t)BH * T * DD;
    std::vector<__nv_bfloat16> hq(n), hk(n), hv(n);
    std::vector<float> fq(n), fk(n), fv(n), P(128 * 128);
    for (size_t i = 0; i < n; i++) {
        fq[i] = rnd(1.0f); fk[i] = rnd(1.0f); fv[i] = rnd(1.0f);
        hq[i] = __float2bfloat16(fq[i]); hk[i] = __float2bfloat16(fk[i]); hv[i] = __float2bfloat16(fv[i]);
    }
    for (auto &x : P) x = bf(urand());
    __nv_bfloat16 *dq, *dk, *dv;
    float *dP, *dS, *dO;
    CK(cudaMalloc(&dq, n * 2)); CK(cudaMalloc(&dk, n * 2)); CK(cudaMalloc(&dv, n * 2));
    CK(cudaMalloc(&dP, P.size() * 4)); CK(cudaMalloc(&dS, 128 * 128 * 4)); CK(cudaMalloc(&dO, 128 * DD * 4));
    CK(cudaMemcpy(dq, hq.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dk, hk.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, hv.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dP, P.data(), P.size() * 4, cudaMemcpyHostToDevice));
    CUtensorMap mq, mk, mv;
    if (hp_make_map(enc, &mq, dq, DD, T, BH) || hp_make_map(enc, &mk, dk, DD, T, BH) ||
        hp_make_map(enc, &mv, dv, DD, T, BH)) {
        printf("FAIL cuTensorMapEncodeTiled\n");
        return 1;
    }
    const int smem = hp_cfg<DD>::SMEM;
    CK(cudaFuncSetAttribute(st_tile_kernel<DD>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    st_tile_kernel<DD><<<1, 256, smem>>>(mq, mk, mv, row0, head, dP, dS, dO);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> S(128 * 128), O(128 * DD), Sw(128 * 128), Ow(128 * DD);
    CK(cudaMemcpy(S.data(), dS, S.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(O.data(), dO, O.size() * 4, cudaMemcpyDeviceToHost));
    /* rows past T are zero in every tile (TMA bounds) */
    auto at = [&](const std::vector<float> &f, int r, int d) {
        const int row = row0 + r;
        return row < T ? f[((size_t)head * T + row) * DD + d] : 0.0f;
    };
    for (int i = 0; i < 128; i++)
        for (int j = 0; j < 128; j++) {
            double acc = 0;
            for (int d = 0; d < DD; d++) acc += (double)at(fq, i, d) * at(fk, j, d);
            Sw[i * 128 + j] = (float)acc;
        }
    for (int i = 0; i < 128; i++)
        for (int d = 0; d < DD; d++) {
            double acc = 0;
            for (int j = 0; j < 128; j++) acc += (double)P[i * 128 + j] * at(fv, j, d);
            Ow[i * DD + d] = (float)acc;
        }
    char name[96];
    int fails = 0;
    snprintf(name, sizeof name, "TMA + SS wgmma S=Q.K^T  T=%d row0=%d", T, row0);
    fails += report(name, S, Sw, 1e-3, 1e-4);
    snprintf(name, sizeof name, "RS wgmma O=P.V (V N-major) T=%d row0=%d", T, row0);
    fails += report(name, O, Ow, 1e-3, 1e-4);
    cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dP); cudaFree(dS); cudaFree(dO);
    return fails;
}

/* (3) the whole solution against a double-precision causal attention. */
static int full_case(int B, int H, int T, double atol, double rtol) {
    const int64_t vals[3] = {B, H, T};
    const char *names[3] = {"B", "H", "T"};
    st_config cfg = {3, names, vals};
    const size_t n = (size_t)B * H * T * DD;
    std::vector<__nv_bfloat16> h[3];
    std::vector<float> f[3];
    for (int a = 0; a < 3; a++) {
        h[a].resize(n); f[a].resize(n);
        for (size_t i = 0; i < n; i++) {
            f[a][i] = rnd(a == 2 ? 1.0f : 1.5f);
            h[a][i] = __float2bfloat16(f[a][i]);
        }
    }
    void *ctx = NULL;
    if (st_init(&cfg, NULL, 0, 0, &ctx) != 0) {
        printf("FAIL st_init B=%d H=%d T=%d\n", B, H, T);
        return 1;
    }
    st_tensor in[3], out[1];
    const char *tn[4] = {"q", "k", "v", "o"};
    for (int a = 0; a < 4; a++) {
        st_tensor *t = a < 3 ? &in[a] : &out[0];
        t->name = tn[a]; t->dtype = ST_BF16; t->ndim = 4;
        t->shape[0] = B; t->shape[1] = H; t->shape[2] = T; t->shape[3] = DD;
        CK(cudaMalloc(&t->data, n * 2));
        if (a < 3) CK(cudaMemcpy(t->data, h[a].data(), n * 2, cudaMemcpyHostToDevice));
        else CK(cudaMemset(t->data, 0xFF, n * 2)); /* NaN */
    }
    const int rc = st_run(ctx, in, 3, out, 1, 0);
    CK(cudaDeviceSynchronize());
    std::vector<__nv_bfloat16> ho(n);
    CK(cudaMemcpy(ho.data(), out[0].data, n * 2, cudaMemcpyDeviceToHost));
    const int hp = ((attn_ctx *)ctx)->use_hp;
    st_free(ctx);
    for (int a = 0; a < 3; a++) cudaFree(in[a].data);
    cudaFree(out[0].data);
    std::vector<float> got(n), want(n);
    std::vector<double> w(T);
    const double scale = 1.0 / sqrt((double)DD);
    for (int bh = 0; bh < B * H; bh++)
        for (int i = 0; i < T; i++) {
            const float *q = &f[0][((size_t)bh * T + i) * DD];
            double mx = -1e300, sum = 0;
            for (int j = 0; j <= i; j++) {
                const float *k = &f[1][((size_t)bh * T + j) * DD];
                double acc = 0;
                for (int d = 0; d < DD; d++) acc += (double)q[d] * k[d];
                w[j] = acc * scale;
                if (w[j] > mx) mx = w[j];
            }
            for (int j = 0; j <= i; j++) { w[j] = exp(w[j] - mx); sum += w[j]; }
            for (int d = 0; d < DD; d++) {
                double acc = 0;
                for (int j = 0; j <= i; j++) acc += w[j] * f[2][((size_t)bh * T + j) * DD + d];
                const size_t idx = ((size_t)bh * T + i) * DD + d;
                want[idx] = (float)(acc / sum);
                got[idx] = __bfloat162float(ho[idx]);
            }
        }
    char name[96];
    snprintf(name, sizeof name, "attention B=%d H=%d T=%d (%s path)%s", B, H, T,
             hp ? "sm_90a" : "sm_80", rc ? " st_run FAILED" : "");
    return report(name, got, want, atol, rtol) + (rc != 0);
}

/* Median time of st_run at the task's eval size (D = 128: B 4, H 16, T 4096; D = 64: T 2048),
 * with the sm_90a kernel and, forced through the context, the sm_80 one; inputs are zeros (the
 * kernels' work does not depend on the values). Not the harness's timing (warm L2, no
 * interleaving), only a quick comparison of build switches. */
static void bench(void) {
    const int B = 4, H = 16, T = DD == 128 ? 4096 : 2048, iters = 20;
    const int64_t vals[3] = {B, H, T};
    const char *names[3] = {"B", "H", "T"};
    st_config cfg = {3, names, vals};
    const size_t n = (size_t)B * H * T * DD;
    st_tensor t[4];
    for (int a = 0; a < 4; a++) {
        t[a].name = "x"; t[a].dtype = ST_BF16; t[a].ndim = 4;
        t[a].shape[0] = B; t[a].shape[1] = H; t[a].shape[2] = T; t[a].shape[3] = DD;
        CK(cudaMalloc(&t[a].data, n * 2));
        CK(cudaMemset(t[a].data, 0, n * 2));
    }
    void *ctx = NULL;
    if (st_init(&cfg, NULL, 0, 0, &ctx) != 0) {
        printf("bench: st_init failed\n");
        return;
    }
    attn_ctx *c = (attn_ctx *)ctx;
    const int had_hp = c->use_hp;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int path = had_hp ? 1 : 0; path >= 0; path--) {
        c->use_hp = path;
        std::vector<float> ms(iters);
        for (int i = -2; i < iters; i++) {
            CK(cudaEventRecord(e0, 0));
            if (st_run(ctx, t, 3, &t[3], 1, 0) != 0) { printf("bench: st_run failed\n"); break; }
            CK(cudaEventRecord(e1, 0));
            CK(cudaEventSynchronize(e1));
            if (i >= 0) CK(cudaEventElapsedTime(&ms[i], e0, e1));
        }
        std::sort(ms.begin(), ms.end());
        const double flops = 4.0 * B * H * (double)T * (T + 1) / 2 * DD;
        printf("bench B=%d H=%d T=%d D=%d %s path: median %.4f ms (%.0f TFLOP/s)\n", B, H, T, DD,
               path ? "sm_90a" : "sm_80", ms[iters / 2], flops / (ms[iters / 2] * 1e-3) / 1e12);
    }
    c->use_hp = had_hp;
    st_free(ctx);
    for (int a = 0; a < 4; a++) cudaFree(t[a].data);
}

int main(int argc, char **argv) {
    int dev = 0, major = 0, minor = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    hp_state *hs = hp_init<DD>(256, 2);
    printf("device sm_%d%d, D = %d, sm_90a path usable = %d, %d threads, HP_PINGPONG %d "
           "HP_PERSISTENT %d HP_STAGES %d Q buffers %d HP_NMAJOR_LBO %d HP_NMAJOR_SBO %d "
           "HP_PFRAG_ALT %d\n",
           major, minor, DD, hs != NULL, HP_THREADS, HP_PINGPONG, HP_PERSISTENT, HP_STAGES,
           hp_cfg<DD>::QBUFS, HP_NMAJOR_LBO, HP_NMAJOR_SBO, HP_PFRAG_ALT);
    int fails = 0;
    if (hs != NULL) {
        hp_encode_fn enc = hs->enc;
        hp_destroy(hs);
        fails += tile_case(enc, 256, 128); /* full tile, second query block */
        fails += tile_case(enc, 200, 128); /* rows 200..255 zero-filled */
        fails += tile_case(enc, 77, 0);    /* T below one tile */
    } else {
        printf("SKIP tile cases: not an sm_90 device with an sm_90a build\n");
    }
    const double atol = DD == 128 ? 0.005 : 0.01;
    fails += full_case(1, 1, 1, atol, 0.02);
    fails += full_case(1, 2, 77, atol, 0.02);
    fails += full_case(2, 1, 128, atol, 0.02);
    fails += full_case(1, 2, 300, atol, 0.02);
    fails += full_case(1, 1, 1000, atol, 0.02);
    printf("%s\n", fails ? "SOME CASES FAILED" : "ALL PASS");
    if (argc > 1 && strcmp(argv[1], "bench") == 0) bench();
    return fails ? 1 : 0;
}
