/* Host backend: solutions are C shared objects working on host memory; "device" buffers are
 * malloc'd, the stream is NULL, and a sample is CPU wall time. It lets CI drive the whole
 * parent/runner/compare/timing pipeline on a machine without a GPU. */
#include "backend.h"
#include "common/digest.h"
#include "common/proto.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "runner_gen.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define HAVE_CLFLUSH 1
#else
/* Without a line flush: a buffer of twice the last-level cache, written before each call. */
static unsigned char *flush_buf;
static size_t flush_len;
#endif

static void cpu_model(char *out, size_t len)
{
	snprintf(out, len, "host CPU");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		char *colon = strchr(line, ':');
		if (!strncmp(line, "model name", 10) && colon) {
			colon += 2;
			colon[strcspn(colon, "\n")] = 0;
			snprintf(out, len, "host CPU (%s)", colon);
			break;
		}
	}
	fclose(f);
}

int rb_open(json_t *info, char *err, size_t len)
{
	long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
	long llc = l3 > 0 ? l3 : l2 > 0 ? l2 : 8L << 20;
#ifndef HAVE_CLFLUSH
	flush_len = (size_t)llc * 2;
	if (flush_len > (64u << 20))
		flush_len = 64u << 20;
	flush_buf = malloc(flush_len);
	if (!flush_buf) {
		snprintf(err, len, "out of host memory for the cache-flush buffer");
		return -1;
	}
#else
	(void)err;
	(void)len;
#endif
	char model[300];
	cpu_model(model, sizeof model);
	json_object_set_new(info, "backend", json_string("host"));
	json_object_set_new(info, "device", json_string(model));
	json_object_set_new(info, "arch", json_string("host"));
	json_object_set_new(info, "uuid", json_string("host"));
	json_object_set_new(info, "sms", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
	json_object_set_new(info, "l2_bytes", json_integer(llc));
	json_object_set_new(info, "mem_bytes",
	                    json_integer((json_int_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE)));
	return 0;
}

void rb_close(void)
{
#ifndef HAVE_CLFLUSH
	free(flush_buf);
	flush_buf = NULL;
#endif
}

cudaStream_t rb_stream(void)
{
	return NULL;
}

int rb_alloc(void **p, size_t bytes, char *err, size_t len)
{
	*p = malloc(bytes);
	if (!*p) {
		snprintf(err, len, "out of memory: cannot allocate %zu bytes", bytes);
		return -1;
	}
	return 0;
}

void rb_free(void *p)
{
	free(p);
}

int rb_fill(void *dst, st_dtype dt, int64_t n, const rb_init *init, uint64_t seed, char *err,
            size_t len)
{
	(void)err;
	(void)len;
	st_gen_host(dst, dt, n, init, seed);
	return 0;
}

int rb_upload(void *dst, const void *src, size_t bytes, char *err, size_t len)
{
	(void)err;
	(void)len;
	memcpy(dst, src, bytes);
	return 0;
}

int rb_download(void *dst, const void *src, size_t bytes, char *err, size_t len)
{
	(void)err;
	(void)len;
	memcpy(dst, src, bytes);
	return 0;
}

int rb_poison(void *dst, size_t bytes, char *err, size_t len)
{
	(void)err;
	(void)len;
	memset(dst, 0xff, bytes);
	return 0;
}

/* The host computes each call's sums at once: there is no device to overlap with. */
static uint64_t *g_sums;
static size_t g_sums_cap;

int rb_digest_begin(int calls, int n_spans, char *err, size_t len)
{
	size_t need = (size_t)calls * (size_t)n_spans;
	if (need > g_sums_cap) {
		uint64_t *p = realloc(g_sums, need * sizeof *p);
		if (!p) {
			snprintf(err, len, "out of memory for %zu digest sums", need);
			return -1;
		}
		g_sums = p;
		g_sums_cap = need;
	}
	return 0;
}

int rb_digest_add(int call, const rb_span *spans, int n_spans, char *err, size_t len)
{
	(void)err;
	(void)len;
	for (int k = 0; k < n_spans; k++)
		g_sums[(size_t)call * (size_t)n_spans + (size_t)k] =
			st_digest_sum(spans[k].p, spans[k].bytes);
	return 0;
}

int rb_digest_end(int calls, int n_spans, uint64_t *sums, char *err, size_t len)
{
	(void)err;
	(void)len;
	memcpy(sums, g_sums, (size_t)calls * (size_t)n_spans * sizeof *sums);
	return 0;
}

int rb_check(const char *after, int *fatal, char *err, size_t len)
{
	(void)after;
	(void)err;
	(void)len;
	*fatal = 0;
	return 0;
}

/* This thread's CPU time: what a call cost the runner's one thread, its waits for a CPU left out
 * (the parent's clock bound takes a trusted runner's figure for the calls off what the kernel
 * counts for the whole batch, and what is left is the harness's own work, clock_bound.h). */
static double thread_cpu_ms(void)
{
	struct timespec t;
	return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) ? -1 : t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The call's data out of every cache level of every core: its lines flushed, work in proportion
 * to the data, as the call's own. A flush of a buffer twice the last-level cache (the GPU's way)
 * cost milliseconds a call whatever the task, and what it cost differed between two runner
 * processes by up to a fifth: the parent's clock had to let a quarter of it pass as noise
 * (vx_harness_share), more than any host call of the suite takes, so a runner whose clock lied
 * could hide all of a fast call's work (tests/redteam/host/slow_clock_fast_call.c). */
static void make_cold(const rb_span *a, int na, const rb_span *b, int nb)
{
#ifdef HAVE_CLFLUSH
	for (int k = 0; k < na + nb; k++) {
		const rb_span *sp = k < na ? &a[k] : &b[k - na];
		uintptr_t p = (uintptr_t)sp->p & ~(uintptr_t)63, end = (uintptr_t)sp->p + sp->bytes;
		for (; sp->bytes && p < end; p += 64)
			_mm_clflush((const void *)p);
	}
	_mm_mfence();
#else
	static unsigned char v;
	(void)a, (void)na, (void)b, (void)nb;
	memset(flush_buf, ++v, flush_len);
#endif
}

int rb_time_sample(rb_run_fn fn, void *arg, const rb_span *poison, int n_poison,
                   const rb_span *cold, int n_cold, st_sample *s, char *err, size_t len)
{
	for (int i = 0; i < n_poison; i++)
		if (rb_poison(poison[i].p, poison[i].bytes, err, len))
			return -1;
	make_cold(poison, n_poison, cold, n_cold);
	double c0 = thread_cpu_ms(), t0 = st_now_s() * 1e3;
	int rc = fn(arg);
	double t1 = st_now_s() * 1e3, c1 = thread_cpu_ms();
	s->ms = s->wall_ms = t1 - t0;
	s->cpu_ms = c0 >= 0 && c1 >= c0 ? c1 - c0 : -1;
	s->sm_mhz = 0;
	s->throttled = 0;
	return rc;
}

void rb_sample_clocks(st_sample *s)
{
	(void)s; /* no clock to read: rb_time_sample left them at 0 */
}

int rb_profiler_load(char *err, size_t len)
{
	snprintf(err, len, "profiling needs the CUDA backend (CUPTI)");
	return -1;
}

int rb_profile(rb_run_fn fn, void *arg, json_t *out, int *fn_rc, char *err, size_t len)
{
	(void)fn;
	(void)arg;
	(void)out;
	*fn_rc = 0;
	return rb_profiler_load(err, len);
}

/* GB/s of copying `bytes` from src to dst `reps` times a round, counted as both directions:
 * the best of five rounds. A byte of dst is read afterwards, so the copies are not dead stores. */
static double copy_gbs(unsigned char *dst, const unsigned char *src, size_t bytes, int reps)
{
	double best = 1e30;
	for (int r = 0; r < 5; r++) {
		double t0 = st_now_s() * 1e3;
		for (int i = 0; i < reps; i++)
			memcpy(dst, src, bytes);
		double t = st_now_s() * 1e3 - t0;
		if (t > 0 && t < best)
			best = t;
	}
	volatile unsigned char keep = dst[0] ^ dst[bytes - 1];
	(void)keep;
	return best < 1e30 ? 2.0 * bytes * reps / (best * 1e-3) / 1e9 : 0;
}

/* The host's stand-in for the GPU's L2 figure: copies between two 64 KiB halves of a buffer that
 * stays in any CPU's L2 (past its L1). 0 when the buffer cannot be had. */
static double host_l2_gbs(void)
{
	size_t half = 64u << 10;
	unsigned char *buf = malloc(2 * half);
	if (!buf)
		return 0;
	memset(buf, 3, 2 * half);
	double gbs = copy_gbs(buf + half, buf, half, 2000);
	free(buf);
	return gbs;
}

/* The host's stand-in for the special-function rate: the C library's expf and logf, eight
 * independent chains of x = log(e^x), in tera-operations/s. */
static double host_sfu_tops(void)
{
	float x[8] = {0.25f, 0.28f, 0.31f, 0.34f, 0.37f, 0.4f, 0.43f, 0.46f};
	long iters = 1000000;
	double t0 = st_now_s();
	for (long i = 0; i < iters; i++)
		for (int k = 0; k < 8; k++)
			x[k] = logf(expf(x[k]));
	double t = st_now_s() - t0;
	volatile float sink = x[0] + x[7];
	(void)sink;
	return t > 0 ? 2.0 * 8 * iters / t / 1e12 : 0;
}

int rb_probe_us(double *us, char *err, size_t len)
{
	(void)err;
	(void)len;
	*us = 0;
	return 0;
}

int rb_peaks(json_t *out, char *err, size_t len)
{
	size_t bytes = 64u << 20;
	unsigned char *a = malloc(bytes), *b = malloc(bytes);
	if (!a || !b) {
		free(a);
		free(b);
		snprintf(err, len, "out of memory for the bandwidth probe");
		return -1;
	}
	memset(a, 1, bytes);
	memset(b, 2, bytes);
	double bw = copy_gbs(b, a, bytes, 1);
	/* A dependent-free multiply-add loop the compiler cannot fold: the scalar fp32 rate. */
	volatile float sink;
	float x[8] = {1, 1.1f, 1.2f, 1.3f, 1.4f, 1.5f, 1.6f, 1.7f};
	long iters = 20000000;
	double t0 = st_now_s() * 1e3;
	for (long i = 0; i < iters; i++)
		for (int k = 0; k < 8; k++)
			x[k] = x[k] * 0.9999f + 0.0001f;
	double tf = st_now_s() * 1e3 - t0;
	sink = x[0] + x[7];
	(void)sink;
	double fp32 = 2.0 * 8 * iters / (tf * 1e-3) / 1e12;
	json_object_set_new(out, "bw_gbs", json_real(bw));
	double l2 = host_l2_gbs();
	json_object_set_new(out, "l2_gbs", l2 > 0 ? json_real(l2) : json_null());
	double sfu = host_sfu_tops();
	json_object_set_new(out, "sfu", sfu > 0 ? json_real(sfu) : json_null());
	/* one thread runs a host solution: no grid to synchronise, no bound */
	json_object_set_new(out, "sync_us", json_null());
	json_object_set_new(out, "fp32", json_real(fp32));
	json_object_set_new(out, "fp64", json_real(fp32 / 2));
	json_object_set_new(out, "tf32", json_real(fp32));
	json_object_set_new(out, "fp16", json_real(fp32));
	json_object_set_new(out, "bf16", json_real(fp32));
	json_object_set_new(out, "int", json_real(fp32));
	json_object_set_new(out, "fp8", json_null());
	json_object_set_new(out, "version", json_integer(ST_PEAKS_VERSION));
	free(a);
	free(b);
	return 0;
}

void rb_range_push(const char *name)
{
	(void)name; /* no range tool on the host backend */
}

void rb_range_pop(void)
{
}
