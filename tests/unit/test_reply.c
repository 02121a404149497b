/* The parent's validated readers of runner replies, and the pairing of requests and replies on a
 * runner's channel: a timing batch must answer with exactly the samples and digests its request
 * asked for, every reply must carry its request's id, and a frame nobody asked for is a protocol
 * fault, found before the next request goes out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/proto.h"
#include "verify/reply.h"
#include "verify/runner_client.h"

static json_t *batch(int n, int digests)
{
	json_t *rep = json_pack("{s:b,s:[]}", "ok", 1, "samples");
	json_t *d = json_array();
	for (int k = 0; k < n; k++) {
		json_array_append_new(json_object_get(rep, "samples"),
		                      json_pack("[f,f,i,i]", 0.5, 0.6, 1980, 0));
		json_array_append_new(d, json_string("00112233445566ff"));
	}
	if (digests)
		json_object_set_new(rep, "digests", d);
	else
		json_decref(d);
	return rep;
}

static void test_check_time(void **state)
{
	(void)state;
	char why[256];
	uint64_t out[4];
	json_t *r = batch(4, 1);
	assert_int_equal(st_reply_check_time(r, 4, 1, out, why, sizeof why), 0);
	assert_true(out[3] == 0x00112233445566ffull);
	assert_int_equal(st_reply_check_time(r, 5, 1, NULL, why, sizeof why), -1); /* too few */
	assert_non_null(strstr(why, "5 calls answered with 4 samples"));
	assert_int_equal(st_reply_check_time(r, 3, 1, NULL, why, sizeof why), -1); /* too many */
	assert_int_equal(st_reply_check_time(r, 4, 0, NULL, why, sizeof why), -1); /* unasked */
	json_array_remove(json_object_get(r, "digests"), 0);
	assert_int_equal(st_reply_check_time(r, 4, 1, NULL, why, sizeof why), -1);
	assert_non_null(strstr(why, "committed 3 digests"));
	json_decref(r);

	r = batch(2, 0);
	assert_int_equal(st_reply_check_time(r, 2, 0, NULL, why, sizeof why), 0);
	assert_int_equal(st_reply_check_time(r, 2, 1, NULL, why, sizeof why), -1);
	/* impossible figures: negative, not finite, not numbers, short rows */
	json_t *row = json_array_get(json_object_get(r, "samples"), 1);
	json_array_set_new(row, 0, json_real(-0.001));
	assert_int_equal(st_reply_check_time(r, 2, 0, NULL, why, sizeof why), -1);
	json_array_set_new(row, 0, json_string("0.1"));
	assert_int_equal(st_reply_check_time(r, 2, 0, NULL, why, sizeof why), -1);
	json_array_set_new(row, 0, json_real(0.1));
	json_array_append_new(row, json_real(0.4)); /* a fifth field, the call's CPU time: fine */
	assert_int_equal(st_reply_check_time(r, 2, 0, NULL, why, sizeof why), 0);
	json_array_set_new(row, 4, json_real(-1)); /* but not a negative one */
	assert_int_equal(st_reply_check_time(r, 2, 0, NULL, why, sizeof why), -1);
	json_array_set_new(row, 4, json_real(0.4));
	json_array_append_new(row, json_real(0.4)); /* nor a sixth */
	assert_int_equal(st_reply_check_time(r, 2, 0, NULL, why, sizeof why), -1);
	assert_non_null(strstr(why, "not four or five numbers"));
	json_array_remove(row, 5);
	json_array_remove(row, 4);
	json_array_remove(row, 3);
	assert_int_equal(st_reply_check_time(r, 2, 0, NULL, why, sizeof why), -1);
	json_decref(r);

	r = batch(1, 1);
	json_array_set_new(json_object_get(r, "digests"), 0, json_string("0011223344556 ff"));
	assert_int_equal(st_reply_check_time(r, 1, 1, NULL, why, sizeof why), -1);
	json_decref(r);
	assert_int_equal(st_reply_check_time(NULL, 1, 0, NULL, why, sizeof why), -1);
}

/* The quiet probe's reply: a boolean and a sane wait, or refused. */
static void test_quiet(void **state)
{
	(void)state;
	int quiet = -1;
	double ms = -1;
	char why[160];
	json_t *r = json_pack("{s:b,s:b,s:f}", "ok", 1, "quiet", 1, "waited_ms", 0.03);
	assert_int_equal(st_reply_quiet(r, &quiet, &ms, why, sizeof why), 0);
	assert_int_equal(quiet, 1);
	assert_true(ms > 0.029 && ms < 0.031);
	json_decref(r);
	r = json_pack("{s:b,s:b,s:i}", "ok", 1, "quiet", 0, "waited_ms", 5000);
	assert_int_equal(st_reply_quiet(r, &quiet, &ms, why, sizeof why), 0);
	assert_int_equal(quiet, 0);
	assert_true(ms == 5000);
	json_decref(r);
	const char *bad[] = {"{\"quiet\": 1, \"waited_ms\": 1}", "{\"quiet\": true}",
	                     "{\"quiet\": true, \"waited_ms\": -1}",
	                     "{\"quiet\": true, \"waited_ms\": 1e300}",
	                     "{\"quiet\": true, \"waited_ms\": \"1\"}", "[]"};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		r = json_loads(bad[k], 0, NULL);
		assert_non_null(r);
		why[0] = 0;
		assert_int_equal(st_reply_quiet(r, &quiet, &ms, why, sizeof why), -1);
		assert_non_null(strstr(why, "quiet probe"));
		json_decref(r);
	}
	assert_int_equal(st_reply_quiet(NULL, &quiet, &ms, why, sizeof why), -1);
}

/* The inputs a run wrote: the lowest index that names one of the inputs; anything else is none. */
static void test_inputs_written(void **state)
{
	(void)state;
	const struct {
		const char *json;
		int want;
	} cases[] = {
		{"{\"ok\": true}", -1},
		{"{\"inputs_written\": [2, 1]}", 1},
		{"{\"inputs_written\": [0]}", 0},
		{"{\"inputs_written\": [3]}", -1}, /* only 3 inputs: 0, 1, 2 */
		{"{\"inputs_written\": [-1, \"1\", 1.0, null, 2]}", 2},
		{"{\"inputs_written\": 1}", -1},
		{"{\"inputs_written\": {\"0\": 0}}", -1},
		{"{\"inputs_written\": [9223372036854775807]}", -1},
		{"[]", -1},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		json_t *r = json_loads(cases[k].json, 0, NULL);
		assert_non_null(r);
		assert_int_equal(st_reply_inputs_written(r, 3), cases[k].want);
		json_decref(r);
	}
	assert_int_equal(st_reply_inputs_written(NULL, 3), -1);
}

static void test_id_matches(void **state)
{
	(void)state;
	json_t *r = json_pack("{s:I}", "id", (json_int_t)78);
	assert_true(st_reply_id_matches(r, 78));
	assert_false(st_reply_id_matches(r, 77));
	assert_false(st_reply_id_matches(r, 0)); /* an id where nothing was asked */
	json_object_set_new(r, "id", json_string("78"));
	assert_false(st_reply_id_matches(r, 78));
	json_object_set_new(r, "id", json_real(78.0)); /* a number, not an integer */
	assert_false(st_reply_id_matches(r, 78));
	json_object_del(r, "id");
	assert_true(st_reply_id_matches(r, 0));
	assert_false(st_reply_id_matches(r, 78));
	json_decref(r);
	json_t *a = json_pack("[I]", (json_int_t)78);
	assert_false(st_reply_id_matches(a, 78));
	assert_true(st_reply_id_matches(a, 0));
	json_decref(a);
	assert_false(st_reply_id_matches(NULL, 78));
}

static void test_add_samples(void **state)
{
	(void)state;
	st_sample *s = NULL;
	int n = 0, cap = 0;
	json_t *r = batch(3, 0);
	assert_int_equal(st_reply_add_samples(r, &s, &n, &cap), 0);
	assert_int_equal(n, 3);
	assert_true(s[2].ms == 0.5 && s[2].wall_ms == 0.6 && s[2].sm_mhz == 1980);
	assert_true(s[2].cpu_ms == -1); /* no fifth field: not measured */
	json_array_append_new(json_array_get(json_object_get(r, "samples"), 1), json_real(0.25));
	assert_int_equal(st_reply_add_samples(r, &s, &n, &cap), 0);
	assert_true(s[4].cpu_ms == 0.25 && s[5].cpu_ms == -1);
	n = 3;
	/* Rows and fields of the wrong type read as 0; a short row's missing fields too. */
	json_t *rows = json_object_get(r, "samples");
	json_array_set_new(rows, 0, json_string("row"));
	json_array_set_new(json_array_get(rows, 1), 1, json_string("0.6"));
	json_array_clear(json_array_get(rows, 2));
	assert_int_equal(st_reply_add_samples(r, &s, &n, &cap), 0);
	assert_int_equal(n, 6);
	assert_true(s[3].ms == 0 && s[3].wall_ms == 0 && s[4].ms == 0.5 && s[4].wall_ms == 0);
	assert_true(s[5].ms == 0 && s[5].sm_mhz == 0);
	/* No array, another type, or no object at all: no rows. */
	json_object_set_new(r, "samples", json_string("many"));
	assert_int_equal(st_reply_add_samples(r, &s, &n, &cap), 0);
	json_object_del(r, "samples");
	assert_int_equal(st_reply_add_samples(r, &s, &n, &cap), 0);
	assert_int_equal(st_reply_add_samples(NULL, &s, &n, &cap), 0);
	assert_int_equal(n, 6);
	json_decref(r);
	free(s);
}

typedef struct ms_seen {
	int n;
	double sum;
	char last[32];
} ms_seen;

static void ms_add(void *ctx, const char *phase, double ms)
{
	ms_seen *m = ctx;
	m->n++;
	m->sum += ms;
	snprintf(m->last, sizeof m->last, "%s", phase);
}

static void test_ms(void **state)
{
	(void)state;
	char why[256];
	ms_seen m = {0};
	json_t *r = json_pack("{s:b,s:{s:f,s:i}}", "ok", 1, "ms", "load", 1.5, "init", 2);
	assert_int_equal(st_reply_ms(r, ms_add, &m, why, sizeof why), 0);
	assert_int_equal(m.n, 2);
	assert_true(m.sum == 3.5);
	/* A member that is not a number reads as 0, as it always did. */
	json_object_set_new(json_object_get(r, "ms"), "fetch", json_string("lots"));
	m = (ms_seen){0};
	assert_int_equal(st_reply_ms(r, ms_add, &m, why, sizeof why), 0);
	assert_int_equal(m.n, 3);
	assert_true(m.sum == 3.5);
	/* Not an object: refused, nothing added. */
	json_object_set_new(r, "ms", json_pack("[f]", 1.0));
	m = (ms_seen){0};
	assert_int_equal(st_reply_ms(r, ms_add, &m, why, sizeof why), -1);
	assert_non_null(strstr(why, "\"ms\" is an array"));
	assert_int_equal(m.n, 0);
	json_object_set_new(r, "ms", json_real(2.0));
	assert_int_equal(st_reply_ms(r, ms_add, &m, why, sizeof why), -1);
	assert_non_null(strstr(why, "a number"));
	/* Absent: nothing to add, not an error. */
	json_object_del(r, "ms");
	assert_int_equal(st_reply_ms(r, ms_add, &m, why, sizeof why), 0);
	assert_int_equal(st_reply_ms(NULL, ms_add, &m, why, sizeof why), 0);
	assert_int_equal(m.n, 0);
	json_decref(r);
}

static void test_profile(void **state)
{
	(void)state;
	char why[256];
	const json_t *p = NULL;
	json_t *r = json_pack("{s:b,s:{s:[]}}", "ok", 1, "profile", "acts");
	assert_int_equal(st_reply_profile(r, &p, why, sizeof why), 0);
	assert_ptr_equal(p, json_object_get(r, "profile"));
	json_object_set_new(r, "profile", json_string("{}"));
	assert_int_equal(st_reply_profile(r, &p, why, sizeof why), -1);
	assert_null(p);
	assert_non_null(strstr(why, "\"profile\" is a string"));
	json_object_set_new(r, "profile", json_null());
	assert_int_equal(st_reply_profile(r, &p, why, sizeof why), -1);
	assert_non_null(strstr(why, "is null"));
	json_object_del(r, "profile");
	assert_int_equal(st_reply_profile(r, &p, why, sizeof why), -1);
	assert_non_null(strstr(why, "is missing"));
	json_decref(r);
	assert_int_equal(st_reply_profile(NULL, &p, why, sizeof why), -1);
	assert_null(p);
}

/* A runner handle over one end of a socket pair; the test plays the runner on the other. No
 * process: reaping it is a no-op. */
static void fake_runner(st_runner *r, int *peer)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	memset(r, 0, sizeof *r);
	r->sock = sv[0];
	r->pid = -1;
	r->alive = 1;
	r->next_id = 77;
	snprintf(r->label, sizeof r->label, "candidate");
	*peer = sv[1];
}

/* The runner's side: read one request, answer with `reply` carrying the request's id plus
 * `id_delta`. */
static void answer(int peer, json_t *reply, int id_delta)
{
	st_err e;
	json_t *req;
	assert_int_equal(st_proto_recv(peer, &req, NULL, 1000, &e), ST_OK);
	json_int_t id = json_integer_value(json_object_get(req, "id"));
	assert_true(id > 0);
	json_object_set_new(reply, "id", json_integer(id + id_delta));
	assert_int_equal(st_proto_send(peer, reply, -1, &e), ST_OK);
	json_decref(req);
	json_decref(reply);
}

static void test_ids_and_unsolicited(void **state)
{
	(void)state;
	st_runner r;
	int peer;
	st_err e;
	json_t *req = json_pack("{s:s}", "op", "fetch"), *rep;

	/* An honest exchange: the id is checked and taken off. */
	fake_runner(&r, &peer);
	assert_int_equal(st_runner_send(&r, req, -1, &e), ST_OK);
	answer(peer, json_pack("{s:b}", "ok", 1), 0);
	assert_int_equal(st_runner_recv(&r, &rep, 5, &e), ST_OK);
	assert_null(json_object_get(rep, "id"));
	json_decref(rep);
	/* The next request has another id: a replayed old reply does not pass. */
	assert_int_equal(st_runner_send(&r, req, -1, &e), ST_OK);
	answer(peer, json_pack("{s:b}", "ok", 1), -1);
	assert_int_equal(st_runner_recv(&r, &rep, 5, &e), ST_E_IO);
	assert_true(r.protocol_fault);
	assert_non_null(strstr(e.msg, "does not carry the request's id"));
	close(peer);
	close(r.sock);

	/* A second frame after the reply. */
	fake_runner(&r, &peer);
	assert_int_equal(st_runner_send(&r, req, -1, &e), ST_OK);
	json_t *forged = json_pack("{s:b,s:[[f,f,i,i]]}", "ok", 1, "samples", 0.001, 0.0015, 1980, 0);
	json_t *ok = json_pack("{s:b}", "ok", 1);
	json_t *in;
	assert_int_equal(st_proto_recv(peer, &in, NULL, 1000, &e), ST_OK);
	json_object_set(ok, "id", json_object_get(in, "id"));
	json_object_set(forged, "id", json_object_get(in, "id"));
	assert_int_equal(st_proto_send(peer, ok, -1, &e), ST_OK);
	assert_int_equal(st_proto_send(peer, forged, -1, &e), ST_OK);
	usleep(20000);
	assert_int_equal(st_runner_recv(&r, &rep, 5, &e), ST_E_IO);
	assert_true(r.protocol_fault);
	json_decref(in);
	json_decref(ok);
	close(peer);
	close(r.sock);

	/* A frame between requests is found before the next request goes out. */
	fake_runner(&r, &peer);
	assert_int_equal(st_proto_send(peer, forged, -1, &e), ST_OK);
	usleep(20000);
	assert_int_equal(st_runner_send(&r, req, -1, &e), ST_E_IO);
	assert_true(r.protocol_fault);
	assert_non_null(strstr(e.msg, "nobody asked for"));
	json_decref(forged);
	close(peer);
	close(r.sock);

	/* Garbage, and a length of 4 GiB: protocol faults, not waits. */
	fake_runner(&r, &peer);
	assert_int_equal(st_runner_send(&r, req, -1, &e), ST_OK);
	unsigned char huge[4] = {0xff, 0xff, 0xff, 0xff};
	assert_int_equal(write(peer, huge, 4), 4);
	assert_int_equal(st_runner_recv(&r, &rep, 5, &e), ST_E_IO);
	assert_true(r.protocol_fault);
	close(peer);
	close(r.sock);

	/* The hello carries no id; one that does is a frame nobody asked for. */
	fake_runner(&r, &peer);
	json_t *hello = json_pack("{s:b,s:I}", "ok", 1, "id", (json_int_t)5);
	assert_int_equal(st_proto_send(peer, hello, -1, &e), ST_OK);
	assert_int_equal(st_runner_recv(&r, &rep, 5, &e), ST_E_IO);
	assert_true(r.protocol_fault);
	json_decref(hello);
	close(peer);
	close(r.sock);
	json_decref(req);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_time),
		cmocka_unit_test(test_quiet),
		cmocka_unit_test(test_inputs_written),
		cmocka_unit_test(test_id_matches),
		cmocka_unit_test(test_add_samples),
		cmocka_unit_test(test_ms),
		cmocka_unit_test(test_profile),
		cmocka_unit_test(test_ids_and_unsolicited),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
