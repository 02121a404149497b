/* stitch solution ABI v1: the contract every reference, expert and candidate implements.
 * A solution is one CUDA C/C++ (or, for the host backend, C) file that includes this header and
 * exports st_init, st_run and st_free with C linkage. The harness owns all tensor memory. */
#ifndef STITCH_SOLUTION_H
#define STITCH_SOLUTION_H

#include <stdint.h>

#define STITCH_ABI_VERSION 1

/* Same type as the CUDA runtime's, declared here so host-backend solutions need no CUDA headers. */
struct CUstream_st;
typedef struct CUstream_st *cudaStream_t;

#ifdef __cplusplus
extern "C" {
#endif

typedef enum st_dtype { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I32, ST_I64, ST_I8, ST_U8,
                        ST_F8E4M3, ST_F8E5M2 } st_dtype;

typedef struct st_tensor { const char *name; st_dtype dtype; int32_t ndim; int64_t shape[8];
                           void *data; /* contiguous, row-major: device memory on the cuda
                                          backend, host memory on the host backend */ } st_tensor;

typedef struct st_config { int32_t n; const char *const *names; const int64_t *values; } st_config;

/* once, untimed: weights are read-only and live until st_free; build plans, workspaces, graphs */
int  st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
             cudaStream_t stream, void **ctx);
/* many times, timed: read in[] (read-only: a run that writes an input is incorrect), write
   every element of out[]; pointers AND contents of in/out may differ on every call; all work
   must be done or ordered on `stream` when it returns */
int  st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
            cudaStream_t stream);
void st_free(void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* STITCH_SOLUTION_H */
