/* The profile of one st_run: the device activity CUPTI recorded inside the runner (kernels,
 * copies, memsets, synchronisations, runtime calls), what follows from it (busy time, idle gaps,
 * launches, top kernels), the roofline position of the whole run, and the findings an LLM coder
 * can act on. Everything here is computed in the parent from the runner's reply; nothing is
 * estimated that was not measured. */
#ifndef ST_TIMELINE_H
#define ST_TIMELINE_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "common/st_error.h"

typedef enum st_act_kind {
	ST_ACT_KERNEL,
	ST_ACT_MEMCPY,
	ST_ACT_MEMSET,
	ST_ACT_SYNC, /* a synchronisation call (stream, event, context) */
	ST_ACT_API,  /* a CUDA runtime API call on the host */
} st_act_kind;

typedef struct st_activity {
	st_act_kind kind;
	char *name;             /* kernel: demangled name; memcpy: "HtoD", "DtoH", "DtoD", ...;
	                           memset: "memset"; sync: its type; api: the function's name */
	double start_us, end_us; /* from the host timestamp taken as st_run was called */
	uint32_t stream;        /* CUPTI stream id (0: none) */
	uint32_t corr;          /* correlation id: an API call and the work it launched share it */
	int grid[3], block[3];  /* kernels */
	int regs;               /* registers per thread */
	int smem_static, smem_dynamic; /* bytes per block */
	int64_t bytes;          /* memcpy, memset */
} st_activity;

typedef struct st_timeline {
	st_activity *acts;
	int n, cap;
	double run_wall_us;  /* host wall time of the profiled st_run to a whole-device sync */
	double run_event_us; /* CUDA event time of the same run on the solution's stream */
	int64_t dropped;     /* records CUPTI dropped (buffer overflow): reported, never hidden */
} st_timeline;

typedef struct st_kernel_stat {
	const char *name;    /* points into the timeline */
	int launches;
	double total_us;
	double share;        /* of all kernel time, 0..1 */
	int grid_blocks;     /* blocks of its first launch */
	int regs;
} st_kernel_stat;

/* The idle stretches (over 1 us) between one named device activity's end and another's start,
 * summed per pair: where a program's gaps come from, e.g. a library's matmul launched behind
 * each of the program's own kernels, or a copy between two kernels. */
typedef struct st_gap_pair {
	const char *before, *after; /* names, pointing into the timeline */
	int count;
	double total_us, max_us;
} st_gap_pair;

typedef struct st_timeline_summary {
	double span_us;      /* first device activity's start to the last one's end */
	double busy_us;      /* union of kernel, memcpy and memset intervals */
	double busy_pct;     /* busy_us / span_us, 0..100 */
	double kernel_us;    /* sum of kernel durations (overlaps counted twice) */
	double gaps_us;      /* idle time between device activities inside the span */
	int n_gaps;          /* idle stretches longer than 1 us */
	double max_gap_us;
	double lead_us;      /* from st_run's call to the first device activity: the GPU waiting
	                        for the host's first launch */
	int launches, memcpys, memsets, syncs, api_calls;
	int64_t memcpy_bytes;
	double host_us;      /* run_wall_us */
	double device_us;    /* busy_us */
	double agreement;    /* (lead_us + kernel_us + gaps_us) / run_event_us: CUPTI against the
	                        event timing of the same call */
	st_kernel_stat *top; /* grouped by name, longest total first */
	int n_top;
	st_gap_pair *gap_pairs; /* largest total first */
	int n_gap_pairs;
} st_timeline_summary;

/* Where the whole run sits under the roofline of the device's measured peaks. */
typedef struct st_roofline {
	double flops, bytes, time_ms;
	double intensity;      /* FLOP per byte; 0 where the task counts no FLOPs */
	double attained_tflops, attained_gbs;
	double peak_tflops, peak_gbs; /* for the task's cost unit; bandwidth of the copy probe */
	double ridge;          /* intensity where the roofs meet */
	double roof_tflops;    /* min(peak, intensity × bandwidth) */
	double fraction;       /* of the roof at this intensity (memory roof when FLOPs are 0) */
	const char *bound;     /* "memory", "compute" or "latency" */
} st_roofline;

/* Per-kernel hardware counters from Nsight Compute, where it ran (-1: not measured). */
typedef struct st_ncu_kernel {
	char *name;
	double duration_us, dram_pct, sm_pct, occupancy_pct, tensor_pct, l1_hit_pct, l2_hit_pct;
	int regs;
	int64_t local_insts;   /* local-memory instructions executed: register spills */
	double issue_pct;      /* % of a scheduler's cycles that issue an instruction */
	const char *top_stall; /* the largest of the measured stall reasons, or NULL */
	double top_stall_ratio; /* its cycles stalled per issued instruction */
	const char *top_stall_advice; /* what usually cuts it, or NULL */
} st_ncu_kernel;

typedef struct st_finding {
	double weight;  /* the share of run time it concerns, 0..1: the ranking key */
	char *text;     /* one sentence: what was measured, then what to do */
} st_finding;

/* ---- timeline_json.c: the runner's reply and the timeline ---------------------------------- */

void st_timeline_init(st_timeline *t);
void st_timeline_free(st_timeline *t);
/* Read the "profile" object of a runner reply (kernel names demangled here). */
st_status st_timeline_from_json(const json_t *j, st_timeline *t, st_err *err);

/* ---- summary.c ------------------------------------------------------------------------------ */

/* Compute the summary; `top` is allocated (free with st_timeline_summary_free). */
st_status st_timeline_summarize(const st_timeline *t, st_timeline_summary *s, st_err *err);
void st_timeline_summary_free(st_timeline_summary *s);
json_t *st_timeline_summary_json(const st_timeline_summary *s, int max_top);

/* ---- roofline.c ----------------------------------------------------------------------------- */

/* peaks as cached by peaks.c: "bw_gbs" and one TFLOP/s figure per cost unit ("bf16", ...).
 * unit NULL or flops 0: a pure memory roofline. time_ms: the run's (median) time. */
void st_roofline_compute(const json_t *peaks, const char *unit, double flops, double bytes,
                         double time_ms, double busy_pct, st_roofline *r);
json_t *st_roofline_json(const st_roofline *r);

/* ---- findings.c ----------------------------------------------------------------------------- */

/* Findings derived from the measurements, heaviest first, at most `max`; deterministic for the
 * same input. roof and ncu may be NULL (n_ncu 0). Returns the count; *out is allocated. */
int st_feedback(const st_timeline *t, const st_timeline_summary *s, const st_roofline *roof,
                const st_ncu_kernel *ncu, int n_ncu, int max, st_finding **out);
void st_findings_free(st_finding *f, int n);
/* Only the findings Nsight Compute's counters give (spills, latency-bound kernels, idle tensor
 * pipes), weighted by each kernel's share in `s`'s top kernels (s->top and s->n_top are all it
 * reads). Returns the count, -1 when memory ran out. */
int st_feedback_ncu(const st_timeline_summary *s, const st_ncu_kernel *ncu, int n_ncu, int max,
                    st_finding **out);
/* Nsight Compute's kernels as stitch's verdict holds them (st_ncu_parse's objects) into *out
 * (n entries; names point into the JSON, which must outlive them). NULL when there are none. */
st_ncu_kernel *st_ncu_kernels_from_json(const json_t *kernels, int *n);

/* ---- trace_chrome.c ------------------------------------------------------------------------- */

/* The timeline in Chrome's trace-event JSON ("traceEvents"), one track per stream plus one for
 * host API calls, so that Perfetto or chrome://tracing draws it. */
st_status st_trace_write_chrome(const st_timeline *t, const char *title, FILE *f, st_err *err);

#endif
