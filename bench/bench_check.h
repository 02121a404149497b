/* The error check of the stand-alone benchmark programs in bench/: a failed CUDA call prints
 * where and why, and main returns 1. */
#ifndef ST_BENCH_CHECK_H
#define ST_BENCH_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>

#define CK(x)                                                                                   \
	do {                                                                                        \
		cudaError_t e_ = (x);                                                                   \
		if (e_ != cudaSuccess) {                                                                \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			return 1;                                                                           \
		}                                                                                       \
	} while (0)

#endif
