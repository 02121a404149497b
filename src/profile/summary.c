/* The numbers a profile reduces to: how much of the run's device span the GPU was actually busy
 * (the union of kernel, copy and memset intervals, so that overlapping streams are not counted
 * twice), where it sat idle and between which activities, and which kernels the time went to.
 * Host-side records (syncs, API calls) are counted but never enter the device span. */
#include "timeline.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Idle stretches up to this long are the launch pipeline's normal spacing, not a gap worth
 * reporting. */
#define GAP_MIN_US 1.0

typedef struct span_iv {
	double a, b;
	const st_activity *act;
} span_iv;

static int is_device(st_act_kind k)
{
	return k == ST_ACT_KERNEL || k == ST_ACT_MEMCPY || k == ST_ACT_MEMSET;
}

/* A record that ends before it starts has no length, rather than a negative one. */
static double act_end(const st_activity *a)
{
	return a->end_us > a->start_us ? a->end_us : a->start_us;
}

static int cmp_iv(const void *x, const void *y)
{
	const span_iv *p = x, *q = y;
	if (p->a != q->a)
		return (p->a > q->a) - (p->a < q->a);
	return (p->b > q->b) - (p->b < q->b);
}

static const char *kname(const st_activity *a)
{
	return a->name ? a->name : "(unnamed)";
}

/* Kernels ordered by name, then launch time, then record index: every name's first launch heads
 * its run, and the order never depends on qsort's instability. */
typedef struct kref {
	const st_activity *a;
	int i;
} kref;

static int cmp_kernel(const void *x, const void *y)
{
	const kref *p = x, *q = y;
	int c = strcmp(kname(p->a), kname(q->a));
	if (c)
		return c;
	if (p->a->start_us != q->a->start_us)
		return (p->a->start_us > q->a->start_us) - (p->a->start_us < q->a->start_us);
	return (p->i > q->i) - (p->i < q->i);
}

/* Grid dimensions are each below 2^31, their product is not. */
static int blocks_of(const st_activity *a)
{
	int64_t b = (int64_t)a->grid[0] * a->grid[1] * a->grid[2];
	return b > INT_MAX ? INT_MAX : b < 0 ? 0 : (int)b;
}

static int cmp_stat(const void *x, const void *y)
{
	const st_kernel_stat *p = x, *q = y;
	if (p->total_us != q->total_us)
		return (p->total_us < q->total_us) - (p->total_us > q->total_us);
	return strcmp(p->name, q->name);
}

/* A gap between `before`'s end and `after`'s start, added to its pair's sums in pairs[0..*n). */
static void note_gap(st_gap_pair *pairs, int *n, const char *before, const char *after,
                     double gap)
{
	int i = 0;
	while (i < *n && (strcmp(pairs[i].before, before) || strcmp(pairs[i].after, after)))
		i++;
	if (i == *n) {
		pairs[i] = (st_gap_pair){.before = before, .after = after};
		(*n)++;
	}
	pairs[i].count++;
	pairs[i].total_us += gap;
	if (gap > pairs[i].max_us)
		pairs[i].max_us = gap;
}

static int cmp_pair(const void *x, const void *y)
{
	const st_gap_pair *p = x, *q = y;
	if (p->total_us != q->total_us)
		return (p->total_us < q->total_us) - (p->total_us > q->total_us);
	int c = strcmp(p->before, q->before);
	return c ? c : strcmp(p->after, q->after);
}

static st_status busy_and_gaps(const st_timeline *t, st_timeline_summary *s, st_err *err)
{
	int nd = 0;
	for (int i = 0; i < t->n; i++)
		nd += is_device(t->acts[i].kind);
	if (nd == 0)
		return ST_OK;
	span_iv *iv = malloc((size_t)nd * sizeof *iv);
	s->gap_pairs = calloc((size_t)nd, sizeof *s->gap_pairs);
	if (!iv || !s->gap_pairs) {
		free(iv);
		free(s->gap_pairs);
		s->gap_pairs = NULL;
		return st_err_set(err, ST_E_NOMEM, "profile summary: out of memory for %d intervals", nd);
	}
	int k = 0;
	for (int i = 0; i < t->n; i++)
		if (is_device(t->acts[i].kind)) {
			iv[k].a = t->acts[i].start_us;
			iv[k].b = act_end(&t->acts[i]);
			iv[k].act = &t->acts[i];
			k++;
		}
	qsort(iv, (size_t)nd, sizeof *iv, cmp_iv);
	double lo = iv[0].a, hi = iv[0].b, first = iv[0].a, busy = 0;
	const st_activity *last = iv[0].act; /* the one whose end is hi */
	for (int i = 1; i < nd; i++) {
		if (iv[i].a <= hi) {
			if (iv[i].b > hi) {
				hi = iv[i].b;
				last = iv[i].act;
			}
			continue;
		}
		busy += hi - lo;
		double gap = iv[i].a - hi;
		if (gap > GAP_MIN_US) {
			s->n_gaps++;
			note_gap(s->gap_pairs, &s->n_gap_pairs, kname(last), kname(iv[i].act), gap);
		}
		if (gap > s->max_gap_us)
			s->max_gap_us = gap;
		lo = iv[i].a;
		hi = iv[i].b;
		last = iv[i].act;
	}
	busy += hi - lo;
	free(iv);
	qsort(s->gap_pairs, (size_t)s->n_gap_pairs, sizeof *s->gap_pairs, cmp_pair);
	s->span_us = hi - first;
	s->lead_us = first > 0 ? first : 0;
	s->busy_us = busy;
	/* The difference, not a sum of gaps, so that span = busy + gaps holds exactly. */
	s->gaps_us = s->span_us - busy;
	if (s->gaps_us < 0)
		s->gaps_us = 0;
	s->busy_pct = s->span_us > 0 ? 100.0 * busy / s->span_us : 0;
	return ST_OK;
}

static st_status top_kernels(const st_timeline *t, st_timeline_summary *s, st_err *err)
{
	if (s->launches == 0)
		return ST_OK;
	kref *idx = malloc((size_t)s->launches * sizeof *idx);
	st_kernel_stat *top = calloc((size_t)s->launches, sizeof *top);
	if (!idx || !top) {
		free(idx);
		free(top);
		return st_err_set(err, ST_E_NOMEM, "profile summary: out of memory for %d kernels",
		                  s->launches);
	}
	int k = 0;
	for (int i = 0; i < t->n; i++)
		if (t->acts[i].kind == ST_ACT_KERNEL) {
			idx[k].a = &t->acts[i];
			idx[k].i = i;
			k++;
		}
	qsort(idx, (size_t)k, sizeof *idx, cmp_kernel);

	int n = 0;
	for (int i = 0; i < k; i++) {
		const st_activity *a = idx[i].a;
		if (n == 0 || strcmp(top[n - 1].name, kname(a))) {
			st_kernel_stat *st = &top[n++];
			st->name = kname(a);
			st->grid_blocks = blocks_of(a);
			st->regs = a->regs;
		}
		top[n - 1].launches++;
		top[n - 1].total_us += act_end(a) - a->start_us;
	}
	free(idx);
	for (int i = 0; i < n; i++)
		top[i].share = s->kernel_us > 0 ? top[i].total_us / s->kernel_us : 0;
	qsort(top, (size_t)n, sizeof *top, cmp_stat);
	s->top = top;
	s->n_top = n;
	return ST_OK;
}

st_status st_timeline_summarize(const st_timeline *t, st_timeline_summary *s, st_err *err)
{
	memset(s, 0, sizeof *s);
	for (int i = 0; i < t->n; i++) {
		const st_activity *a = &t->acts[i];
		switch (a->kind) {
		case ST_ACT_KERNEL:
			s->launches++;
			s->kernel_us += act_end(a) - a->start_us;
			break;
		case ST_ACT_MEMCPY:
			s->memcpys++;
			s->memcpy_bytes += a->bytes;
			break;
		case ST_ACT_MEMSET: s->memsets++; break;
		case ST_ACT_SYNC: s->syncs++; break;
		case ST_ACT_API: s->api_calls++; break;
		}
	}
	st_status st = busy_and_gaps(t, s, err);
	if (st)
		return st;
	s->host_us = t->run_wall_us;
	s->device_us = s->busy_us;
	/* Near 1 when CUPTI saw everything the event timing measured; far from it when records
	 * were dropped or work ran outside the profiled window. */
	/* The start event runs as st_run is called, so the event time also holds the lead-in before
	 * the first launch reached the GPU. */
	s->agreement = t->run_event_us > 0
	                   ? (s->lead_us + s->kernel_us + s->gaps_us) / t->run_event_us
	                   : 0;
	st = top_kernels(t, s, err);
	if (st)
		st_timeline_summary_free(s);
	return st;
}

void st_timeline_summary_free(st_timeline_summary *s)
{
	if (!s)
		return;
	free(s->top);
	s->top = NULL;
	s->n_top = 0;
	free(s->gap_pairs);
	s->gap_pairs = NULL;
	s->n_gap_pairs = 0;
}

/* jansson refuses NaN and infinities; a measurement that produced one is reported as 0 rather
 * than losing the whole object. */
static double fin(double x)
{
	return isfinite(x) ? x : 0;
}

static json_t *gap_pairs_json(const st_timeline_summary *s, int max)
{
	json_t *a = json_array();
	for (int i = 0; a && i < s->n_gap_pairs && i < max; i++) {
		const st_gap_pair *g = &s->gap_pairs[i];
		if (json_array_append_new(a, json_pack("{s:s, s:s, s:i, s:f, s:f}", "before", g->before,
		                                       "after", g->after, "count", g->count,
		                                       "total_us", fin(g->total_us),
		                                       "max_us", fin(g->max_us)))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

json_t *st_timeline_summary_json(const st_timeline_summary *s, int max_top)
{
	json_t *top = json_array();
	if (!top)
		return NULL;
	int n = max_top < s->n_top ? max_top : s->n_top;
	for (int i = 0; i < n; i++) {
		const st_kernel_stat *k = &s->top[i];
		if (json_array_append_new(top, json_pack("{s:s, s:i, s:f, s:f, s:i, s:i}",
		                                         "name", k->name, "launches", k->launches,
		                                         "total_us", fin(k->total_us),
		                                         "share", fin(k->share),
		                                         "grid_blocks", k->grid_blocks,
		                                         "regs", k->regs))) {
			json_decref(top);
			return NULL;
		}
	}
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:i, s:f, s:f, s:i, s:i, s:i, s:i, s:i, s:I, "
	                 "s:f, s:f, s:f, s:o, s:o*}",
	                 "span_us", fin(s->span_us), "busy_us", fin(s->busy_us),
	                 "busy_pct", fin(s->busy_pct), "kernel_us", fin(s->kernel_us),
	                 "gaps_us", fin(s->gaps_us), "n_gaps", s->n_gaps,
	                 "max_gap_us", fin(s->max_gap_us), "lead_us", fin(s->lead_us),
	                 "launches", s->launches,
	                 "memcpys", s->memcpys, "memsets", s->memsets, "syncs", s->syncs,
	                 "api_calls", s->api_calls, "memcpy_bytes", (json_int_t)s->memcpy_bytes,
	                 "host_us", fin(s->host_us), "device_us", fin(s->device_us),
	                 "agreement", fin(s->agreement), "top_kernels", top,
	                 "gap_pairs", gap_pairs_json(s, max_top));
}
