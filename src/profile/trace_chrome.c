/* The timeline in Chrome's trace-event format, which Perfetto and chrome://tracing open as they
 * are: one process for the profiled st_run, one track for the host's CUDA API and sync calls
 * (tid 0) and one per CUDA stream. Dropped CUPTI records are drawn as a global marker so that a
 * gap in the picture is never mistaken for idle time. */
#include "timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PID 1
#define TID_HOST 0
/* Device work CUPTI gave no stream for (stream id 0) gets a track of its own, away from the host's
 * tid 0. */
#define TID_NOSTREAM INT32_MAX

static int is_device(st_act_kind k)
{
	return k == ST_ACT_KERNEL || k == ST_ACT_MEMCPY || k == ST_ACT_MEMSET;
}

static json_int_t tid_of(const st_activity *a)
{
	if (!is_device(a->kind))
		return TID_HOST;
	return a->stream ? (json_int_t)a->stream : TID_NOSTREAM;
}

static const char *cat_of(st_act_kind k)
{
	switch (k) {
	case ST_ACT_KERNEL: return "kernel";
	case ST_ACT_MEMCPY: return "memcpy";
	case ST_ACT_MEMSET: return "memset";
	case ST_ACT_SYNC: return "sync";
	case ST_ACT_API: return "api";
	}
	return "?";
}

static double fin(double x)
{
	return isfinite(x) ? x : 0;
}

static json_t *event_of(const st_activity *a)
{
	json_t *args;
	if (a->kind == ST_ACT_KERNEL)
		args = json_pack("{s:[i,i,i], s:[i,i,i], s:i, s:i, s:i, s:I}",
		                 "grid", a->grid[0], a->grid[1], a->grid[2],
		                 "block", a->block[0], a->block[1], a->block[2],
		                 "regs", a->regs, "smem_static", a->smem_static,
		                 "smem_dynamic", a->smem_dynamic, "corr", (json_int_t)a->corr);
	else if (a->kind == ST_ACT_MEMCPY || a->kind == ST_ACT_MEMSET)
		args = json_pack("{s:I, s:I}", "bytes", (json_int_t)a->bytes,
		                 "corr", (json_int_t)a->corr);
	else
		args = json_pack("{s:I}", "corr", (json_int_t)a->corr);
	if (!args)
		return NULL;
	double dur = a->end_us > a->start_us ? a->end_us - a->start_us : 0;
	return json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:I, s:o}", "name", a->name ? a->name : "?",
	                 "cat", cat_of(a->kind), "ph", "X", "ts", fin(a->start_us), "dur", fin(dur),
	                 "pid", PID, "tid", tid_of(a), "args", args);
}

static json_t *thread_name(json_int_t tid, const char *name)
{
	return json_pack("{s:s, s:s, s:i, s:I, s:{s:s}}", "name", "thread_name", "ph", "M",
	                 "pid", PID, "tid", tid, "args", "name", name);
}

static int cmp_tid(const void *x, const void *y)
{
	json_int_t a = *(const json_int_t *)x, b = *(const json_int_t *)y;
	return (a > b) - (a < b);
}

/* Metadata first: the process, then one name per track that has events, in tid order. */
static int add_metadata(const st_timeline *t, json_t *ev)
{
	if (json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name",
	                                        "process_name", "ph", "M", "pid", PID, "tid",
	                                        TID_HOST, "args", "name", "stitch st_run")))
		return -1;
	if (t->n == 0)
		return 0;
	json_int_t *tids = malloc((size_t)t->n * sizeof *tids);
	if (!tids)
		return -1;
	for (int i = 0; i < t->n; i++)
		tids[i] = tid_of(&t->acts[i]);
	qsort(tids, (size_t)t->n, sizeof *tids, cmp_tid);
	int rc = 0;
	for (int i = 0; i < t->n && rc == 0; i++) {
		if (i > 0 && tids[i] == tids[i - 1])
			continue;
		char name[64];
		if (tids[i] == TID_HOST)
			snprintf(name, sizeof name, "host (CUDA API)");
		else if (tids[i] == TID_NOSTREAM)
			snprintf(name, sizeof name, "device (no stream id)");
		else
			snprintf(name, sizeof name, "stream %" JSON_INTEGER_FORMAT, tids[i]);
		rc = json_array_append_new(ev, thread_name(tids[i], name));
	}
	free(tids);
	return rc;
}

static json_t *build(const st_timeline *t, const char *title)
{
	json_t *ev = json_array();
	if (!ev || add_metadata(t, ev)) {
		json_decref(ev);
		return NULL;
	}
	for (int i = 0; i < t->n; i++)
		if (json_array_append_new(ev, event_of(&t->acts[i]))) {
			json_decref(ev);
			return NULL;
		}
	if (t->dropped > 0) {
		char name[96];
		snprintf(name, sizeof name, "CUPTI dropped %" PRId64 " records", t->dropped);
		if (json_array_append_new(ev, json_pack("{s:s, s:s, s:s, s:f, s:i, s:i}", "name", name,
		                                        "ph", "i", "s", "g", "ts", 0.0, "pid", PID,
		                                        "tid", TID_HOST))) {
			json_decref(ev);
			return NULL;
		}
	}
	return json_pack("{s:s, s:{s:s}, s:o}", "displayTimeUnit", "ns", "otherData", "title",
	                 title ? title : "stitch", "traceEvents", ev);
}

st_status st_trace_write_chrome(const st_timeline *t, const char *title, FILE *f, st_err *err)
{
	json_t *root = build(t, title);
	if (!root)
		return st_err_set(err, ST_E_NOMEM, "chrome trace: building %d events failed (out of "
		                  "memory, or a name that is not UTF-8)", t->n);
	errno = 0;
	int rc = json_dumpf(root, f, JSON_COMPACT);
	json_decref(root);
	if (rc != 0 || fflush(f) != 0 || ferror(f))
		return st_err_set(err, ST_E_IO, "chrome trace: writing the trace failed: %s",
		                  errno ? strerror(errno) : "write error");
	return ST_OK;
}
