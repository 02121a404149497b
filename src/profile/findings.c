/* Findings an LLM coder can act on, each one sentence that states what was measured, with the
 * numbers, and then what to do about it. Every rule fires only on a measured condition; nothing is
 * guessed from names alone except which kernels are GEMMs. Findings are ranked by the share of
 * the run they concern, ties broken by their text, so that the same profile always gives the
 * same list. */
#include "timeline.h"
#include "ncu.h"

#include <jansson.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/grow.h"

/* Streaming multiprocessors of the H200 the project targets: a grid with fewer blocks than this
 * leaves SMs empty. A hint, not a measurement, hence named as one. */
#define SMS_HINT 132

/* Up to this many kernel or sync names are listed in one sentence. */
#define MAX_NAMES 3
#define SHORT_NAME 40

typedef struct flist {
	st_finding *v;
	int n, cap;
	int oom;
} flist;

static void add(flist *l, double weight, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void add(flist *l, double weight, const char *fmt, ...)
{
	if (l->oom)
		return;
	if (ST_GROW(l->v, l->cap, l->n + 1, 16)) {
		l->oom = 1;
		return;
	}
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	char *text = strdup(buf);
	if (!text) {
		l->oom = 1;
		return;
	}
	if (!(weight > 0))
		weight = 0;
	if (weight > 1)
		weight = 1;
	l->v[l->n].weight = weight;
	l->v[l->n].text = text;
	l->n++;
}

static int contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return 1;
	return 0;
}

static int gemm_like(const char *name)
{
	static const char *const marks[] = { "gemm", "xmma", "cutlass", "matmul", "wgmma", "sm90_",
		                             "cublas", "mma" };
	if (!name)
		return 0;
	for (size_t i = 0; i < sizeof marks / sizeof *marks; i++)
		if (contains_ci(name, marks[i]))
			return 1;
	return 0;
}

/* The part of a demangled name a reader recognises: without the return type templates get, the
 * template arguments and the parameter list, and no longer than SHORT_NAME characters. */
static void short_name(const char *name, char out[SHORT_NAME + 1])
{
	if (!name)
		name = "?";
	if (strncmp(name, "void ", 5) == 0)
		name += 5;
	size_t n = strcspn(name, "(<");
	if (n > SHORT_NAME)
		n = SHORT_NAME;
	memcpy(out, name, n);
	out[n] = '\0';
}

/* Appends "a, b, c" (with ", …" when more were left out) of distinct names. */
typedef struct namelist {
	char names[MAX_NAMES][SHORT_NAME + 1];
	int n, more;
} namelist;

static void namelist_add(namelist *nl, const char *name)
{
	char s[SHORT_NAME + 1];
	short_name(name, s);
	for (int i = 0; i < nl->n; i++)
		if (strcmp(nl->names[i], s) == 0)
			return;
	if (nl->n == MAX_NAMES) {
		nl->more = 1;
		return;
	}
	strcpy(nl->names[nl->n++], s);
}

static void namelist_str(const namelist *nl, char *out, size_t len)
{
	size_t k = 0;
	out[0] = '\0';
	for (int i = 0; i < nl->n && k < len; i++)
		k += (size_t)snprintf(out + k, len - k, "%s%s", i ? ", " : "", nl->names[i]);
	if (nl->more && k < len)
		snprintf(out + k, len - k, ", …");
}

static double share_of(const st_timeline_summary *s, const char *name)
{
	for (int i = 0; i < s->n_top; i++)
		if (name && strcmp(s->top[i].name, name) == 0)
			return s->top[i].share;
	/* ncu may report a name in another form than CUPTI: match on the short name. */
	char a[SHORT_NAME + 1], b[SHORT_NAME + 1];
	short_name(name, a);
	for (int i = 0; i < s->n_top; i++) {
		short_name(s->top[i].name, b);
		if (strcmp(a, b) == 0)
			return s->top[i].share;
	}
	return 0.05;
}

/* a. elementwise kernels next to GEMMs that could be their epilogue */
static void rule_unfused(const st_timeline_summary *s, flist *l)
{
	int gemms = 0, others = 0;
	double other_us = 0;
	namelist nl = { 0 };
	for (int i = 0; i < s->n_top; i++) {
		const st_kernel_stat *k = &s->top[i];
		if (gemm_like(k->name)) {
			gemms++;
			continue;
		}
		others += k->launches;
		other_us += k->total_us;
		namelist_add(&nl, k->name);
	}
	if (!gemms || !others || !(s->kernel_us > 0))
		return;
	double share = other_us / s->kernel_us;
	if (share < 0.10)
		return;
	char names[256];
	namelist_str(&nl, names, sizeof names);
	add(l, share, "%d kernel launch%s besides the GEMMs (%s) take%s %.0f %% of kernel time — "
	    "fuse them into the GEMM epilogue (cuBLASLt bias/GELU epilogues) or into one kernel",
	    others, others == 1 ? "" : "es", names, others == 1 ? "s" : "", 100 * share);
}

/* b. many launches with the GPU idle between them */
static void rule_gaps(const st_timeline_summary *s, flist *l)
{
	if (s->launches < 8 || !(s->span_us > 0))
		return;
	double frac = s->gaps_us / s->span_us;
	if (frac < 0.15)
		return;
	add(l, frac, "%d launches leave %.0f %% of the run idle between kernels (largest gap %.1f µs) "
	    "— capture the launches in a CUDA graph in st_init and replay it, or fuse kernels",
	    s->launches, 100 * frac, s->max_gap_us);
}

/* b2. the gaps gather behind one pair of kernels: what to look at first. Pairs with a memset on
 * one side are rule b3's: a memset cannot be launched as a programmatic dependent. */
static int memset_pair(const st_gap_pair *g)
{
	return !strcmp(g->before, "memset") || !strcmp(g->after, "memset");
}

static void rule_gap_pair(const st_timeline_summary *s, flist *l)
{
	const st_gap_pair *g = NULL;
	for (int i = 0; i < s->n_gap_pairs && !g; i++)
		if (!memset_pair(&s->gap_pairs[i]))
			g = &s->gap_pairs[i];
	if (!g || !(s->span_us > 0))
		return;
	double frac = g->total_us / s->span_us;
	/* one kernel's launches spaced out are rule b's */
	if (g->count < 4 || frac < 0.02 || !strcmp(g->before, g->after))
		return;
	char a[SHORT_NAME + 1], b[SHORT_NAME + 1];
	short_name(g->before, a);
	short_name(g->after, b);
	add(l, frac, "%d gaps of %.1f µs on average between the end of %s and the start of %s "
	    "(%.1f µs, %.0f %% of the run) — the launch of %s behind %s: fuse the two, or launch "
	    "%s as a programmatic dependent (griddepcontrol.wait before its reads) where it is yours",
	    g->count, g->total_us / g->count, a, b, g->total_us, 100 * frac, b, a, b);
}

/* b3. memsets between kernels: each costs a launch on either side, and the gaps around them add
 * up though no one pair of them stands out (GPT-2's 44, before four kinds of matmul). */
static void rule_memset_gaps(const st_timeline_summary *s, flist *l)
{
	int n = 0;
	double us = 0;
	for (int i = 0; i < s->n_gap_pairs; i++)
		if (memset_pair(&s->gap_pairs[i])) {
			n += s->gap_pairs[i].count;
			us += s->gap_pairs[i].total_us;
		}
	if (!(s->span_us > 0) || s->memsets < 4 || us < 0.02 * s->span_us)
		return;
	add(l, us / s->span_us, "%d memsets inside st_run sit between kernels: %d gaps around them, "
	    "%.1f µs (%.0f %% of the run) — where they are yours, clear in a kernel of your own or "
	    "leave out a clearing the next kernel makes needless by writing every element; a "
	    "library's own (cuBLASLt clears part of its workspace before some matmuls) are its "
	    "business", s->memsets, n, us, 100 * us / s->span_us);
}

/* c. the host, not the GPU, sets the run time */
static void rule_host(const st_timeline_summary *s, flist *l)
{
	if (!(s->host_us > 0) || !(s->device_us < 0.6 * s->host_us) ||
	    !(s->host_us - s->device_us > 20))
		return;
	double frac = s->device_us / s->host_us;
	add(l, 1 - frac, "the GPU is busy for only %.0f %% of st_run's %.1f µs — host work or "
	    "synchronisation dominates; enqueue everything asynchronously", 100 * frac, s->host_us);
}

static int host_copy(const char *kind)
{
	static const char *const kinds[] = { "HtoD", "DtoH", "HtoH", "HtoA", "AtoH" };
	if (!kind)
		return 0;
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
		if (strcmp(kind, kinds[i]) == 0)
			return 1;
	return 0;
}

/* d. data crossing PCIe inside the timed call */
static void rule_copies(const st_timeline *t, const st_timeline_summary *s, flist *l)
{
	int n = 0;
	int64_t bytes = 0;
	double us = 0;
	for (int i = 0; i < t->n; i++) {
		const st_activity *a = &t->acts[i];
		if (a->kind != ST_ACT_MEMCPY || !host_copy(a->name))
			continue;
		n++;
		bytes += a->bytes;
		if (a->end_us > a->start_us)
			us += a->end_us - a->start_us;
	}
	if (!n)
		return;
	double frac = s->span_us > 0 ? us / s->span_us : 0;
	add(l, frac > 0.05 ? frac : 0.05, "%d host↔device cop%s (%.1f MB) inside st_run take%s %.0f "
	    "%% of the device span — keep the data on the device", n, n == 1 ? "y" : "ies",
	    (double)bytes / 1e6, n == 1 ? "s" : "", 100 * frac);
}

/* e. the host waiting on the device */
static void rule_syncs(const st_timeline *t, const st_timeline_summary *s, flist *l)
{
	if (s->syncs <= 0)
		return;
	double us = 0;
	namelist nl = { 0 };
	for (int i = 0; i < t->n; i++) {
		const st_activity *a = &t->acts[i];
		if (a->kind != ST_ACT_SYNC)
			continue;
		namelist_add(&nl, a->name);
		if (a->end_us > a->start_us)
			us += a->end_us - a->start_us;
	}
	double w = s->host_us > 0 ? us / s->host_us : 0;
	char names[256];
	namelist_str(&nl, names, sizeof names);
	add(l, w > 0.02 ? w : 0.02, "%d synchronisation call%s inside st_run (%s) stall%s the host "
	    "for %.1f µs — order work on the given stream instead", s->syncs,
	    s->syncs == 1 ? "" : "s", names, s->syncs == 1 ? "s" : "", us);
}

/* f. heavy kernels whose grid cannot fill the GPU */
static void rule_small_grids(const st_timeline_summary *s, flist *l)
{
	for (int i = 0; i < s->n_top; i++) {
		const st_kernel_stat *k = &s->top[i];
		if (k->share < 0.10 || k->grid_blocks <= 0 || k->grid_blocks >= SMS_HINT)
			continue;
		char nm[SHORT_NAME + 1];
		short_name(k->name, nm);
		add(l, k->share * (1 - (double)k->grid_blocks / SMS_HINT),
		    "kernel %s launches only %d block%s (%.0f %% of kernel time) on a %d-SM GPU — split "
		    "the work across more blocks", nm, k->grid_blocks, k->grid_blocks == 1 ? "" : "s",
		    100 * k->share, SMS_HINT);
	}
}

/* g. the run against its roofline */
static void rule_roofline(const st_roofline *r, flist *l)
{
	if (!r || !(r->fraction > 0) || !r->bound)
		return;
	double w = 1 - r->fraction;
	if (strcmp(r->bound, "memory") == 0 && r->fraction < 0.6)
		add(l, w, "the run is memory-bound at %.0f %% of the measured %.0f GB/s — coalesce and "
		    "vectorise accesses, cut passes over memory", 100 * r->fraction, r->peak_gbs);
	else if (strcmp(r->bound, "compute") == 0 && r->fraction < 0.5)
		add(l, w, "the run is compute-bound at %.0f %% of the %.0f TFLOP/s peak — use tensor "
		    "cores (WGMMA / cuBLASLt) and keep them fed", 100 * r->fraction, r->peak_tflops);
	else if (strcmp(r->bound, "latency") == 0)
		add(l, w, "the run reaches %.0f %% of its roof with the GPU idle part of the time — it is "
		    "latency- or launch-bound: launch fewer, larger kernels or a CUDA graph",
		    100 * r->fraction);
}

/* h. Nsight Compute's counters per kernel. A kernel whose schedulers issue on fewer than this
 * share of their cycles (and that is not simply waiting on latency everywhere) is named with
 * the stall reason its warps spent most cycles on: a compute loop near its limit issues on
 * 80-95 % of them (the nbody and kmeans experts on an H100: 82 and 72 %, the topk expert 50 %,
 * bench/RESULTS.md session 51). */
#define ISSUE_LOW_PCT 60.0
static void rule_ncu(const st_timeline_summary *s, const st_ncu_kernel *ncu, int n_ncu, flist *l)
{
	for (int i = 0; ncu && i < n_ncu; i++) {
		const st_ncu_kernel *k = &ncu[i];
		char nm[SHORT_NAME + 1];
		short_name(k->name, nm);
		double w = share_of(s, k->name);
		if (k->local_insts > 0)
			add(l, w, "kernel %s executes %" PRId64 " local-memory instructions (%d registers "
			    "per thread): registers spill — reduce live registers or use __launch_bounds__",
			    nm, k->local_insts, k->regs);
		if (k->dram_pct >= 0 && k->dram_pct < 30 && k->sm_pct >= 0 && k->sm_pct < 30) {
			char stall[192] = "";
			if (k->top_stall && k->top_stall[0])
				snprintf(stall, sizeof stall, " (mostly stalled on %s, %.1f warps per issue)",
				         k->top_stall, k->top_stall_ratio);
			add(l, w, "kernel %s uses %.0f %% of DRAM bandwidth and %.0f %% of SM throughput — "
			    "it waits on latency%s: raise occupancy or the work in flight per thread", nm,
			    k->dram_pct, k->sm_pct, stall);
		} else if (k->issue_pct >= 0 && k->issue_pct < ISSUE_LOW_PCT && k->top_stall &&
		           k->top_stall_advice) {
			add(l, w, "kernel %s issues an instruction on %.0f %% of a scheduler's cycles, its "
			    "warps waiting mostly on %s (%.1f cycles per issued instruction) — %s", nm,
			    k->issue_pct, k->top_stall, k->top_stall_ratio, k->top_stall_advice);
		}
		if (k->tensor_pct >= 0 && k->tensor_pct < 20 && gemm_like(k->name))
			add(l, w, "kernel %s keeps the tensor pipes %.0f %% busy — check that it runs on "
			    "tensor cores and that its tiles and pipeline stages keep them fed", nm,
			    k->tensor_pct);
	}
}

static int cmp_finding(const void *x, const void *y);

/* The list ranked and cut to `max`, handed to *out; -1 when memory ran out on the way. */
static int ranked(flist *l, int max, st_finding **out)
{
	if (l->oom) {
		st_findings_free(l->v, l->n);
		return -1;
	}
	if (l->n)
		qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_finding);
	int keep = max < l->n ? (max > 0 ? max : 0) : l->n;
	for (int i = keep; i < l->n; i++)
		free(l->v[i].text);
	if (keep == 0) {
		free(l->v);
		return 0;
	}
	*out = l->v;
	return keep;
}

int st_feedback_ncu(const st_timeline_summary *s, const st_ncu_kernel *ncu, int n_ncu, int max,
                    st_finding **out)
{
	*out = NULL;
	flist l = { 0 };
	rule_ncu(s, ncu, n_ncu, &l);
	return ranked(&l, max, out);
}

static double field(const json_t *o, const char *k)
{
	const json_t *x = json_object_get(o, k);
	return json_is_number(x) ? json_number_value(x) : -1;
}

st_ncu_kernel *st_ncu_kernels_from_json(const json_t *kernels, int *n)
{
	*n = 0;
	size_t m = json_array_size(kernels);
	st_ncu_kernel *v = m ? calloc(m, sizeof *v) : NULL;
	if (!v)
		return NULL;
	size_t i;
	const json_t *k;
	json_array_foreach(kernels, i, k) {
		st_ncu_kernel *o = &v[i];
		o->name = (char *)json_string_value(json_object_get(k, "name"));
		o->duration_us = field(k, "duration_us");
		o->dram_pct = field(k, "dram_pct");
		o->sm_pct = field(k, "sm_pct");
		o->occupancy_pct = field(k, "occupancy_pct");
		o->tensor_pct = field(k, "tensor_pct");
		o->l1_hit_pct = field(k, "l1_hit_pct");
		o->l2_hit_pct = field(k, "l2_hit_pct");
		o->regs = (int)field(k, "registers");
		double ld = field(k, "local_loads"), st = field(k, "local_stores");
		o->local_insts = (int64_t)((ld > 0 ? ld : 0) + (st > 0 ? st : 0));
		o->issue_pct = field(k, "issue_pct");
		const st_ncu_stall *top;
		if (st_ncu_top_stalls(k, &top, &o->top_stall_ratio, 1)) {
			o->top_stall = top->what;
			o->top_stall_advice = top->advice;
		}
	}
	*n = (int)m;
	return v;
}

static int cmp_finding(const void *x, const void *y)
{
	const st_finding *p = x, *q = y;
	if (p->weight != q->weight)
		return (p->weight < q->weight) - (p->weight > q->weight);
	return strcmp(p->text, q->text);
}

/* Returns -1, with *out NULL, only when memory ran out. */
int st_feedback(const st_timeline *t, const st_timeline_summary *s, const st_roofline *roof,
                const st_ncu_kernel *ncu, int n_ncu, int max, st_finding **out)
{
	*out = NULL;
	flist l = { 0 };
	rule_unfused(s, &l);
	rule_gaps(s, &l);
	rule_gap_pair(s, &l);
	rule_memset_gaps(s, &l);
	rule_host(s, &l);
	rule_copies(t, s, &l);
	rule_syncs(t, s, &l);
	rule_small_grids(s, &l);
	rule_roofline(roof, &l);
	rule_ncu(s, ncu, n_ncu, &l);
	return ranked(&l, max, out);
}

void st_findings_free(st_finding *f, int n)
{
	if (!f)
		return;
	for (int i = 0; i < n; i++)
		free(f[i].text);
	free(f);
}
