/* Nsight Compute's view of kernels: the curated metric set stitch asks `ncu` for, and the parser
 * of what `ncu --csv --page raw` prints (one row per profiled kernel, a units row under the
 * header, numbers with thousands separators), turned into one JSON object per kernel with
 * stable names a report or an agent can rely on. */
#ifndef ST_PROFILE_NCU_H
#define ST_PROFILE_NCU_H

#include <jansson.h>
#include <stddef.h>

#include "common/st_error.h"

/* For `ncu --metrics`: duration, DRAM and SM throughput (% of peak), achieved occupancy,
 * tensor-pipe activity, L1 and L2 hit rates, registers, the occupancy limit from registers,
 * waves, how often a scheduler issues and how busy the FP32 pipe is, the warps' stall reasons
 * (cycles a warp waited per issued instruction, st_ncu_stalls) and local-memory instructions
 * (spills). */
extern const char st_ncu_metrics[];

/* The stall reasons a kernel's JSON may hold ("stall_barrier", ...), each with what it means and
 * what usually cuts it; ends with a NULL key. "stall_not_selected" is parsed too but is not a
 * wait: a warp that was ready while another issued. */
typedef struct {
	const char *key, *what, *advice;
} st_ncu_stall;
extern const st_ncu_stall st_ncu_stalls[];

/* The n largest stall reasons of a kernel's JSON (those measured above 0), largest first, into
 * top[] and ratio[]: how many there were, at most n. */
int st_ncu_top_stalls(const json_t *kernel, const st_ncu_stall **top, double *ratio, int n);

/* Launches measured per pass: each costs ncu a few replays (~0.3 s), and a run of hundreds of
 * launches (an LSTM's steps) would take minutes; the first ones of a run are representative.
 * The report says when the cap was reached. */
#define ST_NCU_MAX_LAUNCHES 64
#define ST_NCU_MAX_LAUNCHES_STR "64"

/* Parse ncu's CSV (`--csv --page raw`; lines before the header, such as the application's own
 * output, are skipped). *kernels: an array of {"name", "block", "grid", and where ncu reported
 * them "duration_us", "dram_pct", "sm_pct", "occupancy_pct", "tensor_pct", "l1_hit_pct",
 * "l2_hit_pct", "registers", "occupancy_limit_registers", "waves", "issue_pct", "fma_pct", the
 * st_ncu_stalls keys and "stall_not_selected", "local_loads", "local_stores"}. ST_E_INVALID,
 * saying what is missing, when the text holds no CSV report. */
st_status st_ncu_parse(const char *text, size_t len, json_t **kernels, st_err *err);

/* Where one kernel sits under the device's roofs by Nsight Compute's own speed-of-light figures
 * (its DRAM and SM throughput as % of peak): adds "roof_pct" (the higher of the two: how close
 * it runs to the nearer roof), "bound" ("memory", "compute", or "latency" when it is under
 * ST_NCU_LATENCY_PCT of both, i.e. waiting rather than limited by either), and "dram_gbs"
 * (attained DRAM bytes/s) where ncu measured the bytes. Kernels without both figures are left as
 * they are. */
#define ST_NCU_LATENCY_PCT 30.0
void st_ncu_classify(json_t *kernel);

#endif
