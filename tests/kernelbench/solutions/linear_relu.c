/* Host solution of tests/kernelbench/linear_relu.py: y = relu(x W^T + b), with the params in
 * state_dict order (fc.weight, fc.bias) and double accumulators. */
#include <stdlib.h>

#include "stitch/solution.h"

typedef struct ctx {
	const float *w, *b;
} ctx;

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out)
{
	(void)cfg;
	(void)stream;
	if (n_params != 2)
		return 1;
	ctx *c = malloc(sizeof *c);
	if (!c)
		return 1;
	c->w = params[0].data;
	c->b = params[1].data;
	*out = c;
	return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)n_in;
	(void)n_out;
	(void)stream;
	const ctx *c = p;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], k_dim = in[0].shape[1], cols = out[0].shape[1];
	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < cols; j++) {
			double acc = c->b[j];
			for (int64_t k = 0; k < k_dim; k++)
				acc += (double)x[i * k_dim + k] * c->w[j * k_dim + k];
			y[i * cols + j] = acc > 0 ? (float)acc : 0.0f;
		}
	return 0;
}

void st_free(void *p)
{
	free(p);
}
