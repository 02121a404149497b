/* The Redis Streams queue (queue.h) on hiredis's blocking API. Every command goes through cmd(),
 * which reconnects and repeats it while Redis is away (a restart), for up to retry_s: each
 * command is safe to repeat (SET NX, XACK, reads), and the one that is not (XADD after a lost
 * reply) can only add a duplicate entry, which workers recognise by its id. */
#include "queue.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs.h"
#include "tls.h"

#define KEY_MAX 160

st_status st_queue_parse_url(const char *url, st_queue *q, st_err *err)
{
	memset(q, 0, sizeof *q);
	q->port = 6379;
	q->retry_s = 60;
	q->tls = !strncmp(url, "rediss://", 9);
	if (!q->tls && strncmp(url, "redis://", 8))
		return st_err_set(err, ST_E_INVALID, "%s: expected redis[s]://[:PASSWORD@]HOST[:PORT][/DB]",
		                  url);
	const char *p = url + (q->tls ? 9 : 8), *at = strrchr(p, '@');
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		const char *pw = colon ? colon + 1 : p;
		size_t n = (size_t)(at - pw);
		if (n >= sizeof q->password)
			return st_err_set(err, ST_E_INVALID, "%s: password too long", url);
		memcpy(q->password, pw, n);
		q->password[n] = 0;
		p = at + 1;
	}
	size_t hl = strcspn(p, ":/");
	if (!hl || hl >= sizeof q->host)
		return st_err_set(err, ST_E_INVALID, "%s: no host", url);
	memcpy(q->host, p, hl);
	q->host[hl] = 0;
	p += hl;
	char *end;
	if (*p == ':') {
		long port = strtol(p + 1, &end, 10);
		if (end == p + 1 || port < 1 || port > 65535 || (*end && *end != '/'))
			return st_err_set(err, ST_E_INVALID, "%s: bad port", url);
		q->port = (int)port;
		p = end;
	}
	if (*p == '/' && p[1]) {
		long db = strtol(p + 1, &end, 10);
		if (end == p + 1 || *end || db < 0 || db > 1000)
			return st_err_set(err, ST_E_INVALID, "%s: bad database number", url);
		q->db = (int)db;
	}
	return ST_OK;
}

static void drop(st_queue *q)
{
	if (q->ctx && q->tls)
		st_redis_tls_free(q->ctx);
	else if (q->ctx)
		redisFree(q->ctx);
	q->ctx = NULL;
}

/* One command on the open connection, plain or TLS: the reply, or NULL with why. */
static redisReply *run(st_queue *q, int argc, const char **argv, char *why, size_t len)
{
	if (q->tls)
		return st_redis_tls_command(q->ctx, argc, argv, why, len);
	redisReply *r = redisCommandArgv(q->ctx, argc, argv, NULL);
	if (!r)
		snprintf(why, len, "%s", ((redisContext *)q->ctx)->errstr);
	return r;
}

static st_status connect_once(st_queue *q, st_err *err)
{
	drop(q);
	if (q->tls) {
		st_redis_tls *t;
		st_status s = st_redis_tls_connect(q->host, q->port, 5, &t, err);
		if (s)
			return s;
		q->ctx = t;
	} else {
		struct timeval tv = {5, 0};
		redisContext *c = redisConnectWithTimeout(q->host, q->port, tv);
		if (!c)
			return st_err_set(err, ST_E_NOMEM, "redis: out of memory");
		if (c->err) {
			st_status s = st_err_set(err, ST_E_IO, "redis %s:%d: %s", q->host, q->port,
			                         c->errstr);
			redisFree(c);
			return s;
		}
		q->ctx = c;
	}
	redisReply *r = NULL;
	char why[512];
	if (q->password[0]) {
		r = run(q, 2, (const char *[]){"AUTH", q->password}, why, sizeof why);
		if (!r || r->type == REDIS_REPLY_ERROR) {
			st_status s = st_err_set(err, r ? ST_E_INVALID : ST_E_IO, "redis %s:%d: AUTH: %s",
			                         q->host, q->port, r ? r->str : why);
			freeReplyObject(r);
			drop(q);
			return s;
		}
		freeReplyObject(r);
	}
	char db[16];
	snprintf(db, sizeof db, "%d", q->db);
	r = run(q, 2, (const char *[]){"SELECT", db}, why, sizeof why);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		st_status s = st_err_set(err, r ? ST_E_INVALID : ST_E_IO, "redis %s:%d: SELECT %d: %s",
		                         q->host, q->port, q->db, r ? r->str : why);
		freeReplyObject(r);
		drop(q);
		return s;
	}
	freeReplyObject(r);
	return ST_OK;
}

st_status st_queue_open(const char *url, st_queue *q, st_err *err)
{
	st_status s = st_queue_parse_url(url, q, err);
	if (s)
		return s;
	if ((s = connect_once(q, err)))
		return s;
	char why[512];
	redisReply *r = run(q, 1, (const char *[]){"PING"}, why, sizeof why);
	int ok = r && r->type != REDIS_REPLY_ERROR;
	if (!ok)
		s = st_err_set(err, ST_E_IO, "redis %s:%d: PING: %s", q->host, q->port,
		               r ? r->str : why);
	freeReplyObject(r);
	if (s)
		drop(q);
	return s;
}

void st_queue_close(st_queue *q)
{
	drop(q);
}

/* One command (argv form, so no value is ever parsed as format), reconnecting while Redis is
 * away. An error reply is returned as ST_E_SYSTEM with its text. */
static st_status cmd(st_queue *q, redisReply **out, st_err *err, int argc, const char **argv)
{
	*out = NULL;
	double start = st_now_s(), pause = 0.05;
	for (;;) {
		st_status s = q->ctx ? ST_OK : connect_once(q, err);
		if (!s) {
			char why[512];
			redisReply *r = run(q, argc, argv, why, sizeof why);
			if (r) {
				if (r->type == REDIS_REPLY_ERROR) {
					s = st_err_set(err, ST_E_SYSTEM, "redis %s: %s", argv[0], r->str);
					freeReplyObject(r);
					return s;
				}
				*out = r;
				return ST_OK;
			}
			s = st_err_set(err, ST_E_IO, "redis %s:%d: %s", q->host, q->port, why);
			drop(q);
		}
		if (s != ST_E_IO || st_now_s() - start > q->retry_s)
			return st_err_wrap(err, s, "redis %s", argv[0]);
		usleep((useconds_t)(pause * 1e6));
		pause = pause < 1 ? pause * 2 : 1;
	}
}

#define CMD(q, out, err, ...)                                                                  \
	cmd((q), (out), (err), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), \
	    (const char *[]){__VA_ARGS__})

static void key(char *out, const char *kind, const char *name)
{
	snprintf(out, KEY_MAX, "stitch:%s:%s", kind, name);
}

void st_queue_job_id(const json_t *job, char id[65])
{
	json_t *canon = json_pack("{s:O?,s:O?,s:O?,s:O?,s:O?,s:O?}", "kind",
	                          json_object_get(job, "kind"), "task", json_object_get(job, "task"),
	                          "arch", json_object_get(job, "arch"), "code",
	                          json_object_get(job, "code"), "options",
	                          json_object_get(job, "options"), "trusted",
	                          json_object_get(job, "trusted"));
	char *text = json_dumps(canon, JSON_SORT_KEYS | JSON_COMPACT);
	st_sha256_hex(text ? text : "", text ? strlen(text) : 0, id);
	free(text);
	json_decref(canon);
}

/* *done = whether job id's result is stored. */
static st_status has_result(st_queue *q, const char *id, int *done, st_err *err)
{
	char rkey[KEY_MAX];
	key(rkey, "result", id);
	redisReply *r;
	st_status s = CMD(q, &r, err, "EXISTS", rkey);
	if (s)
		return s;
	*done = r->integer > 0;
	freeReplyObject(r);
	return ST_OK;
}

st_status st_queue_submit(st_queue *q, const json_t *job, long max_pending, char id[65],
                          int *state, st_err *err)
{
	const char *arch = json_string_value(json_object_get(job, "arch"));
	if (!arch || !json_string_value(json_object_get(job, "task")) ||
	    !json_string_value(json_object_get(job, "code")))
		return st_err_set(err, ST_E_INVALID, "a job needs task, arch and code");
	st_queue_job_id(job, id);
	char qkey[KEY_MAX], skey[KEY_MAX];
	key(qkey, "queued", id);
	key(skey, "jobs", arch);
	redisReply *r;
	int done;
	st_status s = has_result(q, id, &done, err);
	if (s)
		return s;
	if (done) {
		*state = 2;
		return ST_OK;
	}
	if (max_pending > 0) {
		if ((s = CMD(q, &r, err, "XLEN", skey)))
			return s;
		long len = (long)r->integer;
		freeReplyObject(r);
		if (len >= max_pending)
			return st_err_set(err, ST_E_BUSY, "the %s queue holds %ld jobs (limit %ld)", arch, len,
			                  max_pending);
	}
	/* Queued once: the marker lives as long as a job can wait, a week. */
	if ((s = CMD(q, &r, err, "SET", qkey, "1", "NX", "EX", "604800")))
		return s;
	int fresh = r->type == REDIS_REPLY_STATUS;
	freeReplyObject(r);
	if (!fresh) {
		*state = 1;
		return ST_OK;
	}
	char *text = json_dumps(job, JSON_COMPACT);
	if (!text)
		return st_err_set(err, ST_E_NOMEM, "out of memory");
	s = CMD(q, &r, err, "XADD", skey, "*", "id", id, "job", text);
	free(text);
	if (s) {
		redisReply *d;
		if (!CMD(q, &d, NULL, "DEL", qkey))
			freeReplyObject(d);
		return s;
	}
	freeReplyObject(r);
	*state = 0;
	return ST_OK;
}

st_status st_queue_put(st_queue *q, const json_t *job, long max_pending, char id[65], int *state,
                       st_err *err)
{
	st_status s;
	while ((s = st_queue_submit(q, job, max_pending, id, state, err)) == ST_E_BUSY)
		usleep(200000);
	return s;
}

json_t *st_queue_verify_job(const char *task, const char *arch, const char *code, size_t len,
                            const json_t *options, int trusted)
{
	json_t *job = json_pack("{s:s,s:s,s:s,s:s%}", "kind", "verify", "task", task, "arch", arch,
	                        "code", code, len);
	if (job && options)
		json_object_set_new(job, "options", json_deep_copy(options));
	if (job && trusted)
		json_object_set_new(job, "trusted", json_true());
	return job;
}

static st_status get_result(st_queue *q, const char *id, json_t **result, st_err *err)
{
	char rkey[KEY_MAX];
	key(rkey, "result", id);
	redisReply *r;
	st_status s = CMD(q, &r, err, "GET", rkey);
	if (s)
		return s;
	*result = NULL;
	if (r->type == REDIS_REPLY_STRING) {
		json_error_t je;
		*result = json_loadb(r->str, r->len, 0, &je);
		if (!*result)
			s = st_err_set(err, ST_E_SYSTEM, "the stored result of %s is not JSON: %s", id,
			               je.text);
	}
	freeReplyObject(r);
	return s;
}

st_status st_queue_wait(st_queue *q, const char *id, double timeout_s, json_t **result,
                        st_err *err)
{
	char dkey[KEY_MAX];
	key(dkey, "done", id);
	double until = st_now_s() + timeout_s;
	for (;;) {
		st_status s = get_result(q, id, result, err);
		if (s || *result)
			return s;
		double left = until - st_now_s();
		if (left <= 0)
			return st_err_set(err, ST_E_TIMEOUT, "no result for %.12s... within %.0f s", id,
			                  timeout_s);
		/* Woken by the worker's push; the wait is bounded so that a push lost to a Redis
		 * restart costs a second, not the whole timeout. */
		char secs[32];
		snprintf(secs, sizeof secs, "%.3f", left < 1 ? left : 1.0);
		redisReply *r;
		if ((s = CMD(q, &r, err, "BLPOP", dkey, secs)))
			return s;
		freeReplyObject(r);
	}
}

/* ---- workers ---------------------------------------------------------------------------- */

st_status st_queue_verify(st_queue *q, const char *task, const char *arch, const char *code,
                          size_t len, const json_t *options, long max_pending, double timeout_s,
                          json_t **verdict, st_err *err)
{
	*verdict = NULL;
	json_t *job = st_queue_verify_job(task, arch, code, len, options, 0);
	if (!job)
		return st_err_set(err, ST_E_NOMEM, "out of memory");
	char id[65];
	int state;
	json_t *result = NULL;
	st_status s = st_queue_put(q, job, max_pending, id, &state, err);
	json_decref(job);
	if (!s)
		s = st_queue_wait(q, id, timeout_s, &result, err);
	if (s)
		return st_err_wrap(err, ST_E_SYSTEM, "the queue");
	*verdict = json_incref(json_object_get(result, "verdict"));
	if (!*verdict) {
		const char *why = json_string_value(json_object_get(result, "error"));
		s = st_err_set(err, json_is_true(json_object_get(result, "bad_input")) ? ST_E_INVALID
		                                                                       : ST_E_SYSTEM,
		               "%s", why ? why : "the worker answered without a verdict");
	}
	json_decref(result);
	return s;
}

st_status st_queue_group(st_queue *q, const char *arch, st_err *err)
{
	char skey[KEY_MAX];
	key(skey, "jobs", arch);
	redisReply *r;
	st_err e;
	st_status s = CMD(q, &r, &e, "XGROUP", "CREATE", skey, ST_QUEUE_GROUP, "0", "MKSTREAM");
	if (!s) {
		freeReplyObject(r);
		return ST_OK;
	}
	if (strstr(e.msg, "BUSYGROUP")) /* made by another worker */
		return ST_OK;
	if (err)
		*err = e;
	return s;
}

/* XREADGROUP's reply: [[stream, [[entry id, [field, value, ...]], ...]]]. */
static int parse_entries(redisReply *r, st_queue_entry *out, int max)
{
	int n = 0;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1)
		return 0;
	redisReply *st = r->element[0];
	if (st->type != REDIS_REPLY_ARRAY || st->elements < 2 ||
	    st->element[1]->type != REDIS_REPLY_ARRAY)
		return 0;
	redisReply *list = st->element[1];
	for (size_t i = 0; i < list->elements && n < max; i++) {
		redisReply *e = list->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 2)
			continue;
		st_queue_entry *x = &out[n];
		memset(x, 0, sizeof *x);
		snprintf(x->stream_id, sizeof x->stream_id, "%s", e->element[0]->str);
		redisReply *f = e->element[1];
		/* An entry whose fields are gone (nil: trimmed after delivery) still needs its ack. */
		for (size_t k = 0; f->type == REDIS_REPLY_ARRAY && k + 1 < f->elements; k += 2) {
			const char *name = f->element[k]->str;
			redisReply *v = f->element[k + 1];
			if (!strcmp(name, "id"))
				snprintf(x->id, sizeof x->id, "%s", v->str);
			else if (!strcmp(name, "job"))
				x->job = json_loadb(v->str, v->len, 0, NULL);
		}
		n++;
	}
	return n;
}

st_status st_queue_take(st_queue *q, const char *arch, const char *consumer, double block_s,
                        st_queue_entry *out, int max, int *n, st_err *err)
{
	char skey[KEY_MAX], count[16], block[32];
	key(skey, "jobs", arch);
	snprintf(count, sizeof count, "%d", max);
	snprintf(block, sizeof block, "%ld", (long)(block_s * 1000));
	redisReply *r;
	st_status s = CMD(q, &r, err, "XREADGROUP", "GROUP", ST_QUEUE_GROUP, consumer, "COUNT", count,
	                  "STREAMS", skey, "0");
	if (s)
		return s;
	*n = parse_entries(r, out, max);
	freeReplyObject(r);
	if (*n)
		return ST_OK;
	if ((s = CMD(q, &r, err, "XREADGROUP", "GROUP", ST_QUEUE_GROUP, consumer, "COUNT", "1",
	             "BLOCK", block, "STREAMS", skey, ">")))
		return s;
	*n = parse_entries(r, out, max);
	freeReplyObject(r);
	return ST_OK;
}

static int alive(st_queue *q, const char *consumer)
{
	char wkey[KEY_MAX];
	key(wkey, "worker", consumer);
	redisReply *r;
	if (CMD(q, &r, NULL, "EXISTS", wkey))
		return 1; /* when in doubt, the other one lives */
	int yes = r->integer > 0;
	freeReplyObject(r);
	return yes;
}

st_status st_queue_begin(st_queue *q, const char *arch, const st_queue_entry *e,
                         const char *consumer, double lease_s, int *state, st_err *err)
{
	(void)arch;
	char lkey[KEY_MAX], ttl[32];
	key(lkey, "lease", e->id);
	snprintf(ttl, sizeof ttl, "%ld", (long)(lease_s * 1000));
	redisReply *r;
	int done;
	st_status s = has_result(q, e->id, &done, err);
	if (s)
		return s;
	if (done || !e->id[0] || !e->job) {
		*state = 2;
		return ST_OK;
	}
	if ((s = CMD(q, &r, err, "SET", lkey, consumer, "NX", "PX", ttl)))
		return s;
	int got = r->type == REDIS_REPLY_STATUS;
	freeReplyObject(r);
	if (got) {
		*state = 0;
		return ST_OK;
	}
	if ((s = CMD(q, &r, err, "GET", lkey)))
		return s;
	int mine = r->type == REDIS_REPLY_STRING && !strcmp(r->str, consumer);
	char holder[256] = "";
	if (r->type == REDIS_REPLY_STRING)
		snprintf(holder, sizeof holder, "%s", r->str);
	freeReplyObject(r);
	if (mine || (holder[0] && !alive(q, holder))) {
		/* ours from before (a restart under the same name), or its holder is gone */
		if ((s = CMD(q, &r, err, "SET", lkey, consumer, "PX", ttl)))
			return s;
		freeReplyObject(r);
		*state = 0;
		return ST_OK;
	}
	*state = 1;
	return ST_OK;
}

st_status st_queue_ack(st_queue *q, const char *arch, const st_queue_entry *e, st_err *err)
{
	char skey[KEY_MAX], qkey[KEY_MAX];
	key(skey, "jobs", arch);
	key(qkey, "queued", e->id);
	redisReply *r;
	/* Acknowledged and removed: the stream holds what is still to do, and its length is the
	 * backlog producers are held to. */
	st_status s = CMD(q, &r, err, "XACK", skey, ST_QUEUE_GROUP, e->stream_id);
	if (!s) {
		freeReplyObject(r);
		s = CMD(q, &r, err, "XDEL", skey, e->stream_id);
	}
	if (!s) {
		freeReplyObject(r);
		s = e->id[0] ? CMD(q, &r, err, "DEL", qkey) : ST_OK;
		if (!s && e->id[0])
			freeReplyObject(r);
	}
	return s;
}

st_status st_queue_finish(st_queue *q, const char *arch, const st_queue_entry *e,
                          const json_t *result, st_err *err)
{
	char rkey[KEY_MAX], dkey[KEY_MAX], lkey[KEY_MAX];
	key(rkey, "result", e->id);
	key(dkey, "done", e->id);
	key(lkey, "lease", e->id);
	char *text = json_dumps(result, JSON_COMPACT);
	if (!text)
		return st_err_set(err, ST_E_NOMEM, "out of memory");
	/* The first result of a job is stored and counted in one script: a command whose reply a
	 * Redis crash swallows is sent again after the restart (cmd), and as two commands that
	 * counted a job twice (the INCR had reached the append-only file) or not at all (the SET
	 * had, so the second SET NX found it and skipped the INCR). */
	static const char finish_lua[] =
		"if redis.call('SET', KEYS[1], ARGV[1], 'NX') then redis.call('INCR', KEYS[2]) end "
		"return 1";
	redisReply *r;
	st_status s = CMD(q, &r, err, "EVAL", finish_lua, "2", rkey, "stitch:stats:done", text);
	free(text);
	if (s)
		return s;
	freeReplyObject(r);
	/* Wake every producer waiting; the list expires, whoever comes later reads the result. */
	if (!(s = CMD(q, &r, err, "RPUSH", dkey, "1"))) {
		freeReplyObject(r);
		s = CMD(q, &r, err, "EXPIRE", dkey, "600");
	}
	if (!s) {
		freeReplyObject(r);
		s = CMD(q, &r, err, "DEL", lkey);
	}
	if (s)
		return s;
	freeReplyObject(r);
	return st_queue_ack(q, arch, e, err);
}

st_status st_queue_heartbeat(st_queue *q, const char *consumer, const json_t *info,
                             const char *const *leases, int n_leases, double ttl_s, st_err *err)
{
	char wkey[KEY_MAX], ttl[32];
	key(wkey, "worker", consumer);
	snprintf(ttl, sizeof ttl, "%ld", (long)(ttl_s * 1000));
	char *text = json_dumps(info, JSON_COMPACT);
	redisReply *r;
	st_status s = CMD(q, &r, err, "SET", wkey, text ? text : "{}", "PX", ttl);
	free(text);
	if (s)
		return s;
	freeReplyObject(r);
	for (int i = 0; i < n_leases; i++) {
		char lkey[KEY_MAX];
		key(lkey, "lease", leases[i]);
		if ((s = CMD(q, &r, err, "SET", lkey, consumer, "PX", ttl)))
			return s;
		freeReplyObject(r);
	}
	return ST_OK;
}

st_status st_queue_reclaim(st_queue *q, const char *arch, const char *consumer, double idle_s,
                           double stale_s, int *n, st_err *err)
{
	char skey[KEY_MAX], idle[32], stale[32];
	key(skey, "jobs", arch);
	snprintf(idle, sizeof idle, "%ld", (long)(idle_s * 1000));
	snprintf(stale, sizeof stale, "%ld", (long)(stale_s * 1000));
	*n = 0;
	redisReply *r;
	/* [[entry id, consumer, idle ms, deliveries], ...] */
	st_status s = CMD(q, &r, err, "XPENDING", skey, ST_QUEUE_GROUP, "IDLE", idle, "-", "+", "100");
	if (s)
		return s;
	for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
		redisReply *e = r->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3)
			continue;
		const char *owner = e->element[1]->str;
		long long idle_ms = e->element[2]->integer;
		if (!strcmp(owner, consumer))
			continue;
		if (alive(q, owner) && idle_ms < (long long)(stale_s * 1000))
			continue;
		redisReply *c;
		if (!CMD(q, &c, NULL, "XCLAIM", skey, ST_QUEUE_GROUP, consumer, idle,
		         e->element[0]->str, "JUSTID")) {
			*n += c->type == REDIS_REPLY_ARRAY && c->elements > 0;
			freeReplyObject(c);
		}
	}
	freeReplyObject(r);
	return ST_OK;
}

st_status st_queue_forget(st_queue *q, const char *arch, const char *consumer, st_err *err)
{
	char skey[KEY_MAX], wkey[KEY_MAX];
	key(skey, "jobs", arch);
	key(wkey, "worker", consumer);
	redisReply *r;
	st_status s = CMD(q, &r, err, "XPENDING", skey, ST_QUEUE_GROUP, "-", "+", "1", consumer);
	if (s)
		return s;
	int pending = r->type == REDIS_REPLY_ARRAY && r->elements > 0;
	freeReplyObject(r);
	if (!pending && !(s = CMD(q, &r, err, "XGROUP", "DELCONSUMER", skey, ST_QUEUE_GROUP, consumer)))
		freeReplyObject(r);
	if (!s && !(s = CMD(q, &r, err, "DEL", wkey)))
		freeReplyObject(r);
	return s;
}

static json_t *stream_status(st_queue *q, const char *skey)
{
	redisReply *r;
	json_t *o = json_pack("{s:s}", "arch", skey + strlen("stitch:jobs:"));
	if (!CMD(q, &r, NULL, "XLEN", skey)) {
		json_object_set_new(o, "length", json_integer(r->integer));
		freeReplyObject(r);
	}
	json_t *cons = json_array();
	long pending = 0;
	if (!CMD(q, &r, NULL, "XINFO", "CONSUMERS", skey, ST_QUEUE_GROUP)) {
		for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
			redisReply *c = r->element[i];
			json_t *x = json_object();
			for (size_t k = 0; c->type == REDIS_REPLY_ARRAY && k + 1 < c->elements; k += 2) {
				const char *f = c->element[k]->str;
				redisReply *v = c->element[k + 1];
				if (!strcmp(f, "name"))
					json_object_set_new(x, "name", json_string(v->str));
				else if (!strcmp(f, "pending"))
					json_object_set_new(x, "pending", json_integer(v->integer));
				else if (!strcmp(f, "idle"))
					json_object_set_new(x, "idle_ms", json_integer(v->integer));
			}
			pending += (long)json_integer_value(json_object_get(x, "pending"));
			const char *name = json_string_value(json_object_get(x, "name"));
			json_object_set_new(x, "alive", json_boolean(name && alive(q, name)));
			json_array_append_new(cons, x);
		}
		freeReplyObject(r);
	}
	json_object_set_new(o, "pending", json_integer(pending));
	json_object_set_new(o, "consumers", cons);
	return o;
}

st_status st_queue_status(st_queue *q, json_t **status, st_err *err)
{
	*status = NULL;
	json_t *streams = json_array(), *workers = json_array();
	/* SCAN, not KEYS: a busy Redis is not stopped for a status line. */
	const char *patterns[2] = {"stitch:jobs:*", "stitch:worker:*"};
	for (int p = 0; p < 2; p++) {
		char cursor[32] = "0";
		do {
			redisReply *r;
			st_status s = CMD(q, &r, err, "SCAN", cursor, "MATCH", patterns[p], "COUNT", "1000");
			if (s) {
				json_decref(streams);
				json_decref(workers);
				return s;
			}
			snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
			redisReply *keys = r->element[1];
			for (size_t i = 0; i < keys->elements; i++) {
				if (p == 0) {
					json_array_append_new(streams, stream_status(q, keys->element[i]->str));
					continue;
				}
				redisReply *w;
				if (CMD(q, &w, NULL, "GET", keys->element[i]->str))
					continue;
				json_t *info = w->type == REDIS_REPLY_STRING ? json_loadb(w->str, w->len, 0, NULL)
				                                             : NULL;
				if (info)
					json_array_append_new(workers, info);
				freeReplyObject(w);
			}
			freeReplyObject(r);
		} while (strcmp(cursor, "0"));
	}
	long long done = 0;
	redisReply *r;
	if (!CMD(q, &r, NULL, "GET", "stitch:stats:done")) {
		if (r->type == REDIS_REPLY_STRING)
			done = strtoll(r->str, NULL, 10);
		freeReplyObject(r);
	}
	*status = json_pack("{s:o,s:o,s:I}", "streams", streams, "workers", workers, "done",
	                    (json_int_t)done);
	return ST_OK;
}

void st_queue_entry_free(st_queue_entry *e)
{
	json_decref(e->job);
	e->job = NULL;
}
