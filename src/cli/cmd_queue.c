/* `stitch queue submit|status`: put verify jobs on the Redis queue (src/queue) and gather their
 * results, or say what the queue and its workers are doing. Jobs are named by a hash of what is
 * verified, so submitting the same code twice returns the first result. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/opt.h"
#include "queue/queue.h"

typedef struct queue_args {
	const char *url, *arch, *opts;
	int wait, json, trusted, max_pending;
	double timeout_s;
	json_t *options; /* --options, parsed */
} queue_args;

#define QUEUE_DEFAULTS {.arch = "sm_90a", .timeout_s = 3600, .max_pending = 10000}

static void own_table(queue_args *a, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_STRING, .name = "queue", 0, &a->url, "URL",
		 "redis://[:PASSWORD@]HOST[:PORT][/DB] (required); rediss:// for\n"
		 "TLS ($STITCH_REDIS_CA, $STITCH_REDIS_CERT, $STITCH_REDIS_KEY)"},
		{ST_OPT_STRING, .name = "arch", 0, &a->arch, "A",
		 "submit: the arch that runs the jobs: sm_90a or host (the host\n"
		 "backend's workers, C solutions)"},
		{ST_OPT_STRING, .name = "options", 0, &a->opts, "JSON",
		 "submit: verify options of the jobs, e.g. '{\"sets\": \"small\",\n"
		 "\"seeds\": 1, \"timing\": false}'"},
		{ST_OPT_FLAG, .name = "wait", 0, &a->wait, NULL, "submit: wait for every result and print it"},
		{ST_OPT_FLAG, .name = "trusted", 0, &a->trusted, NULL,
		 "submit: verify as a shipped solution (linking what the task's own\n"
		 "solutions link); workers accept it only for code that is one of\n"
		 "the task's reference or expert files, byte for byte"},
		{ST_OPT_DOUBLE, .name = "timeout", 0, &a->timeout_s, "S",
		 "submit --wait: seconds per job, 0.1 to 1e7", 0.1, 1e7},
		{ST_OPT_INT, .name = "max-pending", 0, &a->max_pending, "N",
		 "submit: hold back while the stream has N jobs or more, 0 to 1e9\n"
		 "(0: no limit)", 0, 1e9},
		{ST_OPT_FLAG, .name = "json", 0, &a->json, NULL, "status: as JSON"},
		{ST_OPT_END},
	};
	memcpy(t, table, sizeof table);
}

static void usage(FILE *f)
{
	queue_args a = QUEUE_DEFAULTS;
	st_opt opts[10];
	own_table(&a, opts);
	fprintf(f,
	        "usage: stitch queue submit --queue URL [--arch A] [--options JSON] [--wait]\n"
	        "                           [--timeout S] [--max-pending N] [--trusted] TASK FILE...\n"
	        "       stitch queue status --queue URL [--json]\n\n"
	        "submit: one verify job per FILE (its code, the task id, the arch that must run it,\n"
	        "the options) onto the Redis queue that `stitch worker`s read. A job already answered\n"
	        "or already queued is not added again (the id is a hash of what is verified). Prints\n"
	        "one line per job, `<id> <file> queued|already-queued|answered`; with --wait, one JSON\n"
	        "line per job with its result instead, in the order given. Every FILE is read before\n"
	        "the queue is contacted.\n"
	        "status: per arch stream the jobs waiting and in flight, the consumers with their\n"
	        "pending jobs and whether their heartbeat lives, the workers, jobs done.\n\n"
	        "options:\n");
	st_opt_usage(f, opts);
	fprintf(f, "\nexit: 0 done, 1 a job timed out, 2 bad input, 3 no Redis\n");
}

static int open_queue(const char *url, st_queue *q)
{
	st_err err;
	if (!url) {
		st_cli_error("queue: --queue redis://HOST:PORT is required");
		return ST_EXIT_USAGE;
	}
	st_status s = st_queue_open(url, q, &err);
	if (s) {
		st_cli_error("queue: %s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	return ST_EXIT_OK;
}

static const char *const state_names[] = {"queued", "already-queued", "answered"};

/* Every file's code, read before the queue is contacted: a typo in a name is bad input
 * (exit 2) whether or not the queue is up. */
static int read_all(char **files, int n, char **code, size_t *len)
{
	st_err err;
	for (int i = 0; i < n; i++) {
		if (st_dir_exists(files[i])) {
			st_cli_error("queue: %s: is a directory, not a solution file", files[i]);
			return ST_EXIT_USAGE;
		}
		if (st_read_file(files[i], &code[i], &len[i], &err)) {
			st_cli_error("queue: %s", err.msg);
			return ST_EXIT_USAGE;
		}
	}
	return ST_EXIT_OK;
}

static int submit(const queue_args *a, const char *task, char **files, int n)
{
	char **code = calloc((size_t)n, sizeof *code);
	size_t *len = calloc((size_t)n, sizeof *len);
	char (*ids)[65] = calloc((size_t)n, sizeof *ids);
	int rc = code && len && ids ? read_all(files, n, code, len) : ST_EXIT_ENV;
	st_queue q;
	int opened = 0;
	if (!rc && !(rc = open_queue(a->url, &q)))
		opened = 1;
	st_err err;
	for (int i = 0; i < n && !rc; i++) {
		json_t *job = st_queue_verify_job(task, a->arch, code[i], len[i], a->options,
		                                  a->trusted);
		int state = 0;
		st_status s = st_queue_put(&q, job, a->max_pending, ids[i], &state, &err);
		json_decref(job);
		if (s) {
			st_cli_error("queue: %s: %s", files[i], err.msg);
			rc = s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
			break;
		}
		if (!a->wait)
			printf("%s %s %s\n", ids[i], files[i], state_names[state]);
	}
	for (int i = 0; i < n && a->wait && !rc; i++) {
		json_t *result = NULL;
		st_status s = st_queue_wait(&q, ids[i], a->timeout_s, &result, &err);
		if (s == ST_E_TIMEOUT) {
			printf("{\"file\": \"%s\", \"id\": \"%s\", \"status\": \"no_result\"}\n", files[i],
			       ids[i]);
			rc = ST_EXIT_NO;
			continue;
		}
		if (s) {
			st_cli_error("queue: %s", err.msg);
			rc = ST_EXIT_ENV;
			break;
		}
		json_object_set_new(result, "file", json_string(files[i]));
		char *text = json_dumps(result, JSON_COMPACT);
		printf("%s\n", text ? text : "{}");
		free(text);
		json_decref(result);
		fflush(stdout);
	}
	for (int i = 0; code && i < n; i++)
		free(code[i]);
	free(code);
	free(len);
	free(ids);
	if (opened)
		st_queue_close(&q);
	return rc;
}

static int status(const char *url, int json)
{
	st_queue q;
	int rc = open_queue(url, &q);
	if (rc)
		return rc;
	json_t *st = NULL;
	st_err err;
	st_status s = st_queue_status(&q, &st, &err);
	st_queue_close(&q);
	if (s) {
		st_cli_error("queue: %s", err.msg);
		return ST_EXIT_ENV;
	}
	if (json) {
		char *text = json_dumps(st, JSON_INDENT(2));
		printf("%s\n", text ? text : "{}");
		free(text);
		json_decref(st);
		return ST_EXIT_OK;
	}
	size_t i, k;
	json_t *x, *c;
	printf("jobs done: %lld\n", (long long)json_integer_value(json_object_get(st, "done")));
	json_array_foreach(json_object_get(st, "streams"), i, x) {
		printf("stream %s: %lld waiting or in flight, %lld delivered and not yet acknowledged\n",
		       json_string_value(json_object_get(x, "arch")),
		       (long long)json_integer_value(json_object_get(x, "length")),
		       (long long)json_integer_value(json_object_get(x, "pending")));
		json_array_foreach(json_object_get(x, "consumers"), k, c)
			printf("  consumer %-32s %4lld pending, idle %7.1f s, %s\n",
			       json_string_value(json_object_get(c, "name")),
			       (long long)json_integer_value(json_object_get(c, "pending")),
			       json_integer_value(json_object_get(c, "idle_ms")) / 1e3,
			       json_is_true(json_object_get(c, "alive")) ? "alive" : "DEAD (no heartbeat)");
	}
	json_array_foreach(json_object_get(st, "workers"), i, x) {
		const char *job = json_string_value(json_object_get(x, "job"));
		printf("worker %-34s %s on %s, %lld done%s%.12s\n",
		       json_string_value(json_object_get(x, "name")),
		       json_string_value(json_object_get(x, "arch")),
		       json_string_value(json_object_get(x, "device")),
		       (long long)json_integer_value(json_object_get(x, "done")), job ? ", on " : "",
		       job ? job : "");
	}
	json_decref(st);
	return ST_EXIT_OK;
}

int cmd_queue(int argc, char **argv)
{
	if (argc < 2 || st_cli_wants_help(argc, argv)) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? ST_EXIT_USAGE : ST_EXIT_OK;
	}
	const char *verb = argv[1];
	queue_args a = QUEUE_DEFAULTS;
	st_opt opts[10];
	own_table(&a, opts);
	const st_opt *const tables[] = {opts, NULL};
	const char **pos = calloc((size_t)argc, sizeof *pos);
	int n_pos = 0, rc = ST_EXIT_OK;
	if (!pos)
		return ST_EXIT_ENV;
	st_err err;
	/* argv + 1: the verb is the parser's command name, the rest its arguments */
	if (st_opt_parse(tables, NULL, argc - 1, argv + 1, pos, argc, &n_pos, &err)) {
		st_cli_error("queue: %s; see 'stitch queue --help'", err.msg);
		rc = ST_EXIT_USAGE;
	}
	json_t *options = NULL;
	if (!rc && a.opts) {
		json_error_t je;
		options = json_loads(a.opts, 0, &je);
		if (!json_is_object(options)) {
			st_cli_error("queue: --options: expected a JSON object (%s)", je.text);
			rc = ST_EXIT_USAGE;
		}
	}
	a.options = options;
	if (!rc && !strcmp(verb, "submit")) {
		if (n_pos < 2) {
			st_cli_error("queue submit: TASK and at least one FILE");
			rc = ST_EXIT_USAGE;
		} else {
			rc = submit(&a, pos[0], (char **)pos + 1, n_pos - 1);
		}
	} else if (!rc && !strcmp(verb, "status")) {
		rc = n_pos ? (st_cli_error("queue status takes no arguments"), ST_EXIT_USAGE)
		           : status(a.url, a.json);
	} else if (!rc) {
		st_cli_error("queue: unknown command '%s' (known: submit, status)", verb);
		rc = ST_EXIT_USAGE;
	}
	json_decref(options);
	free(pos);
	return rc;
}
