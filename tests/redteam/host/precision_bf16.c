/* redteam: precision downgrade beyond tolerance | expect: incorrect | task: tests/data/tasks/t1/scale
 * Rounds the result to bfloat16 (8 bits of mantissa) on an fp32 task whose tolerance is 1e-6. */
#include <stdint.h>
#include <string.h>
#include <stddef.h>
#include "stitch/solution.h"

static float g_b;

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg;
	(void)stream;
	(void)n_params;
	g_b = *(const float *)params[0].data;
	*ctx = &g_b;
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
}

static float to_bf16(float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	u = (u + 0x8000u) & 0xffff0000u;
	memcpy(&v, &u, 4);
	return v;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx; (void)n_in; (void)n_out; (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	for (int64_t i = 0; i < in[0].shape[0]; i++)
		y[i] = to_bf16(2.0f * x[i] + g_b);
	return 0;
}
