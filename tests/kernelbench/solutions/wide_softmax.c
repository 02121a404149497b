/* Host solution of tests/kernelbench/audit/level1/wide_softmax.py: row-wise softmax with the row
 * maximum subtracted and a double sum. */
#include <math.h>
#include <stddef.h>

#include "stitch/solution.h"

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out)
{
	(void)cfg;
	(void)params;
	(void)n_params;
	(void)stream;
	*out = NULL;
	return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)p;
	(void)n_in;
	(void)n_out;
	(void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float m = xr[0];
		for (int64_t c = 1; c < cols; c++)
			m = xr[c] > m ? xr[c] : m;
		double s = 0;
		for (int64_t c = 0; c < cols; c++)
			s += exp((double)xr[c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = (float)(exp((double)xr[c] - m) / s);
	}
	return 0;
}

void st_free(void *p)
{
	(void)p;
}
