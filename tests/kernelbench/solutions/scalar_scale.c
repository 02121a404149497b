/* Host solution of tests/kernelbench/scalar_scale.py: y = tanh(x) * scale, the scale read from
 * the one-element tensor the import makes of forward()'s Python number (input 1). */
#include <math.h>

#include "stitch/solution.h"

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out)
{
	(void)cfg;
	(void)params;
	(void)stream;
	*out = 0;
	return n_params == 0 ? 0 : 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)p;
	(void)stream;
	if (n_in != 2 || n_out != 1 || in[1].shape[0] != 1)
		return 1;
	const float *x = in[0].data;
	const float scale = *(const float *)in[1].data;
	float *y = out[0].data;
	int64_t n = in[0].shape[0] * in[0].shape[1];
	for (int64_t i = 0; i < n; i++)
		y[i] = tanhf(x[i]) * scale;
	return 0;
}

void st_free(void *p)
{
	(void)p;
}
