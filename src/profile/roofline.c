/* Where the whole run sits under the roofline of the device's measured peaks (the cache written
 * by verify/peaks.c: "bw_gbs" in GB/s and one TFLOP/s figure per cost unit). The fraction is of
 * the roof at the run's own intensity, so a memory-bound kernel is judged against bandwidth and a
 * GEMM against its math peak, and the bound names which roof limits it. */
#include "timeline.h"

#include <math.h>

/* Below this fraction of its roof a run has not pressed on either roof. */
#define LATENCY_FRACTION 0.25
/* A run this short (ms) is dominated by launch latency whatever its kernels do. */
#define LATENCY_TIME_MS 0.02
/* Below this device-busy percentage the GPU idled for much of the run. */
#define LATENCY_BUSY_PCT 60.0

void st_roofline_compute(const json_t *peaks, const char *unit, double flops, double bytes,
                         double time_ms, double busy_pct, st_roofline *r)
{
	r->flops = flops;
	r->bytes = bytes;
	r->time_ms = time_ms;
	r->peak_gbs = json_number_value(json_object_get(peaks, "bw_gbs"));
	r->peak_tflops = unit ? json_number_value(json_object_get(peaks, unit)) : 0;
	if (!(r->peak_gbs > 0))
		r->peak_gbs = 0;
	if (!(r->peak_tflops > 0))
		r->peak_tflops = 0;

	r->intensity = flops > 0 && bytes > 0 ? flops / bytes : 0;
	double secs = time_ms * 1e-3;
	r->attained_tflops = secs > 0 && flops > 0 ? flops / secs / 1e12 : 0;
	r->attained_gbs = secs > 0 && bytes > 0 ? bytes / secs / 1e9 : 0;
	r->ridge = r->peak_tflops > 0 && r->peak_gbs > 0 ? r->peak_tflops * 1e12 / (r->peak_gbs * 1e9)
	                                                  : 0;
	double mem_roof = r->intensity * r->peak_gbs * 1e9 / 1e12;
	if (r->peak_tflops > 0 && r->peak_gbs > 0)
		r->roof_tflops = mem_roof < r->peak_tflops ? mem_roof : r->peak_tflops;
	else if (r->peak_tflops > 0)
		r->roof_tflops = r->peak_tflops; /* bandwidth unknown: only the math roof is known */
	else
		r->roof_tflops = mem_roof;

	int math = flops > 0 && r->peak_tflops > 0;
	if (math && r->roof_tflops > 0)
		r->fraction = r->attained_tflops / r->roof_tflops;
	else if (r->peak_gbs > 0)
		r->fraction = r->attained_gbs / r->peak_gbs; /* a pure memory roofline */
	else
		r->fraction = 0;

	/* A run that fills neither the memory roof nor the compute roof, and is either too short for
	 * its kernels to matter or leaves the GPU idle much of the time, is waiting on launches or
	 * on dependencies: more bandwidth or more FLOPs would not make it faster. busy_pct < 0 means
	 * the timeline was not measured, so only the time test can say so. Without any known peak
	 * there is no roof to fall short of, and the run is never called latency-bound. */
	int known = r->peak_gbs > 0 || r->peak_tflops > 0;
	int idle = time_ms < LATENCY_TIME_MS || (busy_pct >= 0 && busy_pct < LATENCY_BUSY_PCT);
	if (known && r->fraction < LATENCY_FRACTION && idle)
		r->bound = "latency";
	else if (math && r->intensity >= r->ridge)
		r->bound = "compute";
	else
		r->bound = "memory";
}

static double fin(double x)
{
	return isfinite(x) ? x : 0;
}

json_t *st_roofline_json(const st_roofline *r)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s}",
	                 "flops", fin(r->flops), "bytes", fin(r->bytes), "time_ms", fin(r->time_ms),
	                 "intensity", fin(r->intensity), "attained_tflops", fin(r->attained_tflops),
	                 "attained_gbs", fin(r->attained_gbs), "peak_tflops", fin(r->peak_tflops),
	                 "peak_gbs", fin(r->peak_gbs), "ridge", fin(r->ridge),
	                 "roof_tflops", fin(r->roof_tflops), "fraction", fin(r->fraction),
	                 "bound", r->bound ? r->bound : "memory");
}
