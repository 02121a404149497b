/* The scripted fake LLM server (see fake_llm.h). libmicrohttpd runs one thread per connection,
 * so a step that hangs or sleeps blocks only its own connection and the client's next attempt,
 * on a new connection, is still answered. Handlers that wait do so on one condition variable
 * that fake_llm_stop broadcasts before it stops the daemon: MHD_stop_daemon joins the
 * connection threads, and a handler still waiting would make it wait forever. Everything a
 * handler shares with the test (the records, the request counter, the log) is under one
 * mutex. */
#include "fake_llm.h"

#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <jansson.h>
#include <microhttpd.h>

/* A request body bigger than this is refused: the client under test never sends one, and a
 * runaway one should not take the test machine's memory with it. */
#define FAKE_MAX_UPLOAD ((size_t)64 << 20)

typedef struct rec_header {
	char *name, *value;
} rec_header;

typedef struct rec {
	char *method, *path, *body;
	size_t body_len;
	rec_header *hdr;
	int n_hdr, cap_hdr;
	int oom; /* a header could not be copied (MHD only stops iterating on MHD_NO) */
} rec;

struct fake_llm {
	struct MHD_Daemon *d;
	int port;
	fake_step *steps;
	int n_steps;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC, so a delay is not stretched by a clock change */
	int stopping;
	rec *recs;
	int n_recs, cap_recs;
	int n_plain; /* requests answered by the steps in order (no step matched them) */
	FILE *log;
};

/* One request's body as it arrives, in the connection's con_cls. */
typedef struct upload {
	char *buf;
	size_t len, cap;
} upload;

static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (!d)
		return NULL;
	if (n)
		memcpy(d, s, n);
	d[n] = 0;
	return d;
}

static void rec_free(rec *r)
{
	free(r->method);
	free(r->path);
	free(r->body);
	for (int i = 0; i < r->n_hdr; i++) {
		free(r->hdr[i].name);
		free(r->hdr[i].value);
	}
	free(r->hdr);
	memset(r, 0, sizeof *r);
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
	(void)kind;
	rec *r = cls;
	if (r->n_hdr == r->cap_hdr) {
		int cap = r->cap_hdr ? 2 * r->cap_hdr : 16;
		rec_header *h = realloc(r->hdr, (size_t)cap * sizeof *h);
		if (!h) {
			r->oom = 1;
			return MHD_NO;
		}
		r->hdr = h;
		r->cap_hdr = cap;
	}
	char *k = dup_n(key, strlen(key));
	char *v = dup_n(value ? value : "", value ? strlen(value) : 0);
	if (!k || !v) {
		free(k);
		free(v);
		r->oom = 1;
		return MHD_NO;
	}
	r->hdr[r->n_hdr].name = k;
	r->hdr[r->n_hdr].value = v;
	r->n_hdr++;
	return MHD_YES;
}

/* Called with f->mu held. A log line that cannot be built is skipped: the log is a debugging
 * aid for shell tests, and the request itself is still recorded and answered. */
static void log_request(fake_llm *f, int i, const rec *r)
{
	if (!f->log)
		return;
	json_t *o = json_object();
	json_t *h = json_object();
	if (!o || !h) {
		json_decref(o);
		json_decref(h);
		return;
	}
	for (int k = 0; k < r->n_hdr; k++)
		json_object_set_new(h, r->hdr[k].name, json_string(r->hdr[k].value));
	json_object_set_new(o, "i", json_integer(i));
	json_object_set_new(o, "method", json_string(r->method));
	json_object_set_new(o, "path", json_string(r->path));
	json_object_set_new(o, "headers", h);
	json_t *b = json_stringn(r->body, r->body_len);
	if (b) {
		json_object_set_new(o, "body", b);
	} else {
		json_object_set_new(o, "body", json_null());
		json_object_set_new(o, "body_invalid_utf8", json_true());
	}
	char *line = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!line)
		return;
	fprintf(f->log, "%s\n", line);
	fflush(f->log);
	free(line);
}

/* The step keyed to text the body holds, else the next of the unkeyed steps in order (the last
 * repeating); NULL when there is none. Called with f->mu held. */
static const fake_step *pick_step(fake_llm *f, const char *body)
{
	const fake_step *last = NULL;
	for (int j = 0; j < f->n_steps; j++)
		if (f->steps[j].match && strstr(body, f->steps[j].match))
			return &f->steps[j];
	for (int j = 0, k = 0; j < f->n_steps; j++) {
		if (f->steps[j].match)
			continue;
		last = &f->steps[j];
		if (k++ == f->n_plain)
			break;
	}
	f->n_plain++;
	return last;
}

/* Appends the record and returns its index and the step that answers it, or -1. */
static int record(fake_llm *f, rec *r, const fake_step **step)
{
	int i = -1;
	pthread_mutex_lock(&f->mu);
	if (f->n_recs == f->cap_recs) {
		int cap = f->cap_recs ? 2 * f->cap_recs : 16;
		rec *nr = realloc(f->recs, (size_t)cap * sizeof *nr);
		if (!nr)
			goto out;
		f->recs = nr;
		f->cap_recs = cap;
	}
	i = f->n_recs++;
	f->recs[i] = *r;
	memset(r, 0, sizeof *r); /* owned by f->recs now */
	log_request(f, i, &f->recs[i]);
	*step = pick_step(f, f->recs[i].body);
out:
	pthread_mutex_unlock(&f->mu);
	return i;
}

/* Waits until stop, or until delay_ms have passed when delay_ms >= 0. Returns 1 when stopping. */
static int wait_or_stop(fake_llm *f, int delay_ms)
{
	struct timespec until;
	if (delay_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += delay_ms / 1000;
		until.tv_nsec += (long)(delay_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&f->mu);
	while (!f->stopping) {
		if (delay_ms < 0) {
			pthread_cond_wait(&f->cv, &f->mu);
		} else if (pthread_cond_timedwait(&f->cv, &f->mu, &until) == ETIMEDOUT) {
			break;
		}
	}
	int stopping = f->stopping;
	pthread_mutex_unlock(&f->mu);
	return stopping;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
	(void)version;
	fake_llm *f = cls;
	upload *u = *con_cls;
	if (!u) {
		/* The first call only announces the request; its body, if any, follows. */
		u = calloc(1, sizeof *u);
		if (!u)
			return MHD_NO;
		*con_cls = u;
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		if (n > FAKE_MAX_UPLOAD - u->len)
			return MHD_NO;
		if (u->len + n > u->cap) {
			size_t cap = u->cap ? u->cap : 4096;
			while (cap < u->len + n)
				cap *= 2;
			char *b = realloc(u->buf, cap);
			if (!b)
				return MHD_NO;
			u->buf = b;
			u->cap = cap;
		}
		memcpy(u->buf + u->len, upload_data, n);
		u->len += n;
		*upload_data_size = 0;
		return MHD_YES;
	}

	/* The whole request is in: record it, then answer with its step. */
	rec r = { 0 };
	r.method = dup_n(method, strlen(method));
	r.path = dup_n(url, strlen(url));
	r.body = dup_n(u->buf ? u->buf : "", u->len);
	r.body_len = u->len;
	if (!r.method || !r.path || !r.body ||
	    MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, &r) < 0 || r.oom) {
		rec_free(&r);
		return MHD_NO;
	}
	const fake_step *st = NULL;
	if (record(f, &r, &st) < 0) {
		rec_free(&r);
		return MHD_NO;
	}

	static const char empty_script[] = "{\"error\":{\"message\":\"fake_llm: empty script\"}}";
	int status = 500;
	const char *body = empty_script;
	size_t body_len = sizeof empty_script - 1;
	if (st) {
		if (st->hang) {
			wait_or_stop(f, -1);
			return MHD_NO; /* only stop ends a hang; close without an answer */
		}
		if (st->delay_ms > 0 && wait_or_stop(f, st->delay_ms))
			return MHD_NO;
		status = st->status;
		body = st->body;
		body_len = st->body_len;
	}

	/* The steps outlive every response: fake_llm_stop frees them after the daemon is gone. */
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(body_len, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	if (MHD_add_response_header(resp, "Content-Type", "application/json") != MHD_YES ||
	    (st && st->retry_after &&
	     MHD_add_response_header(resp, "Retry-After", st->retry_after) != MHD_YES)) {
		MHD_destroy_response(resp);
		return MHD_NO;
	}
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	upload *u = *con_cls;
	if (u) {
		free(u->buf);
		free(u);
		*con_cls = NULL;
	}
}

static void free_steps(fake_step *steps, int n)
{
	if (!steps)
		return;
	for (int i = 0; i < n; i++) {
		free((char *)steps[i].body);
		free((char *)steps[i].retry_after);
		free((char *)steps[i].match);
	}
	free(steps);
}

fake_llm *fake_llm_start(const fake_step *steps, int n)
{
	return fake_llm_start_on(steps, n, 0);
}

fake_llm *fake_llm_start_on(const fake_step *steps, int n, int port)
{
	if (n < 0 || (n > 0 && !steps)) {
		fprintf(stderr, "fake_llm: bad script (n=%d)\n", n);
		return NULL;
	}
	fake_llm *f = calloc(1, sizeof *f);
	if (!f)
		goto nomem;
	if (n) {
		f->steps = calloc((size_t)n, sizeof *f->steps);
		if (!f->steps)
			goto nomem;
	}
	f->n_steps = n;
	for (int i = 0; i < n; i++) {
		const fake_step *s = &steps[i];
		if (s->status < 100 || s->status > 999) {
			fprintf(stderr, "fake_llm: step %d: bad HTTP status %d\n", i, s->status);
			goto fail;
		}
		const char *b = s->body ? s->body : "";
		size_t len = s->body_len ? s->body_len : strlen(b);
		f->steps[i] = *s;
		f->steps[i].body = NULL;
		f->steps[i].retry_after = NULL;
		f->steps[i].match = NULL;
		f->steps[i].body_len = len;
		if (!(f->steps[i].body = dup_n(b, len)))
			goto nomem;
		if (s->retry_after &&
		    !(f->steps[i].retry_after = dup_n(s->retry_after, strlen(s->retry_after))))
			goto nomem;
		if (s->match && !(f->steps[i].match = dup_n(s->match, strlen(s->match))))
			goto nomem;
	}

	int e;
	pthread_condattr_t ca;
	if ((e = pthread_mutex_init(&f->mu, NULL))) {
		fprintf(stderr, "fake_llm: pthread_mutex_init: %s\n", strerror(e));
		goto fail;
	}
	if ((e = pthread_condattr_init(&ca)) ||
	    (e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) ||
	    (e = pthread_cond_init(&f->cv, &ca))) {
		fprintf(stderr, "fake_llm: pthread_cond_init: %s\n", strerror(e));
		pthread_mutex_destroy(&f->mu);
		goto fail;
	}
	pthread_condattr_destroy(&ca);

	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port); /* 0: the kernel picks a free one */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
	if (getenv("FAKE_LLM_VERBOSE"))
		flags |= MHD_USE_ERROR_LOG;
	f->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, f,
	                        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	                        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
	                        MHD_OPTION_END);
	if (!f->d) {
		fprintf(stderr, "fake_llm: MHD_start_daemon failed on 127.0.0.1\n");
		goto fail_sync;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT);
	if (!di || !di->port) {
		fprintf(stderr, "fake_llm: could not read back the bound port\n");
		MHD_stop_daemon(f->d);
		goto fail_sync;
	}
	f->port = di->port;
	return f;

nomem:
	fprintf(stderr, "fake_llm: out of memory\n");
	goto fail;
fail_sync:
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
fail:
	if (f)
		free_steps(f->steps, f->n_steps);
	free(f);
	return NULL;
}

int fake_llm_port(const fake_llm *f)
{
	return f ? f->port : 0;
}

/* The accessors take a const server but must lock: the mutex is not part of its value. */
static pthread_mutex_t *mu_of(const fake_llm *f)
{
	return (pthread_mutex_t *)&f->mu;
}

int fake_llm_count(const fake_llm *f)
{
	if (!f)
		return 0;
	pthread_mutex_lock(mu_of(f));
	int n = f->n_recs;
	pthread_mutex_unlock(mu_of(f));
	return n;
}

/* The strings a record points to never move once recorded (only the array of records is
 * reallocated), so a pointer read under the lock stays valid until stop. */
static const rec *rec_at(const fake_llm *f, int i)
{
	return i >= 0 && i < f->n_recs ? &f->recs[i] : NULL;
}

const char *fake_llm_body(const fake_llm *f, int i)
{
	if (!f)
		return NULL;
	pthread_mutex_lock(mu_of(f));
	const rec *r = rec_at(f, i);
	const char *s = r ? r->body : NULL;
	pthread_mutex_unlock(mu_of(f));
	return s;
}

const char *fake_llm_path(const fake_llm *f, int i)
{
	if (!f)
		return NULL;
	pthread_mutex_lock(mu_of(f));
	const rec *r = rec_at(f, i);
	const char *s = r ? r->path : NULL;
	pthread_mutex_unlock(mu_of(f));
	return s;
}

const char *fake_llm_method(const fake_llm *f, int i)
{
	if (!f)
		return NULL;
	pthread_mutex_lock(mu_of(f));
	const rec *r = rec_at(f, i);
	const char *s = r ? r->method : NULL;
	pthread_mutex_unlock(mu_of(f));
	return s;
}

const char *fake_llm_header(const fake_llm *f, int i, const char *name)
{
	if (!f || !name)
		return NULL;
	const char *s = NULL;
	pthread_mutex_lock(mu_of(f));
	const rec *r = rec_at(f, i);
	for (int k = 0; r && k < r->n_hdr && !s; k++)
		if (strcasecmp(r->hdr[k].name, name) == 0)
			s = r->hdr[k].value;
	pthread_mutex_unlock(mu_of(f));
	return s;
}

void fake_llm_set_log(fake_llm *f, FILE *log)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->log = log;
	pthread_mutex_unlock(&f->mu);
}

void fake_llm_stop(fake_llm *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stopping = 1;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	MHD_stop_daemon(f->d);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	for (int i = 0; i < f->n_recs; i++)
		rec_free(&f->recs[i]);
	free(f->recs);
	free_steps(f->steps, f->n_steps);
	free(f);
}

static char *dump(json_t *o)
{
	if (!o)
		return NULL;
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

char *fake_openai_body(const char *text, const char *finish, int in_tok, int out_tok)
{
	return dump(json_pack("{s:s, s:s, s:s, s:[{s:i, s:{s:s, s:s?}, s:s?}], s:{s:i, s:i, s:i}}",
	                      "id", "chatcmpl-fake", "object", "chat.completion",
	                      "model", "fake-model",
	                      "choices", "index", 0, "message", "role", "assistant", "content", text,
	                      "finish_reason", finish,
	                      "usage", "prompt_tokens", in_tok, "completion_tokens", out_tok,
	                      "total_tokens", in_tok + out_tok));
}

char *fake_anthropic_body(const char *text, const char *stop_reason, int in_tok, int out_tok)
{
	return dump(json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s?}], s:s?, s:n, s:{s:i, s:i}}",
	                      "id", "msg_fake", "type", "message", "role", "assistant",
	                      "model", "fake-claude",
	                      "content", "type", "text", "text", text,
	                      "stop_reason", stop_reason, "stop_sequence",
	                      "usage", "input_tokens", in_tok, "output_tokens", out_tok));
}
