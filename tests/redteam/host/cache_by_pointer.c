/* redteam: cache keyed by pointer | expect: incorrect | task: tests/data/tasks/t1/scale
 * Replays the output it computed the first time it saw an input pointer; pointers repeat, contents do not. */
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

static float b_val;
static const void *seen[4];
static float *saved[4];

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg;
	(void)stream;
	(void)n_params;
	b_val = *(const float *)params[0].data;
	*ctx = &b_val;
	return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx;
	(void)n_in;
	(void)n_out;
	(void)stream;
	int64_t n = in[0].shape[0];
	for (int k = 0; k < 4; k++)
		if (seen[k] == in[0].data) {
			memcpy(out[0].data, saved[k], (size_t)n * sizeof(float));
			return 0;
		}
	const float *x = in[0].data;
	float *y = out[0].data;
	for (int64_t i = 0; i < n; i++)
		y[i] = 2.0f * x[i] + b_val;
	for (int k = 0; k < 4; k++)
		if (!seen[k]) {
			seen[k] = in[0].data;
			saved[k] = malloc((size_t)n * sizeof(float));
			if (saved[k])
				memcpy(saved[k], y, (size_t)n * sizeof(float));
			break;
		}
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
	for (int k = 0; k < 4; k++) {
		free(saved[k]);
		saved[k] = NULL;
		seen[k] = NULL;
	}
}
