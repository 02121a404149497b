/* Device kernels the CUDA runner needs of its own: elementwise input generation. */
#ifndef ST_CUDA_KERNELS_H
#define ST_CUDA_KERNELS_H

#include <stdint.h>
#include "stitch/solution.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill n elements of dtype `dt` at dst from (seed, index); dist as in task.h (st_dist).
 * Returns a cudaError_t as int (0 = success). */
int st_cuda_fill(void *dst, int dt, int64_t n, int dist, double a, double b, int64_t lo,
                 int64_t hi, uint64_t seed, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
