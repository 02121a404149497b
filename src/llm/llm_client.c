/* The client: one HTTP request per attempt through libcurl, retried with exponential backoff and
 * jitter on 429, 5xx and network errors (a Retry-After header wins over the backoff), answers
 * parsed by llm_wire.c, counted in tokens and dollars, and kept in the cache. A request that
 * times out is not retried: a server that hung once for the whole limit would likely do it
 * again, and the caller's budget is in wall time. */
#include "llm.h"

#include "common/buf.h"

#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "common/clock.h"
#include "common/fs.h"
#include "llm_cache.h"
#include "llm_wire.h"

struct st_llm_client {
	st_llm_model m;
	st_llm_opts o;
	char *key;           /* from the environment; never printed */
	st_llm_cache *cache;
	st_llm_usage usage;
	CURL *curl;
};

void st_llm_opts_default(st_llm_opts *o)
{
	memset(o, 0, sizeof *o);
	o->timeout_s = 600;
	o->max_retries = 5;
	o->backoff_base_s = 1;
	o->backoff_max_s = 60;
	o->max_response_bytes = 16 << 20;
}

void st_llm_response_free(st_llm_response *r)
{
	free(r->text);
	free(r->finish);
	memset(r, 0, sizeof *r);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

st_status st_llm_client_new(const st_llm_model *m, const st_llm_opts *o, st_llm_client **out,
                            st_err *err)
{
	*out = NULL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return st_err_set(err, ST_E_SYSTEM, "libcurl: %s", curl_easy_strerror(curl_init_rc));
	const char *key = getenv(m->key_env);
	if (m->key_required && (!key || !*key))
		return st_err_set(err, ST_E_INVALID, "model %s:%s needs an API key in %s, which is not "
		                  "set", m->provider, m->model, m->key_env);
	st_llm_client *c = calloc(1, sizeof *c);
	if (!c)
		return st_err_set(err, ST_E_NOMEM, "out of memory");
	c->m = *m;
	if (o)
		c->o = *o;
	else
		st_llm_opts_default(&c->o);
	c->key = key && *key ? strdup(key) : NULL;
	c->curl = curl_easy_init();
	if (!c->curl || (key && *key && !c->key)) {
		st_llm_client_free(c);
		return st_err_set(err, ST_E_NOMEM, "cannot set up an HTTP client");
	}
	if (c->o.replay && !c->o.cache_path) {
		st_llm_client_free(c);
		return st_err_set(err, ST_E_INVALID, "replay needs a response cache");
	}
	if (c->o.cache_path) {
		st_status s = st_llm_cache_open(c->o.cache_path, &c->cache, err);
		if (s) {
			st_llm_client_free(c);
			return s;
		}
	}
	*out = c;
	return ST_OK;
}

st_status st_llm_model_check(const st_llm_model *m, double timeout_s, st_err *err)
{
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return st_err_set(err, ST_E_SYSTEM, "libcurl: %s", curl_easy_strerror(curl_init_rc));
	const char *key = getenv(m->key_env);
	if (m->key_required && (!key || !*key))
		return st_err_set(err, ST_E_INVALID, "model %s:%s needs an API key in %s, which is not "
		                  "set", m->provider, m->model, m->key_env);
	CURL *h = curl_easy_init();
	if (!h)
		return st_err_set(err, ST_E_NOMEM, "cannot set up an HTTP client");
	char msg[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(h, CURLOPT_URL, m->base_url);
	curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_s * 1000));
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, msg);
	CURLcode rc = curl_easy_perform(h);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK)
		return st_err_set(err, ST_E_NODEVICE, "model endpoint %s is unreachable: %s",
		                  m->base_url, msg[0] ? msg : curl_easy_strerror(rc));
	return ST_OK;
}

void st_llm_client_free(st_llm_client *c)
{
	if (!c)
		return;
	if (c->key) {
		memset(c->key, 0, strlen(c->key));
		free(c->key);
	}
	st_llm_cache_close(c->cache);
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c);
}

st_llm_usage st_llm_client_usage(const st_llm_client *c)
{
	return c->usage;
}

/* ---- one HTTP attempt --------------------------------------------------------------------- */

/* The answer's body, gathered up to `limit` bytes. */
typedef struct buf {
	st_buf b;
	size_t limit;
	int over;
} buf;

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	buf *b = arg;
	size_t n = size * nmemb;
	if (b->b.n + n > b->limit) {
		b->over = 1;
		return 0; /* aborts the transfer */
	}
	st_buf_add(&b->b, data, n);
	return b->b.oom ? 0 : n;
}

typedef struct headers_seen {
	double retry_after; /* seconds; < 0: none */
} headers_seen;

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	headers_seen *h = arg;
	size_t n = size * nmemb;
	static const char name[] = "retry-after:";
	if (n > sizeof name - 1 && !strncasecmp(data, name, sizeof name - 1)) {
		char v[128];
		size_t k = n - (sizeof name - 1);
		if (k >= sizeof v)
			k = sizeof v - 1;
		memcpy(v, data + sizeof name - 1, k);
		v[k] = '\0';
		char *end;
		double secs = strtod(v, &end);
		if (end != v && secs >= 0) {
			h->retry_after = secs;
		} else {
			time_t when = curl_getdate(v, NULL); /* an HTTP date */
			if (when > 0)
				h->retry_after = difftime(when, time(NULL)) > 0 ? difftime(when, time(NULL)) : 0;
		}
	}
	return n;
}

typedef struct attempt {
	CURLcode curl;
	long status;
	buf body;
	headers_seen hdr;
	char curl_msg[CURL_ERROR_SIZE];
} attempt;

static void attempt_once(st_llm_client *c, const char *url, const char *payload, attempt *a)
{
	memset(a, 0, sizeof *a);
	a->hdr.retry_after = -1;
	a->body.limit = c->o.max_response_bytes > 0 ? (size_t)c->o.max_response_bytes : 16u << 20;
	CURL *h = c->curl;
	curl_easy_reset(h);
	struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
	char line[1024];
	if (c->m.proto == ST_LLM_ANTHROPIC) {
		hl = curl_slist_append(hl, "anthropic-version: 2023-06-01");
		if (c->key) {
			snprintf(line, sizeof line, "x-api-key: %s", c->key);
			hl = curl_slist_append(hl, line);
		}
	} else if (c->key) {
		snprintf(line, sizeof line, "Authorization: Bearer %s", c->key);
		hl = curl_slist_append(hl, line);
	}
	memset(line, 0, sizeof line);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &a->body);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &a->hdr);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, a->curl_msg);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->o.timeout_s * 1000));
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
	                 (long)(c->o.timeout_s < 30 ? c->o.timeout_s * 1000 : 30000));
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "stitch/" STITCH_VERSION);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	a->curl = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
	curl_slist_free_all(hl);
}

static void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
	while (nanosleep(&ts, &ts))
		;
}

/* Blank out the key wherever a server (or a proxy) quoted it back, before its text goes into an
 * error message. */
static void redact(const st_llm_client *c, char *text)
{
	if (!c->key || !text)
		return;
	size_t n = strlen(c->key);
	for (char *p = strstr(text, c->key); p; p = strstr(p + n, c->key))
		memset(p, '*', n);
}

/* Full jitter around the exponential step, so that many clients hit by one 429 spread out. */
static double backoff(const st_llm_opts *o, int attempt_no)
{
	uint32_t r = 0;
	if (getrandom(&r, sizeof r, 0) != sizeof r)
		r = (uint32_t)time(NULL);
	double jitter = 0.5 + (r / 4294967296.0);
	double w = o->backoff_base_s * pow(2, attempt_no) * jitter;
	return w < o->backoff_max_s ? w : o->backoff_max_s;
}

static void cache_key(const st_llm_client *c, const char *payload, int sample, char hex[65])
{
	st_sha256 h;
	st_sha256_init(&h);
	char head[1024];
	snprintf(head, sizeof head, "stitch-llm-v1\n%d\n%s\n%s\n%d\n",
	         (int)c->m.proto, c->m.base_url, c->m.model, sample);
	st_sha256_update(&h, head, strlen(head));
	st_sha256_update(&h, payload, strlen(payload));
	st_sha256_final(&h, hex);
}

st_status st_llm_complete(st_llm_client *c, const st_llm_request *q, st_llm_response *r,
                          st_err *err)
{
	memset(r, 0, sizeof *r);
	double t0 = st_now_s();
	json_t *body = st_llm_wire_body(&c->m, q);
	/* Sorted keys: the same request always has the same bytes, hence the same cache key. */
	char *payload = body ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(body);
	if (!payload)
		return st_err_set(err, ST_E_INVALID, "cannot encode the request (is every message valid "
		                  "UTF-8?)");
	char key[65];
	cache_key(c, payload, q->sample, key);
	st_status s = ST_OK;
	if (c->cache) {
		char *cached = NULL;
		size_t len = 0;
		int hit = st_llm_cache_get(c->cache, key, &cached, &len, err);
		if (hit < 0) {
			free(payload);
			return ST_E_IO;
		}
		if (hit) {
			s = st_llm_wire_parse(&c->m, cached, len, r, err);
			free(cached);
			free(payload);
			if (s)
				return s;
			r->cached = 1;
			r->latency_s = st_now_s() - t0;
			c->usage.calls++;
			c->usage.cache_hits++;
			c->usage.input_tokens += r->input_tokens;
			c->usage.output_tokens += r->output_tokens;
			return ST_OK;
		}
		if (c->o.replay) {
			free(payload);
			return st_err_set(err, ST_E_INVALID, "replay: no cached response for this request "
			                  "to %s (%s, sample %d)", c->m.model, c->m.base_url, q->sample);
		}
	}
	char url[700];
	snprintf(url, sizeof url, "%s/%s", c->m.base_url,
	         c->m.proto == ST_LLM_ANTHROPIC ? "messages" : "chat/completions");
	attempt a;
	for (int n = 0;; n++) {
		attempt_once(c, url, payload, &a);
		r->attempts = n + 1;
		int retry = 0;
		if (a.curl == CURLE_OK && a.status >= 200 && a.status < 300) {
			s = st_llm_wire_parse(&c->m, a.body.b.p ? a.body.b.p : "", a.body.b.n, r, err);
			if (!s && c->cache)
				s = st_llm_cache_put(c->cache, key, payload, a.body.b.p ? a.body.b.p : "", a.body.b.n,
				                     err);
			break;
		}
		if (a.body.over) {
			s = st_err_set(err, ST_E_IO, "%s: the response is larger than %lld bytes", url,
			               (long long)a.body.limit);
			break;
		}
		if (a.curl == CURLE_OPERATION_TIMEDOUT) {
			s = st_err_set(err, ST_E_TIMEOUT, "%s: no complete answer within %.0f s (timeout)",
			               url, c->o.timeout_s);
			break;
		}
		if (a.curl != CURLE_OK) {
			s = st_err_set(err, ST_E_IO, "%s: %s", url,
			               a.curl_msg[0] ? a.curl_msg : curl_easy_strerror(a.curl));
			redact(c, err ? err->msg : NULL);
			retry = 1;
		} else {
			json_t *ej = a.body.b.p ? json_loads(a.body.b.p, 0, NULL) : NULL;
			const char *msg = ej ? st_llm_wire_error_message(ej) : NULL;
			/* Redacted whole, before it is cut short, so no part of a key survives. */
			char text[4096];
			snprintf(text, sizeof text, "%s", msg ? msg : (a.body.b.p ? a.body.b.p : ""));
			redact(c, text);
			s = st_err_set(err, a.status == 401 || a.status == 403 ? ST_E_INVALID : ST_E_IO,
			               "%s: HTTP %ld: %.300s", url, a.status, text);
			json_decref(ej);
			retry = a.status == 429 || a.status >= 500;
		}
		if (!retry || n >= c->o.max_retries)
			break;
		double wait = a.hdr.retry_after >= 0 ? a.hdr.retry_after : backoff(&c->o, n);
		if (wait > c->o.backoff_max_s)
			wait = c->o.backoff_max_s;
		free(a.body.b.p);
		c->usage.retries++;
		sleep_s(wait);
	}
	free(a.body.b.p);
	free(payload);
	r->latency_s = st_now_s() - t0;
	if (s) {
		st_llm_response_free(r);
		return s;
	}
	r->cost_usd = (double)r->input_tokens * c->o.price_in_per_mtok / 1e6 +
	              (double)r->output_tokens * c->o.price_out_per_mtok / 1e6;
	c->usage.calls++;
	c->usage.input_tokens += r->input_tokens;
	c->usage.output_tokens += r->output_tokens;
	c->usage.cost_usd += r->cost_usd;
	return ST_OK;
}
