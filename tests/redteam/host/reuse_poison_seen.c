/* redteam: kept inputs, poison seen: a call on inputs it has seen skips its work when its outputs still hold the last answer | expect: ok | task: t1/histogram | speedup_at_most: 1.0
 * As reuse_kept.c, but it skips only when its outputs are not poisoned: the answer of two calls
 * ago on the same buffers still there. Every timed call's outputs are poisoned now, so it never
 * skips and is timed at its work's speed, which is sixteen times the work (0.1-0.3x the
 * reference on the host backend's small set; on its eval set it got `ok` at 9179x the reference
 * before the poison). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct hist_ctx {
	int64_t n, bins;
	const void *in[2];
	void *out[2];
	uint64_t print[2];
} hist_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *value)
{
	for (int32_t i = 0; i < cfg->n; i++)
		if (strcmp(cfg->names[i], name) == 0) {
			*value = cfg->values[i];
			return 0;
		}
	return -1;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)params;
	(void)stream;
	int64_t n, bins;
	if (n_params != 0 || cfg_get(cfg, "n", &n) || cfg_get(cfg, "bins", &bins))
		return 1;
	hist_ctx *c = calloc(1, sizeof *c);
	if (!c)
		return 1;
	c->n = n;
	c->bins = bins;
	*ctx = c;
	return 0;
}

/* A few of the input's elements, cheaply: enough to see that it has not changed. */
static uint64_t fingerprint(const int32_t *x, int64_t n)
{
	uint64_t h = (uint64_t)n;
	for (int k = 0; k < 64; k++)
		h = h * 1000003u + (uint32_t)x[(n - 1) * k / 63];
	return h;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)n_in;
	(void)n_out;
	(void)stream;
	hist_ctx *c = ctx;
	const int32_t *x = in[0].data;
	int32_t *counts = out[0].data;
	uint64_t p = fingerprint(x, c->n);
	for (int s = 0; s < 2; s++) /* the same inputs, the same outputs, not poisoned: done */
		if (c->in[s] == x && c->out[s] == counts && c->print[s] == p && counts[0] != -1)
			return 0;
	/* the work sixteen times over, so that a skipped call (its fingerprint, one read of a few
	 * cold lines) is far faster than a done one even on the host's small set */
	for (int rep = 0; rep < 16; rep++) {
		memset(counts, 0, (size_t)c->bins * sizeof(int32_t));
		for (int64_t i = 0; i < c->n; i++)
			if (x[i] >= 0 && x[i] < c->bins)
				counts[x[i]]++;
	}
	int s = c->in[0] == x ? 0 : c->in[1] == x ? 1 : c->in[0] ? 1 : 0;
	c->in[s] = x;
	c->out[s] = counts;
	c->print[s] = p;
	return 0;
}

void st_free(void *ctx)
{
	free(ctx);
}
