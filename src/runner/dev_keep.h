/* Device memory a runner keeps between size sets. A verify sets up and tears down every size set
 * on each of its runners, and a pooled runner (a task's reference or expert in a service) does
 * the same sets again for every verify of its task: keeping the torn-down buffers and handing
 * them back when the same size comes again spares a cudaMalloc and a synchronising cudaFree per
 * tensor. Kept blocks are poisoned when torn down, as freed ones were, so no set's data outlives
 * it. Only a runner that a service keeps for later verifies keeps blocks (the parent says so in
 * the set-up request): a candidate's runner ends with its verify, and memory it kept would only
 * be missing to the candidate's own allocations. One runner, one thread: no locking.
 * A runner may also reserve one block, the arena, when it starts: a set-up that fits takes it
 * and its teardown gives it back poisoned, so a fresh runner (a candidate's) sets up and tears
 * down its size sets without calling into the driver. Device allocation and freeing wait on a
 * lock the driver holds host-wide while any process on any GPU creates a context (some 0.2 s
 * each); in a service that starts a runner for every candidate on several GPUs they took 0.2
 * and 0.35 s of a verify, reserved while the runner starts they cost the verify nothing. */
#ifndef ST_RUNNER_DEV_KEEP_H
#define ST_RUNNER_DEV_KEEP_H

#include <stddef.h>

/* How many bytes may be kept at most (0: none, every release frees). */
void dk_set_limit(size_t bytes);

/* Reserve the arena: one block of `bytes`. 0, or -1 with err (the runner then goes without). */
int dk_reserve(size_t bytes, char *err, size_t len);

/* Free the arena unless a set-up holds it (a runner kept by a service keeps exact-size blocks
 * instead, and an idle arena in each of them would only be missing to candidates). */
void dk_unreserve(void);

/* Where dk_alloc's block came from. */
typedef enum dk_from { DK_NEW, DK_KEPT, DK_ARENA } dk_from;

/* A block of at least `bytes` (at least 1): the arena when it is free and large enough, else a
 * kept one of exactly that size, else a new one; when the device is out of memory, everything
 * kept (and the arena, when free) is freed and the allocation tried once more.
 * 0, or -1 with err. */
int dk_alloc(void **p, size_t bytes, dk_from *from, char *err, size_t len);

/* A kept block that no set-up has taken in this many set-ups (dk_alloc calls) may be freed to
 * make room for another; younger ones are not (dev_keep.c says why). */
#define DK_STALE_SETUPS 32

/* Give a block back: poisoned (its first `bytes`), then the arena is free again; another block
 * is kept when `keep` says so and it fits under the limit beside the blocks kept (stale ones
 * freed to make room), else freed. NULL is ignored. */
void dk_release(void *p, size_t bytes, int keep);

/* Free every kept block (not the arena). */
void dk_drop_all(void);

/* Bytes kept now (the arena not counted). */
size_t dk_kept_bytes(void);

/* The arena's size; 0 when there is none. */
size_t dk_arena_bytes(void);

#endif
