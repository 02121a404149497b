/* Output comparison: elementwise atol/rtol or NMSE, the worst element, error maxima and counts.
 * The work is cut into fixed chunks whose partial results are merged in chunk order, whatever
 * the thread count, so a verdict never depends on how many cores the parent had: floating-point
 * sums associate the same way, and ties for the worst element go to the lowest index. A block of
 * finite values takes a branch-free form of the per-element rule in vector registers (two lanes
 * to an instruction, or four with AVX2: the same bits either way, compare_lanes.h), which is
 * where a verify of large outputs spends most of its correctness phase and its audit; float32
 * outputs (the common case) are read there as they lie, other types decoded block by block into
 * doubles first. Either way every figure is computed in double. */
#include "compare.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/threads.h"
#include "dtype.h"

#define CHUNK (1 << 16)          /* elements per partial result */
#define BLOCK 2048               /* elements decoded at a time */
#define PARALLEL_MIN (1 << 20)   /* below this, threads cost more than they save */

typedef struct partial {
	double sum_d2, sum_w2;
	double max_abs, max_rel;
	int64_t mismatches, nonfinite;
	double worst_excess;
	int64_t worst_index;
	double worst_got, worst_want;
} partial;

typedef struct job {
	const st_tensor *got, *want;
	double atol, rtol;
	int64_t n;
} job;

static int64_t numel_of(const st_tensor *t)
{
	int64_t n = 1;
	for (int d = 0; d < t->ndim && d < ST_MAX_DIMS; d++)
		n *= t->shape[d];
	return n;
}

static void partial_init(partial *p)
{
	memset(p, 0, sizeof *p);
	p->worst_excess = -INFINITY;
	p->worst_index = -1;
}

static void load_block(st_dtype t, const void *base, int64_t start, int count, double *dst)
{
	if (t == ST_F32) {
		const float *src = (const float *)base + start;
		for (int i = 0; i < count; i++)
			dst[i] = src[i];
	} else if (t == ST_BF16) {
		const uint16_t *src = (const uint16_t *)base + start;
		for (int i = 0; i < count; i++) {
			uint32_t u = (uint32_t)src[i] << 16;
			float f;
			memcpy(&f, &u, sizeof f);
			dst[i] = f;
		}
	} else if (t == ST_F64) {
		memcpy(dst, (const double *)base + start, (size_t)count * sizeof *dst);
	} else {
		for (int i = 0; i < count; i++)
			dst[i] = st_dtype_get(t, base, start + i);
	}
}

static void note_worst(partial *p, double excess, int64_t index, double g, double w)
{
	/* Strictly greater: indices rise within a chunk, so ties keep the lowest. */
	if (excess > p->worst_excess || p->worst_index < 0) {
		p->worst_excess = excess;
		p->worst_index = index;
		p->worst_got = g;
		p->worst_want = w;
	}
}

static void compare_element(const job *j, partial *p, int64_t index, double g, double w)
{
	if (!isfinite(g) || !isfinite(w)) {
		if (g == w || (isnan(g) && isnan(w))) {
			note_worst(p, -INFINITY, index, g, w);
			return;
		}
		p->nonfinite++;
		p->mismatches++;
		p->max_abs = INFINITY;
		note_worst(p, INFINITY, index, g, w);
		return;
	}
	double diff = fabs(g - w);
	double limit = j->atol + j->rtol * fabs(w);
	if (diff > limit)
		p->mismatches++;
	if (diff > p->max_abs)
		p->max_abs = diff;
	if (w != 0 && diff / fabs(w) > p->max_rel)
		p->max_rel = diff / fabs(w);
	p->sum_d2 += (g - w) * (g - w);
	p->sum_w2 += w * w;
	note_worst(p, diff - limit, index, g, w);
}

#define LANES 8 /* independent accumulators, element i in lane i mod LANES */

/* One lane of the finite-block rule below. */
typedef struct lane {
	double d2, w2, max_abs, top;
	int64_t mismatches, rel_hit;
} lane;

static inline __attribute__((always_inline)) void lane_add(lane *l, double atol, double rtol,
                                                           double max_rel, double g, double w)
{
	double e = g - w, diff = fabs(e), aw = fabs(w);
	double limit = atol + rtol * aw, excess = diff - limit;
	l->mismatches += diff > limit;
	l->max_abs = diff > l->max_abs ? diff : l->max_abs;
	l->rel_hit |= diff > max_rel * aw;
	l->top = excess > l->top ? excess : l->top;
	l->d2 += e * e;
	l->w2 += w * w;
}

/* The vector loop, per width (compare_lanes.h), and the widest this CPU runs. */
typedef int (*lanes_fn)(const void *gv, const void *wv, int count, double atol, double rtol,
                        double max_rel, lane *l);
#define LW 2
#include "compare_lanes.h"
#undef LW
/* ST_COMPARE_NARROW: the two-wide loop only (tests/CMakeLists.txt runs the tests on it too). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(ST_COMPARE_NARROW)
#pragma GCC push_options
#pragma GCC target("avx2")
#define LW 4
#include "compare_lanes.h"
#undef LW
#pragma GCC pop_options
#define HAVE_LANES4 1
#endif

static lanes_fn lanes_for(int f32)
{
#ifdef HAVE_LANES4
	if (__builtin_cpu_supports("avx2"))
		return f32 ? lanes_f32_w4 : lanes_f64_w4;
#endif
	return f32 ? lanes_f32_w2 : lanes_f64_w2;
}

/* A block of finite values (nearly always): the rule of compare_element without its branches,
 * in LANES lanes (so the additions overlap, and run in vector registers), merged in a fixed order:
 * the same figures for any thread count. Returns 0, with *p unchanged, when a value is not
 * finite (its square then is not either): the caller takes that block element by element. The
 * largest relative error takes a division, so the lanes only note whether some element might
 * beat the largest so far, and such a block (rare once the maximum has grown) is looked at again
 * for it. Likewise the block's largest excess is looked up only when it beats the worst so far,
 * and its first index taken, as compare_element would. */
static inline __attribute__((always_inline)) int
finite_block(const job *j, partial *p, int64_t base, const void *gv, const void *wv, int f32,
             int count)
{
	/* f32 is a constant at each call: two copies of the loop, one reading float32 outputs
	 * where they lie (the common case: no copy into doubles first), one reading doubles. */
#define AT(v, i) (f32 ? (double)((const float *)(v))[i] : ((const double *)(v))[i])
	const double atol = j->atol, rtol = j->rtol, max_rel = p->max_rel;
	lane l[LANES];
	int i = lanes_for(f32)(gv, wv, count, atol, rtol, max_rel, l);
	for (int k = 0; i < count; i++, k++)
		lane_add(&l[k], atol, rtol, max_rel, AT(gv, i), AT(wv, i));
	double sum_d2 = ((l[0].d2 + l[1].d2) + (l[2].d2 + l[3].d2)) +
	                ((l[4].d2 + l[5].d2) + (l[6].d2 + l[7].d2));
	double sum_w2 = ((l[0].w2 + l[1].w2) + (l[2].w2 + l[3].w2)) +
	                ((l[4].w2 + l[5].w2) + (l[6].w2 + l[7].w2));
	if (!isfinite(sum_d2) || !isfinite(sum_w2))
		return 0;
	double best = -INFINITY;
	int hit = 0;
	for (int k = 0; k < LANES; k++) {
		p->mismatches += l[k].mismatches;
		p->max_abs = l[k].max_abs > p->max_abs ? l[k].max_abs : p->max_abs;
		best = l[k].top > best ? l[k].top : best;
		hit |= l[k].rel_hit != 0;
	}
	p->sum_d2 += sum_d2;
	p->sum_w2 += sum_w2;
	for (i = 0; hit && i < count; i++) {
		double diff = fabs(AT(gv, i) - AT(wv, i)), aw = fabs(AT(wv, i));
		if (aw != 0 && diff / aw > p->max_rel)
			p->max_rel = diff / aw;
	}
	if (!(best > p->worst_excess || p->worst_index < 0))
		return 1;
	for (i = 0; i < count; i++) {
		double diff = fabs(AT(gv, i) - AT(wv, i)), limit = atol + rtol * fabs(AT(wv, i));
		if (diff - limit == best) {
			note_worst(p, best, base + i, AT(gv, i), AT(wv, i));
			break;
		}
	}
	return 1;
}
#undef AT

static void compare_chunk(const job *j, int64_t chunk, partial *p)
{
	double g[BLOCK], w[BLOCK];
	int64_t start = chunk * CHUNK;
	int64_t end = start + CHUNK < j->n ? start + CHUNK : j->n;
	partial_init(p);
	int f32 = j->got->dtype == ST_F32 && j->want->dtype == ST_F32;
	for (int64_t b = start; b < end; b += BLOCK) {
		int count = (int)(end - b < BLOCK ? end - b : BLOCK);
		if (f32 && finite_block(j, p, b, (const float *)j->got->data + b,
		                        (const float *)j->want->data + b, 1, count))
			continue;
		load_block(j->got->dtype, j->got->data, b, count, g);
		load_block(j->want->dtype, j->want->data, b, count, w);
		if (!f32 && finite_block(j, p, b, g, w, 0, count))
			continue;
		for (int i = 0; i < count; i++)
			compare_element(j, p, b + i, g[i], w[i]);
	}
}

static void partial_merge(partial *acc, const partial *c)
{
	acc->sum_d2 += c->sum_d2;
	acc->sum_w2 += c->sum_w2;
	acc->max_abs = fmax(acc->max_abs, c->max_abs);
	acc->max_rel = fmax(acc->max_rel, c->max_rel);
	acc->mismatches += c->mismatches;
	acc->nonfinite += c->nonfinite;
	if (c->worst_index >= 0)
		note_worst(acc, c->worst_excess, c->worst_index, c->worst_got, c->worst_want);
}

typedef struct worker {
	const job *j;
	partial *chunks;
	int64_t n_chunks;
	int index, stride;
} worker;

static void *worker_run(void *arg)
{
	worker *w = arg;
	for (int64_t c = w->index; c < w->n_chunks; c += w->stride)
		compare_chunk(w->j, c, &w->chunks[c]);
	return NULL;
}

/* Fill one partial per chunk across threads; 0 when memory or threads were not available. */
static int compare_parallel(const job *j, int threads, int64_t n_chunks, partial *acc)
{
	partial *chunks = malloc((size_t)n_chunks * sizeof *chunks);
	worker *ws = malloc((size_t)threads * sizeof *ws);
	int ok = chunks && ws;
	if (ok) {
		for (int t = 0; t < threads; t++)
			ws[t] = (worker){j, chunks, n_chunks, t, threads};
		st_threads_run(worker_run, ws, sizeof *ws, threads);
		for (int64_t c = 0; c < n_chunks; c++)
			partial_merge(acc, &chunks[c]);
	}
	free(chunks);
	free(ws);
	return ok;
}

static void unravel(const st_tensor *t, int64_t index, int64_t *coord)
{
	for (int d = 0; d < ST_MAX_DIMS; d++)
		coord[d] = 0;
	for (int d = t->ndim - 1; d >= 0 && index >= 0; d--) {
		if (t->shape[d] > 0) {
			coord[d] = index % t->shape[d];
			index /= t->shape[d];
		}
	}
}

static int same_layout(const st_tensor *a, const st_tensor *b)
{
	if (a->dtype != b->dtype || a->ndim != b->ndim || a->ndim < 0 || a->ndim > ST_MAX_DIMS)
		return 0;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d] || a->shape[d] < 0)
			return 0;
	return 1;
}

static void finish(const st_tensor *got, const st_tol *tol, const partial *acc,
                   st_compare_result *r)
{
	r->mismatches = acc->mismatches;
	r->nonfinite = acc->nonfinite;
	r->max_abs = acc->max_abs;
	r->max_rel = acc->max_rel;
	if (acc->nonfinite)
		r->nmse = INFINITY;
	else if (acc->sum_w2 > 0)
		r->nmse = acc->sum_d2 / acc->sum_w2;
	else
		r->nmse = acc->sum_d2 > 0 ? INFINITY : 0;
	r->worst_index = acc->worst_index;
	r->worst_got = acc->worst_got;
	r->worst_want = acc->worst_want;
	unravel(got, acc->worst_index, r->worst_coord);
	if (tol->nmse >= 0)
		r->ok = acc->nonfinite == 0 && r->nmse <= tol->nmse;
	else
		r->ok = acc->mismatches == 0;
}

void st_compare(const st_tensor *got, const st_tensor *want, const st_tol *tol, int threads,
                st_compare_result *r)
{
	memset(r, 0, sizeof *r);
	r->worst_index = -1;
	if (!same_layout(got, want))
		return; /* ok stays 0: outputs of different type or shape never match */
	/* Under NMSE, unset atol/rtol count every differing element as a mismatch. */
	job j = {got, want, tol->atol > 0 ? tol->atol : 0, tol->rtol > 0 ? tol->rtol : 0,
	         numel_of(got)};
	r->n = j.n;
	r->ndim = got->ndim;
	partial acc;
	partial_init(&acc);
	int64_t n_chunks = (j.n + CHUNK - 1) / CHUNK;
	if (threads > n_chunks)
		threads = (int)n_chunks;
	if (j.n < PARALLEL_MIN || threads <= 1 || !compare_parallel(&j, threads, n_chunks, &acc)) {
		partial_init(&acc);
		for (int64_t c = 0; c < n_chunks; c++) {
			partial p;
			compare_chunk(&j, c, &p);
			partial_merge(&acc, &p);
		}
	}
	finish(got, tol, &acc, r);
}

static void append(char *buf, size_t len, size_t *used, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
	if (*used >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(buf + *used, len - *used, fmt, ap);
	va_end(ap);
	if (k > 0)
		*used += (size_t)k;
}

static void describe_worst(const st_compare_result *r, const char *name, char *buf, size_t len,
                           size_t *used, int ndim)
{
	append(buf, len, used, "worst %s[", name);
	for (int d = 0; d < ndim; d++)
		append(buf, len, used, "%s%lld", d ? "," : "", (long long)r->worst_coord[d]);
	append(buf, len, used, "] (flat %lld): got %.8g want %.8g", (long long)r->worst_index,
	       r->worst_got, r->worst_want);
}

void st_compare_describe(const st_compare_result *r, const char *name, const st_tol *tol,
                         char *buf, size_t len)
{
	size_t used = 0;
	if (!buf || len == 0)
		return;
	buf[0] = '\0';
	if (r->n == 0 && !r->ok) {
		append(buf, len, &used, "%s: type or shape differs from the reference", name);
		return;
	}
	if (tol->nmse >= 0)
		append(buf, len, &used, "%s: nmse %g (limit %g), %lld of %lld elements differ", name,
		       r->nmse, tol->nmse, (long long)r->mismatches, (long long)r->n);
	else if (r->ok)
		append(buf, len, &used, "%s: all %lld elements within tol", name, (long long)r->n);
	else
		append(buf, len, &used, "%s: %lld of %lld elements off", name,
		       (long long)r->mismatches, (long long)r->n);
	if (r->nonfinite)
		append(buf, len, &used, " (%lld not finite)", (long long)r->nonfinite);
	if (r->worst_index >= 0) {
		append(buf, len, &used, ", ");
		describe_worst(r, name, buf, len, &used, r->ndim);
	}
	append(buf, len, &used, ", max abs %g, max rel %g, tol ", r->max_abs, r->max_rel);
	if (tol->nmse >= 0)
		append(buf, len, &used, "nmse %g", tol->nmse);
	else
		append(buf, len, &used, "atol %g rtol %g", tol->atol, tol->rtol);
}

typedef struct bit_range {
	const unsigned char *a, *b;
	size_t es;
	int64_t from, to, first; /* first differing element in [from, to), or -1 */
} bit_range;

static void *bitwise_range(void *arg)
{
	bit_range *r = arg;
	const int64_t step = 1 << 16;
	r->first = -1;
	for (int64_t i = r->from; i < r->to; i += step) {
		int64_t count = r->to - i < step ? r->to - i : step;
		if (!memcmp(r->a + i * r->es, r->b + i * r->es, (size_t)count * r->es))
			continue;
		for (int64_t k = i; k < i + count; k++)
			if (memcmp(r->a + k * r->es, r->b + k * r->es, r->es)) {
				r->first = k;
				return NULL;
			}
	}
	return NULL;
}

int st_compare_bitwise(const st_tensor *a, const st_tensor *b, int threads, int64_t *first_diff)
{
	if (first_diff)
		*first_diff = -1;
	if (!same_layout(a, b)) {
		if (first_diff)
			*first_diff = 0;
		return 0;
	}
	int64_t n = numel_of(a);
	enum { MAX_T = 64 };
	if (threads > MAX_T)
		threads = MAX_T;
	if (threads < 1 || n < PARALLEL_MIN)
		threads = 1;
	bit_range r[MAX_T];
	for (int t = 0; t < threads; t++)
		r[t] = (bit_range){a->data, b->data, st_dtype_size(a->dtype), n * t / threads,
		                   n * (t + 1) / threads, -1};
	st_threads_run(bitwise_range, r, sizeof *r, threads);
	/* the ranges rise with t: the first that differs holds the first difference */
	for (int t = 0; t < threads; t++)
		if (r[t].first >= 0) {
			if (first_diff)
				*first_diff = r[t].first;
			return 0;
		}
	return 1;
}
