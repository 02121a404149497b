/* `stitch queue submit|status`: put verify jobs on the Redis queue (src/queue) and gather their
 * results, or say what the queue and its workers are doing. Jobs are named by a hash of what is
 * verified, so submitting the same code twice returns the first result. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "queue/queue.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch queue submit --queue URL [--arch A] [--options JSON] [--wait]\n"
	        "                           [--timeout S] [--max-pending N] [--trusted] TASK FILE...\n"
	        "       stitch queue status --queue URL [--json]\n\n"
	        "submit: one verify job per FILE (its code, the task id, the arch that must run it,\n"
	        "the options) onto the Redis queue that `stitch worker`s read. A job already answered\n"
	        "or already queued is not added again (the id is a hash of what is verified). Prints\n"
	        "one line per job, `<id> <file> queued|already-queued|answered`; with --wait, one JSON\n"
	        "line per job with its result instead, in the order given.\n"
	        "status: per arch stream the jobs waiting and in flight, the consumers with their\n"
	        "pending jobs and whether their heartbeat lives, the workers, jobs done.\n\n"
	        "options:\n"
	        "  --queue URL      redis://[:PASSWORD@]HOST[:PORT][/DB] (required); rediss:// for\n"
	        "                   TLS ($STITCH_REDIS_CA, $STITCH_REDIS_CERT, $STITCH_REDIS_KEY)\n"
	        "  --arch A         the arch that runs the jobs: sm_90a (default) or host (the host\n"
	        "                   backend's workers, C solutions)\n"
	        "  --options JSON   verify options of the jobs, e.g. '{\"sets\": \"small\", \"seeds\": 1,\n"
	        "                   \"timing\": false}'\n"
	        "  --wait           wait for every result and print it\n"
	        "  --trusted        verify as a shipped solution (linking what the task's own\n"
	        "                   solutions link); workers accept it only for code that is one of\n"
	        "                   the task's reference or expert files, byte for byte\n"
	        "  --timeout S      with --wait: per job (default 3600)\n"
	        "  --max-pending N  hold back while the stream has N jobs or more (default 10000)\n"
	        "  --json           status as JSON\n"
	        "\nexit: 0 done, 1 a job timed out, 2 bad input, 3 no Redis\n");
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

static int submit(const char *url, const char *arch, json_t *options, int wait, double timeout_s,
                  long max_pending, int trusted, const char *task, char **files, int n)
{
	st_queue q;
	int rc = open_queue(url, &q);
	if (rc)
		return rc;
	char (*ids)[65] = calloc((size_t)n, sizeof *ids);
	if (!ids) {
		st_queue_close(&q);
		st_cli_error("queue: out of memory");
		return ST_EXIT_ENV;
	}
	st_err err;
	for (int i = 0; i < n && !rc; i++) {
		char *code;
		size_t len;
		if (st_read_file(files[i], &code, &len, &err)) {
			st_cli_error("queue: %s", err.msg);
			rc = ST_EXIT_USAGE;
			break;
		}
		json_t *job = st_queue_verify_job(task, arch, code, len, options, trusted);
		free(code);
		int state = 0;
		st_status s = st_queue_put(&q, job, max_pending, ids[i], &state, &err);
		json_decref(job);
		if (s) {
			st_cli_error("queue: %s: %s", files[i], err.msg);
			rc = s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
			break;
		}
		if (!wait)
			printf("%s %s %s\n", ids[i], files[i], state_names[state]);
	}
	for (int i = 0; i < n && wait && !rc; i++) {
		json_t *result = NULL;
		st_status s = st_queue_wait(&q, ids[i], timeout_s, &result, &err);
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
	free(ids);
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
	const char *verb = argv[1], *url = NULL, *arch = "sm_90a", *opts = NULL;
	int wait = 0, json = 0, trusted = 0;
	double timeout_s = 3600, max_pending = 10000;
	char **pos = calloc((size_t)argc, sizeof *pos);
	int n_pos = 0, rc = ST_EXIT_OK;
	if (!pos)
		return ST_EXIT_ENV;
	for (int i = 2; i < argc && !rc; i++) {
		const char *a = argv[i];
		int has = i + 1 < argc;
		if (!strcmp(a, "--wait"))
			wait = 1;
		else if (!strcmp(a, "--trusted"))
			trusted = 1;
		else if (!strcmp(a, "--json"))
			json = 1;
		else if (!strcmp(a, "--queue") && has)
			url = argv[++i];
		else if (!strcmp(a, "--arch") && has)
			arch = argv[++i];
		else if (!strcmp(a, "--options") && has)
			opts = argv[++i];
		else if (!strcmp(a, "--timeout") && has)
			rc = st_cli_number(a, argv[++i], 0.1, 1e7, &timeout_s) ? ST_EXIT_USAGE : 0;
		else if (!strcmp(a, "--max-pending") && has)
			rc = st_cli_number(a, argv[++i], 0, 1e9, &max_pending) ? ST_EXIT_USAGE : 0;
		else if (a[0] == '-') {
			st_cli_error("queue: unknown option '%s' (or it lacks its value); see stitch queue "
			             "--help", a);
			rc = ST_EXIT_USAGE;
		} else
			pos[n_pos++] = argv[i];
	}
	json_t *options = NULL;
	if (!rc && opts) {
		json_error_t je;
		options = json_loads(opts, 0, &je);
		if (!json_is_object(options)) {
			st_cli_error("queue: --options: expected a JSON object (%s)", je.text);
			rc = ST_EXIT_USAGE;
		}
	}
	if (!rc && !strcmp(verb, "submit")) {
		if (n_pos < 2) {
			st_cli_error("queue submit: TASK and at least one FILE");
			rc = ST_EXIT_USAGE;
		} else {
			rc = submit(url, arch, options, wait, timeout_s, (long)max_pending, trusted, pos[0],
			            pos + 1, n_pos - 1);
		}
	} else if (!rc && !strcmp(verb, "status")) {
		rc = n_pos ? (st_cli_error("queue status takes no arguments"), ST_EXIT_USAGE)
		           : status(url, json);
	} else if (!rc) {
		st_cli_error("queue: unknown command '%s' (known: submit, status)", verb);
		rc = ST_EXIT_USAGE;
	}
	json_decref(options);
	free(pos);
	return rc;
}
