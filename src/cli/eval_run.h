/* The work of `stitch eval` (eval_run.c): every sample of every task run through its mode by a
 * bounded pool of threads, giving one row per sample and round. */
#ifndef ST_EVAL_RUN_H
#define ST_EVAL_RUN_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "llm/llm.h"
#include "stitch/stitch.h"
#include "verify/neighbours.h"

typedef enum { EVAL_ONESHOT, EVAL_REFINE, EVAL_AGENT } eval_mode;

/* One sample of one task: what it was asked, and what came of it. */
typedef struct eval_item {
	const char *task_id, *prompt;
	int tier, k;
	char task_dir[PATH_MAX];
	json_t *rows;            /* out: one per round, the one that scores the sample "final" */
	int64_t tokens_in, tokens_out;
	double cost_usd;
} eval_item;

typedef struct eval_ctx {
	eval_mode mode;
	int rounds;              /* R: refine rounds, or the agent's attempts; 1 for oneshot */
	double temperature;
	const char *out;         /* per task folder OUT/<task with '_'>/ */
	const char *model;       /* the model string, for the agent loop */
	st_llm_model llm_model;
	st_llm_opts llm;         /* with the shared answer cache and replay */
	st_verify_opts verify;   /* every sample's verify options */
	const char *queue_url;   /* non-NULL: verify on the queue's workers (docs/queue.md) */
	const char *queue_arch;  /* the arch the jobs need: the workers' (sm_90a, host) */
	json_t *queue_options;   /* verify's options as the jobs carry them */
	int quiet;
	eval_item *items;
	int n_items;
	/* filled by eval_run */
	pthread_mutex_t mu;
	pthread_rwlock_t gpu_lock;
	st_neighbours neighbours; /* the pipelines' candidates, stopped while another times */
	st_verify_slot slot;     /* where the samples verify: gpu_lock, so measuring stays alone */
	int next, finished, stop;
	char device[128];        /* the GPU (or CPU) the first verdict names, for the record */
	st_status env_status;    /* what stopped the run: the machine or the setup, not the model */
	char env_error[1024];
} eval_ctx;

/* Run every item with `parallel` threads: each asks the model (concurrently with the others)
 * and verifies what it gets (measurements one at a time). ST_OK, or the error that stopped the
 * run (no GPU, a broken baseline, the endpoint refusing the key, the answer cache); items done
 * before it keep their rows. */
st_status eval_run(eval_ctx *c, int parallel, st_err *err);

/* OUT/<task id with '/' as '_'>. */
void eval_task_folder(const char *out, const char *task_id, char *dir, size_t len);

#endif
