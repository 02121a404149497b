/* What the cuBLASLt benchmark programs in bench/ share: the status check (a failed call prints
 * where and why, and the function returns 1), the heuristic's preference, one attribute of an
 * algorithm's configuration, and the float order qsort takes medians with. */
#ifndef ST_BENCH_LT_H
#define ST_BENCH_LT_H

#include <cublasLt.h>
#include <stdint.h>
#include <stdio.h>

#define LK(x)                                                                                   \
	do {                                                                                        \
		cublasStatus_t s_ = (x);                                                                \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                                      \
			fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #x, (int)s_);        \
			return 1;                                                                           \
		}                                                                                       \
	} while (0)

/* One attribute of an algorithm's configuration, 0xffffffff where cuBLASLt does not say. */
static inline unsigned lt_config(const cublasLtMatmulAlgo_t *a,
                                 cublasLtMatmulAlgoConfigAttributes_t attr)
{
	uint32_t v = 0;
	size_t got = 0;
	if (cublasLtMatmulAlgoConfigGetAttribute(a, attr, &v, sizeof v, &got) != CUBLAS_STATUS_SUCCESS)
		return 0xffffffffu;
	return v;
}

/* A heuristic preference for at most `workspace` bytes of workspace, A and B aligned to align_ab
 * bytes, C and D to align_cd; 1 (said where) on failure. */
static inline int lt_preference(cublasLtMatmulPreference_t *pref, uint64_t workspace,
                                uint32_t align_ab, uint32_t align_cd)
{
	LK(cublasLtMatmulPreferenceCreate(pref));
	LK(cublasLtMatmulPreferenceSetAttribute(*pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
	                                        &workspace, sizeof workspace));
	const struct {
		cublasLtMatmulPreferenceAttributes_t attr;
		const uint32_t *v;
	} al[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_ab},
	          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_ab},
	          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_cd},
	          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_cd}};
	for (int i = 0; i < 4; i++)
		LK(cublasLtMatmulPreferenceSetAttribute(*pref, al[i].attr, al[i].v, sizeof *al[i].v));
	return 0;
}

static inline int lt_cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

#endif
