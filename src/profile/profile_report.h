/* A runner's profile reply turned into the verdict's "profile" object (profile_report.c). */
#ifndef ST_PROFILE_REPORT_H
#define ST_PROFILE_REPORT_H

#include <jansson.h>

#include "timeline.h"

typedef struct st_profile_inputs {
	const json_t *peaks;      /* the device's measured peaks; NULL: no roofline */
	const char *unit;         /* the task's cost unit (bf16, fp32, ...); NULL: memory only */
	double flops, bytes;      /* the task's cost model at the profiled size */
	double time_ms;           /* the run's median time; <= 0: the profiled run's event time */
	const st_ncu_kernel *ncu; /* Nsight Compute rows, where they were measured */
	int n_ncu;
	const char *trace_path;   /* write the Chrome trace here; NULL: none */
	const char *title;
} st_profile_inputs;

st_status st_profile_report(const json_t *reply, const st_profile_inputs *in, json_t **out,
                            st_err *err);

#endif
