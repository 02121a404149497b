/* fake-llm: the fake LLM server as a program, for shell tests that drive the `stitch` binary
 * against a scripted provider. It reads a script, prints the port it listens on as the first
 * line of stdout (flushed, so that a test can read it from a pipe and then talk to it), answers
 * until SIGTERM or SIGINT, and with --log appends each request, as it arrives, as one JSON line.
 *
 *   fake-llm SCRIPT.json [--log FILE] [--port N]
 *
 * SCRIPT.json: {"steps":[STEP, ...]}, answered one per request, the last repeating. A STEP is
 *   {"status":200, "body":"...", "retry_after":"1", "delay_ms":0, "hang":false, "match":"..."}
 * where "match" keys the step to the requests whose body holds that text, in any order (the
 * other steps answer the rest in order)
 * where, instead of "body", "openai_text" or "anthropic_text" builds a well-formed success
 * body around that text ("finish", "input_tokens" and "output_tokens" fill the rest; defaults
 * "stop" / "end_turn", 10, 5). Unknown keys are an error, so that a typo in a script does not
 * silently test something else. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fake_llm.h"

static void usage(void)
{
	fprintf(stderr, "usage: fake-llm SCRIPT.json [--log FILE] [--port N]\n");
}

/* Fills *st from one step object; the strings it makes (a body, a Retry-After value) go to
 * owned[0] and owned[1], freed by the caller. */
static int parse_step(json_t *j, int i, fake_step *st, char **owned)
{
	memset(st, 0, sizeof *st);
	st->status = 200;
	if (!json_is_object(j)) {
		fprintf(stderr, "fake-llm: step %d is not an object\n", i);
		return -1;
	}
	const char *otext = NULL, *atext = NULL, *finish = NULL;
	int in_tok = 10, out_tok = 5, n_bodies = 0;
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v) {
		if (!strcmp(key, "status") && json_is_integer(v)) {
			st->status = (int)json_integer_value(v);
		} else if (!strcmp(key, "body") && json_is_string(v)) {
			st->body = json_string_value(v);
			st->body_len = json_string_length(v);
			n_bodies++;
		} else if (!strcmp(key, "openai_text") && json_is_string(v)) {
			otext = json_string_value(v);
			n_bodies++;
		} else if (!strcmp(key, "anthropic_text") && json_is_string(v)) {
			atext = json_string_value(v);
			n_bodies++;
		} else if (!strcmp(key, "finish") && json_is_string(v)) {
			finish = json_string_value(v);
		} else if (!strcmp(key, "input_tokens") && json_is_integer(v)) {
			in_tok = (int)json_integer_value(v);
		} else if (!strcmp(key, "output_tokens") && json_is_integer(v)) {
			out_tok = (int)json_integer_value(v);
		} else if (!strcmp(key, "retry_after") && json_is_string(v)) {
			st->retry_after = json_string_value(v);
		} else if (!strcmp(key, "retry_after") && json_is_integer(v)) {
			/* A number is accepted for convenience; the header carries its text. */
			if (!(owned[1] = malloc(32))) {
				fprintf(stderr, "fake-llm: out of memory\n");
				return -1;
			}
			snprintf(owned[1], 32, "%lld", (long long)json_integer_value(v));
			st->retry_after = owned[1];
		} else if (!strcmp(key, "delay_ms") && json_is_integer(v)) {
			st->delay_ms = (int)json_integer_value(v);
		} else if (!strcmp(key, "match") && json_is_string(v) && json_string_length(v)) {
			st->match = json_string_value(v);
		} else if (!strcmp(key, "hang") && json_is_boolean(v)) {
			st->hang = json_is_true(v);
		} else {
			fprintf(stderr, "fake-llm: step %d: unknown key or wrong type: \"%s\"\n", i, key);
			return -1;
		}
	}
	if (n_bodies > 1) {
		fprintf(stderr, "fake-llm: step %d: give one of body, openai_text, anthropic_text\n", i);
		return -1;
	}
	if (otext || atext) {
		owned[0] = otext ? fake_openai_body(otext, finish ? finish : "stop", in_tok, out_tok)
		               : fake_anthropic_body(atext, finish ? finish : "end_turn", in_tok,
		                                     out_tok);
		if (!owned[0]) {
			fprintf(stderr, "fake-llm: step %d: could not build the body\n", i);
			return -1;
		}
		st->body = owned[0];
		st->body_len = 0;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *script = NULL, *log_path = NULL;
	int port = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--log") && i + 1 < argc) {
			log_path = argv[++i];
		} else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
			port = atoi(argv[++i]);
		} else if (argv[i][0] != '-' && !script) {
			script = argv[i];
		} else {
			usage();
			return 2;
		}
	}
	if (!script) {
		usage();
		return 2;
	}

	json_error_t je;
	json_t *root = json_load_file(script, 0, &je);
	if (!root) {
		fprintf(stderr, "fake-llm: %s:%d: %s\n", script, je.line, je.text);
		return 2;
	}
	json_t *jsteps = json_object_get(root, "steps");
	if (!json_is_array(jsteps)) {
		fprintf(stderr, "fake-llm: %s: no \"steps\" array\n", script);
		json_decref(root);
		return 2;
	}
	int n = (int)json_array_size(jsteps);
	fake_step *steps = calloc(n ? (size_t)n : 1, sizeof *steps);
	char **owned = calloc(n ? 2 * (size_t)n : 1, sizeof *owned);
	if (!steps || !owned) {
		fprintf(stderr, "fake-llm: out of memory\n");
		return 1;
	}
	int rc = 2;
	fake_llm *f = NULL;
	FILE *log = NULL;
	for (int i = 0; i < n; i++)
		if (parse_step(json_array_get(jsteps, (size_t)i), i, &steps[i], &owned[2 * i]))
			goto out;

	if (log_path && !(log = fopen(log_path, "w"))) {
		perror(log_path);
		goto out;
	}

	/* Blocked before the server's threads exist, so that they inherit the mask and the
	 * signal is taken by sigwait below, never by a connection thread. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL)) {
		perror("sigprocmask");
		rc = 1;
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);

	rc = 1;
	if (!(f = fake_llm_start_on(steps, n, port)))
		goto out;
	fake_llm_set_log(f, log);
	printf("%d\n", fake_llm_port(f));
	fflush(stdout);

	int sig;
	if (sigwait(&sigs, &sig)) {
		perror("sigwait");
		goto out;
	}
	rc = 0;
out:
	fake_llm_stop(f);
	if (log)
		fclose(log);
	for (int i = 0; i < 2 * n; i++)
		free(owned[i]);
	free(owned);
	free(steps);
	json_decref(root);
	return rc;
}
