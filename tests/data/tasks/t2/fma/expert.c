/* Test task "fma", host expert: y = f(x), f = 16 steps of v * 0.9 + 0.1, the whole work
 * done 16 times (a volatile read per repetition keeps every one; r * 0 + f(v) leaves the
 * bits of one f(v)). */
#include <stddef.h>
#include "stitch/solution.h"

#define REPS 16

static float f(float v)
{
	for (int k = 0; k < 16; k++)
		v = v * 0.9f + 0.1f;
	return v;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg, (void)params, (void)n_params, (void)stream;
	*ctx = NULL;
	return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx, (void)stream;
	if (n_in != 1 || n_out != 1)
		return 1;
	const float *x = in[0].data;
	float *y = out[0].data;
	for (int64_t i = 0; i < in[0].shape[0]; i++) {
		float r = 0;
		for (int rep = 0; rep < REPS; rep++) {
			float v = ((volatile const float *)x)[i];
			r = r * 0.0f + f(v);
		}
		y[i] = r;
	}
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
}
