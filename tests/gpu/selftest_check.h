/* The GPU self-tests' check of a CUDA call (tests/gpu/NAME_selftest.cu): a failure prints the
 * call, where and why, and exits 2, the self-tests' code for a CUDA or setup error (1 is a
 * mismatch). */
#ifndef ST_SELFTEST_CHECK_H
#define ST_SELFTEST_CHECK_H
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, \
                    __LINE__, #x);                                                           \
            exit(2);                                                                         \
        }                                                                                    \
    } while (0)

#endif
