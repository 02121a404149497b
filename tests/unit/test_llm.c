/* Unit tests for the LLM client, driven against the scripted fake server (tests/fake_llm) on
 * 127.0.0.1: model-string parsing, both wire protocols as the server sees them (path, headers,
 * body) and as the client reads them back (text, finish reason, truncation, tokens), retries on
 * 429 and 5xx with Retry-After honoured and none on 4xx, a hung server and the timeout, bodies
 * that are not JSON, not UTF-8 or too big, the response cache and offline replay, the API key
 * (required where the provider needs one, sent only in its header, never in a message or the
 * cache) and the cost and usage counts. Waits are shortened (backoff 0.01 s, capped at 0.2 s,
 * 2 s per request) so that the whole file runs in a few seconds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "fake_llm.h"
#include "llm/llm.h"
#include "llm/llm_cache.h"

#define OPENAI_KEY "sk-test-123"
#define ANTHROPIC_KEY "sk-ant-test-456"

/* What a test started, so that teardown can stop it even when an assertion jumps out early. */
static fake_llm *g_srv;
static st_llm_client *g_cli;
static char g_dir[64]; /* a temporary directory holding a cache, or "" */

static void remove_cache_dir(void)
{
	if (!g_dir[0])
		return;
	static const char *const files[] = { "cache.sqlite", "cache.sqlite-wal", "cache.sqlite-shm",
		                             "cache.sqlite-journal" };
	char p[128];
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
		unlink(p);
	}
	rmdir(g_dir);
	g_dir[0] = 0;
}

static int setup(void **state)
{
	(void)state;
	setenv("OPENAI_API_KEY", OPENAI_KEY, 1);
	setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	st_llm_client_free(g_cli);
	g_cli = NULL;
	fake_llm_stop(g_srv);
	g_srv = NULL;
	remove_cache_dir();
	return 0;
}

#define assert_mentions(hay, needle)                                                            \
	do {                                                                                    \
		if (!strcasestr((hay), (needle)))                                               \
			fail_msg("\"%s\" does not mention \"%s\"", (hay), (needle));            \
	} while (0)

/* The key must not leak into any message the client makes. */
static void assert_no_key(const char *msg)
{
	if (strstr(msg, "sk-test") || strstr(msg, "sk-ant-test"))
		fail_msg("an API key appears in the message: \"%s\"", msg);
}

static void fast_opts(st_llm_opts *o)
{
	st_llm_opts_default(o);
	o->backoff_base_s = 0.01;
	o->backoff_max_s = 0.2;
	o->timeout_s = 2;
}

/* Starts the fake server with `steps` and a client for it; `anthropic` picks the protocol. */
static void start(const fake_step *steps, int n, int anthropic, const st_llm_opts *o,
                  st_llm_model *m_out)
{
	g_srv = fake_llm_start(steps, n);
	assert_non_null(g_srv);
	char spec[256];
	snprintf(spec, sizeof spec, "%s:http://127.0.0.1:%d/v1:%s",
	         anthropic ? "anthropic-compat" : "openai-compat", fake_llm_port(g_srv),
	         anthropic ? "fake-claude" : "fake-model");
	st_llm_model m;
	st_err err = { { 0 } };
	if (st_llm_model_parse(spec, &m, &err) != ST_OK)
		fail_msg("parse %s: %s", spec, err.msg);
	if (st_llm_client_new(&m, o, &g_cli, &err) != ST_OK)
		fail_msg("client: %s", err.msg);
	if (m_out)
		*m_out = m;
}

static const st_llm_msg two_msgs[] = {
	{ "system", "You are terse." },
	{ "user", "Say hi." },
};

static st_llm_request simple_request(void)
{
	st_llm_request q;
	memset(&q, 0, sizeof q);
	q.msgs = two_msgs;
	q.n_msgs = 2;
	q.temperature = 0.25;
	q.max_tokens = 321;
	return q;
}

/* Parses request i's body as the server received it. */
static json_t *sent_body(int i)
{
	const char *b = fake_llm_body(g_srv, i);
	assert_non_null(b);
	json_error_t je;
	json_t *j = json_loads(b, 0, &je);
	if (!j)
		fail_msg("request %d's body is not JSON (%s): %s", i, je.text, b);
	return j;
}

/* ---- model strings ------------------------------------------------------------------------ */

static void test_model_parse_ok(void **state)
{
	(void)state;
	st_llm_model m;
	st_err err = { { 0 } };

	assert_int_equal(st_llm_model_parse("openai:gpt-5.4", &m, &err), ST_OK);
	assert_int_equal(m.proto, ST_LLM_OPENAI);
	assert_string_equal(m.provider, "openai");
	assert_string_equal(m.base_url, "https://api.openai.com/v1");
	assert_string_equal(m.model, "gpt-5.4");
	assert_string_equal(m.key_env, "OPENAI_API_KEY");
	assert_true(m.key_required);

	assert_int_equal(st_llm_model_parse("anthropic:claude-opus-4-6", &m, &err), ST_OK);
	assert_int_equal(m.proto, ST_LLM_ANTHROPIC);
	assert_string_equal(m.provider, "anthropic");
	assert_string_equal(m.base_url, "https://api.anthropic.com/v1");
	assert_string_equal(m.model, "claude-opus-4-6");
	assert_string_equal(m.key_env, "ANTHROPIC_API_KEY");
	assert_true(m.key_required);

	assert_int_equal(st_llm_model_parse("vllm:http://host:8000/v1:Qwen3-32B", &m, &err), ST_OK);
	assert_int_equal(m.proto, ST_LLM_OPENAI);
	assert_string_equal(m.provider, "vllm");
	assert_string_equal(m.base_url, "http://host:8000/v1");
	assert_string_equal(m.model, "Qwen3-32B");
	assert_string_equal(m.key_env, "OPENAI_API_KEY");
	assert_false(m.key_required);

	/* The model name may itself contain ':'. */
	assert_int_equal(st_llm_model_parse("ollama:http://h:11434/v1:qwen3:32b", &m, &err), ST_OK);
	assert_int_equal(m.proto, ST_LLM_OPENAI);
	assert_string_equal(m.base_url, "http://h:11434/v1");
	assert_string_equal(m.model, "qwen3:32b");

	/* base_url is kept without a trailing '/', so that "{base}/messages" has one slash. */
	assert_int_equal(st_llm_model_parse("anthropic-compat:https://gw.example/api/v1/:c", &m, &err),
	                 ST_OK);
	assert_int_equal(m.proto, ST_LLM_ANTHROPIC);
	assert_string_equal(m.base_url, "https://gw.example/api/v1");
	assert_string_equal(m.model, "c");
	assert_string_equal(m.key_env, "ANTHROPIC_API_KEY");
	assert_false(m.key_required);
}

static void test_model_parse_errors(void **state)
{
	(void)state;
	static const char *bad[] = {
		"",
		"nope:x",
		"openai:",
		"anthropic:",
		"vllm:http://host:8000:m",   /* no path */
		"vllm:ftp://x/v1:m",         /* not http(s) */
		"vllm:http://host:8000/v1",  /* no model */
		"vllm:http://host:8000/v1:", /* empty model */
		"gpt-4",                     /* no provider */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		st_llm_model m;
		st_err err = { { 0 } };
		if (st_llm_model_parse(bad[i], &m, &err) == ST_OK)
			fail_msg("'%s' parsed (base_url '%s', model '%s')", bad[i], m.base_url, m.model);
		if (!err.msg[0])
			fail_msg("'%s': no error message", bad[i]);
	}
}

/* ---- the two protocols -------------------------------------------------------------------- */

static void test_openai_success(void **state)
{
	(void)state;
	char *body = fake_openai_body("Hello, \"world\"\n\xc3\xa9", "stop", 12, 7);
	assert_non_null(body);
	fake_step steps[] = { { .status = 200, .body = body } };
	st_llm_opts o;
	fast_opts(&o);
	start(steps, 1, 0, &o, NULL);
	free(body);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete: %s", err.msg);
	assert_string_equal(r.text, "Hello, \"world\"\n\xc3\xa9");
	assert_string_equal(r.finish, "stop");
	assert_false(r.truncated);
	assert_int_equal(r.input_tokens, 12);
	assert_int_equal(r.output_tokens, 7);
	assert_false(r.cached);
	assert_int_equal(r.attempts, 1);
	assert_true(r.latency_s > 0);
	st_llm_response_free(&r);

	assert_int_equal(fake_llm_count(g_srv), 1);
	assert_string_equal(fake_llm_method(g_srv, 0), "POST");
	assert_string_equal(fake_llm_path(g_srv, 0), "/v1/chat/completions");
	const char *auth = fake_llm_header(g_srv, 0, "authorization");
	assert_non_null(auth);
	assert_string_equal(auth, "Bearer " OPENAI_KEY);
	assert_null(fake_llm_header(g_srv, 0, "x-api-key"));
	const char *ct = fake_llm_header(g_srv, 0, "Content-Type");
	assert_non_null(ct);
	assert_mentions(ct, "application/json");

	json_t *j = sent_body(0);
	assert_string_equal(json_string_value(json_object_get(j, "model")), "fake-model");
	json_t *msgs = json_object_get(j, "messages");
	assert_int_equal(json_array_size(msgs), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *mi = json_array_get(msgs, i);
		assert_string_equal(json_string_value(json_object_get(mi, "role")), two_msgs[i].role);
		assert_string_equal(json_string_value(json_object_get(mi, "content")),
		                    two_msgs[i].content);
	}
	assert_true(json_is_number(json_object_get(j, "temperature")));
	assert_float_equal(json_number_value(json_object_get(j, "temperature")), 0.25, 1e-12);
	json_t *mt = json_object_get(j, "max_tokens");
	if (!mt)
		mt = json_object_get(j, "max_completion_tokens");
	assert_true(json_is_integer(mt));
	assert_int_equal(json_integer_value(mt), 321);
	assert_null(json_object_get(j, "response_format"));
	json_decref(j);
}

/* The fake server's keyed steps (what tests/kernelbench's scripted evaluation relies on: with
 * parallel requests each task gets its own answer): a request holding a step's text gets that
 * step whatever the order; the others get the unkeyed steps in order, the last repeating. */
static const char *ask(const char *user)
{
	static char text[64];
	st_llm_msg msgs[] = { { "system", "You are terse." }, { "user", user } };
	st_llm_request q = simple_request();
	q.msgs = msgs;
	st_llm_response r;
	st_err err = { { 0 } };
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete: %s", err.msg);
	snprintf(text, sizeof text, "%s", r.text);
	st_llm_response_free(&r);
	return text;
}

static void test_fake_keyed_steps(void **state)
{
	(void)state;
	const char *texts[] = { "for-beta", "plain-1", "for-alpha", "plain-2" };
	const char *keys[] = { "task beta", NULL, "task alpha", NULL };
	fake_step steps[4];
	char *bodies[4];
	for (int i = 0; i < 4; i++) {
		bodies[i] = fake_openai_body(texts[i], "stop", 1, 1);
		assert_non_null(bodies[i]);
		steps[i] = (fake_step){ .status = 200, .body = bodies[i], .match = keys[i] };
	}
	st_llm_opts o;
	fast_opts(&o);
	o.cache_path = NULL;
	start(steps, 4, 0, &o, NULL);
	for (int i = 0; i < 4; i++)
		free(bodies[i]);
	assert_string_equal(ask("solve task alpha"), "for-alpha");
	assert_string_equal(ask("something else"), "plain-1");
	assert_string_equal(ask("solve task beta"), "for-beta");
	assert_string_equal(ask("solve task alpha again"), "for-alpha");
	assert_string_equal(ask("another"), "plain-2");
	assert_string_equal(ask("and another"), "plain-2");
	assert_int_equal(fake_llm_count(g_srv), 6);
}

/* json_mode asks for a JSON object; st_llm_request_json is what was actually sent. */
static void test_openai_json_mode_and_request_json(void **state)
{
	(void)state;
	char *body = fake_openai_body("{\"a\":1}", "stop", 1, 1);
	assert_non_null(body);
	fake_step steps[] = { { .status = 200, .body = body } };
	st_llm_opts o;
	fast_opts(&o);
	st_llm_model m;
	start(steps, 1, 0, &o, &m);
	free(body);

	st_llm_request q = simple_request();
	q.json_mode = 1;
	st_llm_response r;
	st_err err = { { 0 } };
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete: %s", err.msg);
	assert_string_equal(r.text, "{\"a\":1}");
	st_llm_response_free(&r);

	json_t *j = sent_body(0);
	json_t *rf = json_object_get(j, "response_format");
	assert_non_null(rf);
	assert_string_equal(json_string_value(json_object_get(rf, "type")), "json_object");

	char *rj = st_llm_request_json(&m, &q);
	assert_non_null(rj);
	json_t *mine = json_loads(rj, 0, NULL);
	assert_non_null(mine);
	if (!json_equal(mine, j))
		fail_msg("st_llm_request_json gives %s but the server got %s", rj,
		         fake_llm_body(g_srv, 0));
	assert_null(strstr(rj, OPENAI_KEY));
	json_decref(mine);
	free(rj);
	json_decref(j);
}

static void test_anthropic_success(void **state)
{
	(void)state;
	char *body = fake_anthropic_body("Bonjour", "end_turn", 20, 3);
	assert_non_null(body);
	fake_step steps[] = { { .status = 200, .body = body } };
	st_llm_opts o;
	fast_opts(&o);
	start(steps, 1, 1, &o, NULL);
	free(body);

	static const st_llm_msg msgs[] = {
		{ "system", "You are terse." },
		{ "user", "Say hi." },
		{ "assistant", "Hi." },
		{ "user", "In French." },
	};
	st_llm_request q = simple_request();
	q.msgs = msgs;
	q.n_msgs = 4;
	st_llm_response r;
	st_err err = { { 0 } };
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete: %s", err.msg);
	assert_string_equal(r.text, "Bonjour");
	assert_string_equal(r.finish, "end_turn");
	assert_false(r.truncated);
	assert_int_equal(r.input_tokens, 20);
	assert_int_equal(r.output_tokens, 3);
	assert_int_equal(r.attempts, 1);
	st_llm_response_free(&r);

	assert_int_equal(fake_llm_count(g_srv), 1);
	assert_string_equal(fake_llm_path(g_srv, 0), "/v1/messages");
	const char *k = fake_llm_header(g_srv, 0, "x-api-key");
	assert_non_null(k);
	assert_string_equal(k, ANTHROPIC_KEY);
	const char *v = fake_llm_header(g_srv, 0, "anthropic-version");
	assert_non_null(v);
	assert_string_equal(v, "2023-06-01");
	/* The OpenAI key is set too, and must not travel to an Anthropic endpoint. */
	assert_null(fake_llm_header(g_srv, 0, "Authorization"));

	json_t *j = sent_body(0);
	assert_string_equal(json_string_value(json_object_get(j, "model")), "fake-claude");
	json_t *sys = json_object_get(j, "system");
	const char *sys_text = json_is_string(sys)
		? json_string_value(sys)
		: json_string_value(json_object_get(json_array_get(sys, 0), "text"));
	assert_non_null(sys_text);
	assert_string_equal(sys_text, "You are terse.");
	json_t *jm = json_object_get(j, "messages");
	assert_int_equal(json_array_size(jm), 3);
	for (size_t i = 0; i < 3; i++) {
		json_t *mi = json_array_get(jm, i);
		assert_string_equal(json_string_value(json_object_get(mi, "role")), msgs[i + 1].role);
		assert_string_equal(json_string_value(json_object_get(mi, "content")),
		                    msgs[i + 1].content);
	}
	assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), 321);
	assert_float_equal(json_number_value(json_object_get(j, "temperature")), 0.25, 1e-12);
	json_decref(j);
}

static void test_truncated(void **state)
{
	(void)state;
	st_llm_opts o;
	fast_opts(&o);
	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };

	char *body = fake_openai_body("cut sh", "length", 5, 321);
	assert_non_null(body);
	fake_step s1[] = { { .status = 200, .body = body } };
	start(s1, 1, 0, &o, NULL);
	free(body);
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete: %s", err.msg);
	assert_string_equal(r.finish, "length");
	assert_true(r.truncated);
	assert_string_equal(r.text, "cut sh");
	st_llm_response_free(&r);
	teardown(NULL);

	body = fake_anthropic_body("coupé", "max_tokens", 5, 321);
	assert_non_null(body);
	fake_step s2[] = { { .status = 200, .body = body } };
	start(s2, 1, 1, &o, NULL);
	free(body);
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete: %s", err.msg);
	assert_string_equal(r.finish, "max_tokens");
	assert_true(r.truncated);
	st_llm_response_free(&r);
}

/* ---- retries ------------------------------------------------------------------------------ */

static const char rate_limited[] = "{\"error\":{\"message\":\"Rate limit reached\"}}";
static const char server_error[] = "{\"error\":{\"message\":\"upstream exploded\"}}";

static void test_retry_429_then_ok(void **state)
{
	(void)state;
	char *body = fake_openai_body("after 429", "stop", 1, 1);
	assert_non_null(body);
	fake_step steps[] = {
		{ .status = 429, .body = rate_limited, .retry_after = "0" },
		{ .status = 200, .body = body },
	};
	st_llm_opts o;
	fast_opts(&o);
	start(steps, 2, 0, &o, NULL);
	free(body);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete: %s", err.msg);
	assert_string_equal(r.text, "after 429");
	assert_int_equal(r.attempts, 2);
	assert_int_equal(fake_llm_count(g_srv), 2);
	assert_true(st_llm_client_usage(g_cli).retries >= 1);
	st_llm_response_free(&r);
}

/* Retry-After wins over the (here much shorter) backoff, up to backoff_max_s. */
static void test_retry_after_honoured(void **state)
{
	(void)state;
	char *body = fake_openai_body("waited", "stop", 1, 1);
	assert_non_null(body);
	fake_step steps[] = {
		{ .status = 429, .body = rate_limited, .retry_after = "1" },
		{ .status = 200, .body = body },
	};
	st_llm_opts o;
	fast_opts(&o);
	o.backoff_max_s = 5;
	start(steps, 2, 0, &o, NULL);
	free(body);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	double t0 = st_now_s();
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete: %s", err.msg);
	double dt = st_now_s() - t0;
	if (dt < 0.9 || dt > 4)
		fail_msg("Retry-After: 1 with backoff 0.01 s took %.3f s", dt);
	assert_int_equal(r.attempts, 2);
	assert_true(r.latency_s >= 0.9);
	st_llm_response_free(&r);
}

static void test_retry_5xx_then_ok(void **state)
{
	(void)state;
	char *body = fake_anthropic_body("third time", "end_turn", 1, 1);
	assert_non_null(body);
	fake_step steps[] = {
		{ .status = 500, .body = server_error },
		{ .status = 502, .body = "<html>Bad Gateway</html>" },
		{ .status = 200, .body = body },
	};
	st_llm_opts o;
	fast_opts(&o);
	start(steps, 3, 1, &o, NULL);
	free(body);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete: %s", err.msg);
	assert_string_equal(r.text, "third time");
	assert_int_equal(r.attempts, 3);
	assert_int_equal(fake_llm_count(g_srv), 3);
	assert_int_equal(st_llm_client_usage(g_cli).retries, 2);
	st_llm_response_free(&r);
}

static void test_5xx_forever(void **state)
{
	(void)state;
	fake_step steps[] = { { .status = 500, .body = server_error } };
	st_llm_opts o;
	fast_opts(&o);
	o.max_retries = 2;
	start(steps, 1, 0, &o, NULL);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	assert_int_not_equal(st_llm_complete(g_cli, &q, &r, &err), ST_OK);
	assert_int_equal(fake_llm_count(g_srv), 3);
	assert_mentions(err.msg, "500");
	assert_no_key(err.msg);
	assert_null(r.text);
}

static void test_400_no_retry(void **state)
{
	(void)state;
	fake_step steps[] = { {
		.status = 400,
		.body = "{\"error\":{\"message\":\"messages.0.content: field required\","
		        "\"type\":\"invalid_request_error\"}}",
	} };
	st_llm_opts o;
	fast_opts(&o);
	start(steps, 1, 0, &o, NULL);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	assert_int_not_equal(st_llm_complete(g_cli, &q, &r, &err), ST_OK);
	assert_int_equal(fake_llm_count(g_srv), 1);
	assert_mentions(err.msg, "400");
	assert_mentions(err.msg, "messages.0.content: field required");
	assert_no_key(err.msg);
	assert_int_equal(st_llm_client_usage(g_cli).retries, 0);
}

/* ---- a hung server, broken bodies --------------------------------------------------------- */

static void test_hang_timeout(void **state)
{
	(void)state;
	char *body = fake_openai_body("after the hang", "stop", 1, 1);
	assert_non_null(body);
	fake_step steps[] = {
		{ .status = 200, .hang = 1 },
		{ .status = 200, .body = body },
	};
	st_llm_opts o;
	fast_opts(&o);
	o.timeout_s = 1;
	o.max_retries = 0;
	start(steps, 2, 0, &o, NULL);
	free(body);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	double t0 = st_now_s();
	assert_int_not_equal(st_llm_complete(g_cli, &q, &r, &err), ST_OK);
	double dt = st_now_s() - t0;
	if (dt < 0.8 || dt > 3)
		fail_msg("a 1 s timeout took %.3f s", dt);
	if (!strcasestr(err.msg, "timeout") && !strcasestr(err.msg, "timed out"))
		fail_msg("\"%s\" does not say it timed out", err.msg);
	assert_no_key(err.msg);
	assert_int_equal(fake_llm_count(g_srv), 1);

	/* The client is still usable: the next request gets the next step. */
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete after a timeout: %s", err.msg);
	assert_string_equal(r.text, "after the hang");
	assert_int_equal(fake_llm_count(g_srv), 2);
	st_llm_response_free(&r);
	/* teardown stops the server while the first handler still hangs: it must not deadlock. */
}

static void expect_bad_body(const char *body, size_t len, int anthropic, const char *what)
{
	fake_step steps[] = { { .status = 200, .body = body, .body_len = len } };
	st_llm_opts o;
	fast_opts(&o);
	o.max_retries = 0;
	start(steps, 1, anthropic, &o, NULL);
	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	if (st_llm_complete(g_cli, &q, &r, &err) == ST_OK)
		fail_msg("%s: accepted, text \"%s\"", what, r.text ? r.text : "(null)");
	if (!err.msg[0])
		fail_msg("%s: no error message", what);
	assert_null(r.text);
	assert_no_key(err.msg);
	teardown(NULL);
}

static void test_invalid_json(void **state)
{
	(void)state;
	expect_bad_body("this is not JSON {", 0, 0, "not JSON");
	expect_bad_body("{\"choices\":[{\"message\":{\"content\":\"cut", 0, 0, "truncated JSON");
	expect_bad_body("{}", 0, 0, "no choices");
	expect_bad_body("{\"choices\":[]}", 0, 0, "empty choices");
	expect_bad_body("[1,2,3]", 0, 0, "an array");
	expect_bad_body("", 0, 0, "an empty body");
	expect_bad_body("{\"content\":\"not an array\"}", 0, 1, "anthropic without content[]");
	expect_bad_body("not json", 0, 1, "anthropic not JSON");
}

static void test_invalid_utf8(void **state)
{
	(void)state;
	static const char raw[] = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":"
	                          "\"bad \xff\xfe"
	                          " bytes\"},\"finish_reason\":\"stop\"}],"
	                          "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}";
	expect_bad_body(raw, sizeof raw - 1, 0, "invalid UTF-8 in content");
	/* A lone surrogate, escaped: valid ASCII, but not a character. */
	static const char sur[] = "{\"choices\":[{\"message\":{\"content\":\"x\\ud800y\"},"
	                          "\"finish_reason\":\"stop\"}]}";
	expect_bad_body(sur, 0, 0, "a lone surrogate");
}

static void test_huge_response(void **state)
{
	(void)state;
	size_t big = (size_t)2 << 20;
	char *text = malloc(big + 1);
	assert_non_null(text);
	memset(text, 'a', big);
	text[big] = 0;
	char *huge = fake_openai_body(text, "stop", 1, 1);
	/* Half a MiB fits under the 1 MiB limit: the limit must not refuse what it allows. */
	text[big / 4] = 0;
	char *fits = fake_openai_body(text, "stop", 1, 1);
	free(text);
	assert_non_null(huge);
	assert_non_null(fits);
	fake_step steps[] = {
		{ .status = 200, .body = huge },
		{ .status = 200, .body = fits },
	};
	st_llm_opts o;
	fast_opts(&o);
	o.max_retries = 0;
	o.max_response_bytes = 1 << 20;
	start(steps, 2, 0, &o, NULL);
	free(huge);
	free(fits);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	assert_int_not_equal(st_llm_complete(g_cli, &q, &r, &err), ST_OK);
	if (!strstr(err.msg, "1048576") && !strcasestr(err.msg, "MiB") &&
	    !strcasestr(err.msg, "too large") && !strcasestr(err.msg, "larger"))
		fail_msg("\"%s\" does not say the response is too large", err.msg);
	assert_null(r.text);

	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("a 512 KiB answer under a 1 MiB limit: %s", err.msg);
	assert_int_equal(strlen(r.text), big / 4);
	st_llm_response_free(&r);
}

/* ---- cache and replay --------------------------------------------------------------------- */

/* Whether `needle` occurs anywhere in the file (binary-safe); 0 when there is no such file. */
static int file_contains(const char *path, const char *needle)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return 0;
	size_t cap = 1 << 16, n = 0, k;
	char *b = malloc(cap);
	assert_non_null(b);
	while ((k = fread(b + n, 1, cap - n, fp)) > 0) {
		n += k;
		if (n == cap) {
			cap *= 2;
			char *nb = realloc(b, cap);
			assert_non_null(nb);
			b = nb;
		}
	}
	fclose(fp);
	int found = memmem(b, n, needle, strlen(needle)) != NULL;
	free(b);
	return found;
}

/* Several clients opening one new cache at once (stitch eval --parallel: one client per
 * worker): each open must wait its turn, never fail with "database is locked" (seen on the H200
 * machine: every sample of a 50-task eval was no_answer). */
enum { OPENERS = 8 };
static pthread_barrier_t g_open_barrier;
static const char *g_open_path;

static void *open_cache(void *arg)
{
	st_status *out = arg;
	st_llm_cache *c = NULL;
	st_err err = { { 0 } };
	pthread_barrier_wait(&g_open_barrier);
	*out = st_llm_cache_open(g_open_path, &c, &err);
	if (*out)
		fprintf(stderr, "open: %s\n", err.msg);
	st_llm_cache_close(c);
	return NULL;
}

static void test_cache_opened_together(void **state)
{
	(void)state;
	char dir[] = "/tmp/stitch-test-llmc-XXXXXX", db[96], cmd[128];
	assert_non_null(mkdtemp(dir));
	for (int round = 0; round < 20; round++) {
		snprintf(db, sizeof db, "%s/c%d.sqlite", dir, round);
		g_open_path = db;
		pthread_t th[OPENERS];
		st_status got[OPENERS];
		assert_int_equal(pthread_barrier_init(&g_open_barrier, NULL, OPENERS), 0);
		for (int i = 0; i < OPENERS; i++)
			assert_int_equal(pthread_create(&th[i], NULL, open_cache, &got[i]), 0);
		for (int i = 0; i < OPENERS; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&g_open_barrier);
		for (int i = 0; i < OPENERS; i++)
			assert_int_equal(got[i], ST_OK);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_cache_and_replay(void **state)
{
	(void)state;
	snprintf(g_dir, sizeof g_dir, "/tmp/stitch-test-llm-XXXXXX");
	assert_non_null(mkdtemp(g_dir));
	char db[128], wal[160], journal[160];
	snprintf(db, sizeof db, "%s/cache.sqlite", g_dir);
	snprintf(wal, sizeof wal, "%s-wal", db);
	snprintf(journal, sizeof journal, "%s-journal", db);

	char *b0 = fake_openai_body("cached answer", "stop", 100, 50);
	char *b1 = fake_openai_body("second sample", "stop", 100, 60);
	assert_non_null(b0);
	assert_non_null(b1);
	fake_step steps[] = { { .status = 200, .body = b0 }, { .status = 200, .body = b1 } };
	st_llm_opts o;
	fast_opts(&o);
	o.cache_path = db;
	o.price_in_per_mtok = 3;
	o.price_out_per_mtok = 15;
	st_llm_model m;
	start(steps, 2, 0, &o, &m);
	free(b0);
	free(b1);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("first call: %s", err.msg);
	assert_string_equal(r.text, "cached answer");
	assert_false(r.cached);
	assert_true(r.cost_usd > 0);
	assert_int_equal(fake_llm_count(g_srv), 1);
	st_llm_response_free(&r);

	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("second call: %s", err.msg);
	assert_string_equal(r.text, "cached answer");
	assert_string_equal(r.finish, "stop");
	assert_true(r.cached);
	assert_float_equal(r.cost_usd, 0, 0);
	assert_int_equal(r.input_tokens, 100);
	assert_int_equal(r.output_tokens, 50);
	assert_int_equal(fake_llm_count(g_srv), 1);
	st_llm_response_free(&r);
	st_llm_usage u = st_llm_client_usage(g_cli);
	assert_int_equal(u.calls, 2);
	assert_int_equal(u.cache_hits, 1);
	/* Only the call that was paid for is counted in dollars. */
	assert_float_equal(u.cost_usd, (100 * 3 + 50 * 15) / 1e6, 1e-12);

	/* Another sample of the same request is a new request. */
	q.sample = 1;
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("sample 1: %s", err.msg);
	assert_string_equal(r.text, "second sample");
	assert_false(r.cached);
	assert_int_equal(fake_llm_count(g_srv), 2);
	st_llm_response_free(&r);

	/* Replay: no server at all. */
	st_llm_client_free(g_cli);
	g_cli = NULL;
	fake_llm_stop(g_srv);
	g_srv = NULL;
	st_llm_opts ro = o;
	ro.replay = 1;
	if (st_llm_client_new(&m, &ro, &g_cli, &err) != ST_OK)
		fail_msg("replay client: %s", err.msg);
	q.sample = 0;
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("replay of sample 0: %s", err.msg);
	assert_string_equal(r.text, "cached answer");
	assert_true(r.cached);
	st_llm_response_free(&r);
	q.sample = 1;
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("replay of sample 1: %s", err.msg);
	assert_string_equal(r.text, "second sample");
	st_llm_response_free(&r);

	q.sample = 2;
	assert_int_not_equal(st_llm_complete(g_cli, &q, &r, &err), ST_OK);
	assert_mentions(err.msg, "replay");
	q.sample = 0;
	static const st_llm_msg other[] = { { "user", "Something else." } };
	q.msgs = other;
	q.n_msgs = 1;
	err.msg[0] = 0;
	assert_int_not_equal(st_llm_complete(g_cli, &q, &r, &err), ST_OK);
	assert_mentions(err.msg, "replay");
	assert_no_key(err.msg);
	st_llm_client_free(g_cli);
	g_cli = NULL;

	/* The key went in a header, never into the cache. */
	assert_true(file_contains(db, "cached answer") || file_contains(wal, "cached answer"));
	assert_false(file_contains(db, OPENAI_KEY));
	assert_false(file_contains(wal, OPENAI_KEY));
	assert_false(file_contains(journal, OPENAI_KEY));
	char dir[sizeof g_dir];
	memcpy(dir, g_dir, sizeof dir);
	remove_cache_dir();
	/* rmdir succeeds only when every file the cache made is one remove_cache_dir knows. */
	assert_int_equal(access(dir, F_OK), -1);
}

/* ---- keys --------------------------------------------------------------------------------- */

static void test_no_key(void **state)
{
	(void)state;
	st_llm_model m;
	st_err err = { { 0 } };
	st_llm_opts o;
	fast_opts(&o);

	unsetenv("OPENAI_API_KEY");
	assert_int_equal(st_llm_model_parse("openai:gpt-x", &m, &err), ST_OK);
	assert_int_not_equal(st_llm_client_new(&m, &o, &g_cli, &err), ST_OK);
	assert_null(g_cli);
	assert_mentions(err.msg, "OPENAI_API_KEY");

	unsetenv("ANTHROPIC_API_KEY");
	assert_int_equal(st_llm_model_parse("anthropic:claude-x", &m, &err), ST_OK);
	assert_int_not_equal(st_llm_client_new(&m, &o, &g_cli, &err), ST_OK);
	assert_null(g_cli);
	assert_mentions(err.msg, "ANTHROPIC_API_KEY");

	/* A local server needs no key, and then no Authorization header is sent. */
	char *body = fake_openai_body("keyless", "stop", 1, 1);
	assert_non_null(body);
	fake_step steps[] = { { .status = 200, .body = body } };
	start(steps, 1, 0, &o, NULL);
	free(body);
	st_llm_request q = simple_request();
	st_llm_response r;
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("complete without a key: %s", err.msg);
	assert_string_equal(r.text, "keyless");
	st_llm_response_free(&r);
	assert_null(fake_llm_header(g_srv, 0, "Authorization"));
}

/* Whatever goes wrong, the message does not carry the key: not on an HTTP error, not on a
 * network error. */
static void test_key_not_in_errors(void **state)
{
	(void)state;
	fake_step steps[] = {
		{ .status = 401, .body = "{\"error\":{\"message\":\"invalid api key\"}}" },
	};
	st_llm_opts o;
	fast_opts(&o);
	o.max_retries = 0;
	st_llm_model m;
	start(steps, 1, 0, &o, &m);
	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	assert_int_not_equal(st_llm_complete(g_cli, &q, &r, &err), ST_OK);
	assert_mentions(err.msg, "401");
	assert_no_key(err.msg);
	assert_int_equal(fake_llm_count(g_srv), 1);

	/* Nothing listens there any more: a connection error. */
	fake_llm_stop(g_srv);
	g_srv = NULL;
	err.msg[0] = 0;
	assert_int_not_equal(st_llm_complete(g_cli, &q, &r, &err), ST_OK);
	assert_true(err.msg[0] != 0);
	assert_no_key(err.msg);
}

/* A server (or a proxy in front of it) that quotes the key back in its error message: the
 * contract says a key never appears in a message, so the client must cut it out. */
static void test_key_echoed_by_server(void **state)
{
	(void)state;
	fake_step steps[] = {
		{ .status = 401,
		  .body = "{\"error\":{\"message\":\"Incorrect API key provided: " OPENAI_KEY "\"}}" },
	};
	st_llm_opts o;
	fast_opts(&o);
	start(steps, 1, 0, &o, NULL);
	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	assert_int_not_equal(st_llm_complete(g_cli, &q, &r, &err), ST_OK);
	assert_mentions(err.msg, "401");
	assert_no_key(err.msg);
}

/* ---- cost and usage ----------------------------------------------------------------------- */

static void test_cost_and_usage(void **state)
{
	(void)state;
	char *b0 = fake_openai_body("one", "stop", 1000, 500);
	char *b1 = fake_openai_body("two", "stop", 3000, 1000);
	assert_non_null(b0);
	assert_non_null(b1);
	fake_step steps[] = {
		{ .status = 200, .body = b0 },
		{ .status = 500, .body = server_error },
		{ .status = 200, .body = b1 },
	};
	st_llm_opts o;
	fast_opts(&o);
	o.price_in_per_mtok = 2;
	o.price_out_per_mtok = 10;
	start(steps, 3, 0, &o, NULL);
	free(b0);
	free(b1);

	st_llm_request q = simple_request();
	st_llm_response r;
	st_err err = { { 0 } };
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("call 1: %s", err.msg);
	assert_float_equal(r.cost_usd, 1000 * 2 / 1e6 + 500 * 10 / 1e6, 1e-12);
	st_llm_response_free(&r);
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("call 2: %s", err.msg);
	assert_int_equal(r.attempts, 2);
	assert_float_equal(r.cost_usd, 3000 * 2 / 1e6 + 1000 * 10 / 1e6, 1e-12);
	st_llm_response_free(&r);

	st_llm_usage u = st_llm_client_usage(g_cli);
	assert_int_equal(u.calls, 2);
	assert_int_equal(u.cache_hits, 0);
	assert_int_equal(u.retries, 1);
	assert_int_equal(u.input_tokens, 4000);
	assert_int_equal(u.output_tokens, 1500);
	assert_float_equal(u.cost_usd, 0.007 + 0.016, 1e-12);

	/* Unknown prices: no cost, tokens still counted. */
	teardown(NULL);
	b0 = fake_anthropic_body("free", "end_turn", 10, 20);
	assert_non_null(b0);
	fake_step s2[] = { { .status = 200, .body = b0 } };
	fast_opts(&o);
	start(s2, 1, 1, &o, NULL);
	free(b0);
	if (st_llm_complete(g_cli, &q, &r, &err) != ST_OK)
		fail_msg("call 3: %s", err.msg);
	assert_float_equal(r.cost_usd, 0, 0);
	st_llm_response_free(&r);
	u = st_llm_client_usage(g_cli);
	assert_int_equal(u.input_tokens, 10);
	assert_int_equal(u.output_tokens, 20);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_model_parse_ok),
		T(test_model_parse_errors),
		T(test_openai_success),
		T(test_fake_keyed_steps),
		T(test_cache_opened_together),
		T(test_openai_json_mode_and_request_json),
		T(test_anthropic_success),
		T(test_truncated),
		T(test_retry_429_then_ok),
		T(test_retry_after_honoured),
		T(test_retry_5xx_then_ok),
		T(test_5xx_forever),
		T(test_400_no_retry),
		T(test_hang_timeout),
		T(test_invalid_json),
		T(test_invalid_utf8),
		T(test_huge_response),
		T(test_cache_and_replay),
		T(test_no_key),
		T(test_key_not_in_errors),
		T(test_key_echoed_by_server),
		T(test_cost_and_usage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
