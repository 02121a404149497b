/* Every algorithm cuBLASLt's heuristic offers for each matrix product of t3/gpt2_forward's
 * expert, posed exactly as the expert poses it (bf16 in and out, fp32 accumulation, the "TN" form,
 * its bias, GELU and in-place residual epilogues, the logits' row classes), each timed on the
 * local GPU with the L2 flushed before every call, on random inputs. A solution may not read a
 * clock, so the expert cannot tune itself at st_init: its fixed rule for picking among the offers
 * is measured here. Prints, per product, one row per offer (rank, configuration, median, TFLOP/s)
 * and marks the offer the expert's current rule takes (among the first 8, the first with the
 * product's tile, else the first 128x128 one, else the first; the product's tile depends on the
 * GPU's DRAM bandwidth, as in the expert's plan_gemm).
 * Usage: stitch-bench-gpt2-gemms [B T]   (default 8 1024, the eval set; C = 768, V = 50257) */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../src/runner/cuda_kernels.h"
#include "bench_check.h"
#include "bench_lt.h"

#define OFFERS 32
#define REPS 30
#define WORKSPACE (32u << 20)
#define EXPERT_TRY 8 /* the expert's N_TRY */

/* D[m, n] (ld ldd) = W[m, k]^T-stored . act[k, n] (ld ldb), as the expert's make_layouts */
typedef struct {
	const char *name;
	int64_t m, n, k, ldb, ldd;
	cublasLtEpilogue_t epi;
	float beta;
	int count;          /* how many of these one forward runs */
	uint32_t slow_tile; /* the expert's tile under 4 TB/s of DRAM: 0 its first offer */
} product;

typedef struct {
	cudaStream_t s;
	cudaEvent_t e0, e1;
	void *flush, *ws;
	size_t flush_len;
	cublasLtHandle_t lt;
	int slow; /* DRAM under 4 TB/s (memory clock x bus width x 2): the expert's H100 tiles */
} bench;

static int offers(bench *b, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                  cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, uint32_t align_d,
                  cublasLtMatmulHeuristicResult_t *res, int *found)
{
	cublasLtMatmulPreference_t pref;
	if (lt_preference(&pref, WORKSPACE, 16, align_d))
		return 1;
	LK(cublasLtMatmulAlgoGetHeuristic(b->lt, op, la, lb, ld, ld, pref, OFFERS, res, found));
	cublasLtMatmulPreferenceDestroy(pref);
	return 0;
}

/* The median of REPS calls of one offer, L2 flushed before each; < 0 where it fails. */
static float time_offer(bench *b, cublasLtMatmulDesc_t op, const product *p,
                        cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                        cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *algo,
                        const void *A, const void *B, void *D)
{
	const float alpha = 1;
	float t[REPS];
	for (int r = -3; r < REPS; r++) {
		if (cudaMemsetAsync(b->flush, r & 0xff, b->flush_len, b->s) != cudaSuccess ||
		    cudaEventRecord(b->e0, b->s) != cudaSuccess)
			return -1;
		if (cublasLtMatmul(b->lt, op, &alpha, A, la, B, lb, &p->beta, D, ld, D, ld, algo, b->ws,
		                   WORKSPACE, b->s) != CUBLAS_STATUS_SUCCESS)
			return -1;
		if (cudaEventRecord(b->e1, b->s) != cudaSuccess || cudaEventSynchronize(b->e1) != cudaSuccess)
			return -1;
		if (r >= 0 && cudaEventElapsedTime(&t[r], b->e0, b->e1) != cudaSuccess)
			return -1;
	}
	qsort(t, REPS, sizeof *t, lt_cmp_float);
	return t[REPS / 2];
}

/* The first of the offers the expert considers that is usable and has tile `want` (0: any). */
static int expert_pick(const cublasLtMatmulHeuristicResult_t *res, int found, uint32_t want)
{
	for (int i = 0; i < found && i < EXPERT_TRY; i++)
		if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= WORKSPACE &&
		    (want == 0 || lt_config(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID) == want))
			return i;
	return -1;
}

/* Every offer for p: one row each; returns the best and the expert's pick through *best_ms and
 * *pick_ms (forward time = count x call). */
static int run_product(bench *b, const product *p, const void *W, const void *X, void *D,
                       const void *bias, float *best_ms, float *pick_ms)
{
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, ld;
	const cublasOperation_t opT = CUBLAS_OP_T;
	LK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
	LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &p->epi, sizeof p->epi));
	if (p->epi != CUBLASLT_EPILOGUE_DEFAULT)
		LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
		                                  sizeof bias));
	LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, (uint64_t)p->k, (uint64_t)p->m, p->k));
	LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, (uint64_t)p->k, (uint64_t)p->n, p->ldb));
	LK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, (uint64_t)p->m, (uint64_t)p->n, p->ldd));
	cublasLtMatmulHeuristicResult_t res[OFFERS];
	int found = 0;
	if (offers(b, op, la, lb, ld, 16, res, &found))
		return 1;
	const uint32_t want = b->slow ? p->slow_tile : CUBLASLT_MATMUL_TILE_128x128;
	int pick = expert_pick(res, found, want);
	if (pick < 0)
		pick = expert_pick(res, found, CUBLASLT_MATMUL_TILE_128x128);
	if (pick < 0)
		pick = expert_pick(res, found, 0);
	double flop = 2.0 * (double)p->m * (double)p->n * (double)p->k;
	printf("\n%s: m %lld n %lld k %lld (x%d a forward), %d offers\n", p->name, (long long)p->m,
	       (long long)p->n, (long long)p->k, p->count, found);
	printf("rank  algo tile stages splitk red swizzle custom cluster     ms  TFLOP/s\n");
	*best_ms = 1e30f;
	*pick_ms = -1;
	for (int i = 0; i < found; i++) {
		const cublasLtMatmulAlgo_t *a = &res[i].algo;
		float ms = res[i].state == CUBLAS_STATUS_SUCCESS
		               ? time_offer(b, op, p, la, lb, ld, a, W, X, D)
		               : -1;
		printf("%4d %5u %4u %6u %6u %3u %7u %6u %7u", i, lt_config(a, CUBLASLT_ALGO_CONFIG_ID),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_TILE_ID), lt_config(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
		if (ms < 0) {
			printf("  failed\n");
			continue;
		}
		printf(" %7.4f %8.1f%s\n", ms, flop / (ms * 1e9), i == pick ? "  <- the expert's rule" : "");
		if (ms < *best_ms)
			*best_ms = ms;
		if (i == pick)
			*pick_ms = ms;
	}
	cublasLtMatrixLayoutDestroy(la);
	cublasLtMatrixLayoutDestroy(lb);
	cublasLtMatrixLayoutDestroy(ld);
	cublasLtMatmulDescDestroy(op);
	return 0;
}

int main(int argc, char **argv)
{
	int64_t B = 8, T = 1024, C = 768, V = 50257;
	if (argc == 3) {
		B = atoll(argv[1]);
		T = atoll(argv[2]);
	} else if (argc != 1) {
		fprintf(stderr, "usage: %s [B T]\n", argv[0]);
		return 2;
	}
	int64_t N = B * T, RES = 8, res_w = (V - 7) & ~(int64_t)15;
	if (N < RES || T < 1 || T > 1024) {
		fprintf(stderr, "%s: B * T must be at least 8 and T at most 1024\n", argv[0]);
		return 2;
	}
	const uint32_t t128 = CUBLASLT_MATMUL_TILE_128x128;
	const product ps[] = {
		{"qkv (bias)", 3 * C, N, C, C, 3 * C, CUBLASLT_EPILOGUE_BIAS, 0, 12, t128},
		{"attproj (bias, residual in place)", C, N, C, C, C, CUBLASLT_EPILOGUE_BIAS, 1, 12, t128},
		{"fc (GELU + bias)", 4 * C, N, C, C, 4 * C, CUBLASLT_EPILOGUE_GELU_BIAS, 0, 12, t128},
		{"fcproj (bias, residual in place)", C, N, 4 * C, 4 * C, C, CUBLASLT_EPILOGUE_BIAS, 1, 12, 0},
		{"logits row class (1 of 8)", res_w, (N + RES - 1) / RES, C, RES * C, RES * V,
		 CUBLASLT_EPILOGUE_DEFAULT, 0, 8, CUBLASLT_MATMUL_TILE_176x128},
	};
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	bench b = {0};
	b.flush_len = 2 * (size_t)prop.l2CacheSize;
	int khz = 0, bits = 0;
	CK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, 0));
	CK(cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, 0));
	b.slow = 2.0 * khz * 1e3 * (bits / 8.0) / 1e9 < 4000.0;
	void *W, *X, *D, *bias;
	size_t w_elems = (size_t)V * C, x_elems = (size_t)N * 4 * C, d_elems = (size_t)N * V;
	CK(cudaMalloc(&W, 2 * w_elems));
	CK(cudaMalloc(&X, 2 * x_elems));
	CK(cudaMalloc(&D, 2 * d_elems));
	CK(cudaMalloc(&bias, 2 * 4 * C));
	CK(cudaMalloc(&b.ws, WORKSPACE));
	CK(cudaMalloc(&b.flush, b.flush_len));
	CK(cudaStreamCreate(&b.s));
	CK(cudaEventCreate(&b.e0));
	CK(cudaEventCreate(&b.e1));
	LK(cublasLtCreate(&b.lt));
	/* N(0, 0.02) weights and N(0, 1) activations, as the task draws them */
	CK((cudaError_t)st_cuda_fill(W, ST_BF16, (int64_t)w_elems, 0, 0, 0.02, 0, 0, 1, b.s));
	CK((cudaError_t)st_cuda_fill(X, ST_BF16, (int64_t)x_elems, 0, 0, 1, 0, 0, 2, b.s));
	CK((cudaError_t)st_cuda_fill(D, ST_BF16, (int64_t)d_elems, 0, 0, 1, 0, 0, 3, b.s));
	CK((cudaError_t)st_cuda_fill(bias, ST_BF16, 4 * C, 0, 0, 0.02, 0, 0, 4, b.s));
	CK(cudaStreamSynchronize(b.s));
	printf("GPT-2 small's matrix products at B %lld T %lld on %s\n", (long long)B, (long long)T,
	       prop.name);
	double best_fwd = 0, pick_fwd = 0;
	for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
		float best, pick;
		if (run_product(&b, &ps[i], W, X, D, bias, &best, &pick))
			return 1;
		best_fwd += ps[i].count * (double)best;
		pick_fwd += ps[i].count * (double)(pick > 0 ? pick : best);
	}
	printf("\nper forward (cold L2 each call): the expert's rule %.3f ms, the fastest offers %.3f "
	       "ms\n", pick_fwd, best_fwd);
	return 0;
}
