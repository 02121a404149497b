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
#include "verify_opts.h"

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
	        "options (per request): sets (\"small,eval\"), seeds (1-10), timing, profile.\n"
	        "A request id (A-Z a-z 0-9 . _ : -, at most 128) makes a request idempotent: the\n"
	        "same id and content get the stored answer, never a second run; every request and\n"
	        "answer is stored in SQLite first, so a restart loses nothing. Docs: docs/serve.md.\n\n"
	        "options:\n"
	        "  --listen HOST:PORT  address (default 127.0.0.1:8421; port 0: any free port)\n"
	        "  --gpus LIST      cuda: GPU indexes, one worker each (default 0), e.g. 0,1\n"
	        "  --queue URL      verify on the `stitch worker`s of a Redis queue (redis://HOST:\n"
	        "                   PORT) instead of this machine's GPUs: same API; --workers N\n"
	        "                   requests wait on the queue at once (default 32) (docs/queue.md)\n"
	        "  --queue-arch A   with --queue: the arch whose workers take the jobs (default:\n"
	        "                   --arch, else sm_90a; host with --backend host)\n"
	        "  --workers N      host backend: workers (default: the CPUs it may use)\n"
	        "  --per-gpu N      cuda: workers per GPU (default 1); with more they overlap their\n"
	        "                   correctness runs and take the GPU alone to time and profile;\n"
	        "                   a runtime error seen while sharing is verified again alone\n"
	        "  --compilers N    compile pool threads (default: half the CPUs it may use)\n"
	        "  --warm TASKS     before listening, compile the reference, expert and hooks of\n"
	        "                   these tasks (\"all\" or ids such as t1/softmax,t2/mlp_gelu)\n"
	        "                   on every core and load them in kept runners on every GPU, so\n"
	        "                   their first requests compile only the candidate and start\n"
	        "                   no baseline runner (default: none; baselines compile and\n"
	        "                   load on first use)\n"
	        "  --keep-runners N runners of references and experts kept loaded between\n"
	        "                   requests, per GPU (each holds a device context), and spare\n"
	        "                   runners started ahead for the candidates (default 48; 0:\n"
	        "                   every verify starts its own)\n"
	        "  --spares N       spare runners kept started per worker (default 2); a verify\n"
	        "                   that finds none waits up to 15 s for one being started, else\n"
	        "                   starts its own (seconds, on several busy GPUs)\n"
	        "  --queue-max N    requests in flight before 429 + Retry-After (default 256)\n"
	        "  --admit-wait S   a request that finds the queue full waits up to S s in line\n"
	        "                   for a slot before its 429 (default 1; 0: at once)\n"
	        "  --body-max BYTES request body limit (default 1048576; 413 beyond)\n"
	        "  --deadline S     answer 504 after S seconds; the work goes on and a repeat with\n"
	        "                   the same id gets its answer (default 600)\n"
	        "  --db FILE        requests and answers (default $XDG_DATA_HOME/stitch/serve.db or\n"
	        "                   ~/.local/share/stitch/serve.db)\n"
	        "  --spool DIR      where submitted code is written (default: the cache's spool/)\n"
	        "  --judge-model M  LLM rubric judge for /v1/reward (as stitch solve --model);\n"
	        "                   without it the reward is the rule reward alone\n"
	        "  --judges N       judge threads (default 4)\n"
	        "  --prompts DIR    judge prompt templates (default: this stitch's prompts/)\n"
	        "  --clip X --offset X --lambda-gen X --lambda-opt X --baseline reference|expert\n"
	        "                   the reward formula's parameters (docs/reward.md)\n"
	        "  --profile        add the CUPTI profile to every verdict (costs a run)\n"
	        ST_REQUEST_CAP_HELP
	        "$STITCH_SERVE_TOKEN, when set: every /v1 request needs Authorization: Bearer <it>.\n"
	        "verify options for every request (serve's own defaults: --min-time 100\n"
	        "--max-rse 0.01, no profile unless --profile, and --compare-threads the CPUs it\n"
	        "may use shared out among the workers, at most 16 each):\n" ST_VERIFY_OPTS_HELP
	        "\nexit: 0 after a drain, 2 bad options, 3 cannot listen or start\n");
}

static void ready(int port, void *arg)
{
	(void)arg;
	/* On stdout, alone on its line: what a script that asked for port 0 reads. */
	printf("port %d\n", port);
	fflush(stdout);
}

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
	int quiet = 0;
	const char *baseline = NULL;
	o.verify.max_request_bytes = st_cli_request_cap_default();
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int r = st_verify_opt_parse(&o.verify, argc, argv, &i, &quiet);
		if (r < 0)
			return ST_EXIT_USAGE;
		if (r)
			continue;
		if (!strcmp(a, "--profile")) {
			o.verify.profile = 1;
			continue;
		}
		const char **str = !strcmp(a, "--listen")        ? &o.listen
		                 : !strcmp(a, "--gpus")          ? &o.gpus
		                 : !strcmp(a, "--db")            ? &o.db_path
		                 : !strcmp(a, "--spool")         ? &o.spool_dir
		                 : !strcmp(a, "--judge-model")   ? &o.judge_model
		                 : !strcmp(a, "--prompts")       ? &o.prompts_dir
		                 : !strcmp(a, "--queue")         ? &o.queue_url
		                 : !strcmp(a, "--queue-arch")    ? &o.queue_arch
		                 : !strcmp(a, "--warm")          ? &o.warm
		                 : !strcmp(a, "--baseline")      ? &baseline : NULL;
		double *num = !strcmp(a, "--deadline")   ? &o.deadline_s
		            : !strcmp(a, "--admit-wait") ? &o.admit_wait_s
		            : !strcmp(a, "--clip")       ? &o.reward.clip
		            : !strcmp(a, "--offset")     ? &o.reward.offset
		            : !strcmp(a, "--lambda-gen") ? &o.reward.lambda_gen
		            : !strcmp(a, "--lambda-opt") ? &o.reward.lambda_opt : NULL;
		int *count = !strcmp(a, "--workers")   ? &o.workers
		           : !strcmp(a, "--per-gpu")   ? &o.per_gpu
		           : !strcmp(a, "--compilers") ? &o.compilers
		           : !strcmp(a, "--queue-max") ? &o.queue_max
		           : !strcmp(a, "--spares")    ? &o.spares
		           : !strcmp(a, "--judges")    ? &o.judges : NULL;
		int body = !strcmp(a, "--body-max");
		if (!strcmp(a, "--max-request-gb")) {
			if (st_cli_request_cap("serve", i + 1 < argc ? argv[++i] : NULL,
			                       &o.verify.max_request_bytes))
				return ST_EXIT_USAGE;
			continue;
		}
		if (!strcmp(a, "--keep-runners")) { /* 0 is meaningful: no pool */
			double x;
			if (i + 1 >= argc || st_cli_number(a, argv[i + 1], 0, 4096, &x)) {
				if (i + 1 >= argc)
					st_cli_error("serve: %s needs a value", a);
				return ST_EXIT_USAGE;
			}
			o.keep_runners = (int)x;
			i++;
			continue;
		}
		if (!str && !num && !count && !body) {
			st_cli_error("serve: unknown option '%s'; see 'stitch serve --help'", a);
			return ST_EXIT_USAGE;
		}
		if (i + 1 >= argc) {
			st_cli_error("serve: %s needs a value", a);
			return ST_EXIT_USAGE;
		}
		const char *v = argv[++i];
		double x;
		if (str) {
			*str = v;
		} else if (num) {
			if (st_cli_number(a, v, !strcmp(a, "--deadline") ? 0.1 : 0, 1e6, num))
				return ST_EXIT_USAGE;
		} else if (count) {
			if (st_cli_number(a, v, 1, 1e6, &x))
				return ST_EXIT_USAGE;
			*count = (int)x;
		} else {
			if (st_cli_number(a, v, 1024, 1 << 30, &x))
				return ST_EXIT_USAGE;
			o.body_max = (size_t)x;
		}
	}
	if (baseline) {
		if (strcmp(baseline, "reference") && strcmp(baseline, "expert")) {
			st_cli_error("serve: --baseline is reference or expert, not '%s'", baseline);
			return ST_EXIT_USAGE;
		}
		o.reward.baseline = baseline;
	}
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
