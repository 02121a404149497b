/* Every algorithm cuBLASLt's heuristic offers for t1/batched_gemm's product (bf16 in and out,
 * float accumulation, row-major C[b] = A[b]·B[b] posed column-major as the expert poses it),
 * each timed on the local GPU with the L2 flushed before every call, on constant and on random
 * inputs; then the first offer under the verifier's own sample conditions, step by step. A
 * task's expert may not read a clock (the policy forbids it), so it cannot tune itself at
 * st_init: this is where its choice of algorithm is measured. Prints one row per offer (rank,
 * configuration, median times), then one per condition.
 * Usage: stitch-bench-lt-algos [batch M N K]   (default 128 1024 1024 128, the eval set) */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../src/runner/cuda_kernels.h"
#include "bench_check.h"
#include "bench_lt.h"

#define OFFERS 32
#define REPS 50
#define WORKSPACE (32u << 20)

static int layout(cublasLtMatrixLayout_t *l, int64_t rows, int64_t cols, int32_t batch,
                  int64_t stride)
{
	LK(cublasLtMatrixLayoutCreate(l, CUDA_R_16BF, (uint64_t)rows, (uint64_t)cols, rows));
	LK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
	                                    sizeof batch));
	LK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
	                                    sizeof stride));
	return 0;
}

int main(int argc, char **argv)
{
	int64_t batch = 128, M = 1024, N = 1024, K = 128;
	if (argc == 5) {
		batch = atoll(argv[1]);
		M = atoll(argv[2]);
		N = atoll(argv[3]);
		K = atoll(argv[4]);
	} else if (argc != 1) {
		fprintf(stderr, "usage: %s [batch M N K]\n", argv[0]);
		return 2;
	}
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	size_t a_bytes = 2 * (size_t)(batch * M * K), b_bytes = 2 * (size_t)(batch * K * N);
	size_t c_bytes = 2 * (size_t)(batch * M * N), flush_len = 2 * (size_t)p.l2CacheSize;
	void *A, *B, *C, *ws, *flush;
	CK(cudaMalloc(&A, a_bytes));
	CK(cudaMalloc(&B, b_bytes));
	CK(cudaMalloc(&C, c_bytes));
	CK(cudaMalloc(&ws, WORKSPACE));
	CK(cudaMalloc(&flush, flush_len));
	CK(cudaMemset(A, 0x3c, a_bytes)); /* bf16 0x3c3c: 0.0115, finite */
	CK(cudaMemset(B, 0x3c, b_bytes));
	cudaStream_t s;
	cudaEvent_t e0, e1;
	CK(cudaStreamCreate(&s));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));

	cublasLtHandle_t lt;
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t lb, la, lc;
	cublasOperation_t no = CUBLAS_OP_N;
	LK(cublasLtCreate(&lt));
	LK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &no, sizeof no));
	LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &no, sizeof no));
	if (layout(&lb, N, K, (int32_t)batch, K * N) || layout(&la, K, M, (int32_t)batch, M * K) ||
	    layout(&lc, N, M, (int32_t)batch, M * N))
		return 1;
	cublasLtMatmulPreference_t pref;
	uint32_t red = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
	if (lt_preference(&pref, WORKSPACE, 16, 16))
		return 1;
	LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red,
	                                        sizeof red));
	cublasLtMatmulHeuristicResult_t res[OFFERS];
	int found = 0;
	LK(cublasLtMatmulAlgoGetHeuristic(lt, op, lb, la, lc, lc, pref, OFFERS, res, &found));
	double bytes = (double)(a_bytes + b_bytes + c_bytes);
	printf("batch %lld M %lld N %lld K %lld on %s: %d offers (bytes %.0f MB)\n", (long long)batch,
	       (long long)M, (long long)N, (long long)K, p.name, found, bytes / 1e6);
	const float alpha = 1, beta = 0;
	/* median_ms[0]: every element 0x3c3c; [1]: N(0, 1) values, as the verifier draws them
	 * (tensor cores switching on random bits draw more power than on one repeated value) */
	float med[OFFERS][2];
	int failed[OFFERS] = {0};
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && ((cudaError_t)st_cuda_fill(A, ST_BF16, batch * M * K, 0, 0, 1, 0, 0, 1, s) ||
		                  (cudaError_t)st_cuda_fill(B, ST_BF16, batch * K * N, 0, 0, 1, 0, 0, 2, s))) {
			fprintf(stderr, "generating random inputs failed\n");
			return 1;
		}
		for (int i = 0; i < found; i++) {
			float t[REPS];
			int ok = res[i].state == CUBLAS_STATUS_SUCCESS;
			for (int r = -3; ok && r < REPS; r++) {
				CK(cudaMemsetAsync(flush, r & 0xff, flush_len, s));
				CK(cudaEventRecord(e0, s));
				ok = cublasLtMatmul(lt, op, &alpha, B, lb, A, la, &beta, C, lc, C, lc,
				                    &res[i].algo, ws, WORKSPACE, s) == CUBLAS_STATUS_SUCCESS;
				CK(cudaEventRecord(e1, s));
				CK(cudaEventSynchronize(e1));
				if (r >= 0)
					CK(cudaEventElapsedTime(&t[r], e0, e1));
			}
			failed[i] |= !ok;
			qsort(t, REPS, sizeof *t, lt_cmp_float);
			med[i][pass] = t[REPS / 2];
		}
	}
	printf("rank  algo_id tile stages splitk reduction swizzle custom inner cluster  const_ms  random_ms  GB/s(random)\n");
	for (int i = 0; i < found; i++) {
		const cublasLtMatmulAlgo_t *a = &res[i].algo;
		printf("%4d %8u %4u %6u %6u %9u %7u %6u %5u %7u", i, lt_config(a, CUBLASLT_ALGO_CONFIG_ID),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_TILE_ID), lt_config(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID),
		       lt_config(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
		if (failed[i])
			printf("  failed\n");
		else
			printf("  %8.4f  %9.4f  %4.0f\n", med[i][0], med[i][1], bytes / (med[i][1] * 1e6));
	}

	/* The heuristic's first offer (the expert's choice) under the verifier's conditions, one
	 * step at a time, to find what the verifier measures beyond the loop above: two buffer sets
	 * taken in turn, then fresh inputs and a poisoned C before every call (which, 2 x L2 or
	 * more, stands in for the flush, as in the runner). */
	void *A2, *B2, *C2;
	CK(cudaMalloc(&A2, a_bytes));
	CK(cudaMalloc(&B2, b_bytes));
	CK(cudaMalloc(&C2, c_bytes));
	CK(cudaMemcpy(A2, A, a_bytes, cudaMemcpyDeviceToDevice));
	CK(cudaMemcpy(B2, B, b_bytes, cudaMemcpyDeviceToDevice));
	static const char *const modes[] = {
		"one buffer set, memset flush",
		"two buffer sets in turn, memset flush (stitch bench of a shipped expert)",
		"two sets, fresh inputs and poisoned C (an untrusted candidate's sample)"};
	printf("offer 0 under the verifier's conditions (random inputs):\n");
	for (int mode = 0; mode < 3 && found > 0 && res[0].state == CUBLAS_STATUS_SUCCESS; mode++) {
		float t[REPS];
		for (int r = -3; r < REPS; r++) {
			int two = mode > 0 && (r & 1);
			void *a = two ? A2 : A, *b = two ? B2 : B, *c = two ? C2 : C;
			if (mode == 2) {
				uint64_t seed = 1000 + 2 * (uint64_t)(r + 3);
				CK((cudaError_t)st_cuda_fill(a, ST_BF16, batch * M * K, 0, 0, 1, 0, 0, seed, s));
				CK((cudaError_t)st_cuda_fill(b, ST_BF16, batch * K * N, 0, 0, 1, 0, 0, seed + 1, s));
				CK(cudaMemsetAsync(c, 0xff, c_bytes, s));
			}
			if (mode < 2 || c_bytes < flush_len)
				CK(cudaMemsetAsync(flush, r & 0xff, flush_len, s));
			CK(cudaStreamSynchronize(s));
			CK(cudaEventRecord(e0, s));
			if (cublasLtMatmul(lt, op, &alpha, b, lb, a, la, &beta, c, lc, c, lc, &res[0].algo, ws,
			                   WORKSPACE, s) != CUBLAS_STATUS_SUCCESS) {
				fprintf(stderr, "offer 0 failed under condition %d\n", mode);
				return 1;
			}
			CK(cudaEventRecord(e1, s));
			CK(cudaEventSynchronize(e1));
			if (r >= 0)
				CK(cudaEventElapsedTime(&t[r], e0, e1));
		}
		qsort(t, REPS, sizeof *t, lt_cmp_float);
		printf("  %-74s %8.4f ms  %4.0f GB/s\n", modes[mode], t[REPS / 2],
		       bytes / (t[REPS / 2] * 1e6));
	}
	return 0;
}
