/* Every algorithm cuBLASLt's heuristic offers for t1/batched_gemm's product (bf16 in and out,
 * float accumulation, row-major C[b] = A[b]·B[b] posed column-major as the expert poses it; fp16
 * for t1/gemm_fp16's with batch 1),
 * each timed on the local GPU with the L2 flushed before every call, on constant and on random
 * inputs; then the first offer under the verifier's own sample conditions, step by step. A
 * task's expert may not read a clock (the policy forbids it), so it cannot tune itself at
 * st_init: this is where its choice of algorithm is measured. Prints one row per offer (rank,
 * configuration, median times), then one per condition.
 * Usage: stitch-bench-lt-algos [batch M N K [bf16|fp16]]   (default 128 1024 1024 128 bf16,
 * t1/batched_gemm's eval set; 1 4096 4096 4096 fp16 is t1/gemm_fp16's) */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/runner/cuda_kernels.h"
#include "bench_check.h"
#include "bench_lt.h"

#define OFFERS 32
#define REPS 50
#define WORKSPACE (32u << 20)

/* The product under test: its sizes, element type and the device buffers and handles that time
 * it (A2, B2, C2: the second buffer set of the verifier's conditions). */
typedef struct {
	int64_t batch, M, N, K;
	cudaDataType_t type;
	st_dtype st_type;
	size_t a_bytes, b_bytes, c_bytes, flush_len;
	void *A, *B, *C, *A2, *B2, *C2, *ws, *flush;
	cudaStream_t s;
	cudaEvent_t e0, e1;
	cublasLtHandle_t lt;
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t lb, la, lc;
} lt_bench;

static int layout(cublasLtMatrixLayout_t *l, cudaDataType_t type, int64_t rows, int64_t cols,
                  int32_t batch, int64_t stride)
{
	LK(cublasLtMatrixLayoutCreate(l, type, (uint64_t)rows, (uint64_t)cols, rows));
	LK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
	                                    sizeof batch));
	LK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
	                                    sizeof stride));
	return 0;
}

static int parse_args(lt_bench *b, int argc, char **argv)
{
	b->batch = 128, b->M = 1024, b->N = 1024, b->K = 128;
	b->type = CUDA_R_16BF;
	b->st_type = ST_BF16;
	if (argc == 5 || argc == 6) {
		b->batch = atoll(argv[1]);
		b->M = atoll(argv[2]);
		b->N = atoll(argv[3]);
		b->K = atoll(argv[4]);
		if (argc == 6 && strcmp(argv[5], "fp16") == 0) {
			b->type = CUDA_R_16F;
			b->st_type = ST_F16;
		} else if (argc == 6 && strcmp(argv[5], "bf16") != 0) {
			fprintf(stderr, "%s: the type is bf16 or fp16, not '%s'\n", argv[0], argv[5]);
			return 2;
		}
	} else if (argc != 1) {
		fprintf(stderr, "usage: %s [batch M N K [bf16|fp16]]\n", argv[0]);
		return 2;
	}
	if (b->batch < 1 || b->M < 1 || b->N < 1 || b->K < 1) {
		fprintf(stderr, "%s: batch, M, N and K must be positive\n", argv[0]);
		return 2;
	}
	return 0;
}

/* Buffers (A and B filled with 0x3c bytes: bf16 0.0115, fp16 1.06, finite), stream, events and
 * the matmul's descriptors. */
static int setup(lt_bench *b, const cudaDeviceProp *p)
{
	b->a_bytes = 2 * (size_t)(b->batch * b->M * b->K);
	b->b_bytes = 2 * (size_t)(b->batch * b->K * b->N);
	b->c_bytes = 2 * (size_t)(b->batch * b->M * b->N);
	b->flush_len = 2 * (size_t)p->l2CacheSize;
	CK(cudaMalloc(&b->A, b->a_bytes));
	CK(cudaMalloc(&b->B, b->b_bytes));
	CK(cudaMalloc(&b->C, b->c_bytes));
	CK(cudaMalloc(&b->ws, WORKSPACE));
	CK(cudaMalloc(&b->flush, b->flush_len));
	CK(cudaMemset(b->A, 0x3c, b->a_bytes));
	CK(cudaMemset(b->B, 0x3c, b->b_bytes));
	CK(cudaStreamCreate(&b->s));
	CK(cudaEventCreate(&b->e0));
	CK(cudaEventCreate(&b->e1));
	cublasOperation_t no = CUBLAS_OP_N;
	LK(cublasLtCreate(&b->lt));
	LK(cublasLtMatmulDescCreate(&b->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	LK(cublasLtMatmulDescSetAttribute(b->op, CUBLASLT_MATMUL_DESC_TRANSA, &no, sizeof no));
	LK(cublasLtMatmulDescSetAttribute(b->op, CUBLASLT_MATMUL_DESC_TRANSB, &no, sizeof no));
	const int32_t batch = (int32_t)b->batch;
	if (layout(&b->lb, b->type, b->N, b->K, batch, b->K * b->N) ||
	    layout(&b->la, b->type, b->K, b->M, batch, b->M * b->K) ||
	    layout(&b->lc, b->type, b->N, b->M, batch, b->M * b->N))
		return 1;
	return 0;
}

/* The heuristic's offers (at most OFFERS) for 16-byte aligned operands, split-K reducing in
 * float only, as the experts ask. */
static int offers(lt_bench *b, cublasLtMatmulHeuristicResult_t *res, int *found)
{
	cublasLtMatmulPreference_t pref;
	uint32_t red = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
	if (lt_preference(&pref, WORKSPACE, 16, 16))
		return 1;
	LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red,
	                                        sizeof red));
	LK(cublasLtMatmulAlgoGetHeuristic(b->lt, b->op, b->lb, b->la, b->lc, b->lc, pref, OFFERS, res,
	                                  found));
	return 0;
}

/* med[i][0]: offer i's median on every element 0x3c3c; [1]: on N(0, 1) values, as the verifier
 * draws them (tensor cores switching on random bits draw more power than on one repeated
 * value); failed[i] where it would not run. */
static int time_offers(lt_bench *b, const cublasLtMatmulHeuristicResult_t *res, int found,
                       float (*med)[2], int *failed)
{
	const float alpha = 1, beta = 0;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 &&
		    ((cudaError_t)st_cuda_fill(b->A, b->st_type, b->batch * b->M * b->K, 0, 0, 1, 0, 0, 1, b->s) ||
		     (cudaError_t)st_cuda_fill(b->B, b->st_type, b->batch * b->K * b->N, 0, 0, 1, 0, 0, 2, b->s))) {
			fprintf(stderr, "generating random inputs failed\n");
			return 1;
		}
		for (int i = 0; i < found; i++) {
			float t[REPS];
			int ok = res[i].state == CUBLAS_STATUS_SUCCESS;
			for (int r = -3; ok && r < REPS; r++) {
				CK(cudaMemsetAsync(b->flush, r & 0xff, b->flush_len, b->s));
				CK(cudaEventRecord(b->e0, b->s));
				ok = cublasLtMatmul(b->lt, b->op, &alpha, b->B, b->lb, b->A, b->la, &beta, b->C,
				                    b->lc, b->C, b->lc, &res[i].algo, b->ws, WORKSPACE,
				                    b->s) == CUBLAS_STATUS_SUCCESS;
				CK(cudaEventRecord(b->e1, b->s));
				CK(cudaEventSynchronize(b->e1));
				if (r >= 0)
					CK(cudaEventElapsedTime(&t[r], b->e0, b->e1));
			}
			failed[i] |= !ok;
			qsort(t, REPS, sizeof *t, lt_cmp_float);
			med[i][pass] = t[REPS / 2];
		}
	}
	return 0;
}

static void print_offers(const cublasLtMatmulHeuristicResult_t *res, int found,
                         const float (*med)[2], const int *failed, double bytes)
{
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
}

/* The median of `algo` under one of the verifier's conditions (mode, see below). */
static int time_condition(lt_bench *b, const cublasLtMatmulAlgo_t *algo, int mode, float *median)
{
	const float alpha = 1, beta = 0;
	float t[REPS];
	for (int r = -3; r < REPS; r++) {
		int two = mode > 0 && (r & 1);
		void *a = two ? b->A2 : b->A, *bb = two ? b->B2 : b->B, *c = two ? b->C2 : b->C;
		if (mode == 2) {
			uint64_t seed = 1000 + 2 * (uint64_t)(r + 3);
			CK((cudaError_t)st_cuda_fill(a, b->st_type, b->batch * b->M * b->K, 0, 0, 1, 0, 0, seed, b->s));
			CK((cudaError_t)st_cuda_fill(bb, b->st_type, b->batch * b->K * b->N, 0, 0, 1, 0, 0, seed + 1, b->s));
			CK(cudaMemsetAsync(c, 0xff, b->c_bytes, b->s));
		}
		if (mode < 2 || b->c_bytes < b->flush_len)
			CK(cudaMemsetAsync(b->flush, r & 0xff, b->flush_len, b->s));
		CK(cudaStreamSynchronize(b->s));
		CK(cudaEventRecord(b->e0, b->s));
		if (cublasLtMatmul(b->lt, b->op, &alpha, bb, b->lb, a, b->la, &beta, c, b->lc, c, b->lc,
		                   algo, b->ws, WORKSPACE, b->s) != CUBLAS_STATUS_SUCCESS) {
			fprintf(stderr, "offer 0 failed under condition %d\n", mode);
			return 1;
		}
		CK(cudaEventRecord(b->e1, b->s));
		CK(cudaEventSynchronize(b->e1));
		if (r >= 0)
			CK(cudaEventElapsedTime(&t[r], b->e0, b->e1));
	}
	qsort(t, REPS, sizeof *t, lt_cmp_float);
	*median = t[REPS / 2];
	return 0;
}

/* The heuristic's first offer (the expert's choice) under the verifier's conditions, one step at
 * a time, to find what the verifier measures beyond the offers' loop: two buffer sets taken in
 * turn, then fresh inputs and a poisoned C before every call (which, 2 x L2 or more, stands in
 * for the flush, as in the runner). */
static int offer0_conditions(lt_bench *b, const cublasLtMatmulAlgo_t *algo, double bytes)
{
	CK(cudaMalloc(&b->A2, b->a_bytes));
	CK(cudaMalloc(&b->B2, b->b_bytes));
	CK(cudaMalloc(&b->C2, b->c_bytes));
	CK(cudaMemcpy(b->A2, b->A, b->a_bytes, cudaMemcpyDeviceToDevice));
	CK(cudaMemcpy(b->B2, b->B, b->b_bytes, cudaMemcpyDeviceToDevice));
	static const char *const modes[] = {
		"one buffer set, memset flush",
		"two buffer sets in turn, memset flush (stitch bench of a shipped expert)",
		"two sets, fresh inputs and poisoned C (an untrusted candidate's sample)"};
	printf("offer 0 under the verifier's conditions (random inputs):\n");
	for (int mode = 0; mode < 3; mode++) {
		float med;
		if (time_condition(b, algo, mode, &med))
			return 1;
		printf("  %-74s %8.4f ms  %4.0f GB/s\n", modes[mode], med, bytes / (med * 1e6));
	}
	return 0;
}

int main(int argc, char **argv)
{
	lt_bench b = {0};
	int rc = parse_args(&b, argc, argv);
	if (rc)
		return rc;
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	if (setup(&b, &p))
		return 1;
	cublasLtMatmulHeuristicResult_t res[OFFERS];
	int found = 0;
	if (offers(&b, res, &found))
		return 1;
	double bytes = (double)(b.a_bytes + b.b_bytes + b.c_bytes);
	printf("batch %lld M %lld N %lld K %lld %s on %s: %d offers (bytes %.0f MB)\n",
	       (long long)b.batch, (long long)b.M, (long long)b.N, (long long)b.K,
	       b.type == CUDA_R_16F ? "fp16" : "bf16", p.name, found, bytes / 1e6);
	float med[OFFERS][2];
	int failed[OFFERS] = {0};
	if (time_offers(&b, res, found, med, failed))
		return 1;
	print_offers(res, found, med, failed, bytes);
	if (found > 0 && res[0].state == CUBLAS_STATUS_SUCCESS && offer0_conditions(&b, &res[0].algo, bytes))
		return 1;
	return 0;
}
