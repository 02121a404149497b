/* redteam: st_run returning before the work is done: abort | expect: runtime_error | task: tests/data/tasks/t1/scale
 * Aborts inside st_run. */
#include <stdlib.h>
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

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx; (void)in; (void)n_in; (void)out; (void)n_out; (void)stream;
	abort();
}
