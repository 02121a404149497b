/* redteam: honest: a persistent workspace reused across calls | expect: ok | task: tests/data/tasks/t1/scale
 * Allocates a scratch buffer in st_init, stages every call's result in it and copies it out:
 * state that lives across calls is fine as long as nothing derived from earlier inputs is reused. */
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

struct ctx {
	float b;
	float *scratch;
	int64_t cap;
};

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out)
{
	(void)stream;
	if (n_params != 1 || cfg->n < 1)
		return 1;
	struct ctx *c = calloc(1, sizeof *c);
	if (!c)
		return 2;
	c->b = *(const float *)params[0].data;
	c->cap = cfg->values[0];
	c->scratch = malloc((size_t)c->cap * sizeof(float));
	if (!c->scratch) {
		free(c);
		return 2;
	}
	*out = c;
	return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)stream;
	struct ctx *c = p;
	int64_t n = in[0].shape[0];
	if (n_in != 1 || n_out != 1 || n > c->cap)
		return 1;
	const float *x = in[0].data;
	for (int64_t i = 0; i < n; i++)
		c->scratch[i] = 2.0f * x[i] + c->b;
	memcpy(out[0].data, c->scratch, (size_t)n * sizeof(float));
	return 0;
}

void st_free(void *p)
{
	struct ctx *c = p;
	if (c)
		free(c->scratch);
	free(c);
}
