/* The timeline of one st_run, recorded with CUPTI's Activity API inside the CUDA runner: kernels,
 * copies and memsets for the whole call, runtime API calls and synchronisations for the call
 * alone (the runner's own event records and device sync are left out). CUPTI is loaded with
 * dlopen, before the sandbox when the parent asked for profiling, so that runners that never
 * profile never pay for it and a machine without CUPTI still verifies. Records go to the parent
 * as compact arrays (profile/timeline_json.c reads them); dropped records are counted, never
 * hidden. */
#include "profile_cupti.h"
#include "common/clock.h"

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_BYTES (8u << 20)

static struct {
	void *dl;
	CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
	                                  CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*enable)(CUpti_ActivityKind);
	CUptiResult (*disable)(CUpti_ActivityKind);
	CUptiResult (*flush_all)(uint32_t);
	CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
	CUptiResult (*timestamp)(uint64_t *);
	CUptiResult (*result_string)(CUptiResult, const char **);
	CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char **);
	int registered;
} C;

/* Records land here from CUPTI's buffer callbacks; t0 is the host timestamp at st_run's call. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *g_acts;
static uint64_t g_t0, g_t1; /* st_run's call and return; host-side records outside are the runner's */
static int64_t g_dropped;

#define SYM(field, name)                                                                        \
	do {                                                                                        \
		*(void **)&C.field = dlsym(C.dl, name);                                                 \
		if (!C.field) {                                                                         \
			snprintf(err, len, "CUPTI has no %s", name);                                        \
			return -1;                                                                          \
		}                                                                                       \
	} while (0)

int st_cupti_load(char *err, size_t len)
{
	if (C.dl)
		return 0;
	const char *paths[] = {"libcupti.so.13", "libcupti.so", STITCH_CUPTI_DIR "/libcupti.so.13",
	                       "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0] && !C.dl; i++)
		C.dl = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
	if (!C.dl) {
		snprintf(err, len, "CUPTI not found (libcupti.so.13: %s)", dlerror());
		return -1;
	}
	SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
	SYM(enable, "cuptiActivityEnable");
	SYM(disable, "cuptiActivityDisable");
	SYM(flush_all, "cuptiActivityFlushAll");
	SYM(next_record, "cuptiActivityGetNextRecord");
	SYM(dropped, "cuptiActivityGetNumDroppedRecords");
	SYM(timestamp, "cuptiGetTimestamp");
	SYM(result_string, "cuptiGetResultString");
	SYM(callback_name, "cuptiGetCallbackName");
	return 0;
}

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = aligned_alloc(8, BUF_BYTES);
	*size = *buf ? BUF_BYTES : 0;
	*max_records = 0;
}

static double rel_us(uint64_t ns)
{
	return ns >= g_t0 ? (double)(ns - g_t0) / 1e3 : -(double)(g_t0 - ns) / 1e3;
}

static const char *copy_kind(int k)
{
	switch (k) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "HtoA";
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "AtoH";
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "DtoA";
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "AtoD";
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "AtoA";
	default: return "unknown";
	}
}

static const char *sync_kind(int k)
{
	switch (k) {
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "event synchronize";
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "stream wait event";
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "stream synchronize";
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "context synchronize";
	default: return "synchronize";
	}
}

static json_t *record(const CUpti_Activity *r)
{
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
		return json_pack("[s,s,f,f,I,I,i,i,i,i,i,i,i,i,i]", "k", k->name ? k->name : "?",
		                 rel_us(k->start), rel_us(k->end), (json_int_t)k->streamId,
		                 (json_int_t)k->correlationId, k->gridX, k->gridY, k->gridZ, k->blockX,
		                 k->blockY, k->blockZ, (int)k->registersPerThread,
		                 (int)k->staticSharedMemory, (int)k->dynamicSharedMemory);
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
		return json_pack("[s,s,f,f,I,I,I]", "c", copy_kind(m->copyKind), rel_us(m->start),
		                 rel_us(m->end), (json_int_t)m->streamId, (json_int_t)m->correlationId,
		                 (json_int_t)m->bytes);
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
		return json_pack("[s,s,f,f,I,I,I]", "s", "memset", rel_us(m->start), rel_us(m->end),
		                 (json_int_t)m->streamId, (json_int_t)m->correlationId,
		                 (json_int_t)m->bytes);
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *y = (const CUpti_ActivitySynchronization2 *)r;
		return json_pack("[s,s,f,f,I,I]", "y", sync_kind(y->type), rel_us(y->start),
		                 rel_us(y->end), (json_int_t)y->streamId, (json_int_t)y->correlationId);
	}
	case CUPTI_ACTIVITY_KIND_RUNTIME: {
		const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
		const char *name = NULL;
		if (C.callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name) != CUPTI_SUCCESS || !name)
			name = "cuda?";
		return json_pack("[s,s,f,f,i,I]", "a", name, rel_us(a->start), rel_us(a->end), 0,
		                 (json_int_t)a->correlationId);
	}
	default:
		return NULL;
	}
}

/* Runtime calls and synchronisations count only between st_run's call and its return. */
static int inside_call(const CUpti_Activity *r)
{
	uint64_t start;
	if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME)
		start = ((const CUpti_ActivityAPI *)r)->start;
	else if (r->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)
		start = ((const CUpti_ActivitySynchronization2 *)r)->start;
	else
		return 1;
	return start >= g_t0 && (g_t1 == 0 || start <= g_t1);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid)
{
	CUpti_Activity *r = NULL;
	pthread_mutex_lock(&g_lock);
	while (g_acts && C.next_record(buf, valid, &r) == CUPTI_SUCCESS) {
		if (!inside_call(r))
			continue;
		json_t *j = record(r);
		if (j)
			json_array_append_new(g_acts, j);
	}
	size_t dropped = 0;
	if (C.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS)
		g_dropped += (int64_t)dropped;
	pthread_mutex_unlock(&g_lock);
	(void)size;
	free(buf);
}

static const CUpti_ActivityKind device_kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
static const CUpti_ActivityKind call_kinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME,
                                                CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

static int cupti_fail(CUptiResult r, const char *what, char *err, size_t len)
{
	const char *s = NULL;
	C.result_string(r, &s);
	snprintf(err, len, "CUPTI %s: %s", what, s ? s : "unknown error");
	return -1;
}

#define CK_CUPTI(call, what)                                                                    \
	do {                                                                                        \
		CUptiResult r_ = (call);                                                                \
		if (r_ != CUPTI_SUCCESS) {                                                              \
			rc = cupti_fail(r_, what, err, len);                                                \
			goto done;                                                                          \
		}                                                                                       \
	} while (0)

int st_cupti_profile(int (*fn)(void *), void *arg, cudaStream_t stream, json_t *out,
                     int *fn_rc, char *err, size_t len)
{
	int rc = 0;
	*fn_rc = 0;
	if (st_cupti_load(err, len))
		return -1;
	cudaEvent_t e0 = NULL, e1 = NULL;
	if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) {
		snprintf(err, len, "profile: cudaEventCreate failed");
		rc = -1;
		goto done;
	}
	if (!C.registered) {
		CK_CUPTI(C.register_callbacks(buffer_requested, buffer_completed), "register callbacks");
		C.registered = 1;
	}
	pthread_mutex_lock(&g_lock);
	g_acts = json_array();
	g_dropped = 0;
	g_t0 = g_t1 = 0;
	pthread_mutex_unlock(&g_lock);
	/* Enabling is slow: it happens before the clocks start. The runner's own
	 * event records and sync fall outside [g_t0, t1] and are dropped from the host-side kinds. */
	for (size_t i = 0; i < sizeof device_kinds / sizeof device_kinds[0]; i++)
		CK_CUPTI(C.enable(device_kinds[i]), "enable activity");
	for (size_t i = 0; i < sizeof call_kinds / sizeof call_kinds[0]; i++)
		CK_CUPTI(C.enable(call_kinds[i]), "enable activity");
	/* The first runtime call after enabling pays for CUPTI's set-up (milliseconds, after its
	 * work was queued): make that call here, then record the start event for real. */
	cudaEventRecord(e0, stream);
	cudaEventSynchronize(e0);
	cudaEventRecord(e0, stream);
	double w0 = st_now_s() * 1e6;
	CK_CUPTI(C.timestamp(&g_t0), "timestamp");
	*fn_rc = fn(arg);
	uint64_t t1 = 0;
	C.timestamp(&t1);
	pthread_mutex_lock(&g_lock);
	g_t1 = t1;
	pthread_mutex_unlock(&g_lock);
	cudaEventRecord(e1, stream);
	cudaError_t se = cudaDeviceSynchronize();
	double w1 = st_now_s() * 1e6;
	for (size_t i = 0; i < sizeof call_kinds / sizeof call_kinds[0]; i++)
		C.disable(call_kinds[i]);
	for (size_t i = 0; i < sizeof device_kinds / sizeof device_kinds[0]; i++)
		C.disable(device_kinds[i]);
	CK_CUPTI(C.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
	if (se != cudaSuccess) {
		snprintf(err, len, "CUDA error during the profiled st_run: %s (%s)",
		         cudaGetErrorString(se), cudaGetErrorName(se));
		rc = -1;
		goto done;
	}
	float ms = 0;
	cudaEventElapsedTime(&ms, e0, e1);
	pthread_mutex_lock(&g_lock);
	json_object_set_new(out, "acts", g_acts);
	g_acts = NULL;
	json_object_set_new(out, "dropped", json_integer(g_dropped));
	pthread_mutex_unlock(&g_lock);
	json_object_set_new(out, "run_wall_us", json_real(w1 - w0));
	json_object_set_new(out, "run_event_us", json_real(ms * 1e3));
done:
	pthread_mutex_lock(&g_lock);
	json_decref(g_acts);
	g_acts = NULL;
	pthread_mutex_unlock(&g_lock);
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	return rc;
}
