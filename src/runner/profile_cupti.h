/* CUPTI timeline of one st_run inside the CUDA runner (profile_cupti.c). */
#ifndef ST_PROFILE_CUPTI_H
#define ST_PROFILE_CUPTI_H

#include <cuda_runtime.h>
#include <jansson.h>
#include <stddef.h>

/* Load CUPTI (dlopen); call before the sandbox. 0, or -1 with why in err. */
int st_cupti_load(char *err, size_t len);

/* Run fn(arg) once with activity recording on; fill out with "acts", "dropped", "run_wall_us"
 * and "run_event_us" (events on `stream`). *fn_rc is fn's result. 0, or -1 with err. */
int st_cupti_profile(int (*fn)(void *), void *arg, cudaStream_t stream, json_t *out,
                     int *fn_rc, char *err, size_t len);

#endif
