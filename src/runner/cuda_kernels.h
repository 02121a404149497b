/* Device kernels the CUDA runner needs of its own: elementwise input generation, the fill
 * (poison and L2 flush) before each timed call, the digest of a timed call's outputs, and the
 * L2 read probe of the device peaks. */
#ifndef ST_CUDA_KERNELS_H
#define ST_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "stitch/solution.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill n elements of dtype `dt` at dst from (seed, index); dist as in task.h (st_dist).
 * Returns a cudaError_t as int (0 = success). */
int st_cuda_fill(void *dst, int dt, int64_t n, int dist, double a, double b, int64_t lo,
                 int64_t hi, uint64_t seed, cudaStream_t stream);

/* A byte range to fill with one byte value. */
#define ST_PREP_SPANS 16
typedef struct st_prep_span {
	void *p;
	size_t bytes;
	unsigned val;
} st_prep_span;

/* Fill the n spans (1 to ST_PREP_SPANS) with `blocks` blocks of 1024 threads, one launch. With
 * st_cuda_prep_blocks of them, the blocks take every SM's thread slots until the fill is done,
 * so no kernel of another stream starts meanwhile. Returns a cudaError_t as int. */
int st_cuda_prep(const st_prep_span *spans, int n, int blocks, cudaStream_t stream);

/* How many blocks of 1024 threads the SMs hold at once (cudaDeviceProp's multiProcessorCount and
 * maxThreadsPerMultiProcessor). */
int st_cuda_prep_blocks(int sms, int max_threads_per_sm);

/* Add the word sums (common/digest.h) of the n spans (1 to ST_PREP_SPANS) into sums[0..n) on the
 * device (zeroed by the caller): one launch. Returns a cudaError_t as int. */
int st_cuda_digest(const st_prep_span *spans, int n, unsigned long long *sums, int blocks,
                   cudaStream_t stream);

/* Launch one empty kernel on stream: the quiet probe (backend.h, rb_probe_us). Returns a
 * cudaError_t as int. */
int st_cuda_probe(cudaStream_t stream);

/* Read bytes (16-byte aligned, a multiple of 16 read) at buf reps times over with `blocks` blocks
 * of 1024 threads through the L2 only (L1 bypassed): with bytes well inside the L2, every pass
 * after the first is L2 traffic. sink: one float of device memory the kernel may write. Returns
 * a cudaError_t as int. */
int st_cuda_l2_read(const void *buf, size_t bytes, int reps, int blocks, float *sink,
                    cudaStream_t stream);

/* The special-function probe: every thread of `blocks` blocks of 1024 runs ST_SFU_CHAINS
 * independent chains of `iters` steps, each step a base-2 exponential and a base-2 logarithm
 * (two MUFU operations). sink as above. Returns a cudaError_t as int. */
#define ST_SFU_CHAINS 8
int st_cuda_sfu(int iters, int blocks, float *sink, cudaStream_t stream);

/* The grid-barrier probe: `blocks` blocks of 128 threads (one an SM), launched cooperatively,
 * pass `iters` grid-wide barriers (cooperative groups' grid sync) one after another. Returns a
 * cudaError_t as int. */
int st_cuda_sync(int iters, int blocks, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
