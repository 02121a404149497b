/* Admission of a verify: before anything is mapped or a runner started, every size set the verify
 * runs is priced (src/task/task_bytes.h) and compared with what this machine, this process's
 * address-space limit, a host runner's sandbox and the caller's per-request cap allow; the device
 * is compared once a runner's hello says how much it has. A task that does not fit is bad input
 * (ST_E_INVALID) with a message that names the set, its largest tensor and what the machine has,
 * instead of a parent killed by the OOM killer after mapping terabytes. */
#ifndef ST_ADMIT_H
#define ST_ADMIT_H

#include <jansson.h>
#include <stdint.h>
#include "stitch/stitch.h"
#include "task/task.h"
#include "task/task_bytes.h"
#include "common/host_mem.h"

/* What one verify of one size set takes. */
typedef struct st_admit_need {
	int n_sols;        /* solutions with a shared block: reference (or stored outputs), expert,
	                      candidate, harness */
	int n_runners;     /* of them, those with a runner */
	uint64_t shm;      /* each block */
	uint64_t host;     /* host memory in all: blocks, host runners' buffers, parent's copies */
	uint64_t parent_as; /* this process's mappings: the blocks and the params file */
	uint64_t runner_as; /* one host runner's mappings: its block and its buffers (host backend) */
	uint64_t device;   /* device memory of the runners together (cuda backend) */
} st_admit_need;

/* The need of set b under options o (backend, --dump, --params, timing). */
void st_admit_need_of(const st_task *t, const st_verify_opts *o, const st_set_bytes *b,
                      st_admit_need *n);

/* Every set this verify runs against the machine m (NULL: read now). ST_E_INVALID with the
 * message when one does not fit; ST_E_SYSTEM only when /proc/meminfo cannot be read. */
st_status st_admit_verify(const st_task *t, const st_verify_opts *o, const st_host_mem *m,
                          st_err *err);

/* The device check, from a runner's hello `info` (its mem_bytes); no device figure: ST_OK. */
st_status st_admit_device(const st_task *t, const st_verify_opts *o, const json_t *info,
                          st_err *err);

/* For stitch tasks: the first set of t that the host backend could not run on machine m, with
 * the default options, as a message into msg; returns 1 then, 0 when every set fits. */
int st_admit_task_warning(const st_task *t, const st_host_mem *m, char *msg, size_t len);

#endif
