/* stitch serve: the Verifier and the reward over HTTP (src/serve). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "request_cap.h"
#include "common/fs.h"
#include "common/paths.h"
#include "serve/serve.h"
#include "suite_opt.h"
#include "verify_opts.h"

static const char *const baselines[] = {"reference", "expert", "best", NULL};

/* serve's own options over o (and *body_max, an int for the table; o->body_max is a size_t). */
#define SERVE_OPT_N 28

static void own_table(st_serve_opts *o, const char **suite, int *body_max, double *cap_gib,
                      st_opt *t)
{
	const st_opt table[] = {
		st_cli_suite_opt(suite),
		{ST_OPT_STRING, .name = "listen", 0, &o->listen, "HOST:PORT",
		 "address (port 0: any free port)"},
		{ST_OPT_LIST, .name = "gpus", 0, &o->gpus, "LIST",
		 "cuda: GPU indexes, one worker each, e.g. 0,1", .unset = "0"},
		{ST_OPT_STRING, .name = "queue", 0, &o->queue_url, "URL",
		 "verify on the `stitch worker`s of a Redis queue (redis://HOST:\n"
		 "PORT) instead of this machine's GPUs: same API; --workers N\n"
		 "requests wait on the queue at once (default 32) (docs/queue.md)"},
		{ST_OPT_STRING, .name = "queue-arch", 0, &o->queue_arch, "A",
		 "with --queue: the arch whose workers take the jobs",
		 .unset = "--arch, else sm_90a; host with --backend host"},
		{ST_OPT_INT, .name = "workers", 0, &o->workers, "N", "host backend: workers", 1, 1e6,
		 .unset = "the CPUs it may use"},
		{ST_OPT_INT, .name = "per-gpu", 0, &o->per_gpu, "N",
		 "cuda: workers per GPU; with more than one they overlap their\n"
		 "correctness runs and take the GPU alone to time and profile,\n"
		 "stopping the others' candidates while they time;\n"
		 "a runtime error seen while sharing is verified again alone", 1, 1e6, .unset = "1"},
		{ST_OPT_INT, .name = "compilers", 0, &o->compilers, "N", "compile pool threads", 1, 1e6,
		 .unset = "half the CPUs it may use"},
		{ST_OPT_LIST, .name = "warm", 0, &o->warm, "TASKS",
		 "before listening, compile the reference, expert and hooks of\n"
		 "these tasks (\"all\" or ids such as t1/softmax,t2/mlp_gelu)\n"
		 "on every core and load them in kept runners on every GPU, so\n"
		 "their first requests compile only the candidate and start\n"
		 "no baseline runner", .unset = "none; baselines compile and load on first use"},
		{ST_OPT_INT, .name = "keep-runners", 0, &o->keep_runners, "N",
		 "runners of references and experts kept loaded between\n"
		 "requests, per GPU (each holds a device context), and spare\n"
		 "runners started ahead for the candidates (0: every verify\n"
		 "starts its own), 0 to 4096", 0, 4096},
		{ST_OPT_INT, .name = "spares", 0, &o->spares, "N",
		 "spare runners kept started per worker; a verify that finds none\n"
		 "waits up to 15 s for one being started, else starts its own", 1, 1e6},
		{ST_OPT_INT, .name = "queue-max", 0, &o->queue_max, "N",
		 "requests in flight before 429 + Retry-After", 1, 1e6},
		{ST_OPT_DOUBLE, .name = "admit-wait", 0, &o->admit_wait_s, "S",
		 "a request that finds the queue full waits up to S s in line\n"
		 "for a slot before its 429 (0: at once)", 0, 1e6},
		{ST_OPT_INT, .name = "body-max", 0, body_max, "BYTES",
		 "request body limit, 1024 to 2^30 (413 beyond)", 1024, 1 << 30},
		{ST_OPT_DOUBLE, .name = "deadline", 0, &o->deadline_s, "S",
		 "answer 504 after S seconds; the work goes on and a repeat with\n"
		 "the same id gets its answer", 0.1, 1e6},
		{ST_OPT_STRING, .name = "db", 0, &o->db_path, "FILE", "requests and answers",
		 .unset = "$XDG_DATA_HOME/stitch/serve.db or\n~/.local/share/stitch/serve.db"},
		{ST_OPT_STRING, .name = "spool", 0, &o->spool_dir, "DIR",
		 "where submitted code is written", .unset = "the cache's spool/"},
		{ST_OPT_STRING, .name = "judge-model", 0, &o->judge_model, "M",
		 "LLM rubric judge for /v1/reward (as stitch solve --model)",
		 .unset = "none, the reward is the rule reward alone"},
		{ST_OPT_INT, .name = "judges", 0, &o->judges, "N", "judge threads", 1, 1e6},
		{ST_OPT_STRING, .name = "prompts", 0, &o->prompts_dir, "DIR", "judge prompt templates",
		 .unset = "this stitch's prompts/"},
		{ST_OPT_DOUBLE, .name = "clip", 0, &o->reward.clip, "X",
		 "reward: speedup cap (docs/reward.md)", 0, 1e6},
		{ST_OPT_DOUBLE, .name = "offset", 0, &o->reward.offset, "X",
		 "reward: added to the capped speedup", 0, 1e6},
		{ST_OPT_DOUBLE, .name = "lambda-gen", 0, &o->reward.lambda_gen, "X",
		 "reward: rubric weight for task-to-code", 0, 1e6},
		{ST_OPT_DOUBLE, .name = "lambda-opt", 0, &o->reward.lambda_opt, "X",
		 "reward: rubric weight for optimisation", 0, 1e6},
		{ST_OPT_ENUM, .name = "baseline", 0, &o->reward.baseline, "B",
		 "reward: reference, expert or best (the faster of expert and\n"
		 "vendor), which speedup counts", .values = baselines},
		{ST_OPT_FLAG, .name = "profile", 0, &o->verify.profile, NULL,
		 "add the CUPTI profile to every verdict (costs a run)"},
		ST_REQUEST_CAP_OPT(cap_gib),
		{ST_OPT_END},
	};
	_Static_assert(sizeof table / sizeof table[0] <= SERVE_OPT_N, "SERVE_OPT_N");
	memcpy(t, table, sizeof table);
}

static const st_opt_conflict conflicts[] = {{"no-timing", "time-set"}, {NULL, NULL}};

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch serve [options]\n\n"
	        "Serve the Verifier and the reward over HTTP until SIGTERM or SIGINT, which drain:\n"
	        "new requests get 503, admitted ones are finished and answered, then it stops.\n\n"
	        "  POST /v1/verify  {\"task\", \"code\", \"id\"?, \"options\"?}  -> the verdict\n"
	        "  POST /v1/reward  {\"task\", \"code\", \"skill\"?: gen|opt, \"previous_code\"?,\n"
	        "                    \"feedback\"?, \"id\"?, \"options\"?}  -> verdict + reward\n"
	        "  GET  /v1/tasks   the suite;  GET /healthz;  GET /metrics (Prometheus text)\n"
	        "A request's task is an id: without --suite any task under the task root (t1/softmax,\n"
	        "kb/level1/19_ReLU); with --suite only the suites' tasks, by id (level1/19_ReLU).\n"
	        "options (per request): sets (\"small,eval\"), seeds (1-10), timing, profile.\n"
	        "A request id (A-Z a-z 0-9 . _ : -, at most 128) makes a request idempotent: the\n"
	        "same id and content get the stored answer, never a second run; every request and\n"
	        "answer is stored in SQLite first, so a restart loses nothing. Docs: docs/serve.md.\n\n"
	        "options:\n");
	st_serve_opts o;
	st_serve_opts_default(&o);
	int body_max = (int)o.body_max;
	double cap_gib = st_cli_request_cap_default_gib();
	st_opt own[SERVE_OPT_N];
	const char *suite = NULL;
	own_table(&o, &suite, &body_max, &cap_gib, own);
	st_opt_usage(f, own);
	fprintf(f,
	        "$STITCH_SERVE_TOKEN, when set: every /v1 request needs Authorization: Bearer <it>.\n"
	        "verify options for every request (serve's own defaults: --min-time 100\n"
	        "--max-rse 0.01, no profile unless --profile, and --compare-threads the CPUs it\n"
	        "may use shared out among the workers, at most 16 each):\n");
	st_verify_opts_usage(f, &o.verify);
	fprintf(f, "\nexit: 0 after a drain, 2 bad options, 3 cannot listen or start\n");
}

static void ready(int port, void *arg)
{
	(void)arg;
	/* On stdout, alone on its line: what a script that asked for port 0 reads. */
	printf("port %d\n", port);
	fflush(stdout);
}

static int serve(st_serve_opts *o, int body_max, double cap_gib);

int cmd_serve(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_serve_opts o;
	st_serve_opts_default(&o);
	o.ready = ready;
	o.tasks_root = st_cli_tasks_root();
	int quiet = 0, body_max = (int)o.body_max, n_pos;
	st_opt own[SERVE_OPT_N], ver[ST_VERIFY_OPT_N];
	double cap_gib = st_cli_request_cap_default_gib();
	const char *suite = NULL;
	own_table(&o, &suite, &body_max, &cap_gib, own);
	st_verify_opt_table(&o.verify, &quiet, 0, ver);
	const st_opt *const tables[] = {own, ver, NULL};
	if (st_cli_parse("serve", tables, conflicts, argc, argv, NULL, 0, &n_pos))
		return ST_EXIT_USAGE;
	/* Without --suite every task under the root stays reachable, as it always was. */
	st_suite su = {0};
	int rc = suite ? st_cli_suite("serve", suite, o.queue_url, &su) : ST_EXIT_OK;
	if (rc)
		return rc;
	o.suite = suite ? &su : NULL;
	rc = serve(&o, body_max, cap_gib);
	st_suite_free(&su);
	return rc;
}

/* The rest of serve's setup (paths, token) and the service itself. */
static int serve(st_serve_opts *o_, int body_max, double cap_gib)
{
	st_serve_opts o = *o_;
	o.body_max = (size_t)body_max;
	o.verify.max_request_bytes = st_cli_request_cap_bytes(cap_gib);
	char db[PATH_MAX], spool[PATH_MAX], prompts[PATH_MAX], cache[PATH_MAX], judge_cache[PATH_MAX];
	st_err err;
	if (!o.db_path) {
		if (st_data_path("serve.db", db, sizeof db, &err)) {
			st_cli_error("serve: %s (or give --db)", err.msg);
			return ST_EXIT_USAGE;
		}
		o.db_path = db;
	}
	if (!o.spool_dir || (o.judge_model && !o.judge_cache)) {
		if (st_cache_dir(cache, sizeof cache, &err)) {
			st_cli_error("serve: %s", err.msg);
			return ST_EXIT_USAGE;
		}
		snprintf(spool, sizeof spool, "%.4000s/spool", cache);
		snprintf(judge_cache, sizeof judge_cache, "%.4000s/judge.db", cache);
		if (!o.spool_dir)
			o.spool_dir = spool;
		if (!o.judge_cache)
			o.judge_cache = judge_cache;
	}
	if (!o.prompts_dir) {
		snprintf(prompts, sizeof prompts, "%.4000s/prompts", st_home());
		o.prompts_dir = prompts;
	}
	const char *token = getenv("STITCH_SERVE_TOKEN");
	o.token = token && *token ? token : NULL;
	st_status s = st_serve_run(&o, &err);
	if (s) {
		st_cli_error("serve: %s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	return ST_EXIT_OK;
}
