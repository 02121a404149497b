/* The live reference of an imported KernelBench task: the PyTorch program itself
 * (scripts/kb_reference.py under the user's python with torch), started by one verify to rebuild
 * the params and draw that verify's seeds under a secret seed base, so the task keeps no tensor
 * on disk and no two verifies see the same seeds. It is the parent's own helper (trusted, not
 * sandboxed: it is the task's definition, as at import); its replies still go through one
 * validated reader, and it lives in its own process group, killed and reaped on every path.
 * Where this user's warm server runs (ref_server.h), the helper is a child it forks, torch
 * already imported. */
#ifndef ST_LIVE_REF_H
#define ST_LIVE_REF_H

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "stitch/error.h"
#include "task/safetensors.h"
#include "task/task.h"

typedef struct vx_live {
	pid_t pid;             /* the helper's process (and group), or 0 once reaped */
	int server;            /* the helper is a child of the warm server (ref_server.h), not ours */
	int sock;              /* our end of the socket pair, or -1 */
	char dir[PATH_MAX];    /* the verify's own folder for the files (tmpfs where there is one) */
	char log[PATH_MAX + 16]; /* the helper's stdout and stderr, quoted when it fails */
	uint64_t next_id;      /* the id of the next request */
	uint64_t *q_id;        /* the requests sent and not answered, oldest first: their ids */
	int *q_k;              /* and the seed each asked for (-1: the start) */
	int q_len;             /* how many (the helper answers in order) */
	int window;            /* seed files that may exist at once: all of them where they fit in
	                        * a small part of the host's memory, else 2 (the one being judged,
	                        * the next being drawn) */
	int n_seeds;           /* correctness seeds; k = n_seeds is the kept-back check seed */
	char **files;          /* files[k]: seed k's file once answered and not yet taken */
	char params_file[PATH_MAX + 32];
	st_safetensors params;
	int params_open;
	int settled;           /* every seed the verify takes is drawn, nothing more is asked */
	json_t *info;          /* for the verdict: python, torch, device, build_s, draw_s */
	double t_start;
	char devices[32];      /* the CUDA_VISIBLE_DEVICES it runs with ("": the parent's) */
} vx_live;

/* Start the helper for task t (its data_reference), ask it to build the model and draw the first
 * seed, and return without waiting: torch loads while the solutions compile. The seed base is
 * secret and new, or derived from `seed` when it is not 0 (verify --seed: reproducible).
 * `devices`: the CUDA_VISIBLE_DEVICES of the verify's slot, which the program then runs on as the
 * runners do (a `stitch serve --gpus` worker's GPU); NULL or "": the parent's own. */
st_status vx_live_start(vx_live *L, const st_task *t, uint64_t seed, const char *devices,
                        st_err *err);

/* Wait (until `deadline`, st_now_s() seconds) for the rebuilt params and open them in L->params.
 * ST_E_INVALID when the program no longer builds the params the import recorded. */
st_status vx_live_params(vx_live *L, double deadline, st_err *err);

/* Seed k's file (k < n_seeds: a correctness seed; k == n_seeds: the check seed) into
 * path[len], waiting for it; asks for the seeds after k the window has room for before waiting,
 * so the helper draws them while this one runs. The caller deletes the file once read
 * (vx_live_taken). */
st_status vx_live_seed(vx_live *L, int k, double deadline, char *path, size_t len, st_err *err);
void vx_live_taken(vx_live *L, int k);

/* Make sure every seed the verify will take is drawn: from then on the helper runs nothing,
 * so no GPU work of it is beside a measurement. */
st_status vx_live_settle(vx_live *L, double deadline, st_err *err);

/* Kill and reap the helper, remove its files; safe on a zeroed or half-started L. */
void vx_live_free(vx_live *L);

#endif
