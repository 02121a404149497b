/* Device memory a runner keeps between size sets. A verify sets up and tears down every size set
 * on each of its runners, and a pooled runner (a task's reference or expert in a service) does
 * the same sets again for every verify of its task: keeping the torn-down buffers and handing
 * them back when the same size comes again spares a cudaMalloc and a synchronising cudaFree per
 * tensor. Kept blocks are poisoned when torn down, as freed ones were, so no set's data outlives
 * it. Only a runner that a service keeps for later verifies keeps blocks (the parent says so in
 * the set-up request): a candidate's runner ends with its verify, and memory it kept would only
 * be missing to the candidate's own allocations. One runner, one thread: no locking. */
#ifndef ST_RUNNER_DEV_KEEP_H
#define ST_RUNNER_DEV_KEEP_H

#include <stddef.h>

/* How many bytes may be kept at most (0: none, every release frees). */
void dk_set_limit(size_t bytes);

/* A block of exactly `bytes` (at least 1): a kept one of that size, else a new one; when the
 * device is out of memory, everything kept is freed and the allocation tried once more.
 * 0, or -1 with err. *reused says whether it was a kept block. */
int dk_alloc(void **p, size_t bytes, int *reused, char *err, size_t len);

/* Give a block back: poisoned, then kept when `keep` says so (the oldest kept ones freed to stay
 * under the limit), else freed. NULL is ignored. */
void dk_release(void *p, size_t bytes, int keep);

/* Free every kept block. */
void dk_drop_all(void);

/* Bytes kept now. */
size_t dk_kept_bytes(void);

#endif
