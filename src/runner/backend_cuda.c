/* CUDA backend: one GPU, one non-blocking stream handed to the solution, device buffers from
 * cudaMalloc, cold-L2 samples timed with events on the solution's stream beside host wall time
 * to a whole-device sync, and SM clocks / throttle reasons read through NVML (loaded at run
 * time, so the runner works where NVML is missing). */
#include "backend.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/proto.h"
#include "cuda_kernels.h"
#include "profile_cupti.h"
#include "common/arch.h"

static cudaStream_t g_stream;
static cudaEvent_t g_ev0, g_ev1;
static void *g_flush;
static size_t g_flush_len;
static unsigned g_flush_val;
static cudaEvent_t g_ev_prep;
static cudaStream_t g_dstream; /* the digests' (rb_digest_add) */
static cudaEvent_t g_ev_called, g_ev_digested;
static int g_fill_blocks; /* blocks of 1024 threads that take every SM's thread slots */
static int g_sms;         /* the device's SMs */
static int g_coop;        /* whether it launches cooperative (grid-synchronised) kernels */
static size_t g_l2_bytes; /* the L2's size (cudaDeviceProp), 0 when the device does not say */

/* NVML, resolved by hand: the toolkit ships no nvml.h here and the library lives with the driver. */
typedef void *nvml_dev;
static struct {
	void *dl;
	nvml_dev dev;
	int (*clock)(nvml_dev, int, unsigned *);
	int (*reasons)(nvml_dev, unsigned long long *);
} g_nvml;

#define NVML_CLOCK_SM 1
/* HW slowdown, SW thermal, HW thermal, HW power brake: the clock was forced down mid-sample. */
#define NVML_THROTTLE_MASK (0x8ull | 0x20ull | 0x40ull | 0x80ull)

static int cuda_fail(cudaError_t e, const char *what, char *err, size_t len)
{
	snprintf(err, len, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
	return -1;
}

#define CK(call, what)                                                                          \
	do {                                                                                        \
		cudaError_t e_ = (call);                                                                \
		if (e_ != cudaSuccess)                                                                  \
			return cuda_fail(e_, what, err, len);                                               \
	} while (0)

/* NVML's own start (library load, nvmlInit) takes as long as a share of the CUDA context's, and
 * the two do not depend on each other: it runs on a thread of its own while the context starts. */
static struct {
	pthread_t thread;
	int started;
	int (*by_bus)(const char *, nvml_dev *);
	int ok;
} g_nvml_start;

static void *nvml_start(void *arg)
{
	(void)arg;
	g_nvml.dl = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!g_nvml.dl)
		return NULL;
	int (*init)(void) = (int (*)(void))(uintptr_t)dlsym(g_nvml.dl, "nvmlInit_v2");
	g_nvml_start.by_bus = (int (*)(const char *, nvml_dev *))(uintptr_t)dlsym(
		g_nvml.dl, "nvmlDeviceGetHandleByPciBusId_v2");
	g_nvml.clock = (int (*)(nvml_dev, int, unsigned *))(uintptr_t)dlsym(g_nvml.dl,
	                                                                     "nvmlDeviceGetClockInfo");
	void *r = dlsym(g_nvml.dl, "nvmlDeviceGetCurrentClocksEventReasons");
	if (!r)
		r = dlsym(g_nvml.dl, "nvmlDeviceGetCurrentClocksThrottleReasons");
	g_nvml.reasons = (int (*)(nvml_dev, unsigned long long *))(uintptr_t)r;
	g_nvml_start.ok = init && g_nvml_start.by_bus && g_nvml.clock && init() == 0;
	return NULL;
}

/* After the context: the started NVML's handle for CUDA device `device`, or no clock readings. */
static void nvml_finish(int device)
{
	char bus[64];
	if (g_nvml_start.started)
		pthread_join(g_nvml_start.thread, NULL);
	else
		nvml_start(NULL);
	if (!g_nvml_start.ok || cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess ||
	    g_nvml_start.by_bus(bus, &g_nvml.dev) != 0) {
		g_nvml.clock = NULL;
		g_nvml.reasons = NULL;
	}
}

/* The runner's own kernels load at their first launch (CUDA's lazy loading), and a load waits on
 * the lock the driver holds host-wide while any process creates a context: a candidate's runner,
 * always fresh, loaded the fill kernels in its first set-up and the timed call's fill in its
 * first timed sample, while its verify held the GPU (alone, for the latter). Each is launched
 * once here instead, on a few bytes of the flush buffer, while the runner starts (a spare, off
 * any verify's path). */
static int load_kernels(char *err, size_t len)
{
	for (int dt = ST_F32; dt <= ST_F8E5M2; dt++)
		for (int dist = 0; dist <= 2; dist++) /* the narrow floats' kernels differ by dist */
			CK((cudaError_t)st_cuda_fill(g_flush, dt, 4, dist, 0, 1, 0, 1, 0, g_stream),
			   "loading the input generator");
	st_prep_span span = {g_flush, 64, 0};
	CK((cudaError_t)st_cuda_prep(&span, 1, 1, g_stream), "loading the timed call's fill");
	CK(cudaMemsetAsync(g_flush, 0xff, 64, g_stream), "loading cudaMemset's kernel");
	CK(cudaStreamSynchronize(g_stream), "loading the runner's kernels");
	return 0;
}

/* The hardware queues its context asked for (CUDA_DEVICE_MAX_CONNECTIONS, documented as 1 to 32,
 * default 8; another value is reported as the default): streams beyond them share queues, which
 * a solution overlapping many streams is timed with. */
static int hw_queues(void)
{
	const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	char *end;
	long q = v && *v ? strtol(v, &end, 10) : 0;
	return q >= 1 && q <= 32 && !*end ? (int)q : 8;
}

int rb_open(json_t *info, char *err, size_t len)
{
	double t0 = st_now_s() * 1e3;
	g_nvml_start.started = pthread_create(&g_nvml_start.thread, NULL, nvml_start, NULL) == 0;
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	double t1 = st_now_s() * 1e3;
	if (e != cudaSuccess || n == 0) {
		snprintf(err, len, "no CUDA GPU found (cudaGetDeviceCount: %s)",
		         e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this CUDA runtime"
		         : e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return -1;
	}
	CK(cudaSetDevice(0), "cudaSetDevice");
	struct cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
	CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking), "cudaStreamCreate");
	CK(cudaEventCreate(&g_ev0), "cudaEventCreate");
	CK(cudaEventCreate(&g_ev1), "cudaEventCreate");
	CK(cudaEventCreate(&g_ev_prep), "cudaEventCreate");
	CK(cudaStreamCreateWithFlags(&g_dstream, cudaStreamNonBlocking), "cudaStreamCreate (digests)");
	CK(cudaEventCreateWithFlags(&g_ev_called, cudaEventDisableTiming), "cudaEventCreate");
	CK(cudaEventCreateWithFlags(&g_ev_digested, cudaEventDisableTiming), "cudaEventCreate");
	/* Twice the L2, so that every line a sample could reuse is evicted before it starts. */
	g_l2_bytes = p.l2CacheSize > 0 ? (size_t)p.l2CacheSize : 0;
	g_flush_len = 2 * (size_t)(p.l2CacheSize > 0 ? p.l2CacheSize : (64 << 20));
	CK(cudaMalloc(&g_flush, g_flush_len), "cudaMalloc (L2 flush buffer)");
	g_fill_blocks = st_cuda_prep_blocks(p.multiProcessorCount, p.maxThreadsPerMultiProcessor);
	g_sms = p.multiProcessorCount;
	g_coop = p.cooperativeLaunch;
	double t2 = st_now_s() * 1e3;
	if (load_kernels(err, len))
		return -1;
	double t3 = st_now_s() * 1e3;
	nvml_finish(0);
	double t4 = st_now_s() * 1e3;
	/* runner_main moves these into the hello's start_ms */
	json_object_set_new(info, "open_ms", json_pack("{s:f,s:f,s:f,s:f}", "driver", t1 - t0,
	                                               "context", t2 - t1, "kernels", t3 - t2,
	                                               "nvml_wait", t4 - t3));

	char arch[32], uuid[64];
	st_arch_from_cc(p.major, p.minor, arch, sizeof arch);
	const unsigned char *u = (const unsigned char *)p.uuid.bytes;
	snprintf(uuid, sizeof uuid,
	         "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
	         u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
	int driver = 0, runtime = 0;
	cudaDriverGetVersion(&driver);
	cudaRuntimeGetVersion(&runtime);
	json_object_set_new(info, "backend", json_string("cuda"));
	json_object_set_new(info, "device", json_string(p.name));
	json_object_set_new(info, "arch", json_string(arch));
	json_object_set_new(info, "cc", json_integer(p.major * 10 + p.minor));
	json_object_set_new(info, "uuid", json_string(uuid));
	json_object_set_new(info, "sms", json_integer(p.multiProcessorCount));
	json_object_set_new(info, "l2_bytes", json_integer(p.l2CacheSize));
	json_object_set_new(info, "mem_bytes", json_integer((json_int_t)p.totalGlobalMem));
	json_object_set_new(info, "driver", json_integer(driver));
	json_object_set_new(info, "runtime", json_integer(runtime));
	json_object_set_new(info, "nvml", json_boolean(g_nvml.clock != NULL));
	json_object_set_new(info, "hw_queues", json_integer(hw_queues()));
	/* where the GPU sits, so that a service can keep its work on the GPU's own CPUs */
	char bus[64];
	if (cudaDeviceGetPCIBusId(bus, sizeof bus, 0) == cudaSuccess)
		json_object_set_new(info, "pci_bus", json_string(bus));
	return 0;
}

void rb_close(void)
{
	cudaFree(g_flush);
	cudaEventDestroy(g_ev0);
	cudaEventDestroy(g_ev1);
	cudaEventDestroy(g_ev_prep);
	cudaEventDestroy(g_ev_called);
	cudaEventDestroy(g_ev_digested);
	cudaStreamDestroy(g_dstream);
	cudaStreamDestroy(g_stream);
}

cudaStream_t rb_stream(void)
{
	return g_stream;
}

int rb_alloc(void **p, size_t bytes, char *err, size_t len)
{
	cudaError_t e = cudaMalloc(p, bytes);
	if (e == cudaSuccess)
		return 0;
	/* Answered here: left as the last error, a refusal that the caller got past (dev_keep's
	 * retry, a runner going without its arena) would fail the next run's check. */
	cudaGetLastError();
	return cuda_fail(e, "cudaMalloc", err, len);
}

void rb_free(void *p)
{
	cudaFree(p);
}

int rb_fill(void *dst, st_dtype dt, int64_t n, const rb_init *init, uint64_t seed, char *err,
            size_t len)
{
	CK((cudaError_t)st_cuda_fill(dst, (int)dt, n, (int)init->dist, init->a, init->b, init->lo,
	                             init->hi, seed, g_stream),
	   "generating inputs");
	return 0;
}

int rb_upload(void *dst, const void *src, size_t bytes, char *err, size_t len)
{
	CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g_stream), "cudaMemcpy to device");
	CK(cudaStreamSynchronize(g_stream), "cudaMemcpy to device");
	return 0;
}

int rb_download(void *dst, const void *src, size_t bytes, char *err, size_t len)
{
	CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g_stream), "cudaMemcpy to host");
	CK(cudaStreamSynchronize(g_stream), "cudaMemcpy to host");
	return 0;
}

int rb_poison(void *dst, size_t bytes, char *err, size_t len)
{
	CK(cudaMemsetAsync(dst, 0xff, bytes, g_stream), "poisoning outputs");
	return 0;
}

/* One device array of sums for a batch, zeroed once; each call's kernel adds into its own row,
 * queued behind the call with no wait on a stream of its own, so it runs while the host prepares
 * the next call and beside that call's fresh inputs: a timed batch alternates two buffer sets, so
 * the digest reads the outputs of one while the fill writes the inputs of the other. (On the
 * H200 a softmax verify's candidate batches took 4-5 us a call less so than with the digest
 * ahead of the fill on one stream, bench/RESULTS.md session 27.) The timed stream waits for it
 * before the next call's poison (rb_time_sample) and before the sums are copied out: nothing of
 * it runs in a timed window. */
static unsigned long long *g_sums;
static size_t g_sums_cap;
static int g_digest_queued;

static int digest_join(char *err, size_t len)
{
	if (g_digest_queued)
		CK(cudaStreamWaitEvent(g_stream, g_ev_digested, 0), "waiting for the digest");
	g_digest_queued = 0;
	return 0;
}

int rb_digest_begin(int calls, int n_spans, char *err, size_t len)
{
	size_t need = (size_t)calls * (size_t)n_spans;
	if (need > g_sums_cap) {
		if (g_sums)
			cudaFree(g_sums);
		g_sums = NULL;
		g_sums_cap = 0;
		CK(cudaMalloc((void **)&g_sums, need * sizeof *g_sums), "digest sums");
		g_sums_cap = need;
	}
	CK(cudaMemsetAsync(g_sums, 0, need * sizeof *g_sums, g_stream), "digest sums");
	return 0;
}

int rb_digest_add(int call, const rb_span *spans, int n_spans, char *err, size_t len)
{
	unsigned long long *row = g_sums + (size_t)call * (size_t)n_spans;
	CK(cudaEventRecord(g_ev_called, g_stream), "cudaEventRecord");
	CK(cudaStreamWaitEvent(g_dstream, g_ev_called, 0), "queueing the digest");
	for (int at = 0; at < n_spans; at += ST_PREP_SPANS) {
		int m = n_spans - at < ST_PREP_SPANS ? n_spans - at : ST_PREP_SPANS;
		st_prep_span sp[ST_PREP_SPANS];
		for (int k = 0; k < m; k++)
			sp[k] = (st_prep_span){spans[at + k].p, spans[at + k].bytes, 0};
		CK((cudaError_t)st_cuda_digest(sp, m, row + at, g_fill_blocks, g_dstream), "digest");
	}
	CK(cudaEventRecord(g_ev_digested, g_dstream), "cudaEventRecord");
	g_digest_queued = 1;
	return 0;
}

int rb_digest_end(int calls, int n_spans, uint64_t *sums, char *err, size_t len)
{
	if (digest_join(err, len))
		return -1;
	CK(cudaMemcpyAsync(sums, g_sums, (size_t)calls * (size_t)n_spans * sizeof *sums,
	                   cudaMemcpyDeviceToHost, g_stream), "digest copy");
	CK(cudaStreamSynchronize(g_stream), "digest");
	return 0;
}

int rb_check(const char *after, int *fatal, char *err, size_t len)
{
	*fatal = 0;
	cudaError_t e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaGetLastError();
	if (e == cudaSuccess)
		return 0;
	/* Errors from a kernel (illegal address, trap, ...) poison the context for good. */
	*fatal = e != cudaErrorMemoryAllocation && e != cudaErrorInvalidValue &&
	         e != cudaErrorInvalidConfiguration;
	snprintf(err, len, "CUDA error after %s: %s (%s)", after, cudaGetErrorString(e),
	         cudaGetErrorName(e));
	return -1;
}

/* One more span for the fill in front of a timed call; a full set goes out as one launch first
 * (a task with more outputs than one launch takes). */
static int prep_add(st_prep_span *spans, int *n, st_prep_span span, char *err, size_t len)
{
	if (*n == ST_PREP_SPANS) {
		CK((cudaError_t)st_cuda_prep(spans, *n, g_fill_blocks, g_stream), "poisoning outputs");
		*n = 0;
	}
	spans[(*n)++] = span;
	return 0;
}

int rb_time_sample(rb_run_fn fn, void *arg, const rb_span *poison, int n_poison,
                   const rb_span *cold, int n_cold, st_sample *s, char *err, size_t len)
{
	(void)cold; /* the whole L2 is flushed */
	(void)n_cold;
	/* The poison and the flush are queued behind the fresh inputs as the GPU work in front of
	 * the start event, and the clock starts once the inputs are written: the host's work to
	 * launch the call's first kernels (a few us for a kernel, 10-30 for a cuBLASLt matmul,
	 * varying with the core and the process) is done while the fill runs, neither timed nor a
	 * source of spread between runs. Host work beyond it leaves the GPU waiting inside the timed
	 * window, so a solution whose launches cannot keep up still pays. (triton's do_bench gets
	 * the same from its flush between its sync and its start event.) The fill holds every SM,
	 * so no kernel of another stream runs untimed in front of the window; its GPU time is taken
	 * off the wall time. Waiting on the inputs' event rather than for the whole fill saves a
	 * host round trip per sample, in which the GPU would idle. */
	st_prep_span spans[ST_PREP_SPANS];
	int n = 0;
	size_t written = 0;
	if (digest_join(err, len))
		return -1;
	CK(cudaEventRecord(g_ev_prep, g_stream), "cudaEventRecord");
	for (int i = 0; i < n_poison; i++) {
		if (prep_add(spans, &n, (st_prep_span){poison[i].p, poison[i].bytes, 0xffu}, err, len))
			return -1;
		written += poison[i].bytes;
	}
	if (written < g_flush_len &&
	    prep_add(spans, &n, (st_prep_span){g_flush, g_flush_len, ++g_flush_val}, err, len))
		return -1;
	if (n > 0)
		CK((cudaError_t)st_cuda_prep(spans, n, g_fill_blocks, g_stream),
		   "poisoning outputs and flushing the L2");
	CK(cudaEventRecord(g_ev0, g_stream), "cudaEventRecord");
	CK(cudaEventSynchronize(g_ev_prep), "fresh inputs");
	double t0 = st_now_s() * 1e3;
	int rc = fn(arg);
	cudaError_t rec = cudaEventRecord(g_ev1, g_stream);
	cudaError_t e = cudaDeviceSynchronize();
	double t1 = st_now_s() * 1e3;
	if (e != cudaSuccess)
		return cuda_fail(e, "CUDA error during a timed st_run", err, len);
	if (rc)
		return rc;
	CK(rec, "cudaEventRecord");
	float ms = 0;
	CK(cudaEventElapsedTime(&ms, g_ev0, g_ev1), "cudaEventElapsedTime");
	float prep_ms = 0;
	CK(cudaEventElapsedTime(&prep_ms, g_ev_prep, g_ev0), "cudaEventElapsedTime");
	s->ms = ms;
	s->cpu_ms = -1; /* the GPU's work is not the host thread's */
	/* The clock started while the fill ran, some us into it (or, on a host slow to wake, after
	 * it); the call's wall time is never less than its GPU time. */
	s->wall_ms = t1 - t0 - prep_ms > ms ? t1 - t0 - prep_ms : ms;
	s->sm_mhz = 0;
	s->throttled = 0;
	return 0;
}

void rb_sample_clocks(st_sample *s)
{
	unsigned mhz;
	unsigned long long reasons;
	if (g_nvml.clock && g_nvml.clock(g_nvml.dev, NVML_CLOCK_SM, &mhz) == 0)
		s->sm_mhz = (int)mhz;
	if (g_nvml.reasons && g_nvml.reasons(g_nvml.dev, &reasons) == 0)
		s->throttled = (reasons & NVML_THROTTLE_MASK) != 0;
}

int rb_profiler_load(char *err, size_t len)
{
	return st_cupti_load(err, len);
}

int rb_profile(rb_run_fn fn, void *arg, json_t *out, int *fn_rc, char *err, size_t len)
{
	*fn_rc = 0;
	CK(cudaMemsetAsync(g_flush, (int)(++g_flush_val & 0xff), g_flush_len, g_stream), "L2 flush");
	CK(cudaStreamSynchronize(g_stream), "L2 flush");
	return st_cupti_profile(fn, arg, g_stream, out, fn_rc, err, len);
}

/* ---- peaks ------------------------------------------------------------------------------------ */

/* cuBLAS is loaded only here: linking it would make every runner start pay for loading a library
 * of hundreds of megabytes that only the once-per-device peak probe uses. */
static struct {
	void *dl;
	cublasStatus_t (*create)(cublasHandle_t *);
	cublasStatus_t (*destroy)(cublasHandle_t);
	cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
	cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
	                       const void *, const void *, cudaDataType, int, const void *,
	                       cudaDataType, int, const void *, void *, cudaDataType, int,
	                       cublasComputeType_t, cublasGemmAlgo_t);
} g_blas;

static int blas_open(char *err, size_t len)
{
	if (g_blas.dl)
		return 0;
	g_blas.dl = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!g_blas.dl)
		g_blas.dl = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
	if (!g_blas.dl) {
		snprintf(err, len, "cannot load cuBLAS for the peak probe: %s", dlerror());
		return -1;
	}
	*(void **)&g_blas.create = dlsym(g_blas.dl, "cublasCreate_v2");
	*(void **)&g_blas.destroy = dlsym(g_blas.dl, "cublasDestroy_v2");
	*(void **)&g_blas.set_stream = dlsym(g_blas.dl, "cublasSetStream_v2");
	*(void **)&g_blas.gemm = dlsym(g_blas.dl, "cublasGemmEx");
	if (!g_blas.create || !g_blas.destroy || !g_blas.set_stream || !g_blas.gemm) {
		snprintf(err, len, "cuBLAS lacks the functions of the peak probe");
		dlclose(g_blas.dl);
		g_blas.dl = NULL;
		return -1;
	}
	return 0;
}

static int time_gemm(cublasHandle_t h, cudaDataType t, cublasComputeType_t ct, int n, void *a,
                     void *b, void *c, double *tflops, char *err, size_t len)
{
	float one = 1, zero = 0;
	double done = 1, dzero = 0;
	const void *alpha = ct == CUBLAS_COMPUTE_64F ? (const void *)&done : (const void *)&one;
	const void *beta = ct == CUBLAS_COMPUTE_64F ? (const void *)&dzero : (const void *)&zero;
	cudaDataType ctype = t == CUDA_R_64F ? CUDA_R_64F : t == CUDA_R_32F ? CUDA_R_32F : t;
	int reps = 5;
	for (int i = 0; i < reps + 2; i++) {
		if (i == 2)
			CK(cudaEventRecord(g_ev0, g_stream), "cudaEventRecord");
		cublasStatus_t st = g_blas.gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, alpha, a, t, n, b,
		                                 t, n, beta, c, ctype, n, ct, CUBLAS_GEMM_DEFAULT);
		if (st != CUBLAS_STATUS_SUCCESS) {
			snprintf(err, len, "cublasGemmEx for the peak probe failed: status %d", (int)st);
			return -1;
		}
	}
	CK(cudaEventRecord(g_ev1, g_stream), "cudaEventRecord");
	CK(cudaEventSynchronize(g_ev1), "peak probe");
	float ms;
	CK(cudaEventElapsedTime(&ms, g_ev0, g_ev1), "cudaEventElapsedTime");
	*tflops = 2.0 * n * (double)n * n * reps / (ms * 1e-3) / 1e12;
	return 0;
}

/* FP8 needs cuBLASLt (cublasGemmEx has no fp8 types) and the "TN" layout fp8 tensor cores want.
 * Loaded the same way as cuBLAS; any failure (an older GPU, an older library) leaves the fp8
 * peak out rather than failing the probe. */
static struct {
	void *dl;
	cublasStatus_t (*create)(cublasLtHandle_t *);
	cublasStatus_t (*destroy)(cublasLtHandle_t);
	cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
	cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
	cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *,
	                           size_t);
	cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t,
	                                int64_t);
	cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
	cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
	                         cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t,
	                         const void *, const void *, cublasLtMatrixLayout_t, void *,
	                         cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
	                         cudaStream_t);
} g_lt;

static int lt_open(void)
{
	if (g_lt.dl)
		return 0;
	g_lt.dl = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!g_lt.dl)
		g_lt.dl = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
	if (!g_lt.dl)
		return -1;
	*(void **)&g_lt.create = dlsym(g_lt.dl, "cublasLtCreate");
	*(void **)&g_lt.destroy = dlsym(g_lt.dl, "cublasLtDestroy");
	*(void **)&g_lt.desc_create = dlsym(g_lt.dl, "cublasLtMatmulDescCreate");
	*(void **)&g_lt.desc_destroy = dlsym(g_lt.dl, "cublasLtMatmulDescDestroy");
	*(void **)&g_lt.desc_set = dlsym(g_lt.dl, "cublasLtMatmulDescSetAttribute");
	*(void **)&g_lt.layout_create = dlsym(g_lt.dl, "cublasLtMatrixLayoutCreate");
	*(void **)&g_lt.layout_destroy = dlsym(g_lt.dl, "cublasLtMatrixLayoutDestroy");
	*(void **)&g_lt.matmul = dlsym(g_lt.dl, "cublasLtMatmul");
	if (!g_lt.create || !g_lt.destroy || !g_lt.desc_create || !g_lt.desc_destroy ||
	    !g_lt.desc_set || !g_lt.layout_create || !g_lt.layout_destroy || !g_lt.matmul) {
		dlclose(g_lt.dl);
		g_lt.dl = NULL;
		return -1;
	}
	return 0;
}

/* D[n,n] (bf16) = A^T B with A, B e4m3, fp32 accumulation; a and b hold random e4m3 bytes, c the
 * output followed by a workspace. TFLOP/s into *tflops; -1 when fp8 is not available here. */
static int time_fp8(int n, void *a, void *b, void *c, size_t c_bytes, double *tflops)
{
	cublasLtHandle_t h = NULL;
	cublasLtMatmulDesc_t desc = NULL;
	cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
	int rc = -1;
	size_t d_bytes = (size_t)n * n * 2, ws = 64u << 20;
	if (lt_open() || d_bytes + ws > c_bytes)
		return -1;
	cublasOperation_t t = CUBLAS_OP_T;
	float one = 1, zero = 0;
	if (g_lt.create(&h) || g_lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
	    g_lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t) ||
	    g_lt.layout_create(&la, CUDA_R_8F_E4M3, n, n, n) ||
	    g_lt.layout_create(&lb, CUDA_R_8F_E4M3, n, n, n) ||
	    g_lt.layout_create(&ld, CUDA_R_16BF, n, n, n))
		goto done;
	int reps = 10;
	for (int i = 0; i < reps + 2; i++) {
		if (i == 2 && cudaEventRecord(g_ev0, g_stream))
			goto done;
		if (g_lt.matmul(h, desc, &one, a, la, b, lb, &zero, c, ld, c, ld, NULL,
		                (char *)c + d_bytes, ws, g_stream))
			goto done;
	}
	float ms;
	if (cudaEventRecord(g_ev1, g_stream) || cudaEventSynchronize(g_ev1) ||
	    cudaEventElapsedTime(&ms, g_ev0, g_ev1))
		goto done;
	*tflops = 2.0 * n * (double)n * n * reps / (ms * 1e-3) / 1e12;
	rc = 0;
done:
	if (la)
		g_lt.layout_destroy(la);
	if (lb)
		g_lt.layout_destroy(lb);
	if (ld)
		g_lt.layout_destroy(ld);
	if (desc)
		g_lt.desc_destroy(desc);
	if (h)
		g_lt.destroy(h);
	cudaGetLastError();
	return rc;
}

/* The L2's read bandwidth in GB/s, 0 where it cannot be measured: a quarter of the L2 (well
 * inside it even where the L2 is split in two halves that may each keep a copy of a line, as on
 * the A100 and H100) read over and over by every thread slot of the device, after a first pass
 * that brings it in. The best of five launches of about 2 GB each, so the launch's own cost is
 * lost in the noise. The SOL floor of a task with cost.roof "l2" divides its L2 bytes by this. */
static double time_l2(const void *buf, float *sink)
{
	size_t bytes = g_l2_bytes / 4 / 4096 * 4096;
	if (bytes < (1u << 20))
		return 0;
	int reps = (int)((2ull << 30) / bytes);
	float best = 1e30f;
	if (st_cuda_l2_read(buf, bytes, 1, g_fill_blocks, sink, g_stream))
		goto fail;
	for (int i = 0; i < 5; i++) {
		float ms;
		if (cudaEventRecord(g_ev0, g_stream) ||
		    st_cuda_l2_read(buf, bytes, reps, g_fill_blocks, sink, g_stream) ||
		    cudaEventRecord(g_ev1, g_stream) || cudaEventSynchronize(g_ev1) ||
		    cudaEventElapsedTime(&ms, g_ev0, g_ev1))
			goto fail;
		if (ms > 0 && ms < best)
			best = ms;
	}
	return best < 1e30f ? (double)bytes * reps / (best * 1e-3) / 1e9 : 0;
fail:
	cudaGetLastError();
	return 0;
}

/* A probe kernel's launch on g_stream (a cudaError_t as int). */
typedef int (*probe_launch)(int iters, float *sink);

static int launch_sfu(int iters, float *sink)
{
	return st_cuda_sfu(iters, g_fill_blocks, sink, g_stream);
}

static int launch_sync(int iters, float *sink)
{
	(void)sink;
	return st_cuda_sync(iters, g_sms, g_stream);
}

/* The best ms of 5 timed launches, after one that warms up; 0 when one cannot be timed. */
static float best_launch_ms(probe_launch launch, int iters, float *sink)
{
	float best = 1e30f;
	for (int i = 0; i < 6; i++) {
		float ms;
		if (cudaEventRecord(g_ev0, g_stream) || launch(iters, sink) ||
		    cudaEventRecord(g_ev1, g_stream) || cudaEventSynchronize(g_ev1) ||
		    cudaEventElapsedTime(&ms, g_ev0, g_ev1)) {
			cudaGetLastError();
			return 0;
		}
		if (i > 0 && ms > 0 && ms < best)
			best = ms;
	}
	return best < 1e30f ? best : 0;
}

/* Tera-operations/s of the special-function unit (MUFU): the probe kernel over every thread
 * slot. 0 when it cannot be timed. */
static double time_sfu(float *sink)
{
	const int iters = 2048;
	float ms = best_launch_ms(launch_sfu, iters, sink);
	double ops = 2.0 * ST_SFU_CHAINS * iters * 1024.0 * g_fill_blocks;
	return ms > 0 ? ops / (ms * 1e-3) / 1e12 : 0;
}

/* Microseconds of one grid-wide barrier with a block on every SM, from launches of 2000 of them
 * (a launch is 0.1 % of that). 0 when the device cannot launch cooperative kernels or it cannot
 * be timed. */
static double time_sync(void)
{
	const int iters = 2000;
	if (!g_coop || g_sms < 1)
		return 0;
	float ms = best_launch_ms(launch_sync, iters, NULL);
	return ms > 0 ? ms * 1e3 / iters : 0;
}

int rb_probe_us(double *us, char *err, size_t len)
{
	double t0 = st_now_s();
	cudaError_t e = (cudaError_t)st_cuda_probe(g_stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(g_stream);
	*us = (st_now_s() - t0) * 1e6;
	return e == cudaSuccess ? 0 : cuda_fail(e, "the quiet probe", err, len);
}

int rb_peaks(json_t *out, char *err, size_t len)
{
	size_t bytes = 1u << 30;
	void *a = NULL, *b = NULL, *c = NULL;
	int rc = -1;
	cublasHandle_t h = NULL;
	if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
	    cudaMalloc(&c, bytes) != cudaSuccess) {
		snprintf(err, len, "cudaMalloc for the peak probe failed");
		goto done;
	}
	rb_init init = {.dist = ST_DIST_NORMAL, .a = 0, .b = 1};
	if (rb_fill(a, ST_F32, (int64_t)(bytes / 4), &init, 1, err, len) ||
	    rb_fill(b, ST_F32, (int64_t)(bytes / 4), &init, 2, err, len))
		goto done;
	float best = 1e30f;
	for (int i = 0; i < 8; i++) {
		if (cudaEventRecord(g_ev0, g_stream) ||
		    cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, g_stream) ||
		    cudaEventRecord(g_ev1, g_stream) || cudaEventSynchronize(g_ev1)) {
			snprintf(err, len, "bandwidth probe failed");
			goto done;
		}
		float ms;
		cudaEventElapsedTime(&ms, g_ev0, g_ev1);
		if (i > 0 && ms < best)
			best = ms;
	}
	json_object_set_new(out, "bw_gbs", json_real(2.0 * bytes / (best * 1e-3) / 1e9));
	double l2 = time_l2(a, (float *)c);
	json_object_set_new(out, "l2_gbs", l2 > 0 ? json_real(l2) : json_null());
	double sfu = time_sfu((float *)c);
	json_object_set_new(out, "sfu", sfu > 0 ? json_real(sfu) : json_null());
	double sync_us = time_sync();
	json_object_set_new(out, "sync_us", sync_us > 0 ? json_real(sync_us) : json_null());
	if (blas_open(err, len))
		goto done;
	if (g_blas.create(&h) != CUBLAS_STATUS_SUCCESS || g_blas.set_stream(h, g_stream)) {
		snprintf(err, len, "cublasCreate failed");
		goto done;
	}
	/* Random operands: zeros run measurably faster on tensor cores. The bf16/fp16 probes reuse
	 * the fp32 random bits reinterpreted, which are finite values of normal magnitude. */
	static const struct {
		const char *name;
		cudaDataType t;
		cublasComputeType_t ct;
		int n;
	} probes[] = {
		{"bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 8192},
		{"fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, 8192},
		{"tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 8192},
		{"fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, 8192},
		{"fp64", CUDA_R_64F, CUBLAS_COMPUTE_64F, 4096},
	};
	if (rb_fill(a, ST_BF16, (int64_t)(bytes / 2), &init, 3, err, len) ||
	    rb_fill(b, ST_BF16, (int64_t)(bytes / 2), &init, 4, err, len))
		goto done;
	for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
		if (probes[i].t == CUDA_R_16F &&
		    (rb_fill(a, ST_F16, (int64_t)(bytes / 2), &init, 5, err, len) ||
		     rb_fill(b, ST_F16, (int64_t)(bytes / 2), &init, 6, err, len)))
			goto done;
		if (probes[i].t == CUDA_R_32F &&
		    (rb_fill(a, ST_F32, (int64_t)(bytes / 4), &init, 7, err, len) ||
		     rb_fill(b, ST_F32, (int64_t)(bytes / 4), &init, 8, err, len)))
			goto done;
		if (probes[i].t == CUDA_R_64F &&
		    (rb_fill(a, ST_F64, (int64_t)(bytes / 8), &init, 9, err, len) ||
		     rb_fill(b, ST_F64, (int64_t)(bytes / 8), &init, 10, err, len)))
			goto done;
		double tf;
		if (time_gemm(h, probes[i].t, probes[i].ct, probes[i].n, a, b, c, &tf, err, len))
			goto done;
		json_object_set_new(out, probes[i].name, json_real(tf));
	}
	json_object_set_new(out, "int", json_real(json_real_value(json_object_get(out, "fp32"))));
	double fp8;
	if (rb_fill(a, ST_F8E4M3, (int64_t)bytes, &init, 11, err, len) ||
	    rb_fill(b, ST_F8E4M3, (int64_t)bytes, &init, 12, err, len))
		goto done;
	json_object_set_new(out, "fp8", time_fp8(8192, a, b, c, bytes, &fp8) ? json_null() : json_real(fp8));
	json_object_set_new(out, "version", json_integer(ST_PEAKS_VERSION));
	rc = 0;
done:
	if (h)
		g_blas.destroy(h);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	if (rc)
		cudaGetLastError();
	return rc;
}

void rb_range_push(const char *name)
{
	nvtxRangePushA(name);
}

void rb_range_pop(void)
{
	nvtxRangePop();
}
