/* What a runner needs from the machine it runs solutions on. Each runner binary links exactly one
 * implementation: backend_host.c (host memory, C solutions) or backend_cuda.c (one GPU). */
#ifndef ST_RUNNER_BACKEND_H
#define ST_RUNNER_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "stitch/solution.h"
#include "task/task.h"
#include "stitch/timing.h"

/* An elementwise init, resolved to numbers (randint bounds already evaluated). */
typedef struct rb_init {
	st_dist dist;
	double a, b;
	int64_t lo, hi;
} rb_init;

/* Open the device; fill `info` with backend, device, arch, sms, l2_bytes, mem_bytes, uuid. */
int rb_open(json_t *info, char *err, size_t len);
void rb_close(void);
cudaStream_t rb_stream(void);

int rb_alloc(void **p, size_t bytes, char *err, size_t len);
void rb_free(void *p);
/* Elementwise generation of n elements on the device (or host), from seed. */
int rb_fill(void *dst, st_dtype dt, int64_t n, const rb_init *init, uint64_t seed, char *err,
            size_t len);
int rb_upload(void *dst, const void *src, size_t bytes, char *err, size_t len);
int rb_download(void *dst, const void *src, size_t bytes, char *err, size_t len);
/* Fill with 0xFF bytes: NaN for every float type, -1 for signed integers. */
int rb_poison(void *dst, size_t bytes, char *err, size_t len);
/* Wait for all device work and report any fault (sticky errors included). 0 when clean;
 * otherwise *fatal says whether the device context is lost and the runner must exit. */
int rb_check(const char *after, int *fatal, char *err, size_t len);

typedef int (*rb_run_fn)(void *arg);
/* Memory to poison before a timed call. */
typedef struct rb_span {
	void *p;
	size_t bytes;
} rb_span;
/* One timed sample: wait for the work queued so far (the fresh inputs), poison the n_poison
 * spans, make the call's data cold, time fn on the stream, sync the whole device, record wall
 * time (from fn's start) and clocks. Cold: the GPU flushes its whole L2 (left out when the
 * poison covers twice its size); the host evicts the lines of the poisoned outputs and of the
 * n_cold spans (the call's params and inputs) from every cache level, work in proportion to the
 * call's data. Returns fn's non-zero result, or -1 with err on a device fault. The clocks are
 * left at 0 for rb_sample_clocks. */
int rb_time_sample(rb_run_fn fn, void *arg, const rb_span *poison, int n_poison,
                   const rb_span *cold, int n_cold, st_sample *s, char *err, size_t len);
/* The device's clock and throttle state into a sample rb_time_sample took: read after the GPU's
 * next work is queued (an NVML read is host time the GPU would otherwise idle through), some us
 * after the call ends. The host backend has none: left at 0. */
void rb_sample_clocks(st_sample *s);

/* The digests a timing batch commits (common/digest.h): rb_digest_begin makes room for `calls`
 * calls of n_spans output spans each; rb_digest_add queues the word sums of call `call`'s spans,
 * after its sample and outside its timed window, without waiting for them (on the GPU they run
 * while the host prepares the next call, beside the next call's fresh inputs, and end before its
 * poison); rb_digest_end waits and copies every sum out into
 * sums[call * n_spans + k]. 0, or -1 with err on a device fault. */
int rb_digest_begin(int calls, int n_spans, char *err, size_t len);
int rb_digest_add(int call, const rb_span *spans, int n_spans, char *err, size_t len);
int rb_digest_end(int calls, int n_spans, uint64_t *sums, char *err, size_t len);

/* Load the profiler's library (before the sandbox). 0, or -1 with why. */
int rb_profiler_load(char *err, size_t len);
/* Flush the cache, then run fn once under the profiler; fill out with the timeline ("acts",
 * "dropped", "run_wall_us", "run_event_us"). *fn_rc is fn's result. 0, or -1 with err. */
int rb_profile(rb_run_fn fn, void *arg, json_t *out, int *fn_rc, char *err, size_t len);

/* A named range around the first st_run of a correctness run, for a profiler that filters by
 * range (Nsight Compute's --nvtx-include "stitch_st_run/"); costs nothing when no tool listens. */
void rb_range_push(const char *name);
void rb_range_pop(void);

/* One empty kernel on the runner's stream, launched and waited for: *us is what that took on
 * the host's clock. Some microseconds on a GPU no other context holds; while another context's
 * kernel runs, the GPU gives this one a time slice only when the other's ends (a millisecond or
 * more). The host backend has no device: 0. 0, or -1 with err on a device fault. */
int rb_probe_us(double *us, char *err, size_t len);

/* Measure the machine's peaks into out: bw_gbs, fp32/tf32/fp16/bf16/fp64 in TFLOP/s. */
int rb_peaks(json_t *out, char *err, size_t len);

#endif
