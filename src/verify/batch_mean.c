/* The front-loading bound of batch_mean.h: medians over batches of each batch's mean reported
 * call, so that one batch held up by a busy host moves it little. */
#include "batch_mean.h"

#include <stdlib.h>

#include "verify/stats.h"

/* The median over r[0..n) of event_ms / n per batch; 0 when none has event_ms. */
static double median_mean(const st_batch_rec *r, int n)
{
	double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
	if (!v)
		return 0;
	int m = 0;
	for (int i = 0; i < n; i++)
		if (r[i].n > 0 && r[i].event_ms > 0)
			v[m++] = r[i].event_ms / r[i].n;
	double q = m ? st_quantile(v, m, 0.5) : 0;
	free(v);
	return q;
}

void st_batch_mean_compute(const st_batch_rec *c, int nc, const st_batch_rec *b, int nb,
                           double base_median, st_batch_mean *out)
{
	*out = (st_batch_mean){0};
	out->skew = 1;
	for (int i = 0; i < nc; i++)
		out->batches += c[i].n > 0 && c[i].event_ms > 0;
	if (!out->batches)
		return;
	out->cand_ms = median_mean(c, nc);
	out->base_ms = median_mean(b, nb);
	if (out->base_ms > 0 && base_median > 0) {
		double s = out->base_ms / base_median;
		out->skew = s < 1 ? 1 : s > 1.5 ? 1.5 : s;
	}
	out->bound_ms = out->cand_ms / out->skew;
}

int st_batch_mean_binds(const st_batch_mean *m, double median_ms)
{
	return m->batches > 0 && m->bound_ms > median_ms * 1.05 + 0.001;
}
