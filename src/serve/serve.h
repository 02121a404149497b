/* stitch serve: the Verifier and the reward as an HTTP service for RL trainers and other
 * clients. Requests (POST /v1/verify, POST /v1/reward) are admitted into a bounded queue (429
 * with Retry-After when it is full), compiled by a pool on the CPU cores, verified by one worker
 * per GPU (each worker's runners see only its GPU), optionally judged by an LLM rubric, and
 * answered; every request and answer is stored in SQLite first, so a restart loses nothing and a
 * repeated request id gets the stored answer. SIGTERM (or SIGINT) drains: no new work, the
 * admitted work is finished and answered, then the service stops. */
#ifndef ST_SERVE_H
#define ST_SERVE_H

#include <stddef.h>

#include "reward/reward.h"
#include "task/suite.h"
#include "stitch/stitch.h"

typedef struct st_serve_opts {
	const char *listen;        /* "HOST:PORT" (port 0: any free port), default 127.0.0.1:8421 */
	const char *gpus;          /* cuda: comma list of GPU indexes, one worker each (default "0") */
	int workers;               /* host backend: workers (default: online CPUs) */
	int per_gpu;               /* cuda: workers per GPU (default 1); with more, they share the
	                              GPU for correctness runs and take it alone to measure
	                              (st_verify_slot.gpu_lock) */
	int compilers;             /* compile pool threads (default: half the CPUs it may use) */
	const char *warm;          /* "all" or a comma list of task ids whose baselines are compiled
	                              before the first request (src/serve/warm.h); NULL: none */
	const char *queue_url;     /* redis://...: verify on the queue's `stitch worker`s instead of
	                              here (docs/queue.md); NULL: here */
	const char *queue_arch;    /* with queue_url: the arch whose workers take the jobs
	                              (default: verify.arch, else sm_90a; host on the host backend) */
	int keep_runners;          /* runners of references and experts kept loaded between
	                              requests, with spare runners started ahead for the rest
	                              (src/verify/runner_pool.h; default 48); 0: none, every verify
	                              starts and stops its own */
	int spares;                /* spare runners kept started per worker (default 2) */
	int queue_max;             /* admitted and unanswered requests at most (default 256) */
	size_t body_max;           /* request body limit in bytes (default 1 MiB) */
	double deadline_s;         /* per request: answer 504 after this, the work goes on (600) */
	double retry_after_s;      /* the Retry-After of a 429 (default 2) */
	double admit_wait_s;       /* a request that finds the queue full waits this long, in line
	                              with the others, for a slot before its 429 (default 1) */
	const char *token;         /* bearer token every request must carry; NULL: none */
	const char *db_path;       /* SQLite file of requests and answers */
	const char *spool_dir;     /* where submitted code is written for the compiler */
	const char *tasks_root;    /* task ids resolve under here */
	const st_suite *suite;     /* --suite: only these tasks, by id; NULL: any under the root */
	const char *judge_model;   /* rubric judge for /v1/reward (st_llm_model_parse); NULL: the
	                              rule reward alone */
	const char *judge_cache;   /* the judge's answer cache (SQLite); NULL: none */
	const char *prompts_dir;   /* the judge's prompt templates */
	int judges;                /* judge threads (default 4) */
	st_verify_opts verify;     /* every verify's options (backend, sets, seeds, timing, ...) */
	st_reward_opts reward;
	/* Lines for the operator: the address once listening, drain progress. NULL: stderr. */
	void (*log)(const char *line);
	/* Called once listening, with the port (for tests that ask for port 0). */
	void (*ready)(int port, void *arg);
	void *ready_arg;
} st_serve_opts;

void st_serve_opts_default(st_serve_opts *o);

/* Run the service until SIGTERM or SIGINT, then drain and return. ST_E_INVALID for bad
 * options (address, GPU list, database), ST_E_SYSTEM when it cannot listen or start. */
st_status st_serve_run(const st_serve_opts *o, st_err *err);

#endif
