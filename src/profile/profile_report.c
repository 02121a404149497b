/* From a runner's profile reply to the "profile" object of a verdict: the timeline summary, the
 * roofline of the whole run, the ranked findings for the coder, and (when asked) the timeline
 * as a Chrome trace file. The one place where the pieces of src/profile meet. */
#include "profile_report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_TOP 8
#define MAX_FINDINGS 6

st_status st_profile_report(const json_t *reply, const st_profile_inputs *in, json_t **out,
                            st_err *err)
{
	*out = NULL;
	st_timeline t;
	st_status s = st_timeline_from_json(reply, &t, err);
	if (s)
		return s;
	st_timeline_summary sum;
	s = st_timeline_summarize(&t, &sum, err);
	if (s) {
		st_timeline_free(&t);
		return s;
	}
	json_t *r = json_object();
	json_object_set_new(r, "summary", st_timeline_summary_json(&sum, MAX_TOP));
	json_object_set_new(r, "dropped_records", json_integer(t.dropped));
	st_roofline roof, *rp = NULL;
	double time_ms = in->time_ms > 0 ? in->time_ms : t.run_event_us / 1e3;
	if (in->peaks && in->bytes > 0 && time_ms > 0) {
		st_roofline_compute(in->peaks, in->unit, in->flops, in->bytes, time_ms, sum.busy_pct,
		                    &roof);
		rp = &roof;
		json_object_set_new(r, "roofline", st_roofline_json(&roof));
	}
	st_finding *f = NULL;
	int nf = st_feedback(&t, &sum, rp, in->ncu, in->n_ncu, MAX_FINDINGS, &f);
	json_t *fj = json_array();
	for (int i = 0; i < nf; i++)
		json_array_append_new(fj, json_pack("{s:f,s:s}", "weight", f[i].weight, "text",
		                                    f[i].text));
	json_object_set_new(r, "findings", fj);
	st_findings_free(f, nf);
	if (t.dropped > 0)
		json_object_set_new(r, "warning",
		                    json_sprintf("CUPTI dropped %lld records: the timeline is incomplete",
		                                 (long long)t.dropped));
	if (in->trace_path) {
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", in->trace_path);
		FILE *fp = fopen(tmp, "w");
		if (!fp) {
			s = st_err_set(err, ST_E_IO, "--trace %s: %s", in->trace_path, strerror(errno));
		} else {
			s = st_trace_write_chrome(&t, in->title ? in->title : "st_run", fp, err);
			if (fclose(fp) && !s)
				s = st_err_set(err, ST_E_IO, "--trace %s: %s", in->trace_path, strerror(errno));
			if (!s && rename(tmp, in->trace_path))
				s = st_err_set(err, ST_E_IO, "--trace %s: %s", in->trace_path, strerror(errno));
			if (s)
				remove(tmp);
		}
		if (!s)
			json_object_set_new(r, "trace", json_string(in->trace_path));
	}
	st_timeline_summary_free(&sum);
	st_timeline_free(&t);
	if (s) {
		json_decref(r);
		return s;
	}
	*out = r;
	return ST_OK;
}
