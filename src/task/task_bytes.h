/* The bytes a task's size set takes: its tensors (params, inputs, outputs), the shared block the
 * verify parent maps per solution, and the buffers every runner allocates on its device. Pure
 * computation from a loaded task; what a machine can hold is src/verify/admit.c's business. The
 * layout mirrors verify.c's make_layout and runner_main.c's op_setup. */
#ifndef ST_TASK_BYTES_H
#define ST_TASK_BYTES_H

#include <stdint.h>
#include "task.h"

typedef struct st_set_bytes {
	const char *set;          /* the size set's label */
	uint64_t params, inputs, outputs; /* sums over the task's tensors */
	uint64_t shm;             /* the shared block per solution: outputs twice (the two slots, so
	                             a second run is compared with the first) and the inputs, each
	                             tensor page-aligned */
	uint64_t shm_params;      /* the params' part of that block, there only with --dump or
	                             --params (not in shm) */
	uint64_t buffers;         /* what one runner allocates on its device (host memory on the host
	                             backend): the params and two buffer sets of inputs and outputs,
	                             plus input staging where the task's generator makes inputs */
	uint64_t largest;         /* the largest tensor's bytes */
	const char *largest_name; /* its name */
	int overflow;             /* a shape product or a sum does not fit in 64 bits: the figures
	                             above are then UINT64_MAX, to be treated as too large */
} st_set_bytes;

/* Fill b for size set `set` of t. A shape that does not evaluate is ST_E_INVALID; an overflow is
 * not an error (b->overflow). */
st_status st_task_set_bytes(const st_task *t, const st_size_set *set, st_set_bytes *b,
                            st_err *err);

#endif
