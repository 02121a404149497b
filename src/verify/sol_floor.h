/* The speed-of-light floor of a task's cost at one size set: the largest of the lower bounds its
 * roof names (FLOPs at the unit's peak, bytes at the DRAM bandwidth, and for the L2 roof the bytes
 * through the L2 at the L2's bandwidth), and which bound set it. */
#ifndef ST_SOL_FLOOR_H
#define ST_SOL_FLOOR_H

#include <jansson.h>

#include "stitch/error.h"
#include "task/task.h"

/* A task's cost evaluated at one size set. l2_bytes < 0: the task's roof reads no L2 bytes;
 * sfu < 0, syncs < 0: the task counts no special-function operations, no device-wide
 * synchronisations. */
typedef struct st_cost_at {
	double flops, bytes, l2_bytes, sfu, syncs;
	const char *unit; /* the peak that bounds the flops: "fp32", "bf16", ... */
} st_cost_at;

/* Each bound in ms (-1 where it is not known or not counted: no such peak, no flops, no L2
 * bytes, no special-function operations, no synchronisations), the floor (the largest; -1 when
 * the peaks have no DRAM bandwidth, as a floor without the memory roof would flatter every
 * memory-bound task) and the roof that set it: "dram", "l2", the unit's name when the FLOPs
 * bind, "sfu" when the special-function unit does, "sync" when the chain of device-wide
 * synchronisations does. On a tie DRAM wins, then the L2, the FLOPs, the special functions. */
typedef struct st_sol_floor {
	double dram_ms, l2_ms, flops_ms, sfu_ms, sync_ms;
	double floor_ms;
	const char *roof; /* NULL when floor_ms is -1 */
} st_sol_floor;

/* The task's cost expressions at `set`; ST_E_INVALID when one does not evaluate (or the task has
 * no cost model). */
st_status st_cost_eval(const st_task *t, const st_size_set *set, st_cost_at *c, st_err *err);

/* The floor of `c` against the device peaks (verify/peaks.c: "bw_gbs", "l2_gbs" in GB/s, TFLOP/s
 * by unit, "sfu" in tera-operations/s, "sync_us" in microseconds a grid barrier). */
void st_sol_floor_compute(const json_t *peaks, const st_cost_at *c, st_sol_floor *f);

/* {"dram": ms, "l2": ms, "flops": ms, "sfu": ms, "sync": ms}, each only where known. */
json_t *st_sol_floors_json(const st_sol_floor *f);

#endif
