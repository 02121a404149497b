/* serve-load: a bounded load client for `stitch serve`. N client threads send --requests
 * requests (alternately POST /v1/verify and POST /v1/reward) drawn from a weighted mix of
 * candidate solutions, and check the service's promises:
 *
 *   - every request gets exactly one 200 answer: a 429 is retried after its Retry-After, a 503,
 *     a 504 or a broken connection by repeating the same request id (retries are counted);
 *   - the answer's "id" is the request id, and no answer arrives for an id twice;
 *   - the verdict's "status" is the one the mix expects for that candidate (a reward answer
 *     also carries a "reward" object);
 *   - after the run, a sample of ids sent again gets the stored answer, byte for byte.
 *
 *   serve-load --url http://127.0.0.1:PORT --requests N --mix FILE [--clients 32]
 *              [--token T] [--json OUT] [--task t1/scale] [--root DIR] [--reuse X]
 *              [--timing-share X] [--options JSON] [--resend N] [--workers N] [--run TAG]
 *              [--seed N] [--max-retries N] [--attempt-timeout S] [--quiet]
 *
 * The mix file: one candidate kind per line, '#' starts a comment, fields separated by blanks:
 *
 *   NAME  FILE  EXPECTED  WEIGHT  [TASK]
 *   good  tests/fixtures/host/good.c      ok                 0.85
 *   crash tests/fixtures/host/segv.c      runtime_error      0.05
 *   hang  tests/fixtures/host/hang.c      timeout            0.04
 *   hack  tests/redteam/host/exec_raw.c   forbidden|hacking  0.06
 *
 * FILE is relative to --root (default: the current folder); EXPECTED is the verdict status, or
 * several separated by '|'; WEIGHT is any non-negative number (normalised over the lines); TASK,
 * where given, is the task id of that kind's requests (default: --task), so one stream of
 * requests can mix tasks the way an RL trainer's batch of rollouts does. The kind of request n
 * is drawn from the weights by a hash of (--seed, n), so a run is the same whatever the
 * scheduling.
 *
 * Ids are "load-<run>-<n>" (the run tag defaults to the pid and the time). Every request's code
 * gets a comment appended: with probability --reuse (default 0.5) the kind's shared variant for
 * this run (the same bytes each time, so the service's compile cache hits), otherwise one unique
 * to the request (a fresh compile). --timing-share X sends {"timing": true} with probability X
 * and {"timing": false} otherwise (default: no timing option, the service's setting applies);
 * --options '{"sets":"small"}' adds members to every request's options.
 *
 * Report (stdout, and as JSON with --json): requests, answers, lost, duplicated, wrong status,
 * id mismatches, resend mismatches, retries by HTTP code (0: no HTTP answer), wall time,
 * verdicts per minute (and per worker with --workers), client-side latency p50/p90/p99 (first
 * attempt to 200 answer, retries included). Exit 0 only when lost, duplicated, wrong status, id
 * mismatches and resend mismatches are all 0; 1 otherwise; 2 for bad arguments. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner/rng.h" /* splitmix64, as the input generators use */

#define MAX_KINDS 32
#define MAX_CODES 600

typedef struct kind {
	char name[64];
	char path[4096];
	char expected[256]; /* "a|b" */
	char task[256];     /* its requests' task id */
	double weight, cum;
	char *code;         /* the file's text */
	long sent, ok, wrong;
} kind;

typedef struct result {
	int answers;        /* 200 answers whose id named this request */
	int kind;
	double latency_s;   /* first attempt to the 200 answer */
	int final_code;     /* the last HTTP code (0: none) */
	int attempts;
	char *answer;       /* kept for the resend sample */
} result;

static struct {
	const char *url, *token, *json_out, *task, *root, *mix, *options, *run;
	int clients, requests, resend, workers, max_retries, quiet;
	double reuse, timing_share, attempt_timeout;
	uint64_t seed;
	kind kinds[MAX_KINDS];
	int n_kinds;
	result *res;
	int next;           /* next request index (atomic) */
	char run_tag[64];
	pthread_mutex_t mu;
	long retries[MAX_CODES];
	long wrong_status, id_mismatch, no_reward, other_answers, printed;
} g;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	pthread_mutex_lock(&g.mu);
	if (g.printed++ < 40) {
		va_list ap;
		va_start(ap, fmt);
		fprintf(stderr, "serve-load: ");
		vfprintf(stderr, fmt, ap);
		fprintf(stderr, "\n");
		va_end(ap);
	} else if (g.printed == 41) {
		fprintf(stderr, "serve-load: (further problems not printed)\n");
	}
	pthread_mutex_unlock(&g.mu);
}

/* A uniform number in [0, 1) from (seed, n, salt). */
static double unit(int n, int salt)
{
	uint64_t x = st_mix64(g.seed ^ st_mix64((uint64_t)n * 4 + (uint64_t)salt));
	return (double)(x >> 11) / 9007199254740992.0; /* 2^53 */
}

/* ---- a growable buffer -------------------------------------------------------------------- */

typedef struct buf {
	char *p;
	size_t len, cap;
} buf;

static void buf_add(buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			fprintf(stderr, "serve-load: out of memory\n");
			exit(2);
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_str(buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static void buf_fmt(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_fmt(buf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	buf_add(b, tmp, n < 0 ? 0 : (size_t)n >= sizeof tmp ? sizeof tmp - 1 : (size_t)n);
}

static void buf_json_string(buf *b, const char *s)
{
	buf_add(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			char e[2] = {'\\', (char)*p};
			buf_add(b, e, 2);
		} else if (*p == '\n') {
			buf_add(b, "\\n", 2);
		} else if (*p == '\t') {
			buf_add(b, "\\t", 2);
		} else if (*p < 0x20) {
			buf_fmt(b, "\\u%04x", *p);
		} else {
			buf_add(b, (const char *)p, 1);
		}
	}
	buf_add(b, "\"", 1);
}

/* ---- reading the top level of a JSON answer ------------------------------------------------ */

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

static const char *skip_string(const char *p) /* p at the opening quote */
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : NULL;
}

static const char *skip_value(const char *p)
{
	p = skip_ws(p);
	if (*p == '"')
		return skip_string(p);
	if (*p == '{' || *p == '[') {
		int depth = 0;
		while (*p) {
			if (*p == '"') {
				if (!(p = skip_string(p)))
					return NULL;
				continue;
			}
			if (*p == '{' || *p == '[')
				depth++;
			else if (*p == '}' || *p == ']')
				if (--depth == 0)
					return p + 1;
			p++;
		}
		return NULL;
	}
	while (*p && !strchr(",}] \n\t\r", *p))
		p++;
	return p;
}

/* The raw text of the top-level member `key` of the object `s` (a string keeps its quotes);
 * 0 when found. */
static int json_top(const char *s, const char *key, const char **v, size_t *vlen)
{
	const char *p = skip_ws(s);
	if (*p != '{')
		return -1;
	p = skip_ws(p + 1);
	size_t klen = strlen(key);
	while (*p == '"') {
		const char *k = p + 1, *end = skip_string(p);
		if (!end)
			return -1;
		p = skip_ws(end);
		if (*p != ':')
			return -1;
		const char *val = skip_ws(p + 1), *vend = skip_value(val);
		if (!vend)
			return -1;
		if ((size_t)(end - 1 - k) == klen && !memcmp(k, key, klen)) {
			*v = val;
			*vlen = (size_t)(vend - val);
			return 0;
		}
		p = skip_ws(vend);
		if (*p != ',')
			break;
		p = skip_ws(p + 1);
	}
	return -1;
}

/* A top-level string member without escapes, copied into out; 0 when found. */
static int json_top_string(const char *s, const char *key, char *out, size_t len)
{
	const char *v;
	size_t n;
	if (json_top(s, key, &v, &n) || n < 2 || v[0] != '"' || n - 2 >= len)
		return -1;
	memcpy(out, v + 1, n - 2);
	out[n - 2] = '\0';
	return 0;
}

/* ---- the mix file ------------------------------------------------------------------------- */

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	buf b = {0};
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		buf_add(&b, chunk, n);
	fclose(f);
	if (!b.p)
		buf_add(&b, "", 0);
	return b.p;
}

static int load_mix(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "serve-load: cannot read the mix file %s\n", path);
		return -1;
	}
	char line[8192];
	int ln = 0;
	double total = 0;
	while (fgets(line, sizeof line, f)) {
		ln++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char name[64], file[4096], expected[256], task[256], extra[8];
		double w;
		int n = sscanf(line, "%63s %4095s %255s %lf %255s %7s", name, file, expected, &w, task,
		               extra);
		if (n <= 0)
			continue;
		if ((n != 4 && n != 5) || !(w >= 0)) {
			fprintf(stderr, "serve-load: %s:%d: want NAME FILE EXPECTED WEIGHT [TASK]\n", path,
			        ln);
			fclose(f);
			return -1;
		}
		if (g.n_kinds == MAX_KINDS) {
			fprintf(stderr, "serve-load: %s: at most %d kinds\n", path, MAX_KINDS);
			fclose(f);
			return -1;
		}
		kind *k = &g.kinds[g.n_kinds++];
		snprintf(k->name, sizeof k->name, "%s", name);
		snprintf(k->expected, sizeof k->expected, "%s", expected);
		snprintf(k->task, sizeof k->task, "%s", n == 5 ? task : g.task);
		if (file[0] == '/' || !g.root)
			snprintf(k->path, sizeof k->path, "%s", file);
		else
			snprintf(k->path, sizeof k->path, "%.2000s/%.2000s", g.root, file);
		k->weight = w;
		if (!(k->code = read_file(k->path))) {
			fprintf(stderr, "serve-load: %s:%d: cannot read %s\n", path, ln, k->path);
			fclose(f);
			return -1;
		}
		total += w;
	}
	fclose(f);
	if (!g.n_kinds || !(total > 0)) {
		fprintf(stderr, "serve-load: %s: no kind with a positive weight\n", path);
		return -1;
	}
	double cum = 0;
	for (int i = 0; i < g.n_kinds; i++) {
		cum += g.kinds[i].weight / total;
		g.kinds[i].cum = cum;
	}
	g.kinds[g.n_kinds - 1].cum = 1.0;
	return 0;
}

static int kind_of(int n)
{
	double u = unit(n, 0);
	for (int i = 0; i < g.n_kinds; i++)
		if (u < g.kinds[i].cum && g.kinds[i].weight > 0)
			return i;
	return g.n_kinds - 1;
}

static int status_expected(const kind *k, const char *status)
{
	const char *p = k->expected;
	size_t n = strlen(status);
	while (*p) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (len == n && !memcmp(p, status, n))
			return 1;
		p += len + (bar ? 1 : 0);
	}
	return 0;
}

/* ---- requests ----------------------------------------------------------------------------- */

static const char *endpoint(int n)
{
	return n % 2 ? "reward" : "verify";
}

static void request_id(int n, char *id, size_t len)
{
	snprintf(id, len, "load-%s-%d", g.run_tag, n);
}

/* The body of request n: the same bytes every time it is built. */
static char *request_body(int n)
{
	const kind *k = &g.kinds[kind_of(n)];
	char id[128];
	request_id(n, id, sizeof id);
	buf code = {0};
	buf_str(&code, k->code);
	if (unit(n, 1) < g.reuse)
		buf_fmt(&code, "\n/* serve-load %s: shared variant of %s */\n", g.run_tag, k->name);
	else
		buf_fmt(&code, "\n/* serve-load %s: variant %d */\n", g.run_tag, n);
	buf b = {0};
	buf_str(&b, "{\"id\":");
	buf_json_string(&b, id);
	buf_str(&b, ",\"task\":");
	buf_json_string(&b, k->task);
	buf_str(&b, ",\"code\":");
	buf_json_string(&b, code.p);
	free(code.p);
	int opts = g.timing_share >= 0 || g.options;
	if (opts) {
		buf_str(&b, ",\"options\":{");
		int first = 1;
		if (g.timing_share >= 0) {
			buf_fmt(&b, "\"timing\":%s", unit(n, 2) < g.timing_share ? "true" : "false");
			first = 0;
		}
		if (g.options) {
			/* The members of the --options object, as they were written. */
			const char *o = strchr(g.options, '{') + 1, *e = strrchr(g.options, '}');
			const char *s = skip_ws(o);
			if (s < e) {
				if (!first)
					buf_str(&b, ",");
				buf_add(&b, o, (size_t)(e - o));
			}
		}
		buf_str(&b, "}");
	}
	buf_str(&b, "}");
	return b.p;
}

typedef struct http_reply {
	buf body;
	double retry_after;
} http_reply;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	http_reply *r = arg;
	buf_add(&r->body, p, size * n);
	return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	http_reply *r = arg;
	size_t len = size * n;
	if (len > 12 && !strncasecmp(p, "Retry-After:", 12)) {
		char v[64];
		size_t m = len - 12 < sizeof v - 1 ? len - 12 : sizeof v - 1;
		memcpy(v, p + 12, m);
		v[m] = '\0';
		r->retry_after = atof(v);
	}
	return len;
}

/* One attempt: POST (body non-NULL) or GET to path. The HTTP code, 0 when none came. */
static long http(CURL *c, const char *path, const char *body, http_reply *r, char *errtext,
                 size_t errlen)
{
	char url[2048];
	snprintf(url, sizeof url, "%s%s", g.url, path);
	free(r->body.p);
	memset(r, 0, sizeof *r);
	buf_add(&r->body, "", 0);
	struct curl_slist *h = NULL;
	char auth[1024];
	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
	if (g.token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", g.token);
		h = curl_slist_append(h, auth);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(g.attempt_timeout * 1000));
	CURLcode rc = curl_easy_perform(c);
	curl_slist_free_all(h);
	long code = 0;
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	else
		snprintf(errtext, errlen, "%s", curl_easy_strerror(rc));
	return code;
}

static void count_retry(long code)
{
	pthread_mutex_lock(&g.mu);
	g.retries[code > 0 && code < MAX_CODES ? code : 0]++;
	pthread_mutex_unlock(&g.mu);
}

static void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

/* Sends request n until a 200 or a code that retrying cannot change; checks and records it. */
static void run_one(CURL *c, int n, int resend_sample)
{
	result *res = &g.res[n];
	res->kind = kind_of(n);
	kind *k = &g.kinds[res->kind];
	char id[128], path[32], err[256] = "";
	request_id(n, id, sizeof id);
	snprintf(path, sizeof path, "/v1/%s", endpoint(n));
	char *body = request_body(n);
	http_reply r = {0};
	double t0 = now_s();
	long code = 0;
	int attempt_n = 0;
	for (int attempt = 0;; attempt++) {
		attempt_n = attempt + 1;
		code = http(c, path, body, &r, err, sizeof err);
		if (code == 200 || attempt >= g.max_retries)
			break;
		if (code == 429 || code == 503 || code == 504 || code == 0) {
			count_retry(code);
			/* 429 and 503: as long as the service asks (at least a moment); 504: at once (the
			 * work went on, the same id waits for it again); no answer: a short pause. */
			double wait = code == 504 ? 0 : r.retry_after > 0 ? r.retry_after
			            : code == 0 ? 0.5 : 1.0;
			if (wait > 60)
				wait = 60;
			sleep_s(wait);
			continue;
		}
		break; /* 4xx other than 429, 500: the same request would get the same answer */
	}
	res->final_code = (int)code;
	res->latency_s = now_s() - t0;
	res->attempts = attempt_n;
	pthread_mutex_lock(&g.mu);
	k->sent++;
	pthread_mutex_unlock(&g.mu);
	if (code != 200) {
		note("%s (%s): no 200 answer; last HTTP %ld %s%.300s", id, k->name, code, err,
		     r.body.p ? r.body.p : "");
		free(body);
		free(r.body.p);
		return;
	}
	char got_id[160] = "", status[64] = "";
	json_top_string(r.body.p, "id", got_id, sizeof got_id);
	/* Whose answer is it? The id names the request it answers. */
	int whose = -1;
	char prefix[96];
	int plen = snprintf(prefix, sizeof prefix, "load-%s-", g.run_tag);
	if (!strncmp(got_id, prefix, (size_t)plen)) {
		char *end;
		long m = strtol(got_id + plen, &end, 10);
		if (!*end && m >= 0 && m < g.requests)
			whose = (int)m;
	}
	pthread_mutex_lock(&g.mu);
	if (whose >= 0)
		g.res[whose].answers++;
	else
		g.other_answers++;
	if (strcmp(got_id, id))
		g.id_mismatch++;
	pthread_mutex_unlock(&g.mu);
	if (strcmp(got_id, id))
		note("%s: the answer names id '%s'", id, got_id);
	int good = !json_top_string(r.body.p, "status", status, sizeof status) &&
	           status_expected(k, status);
	const char *rv;
	size_t rl;
	int reward_ok = n % 2 == 0 || (!json_top(r.body.p, "reward", &rv, &rl) && rv[0] == '{');
	pthread_mutex_lock(&g.mu);
	if (!good) {
		g.wrong_status++;
		k->wrong++;
	} else {
		k->ok++;
	}
	if (!reward_ok)
		g.no_reward++;
	pthread_mutex_unlock(&g.mu);
	if (!good)
		note("%s (%s, %s): status '%s', want %s", id, k->name, endpoint(n), status, k->expected);
	if (!reward_ok)
		note("%s: a reward answer without a reward object", id);
	if (resend_sample)
		res->answer = r.body.p;
	else
		free(r.body.p);
	free(body);
}

static int in_resend_sample(int n)
{
	if (g.resend <= 0)
		return 0;
	int step = g.requests / g.resend;
	if (step < 1)
		step = 1;
	return n % step == 0 && n / step < g.resend;
}

static void *client_main(void *arg)
{
	(void)arg;
	CURL *c = curl_easy_init();
	if (!c) {
		fprintf(stderr, "serve-load: curl_easy_init failed\n");
		exit(2);
	}
	int n;
	while ((n = __atomic_fetch_add(&g.next, 1, __ATOMIC_SEQ_CST)) < g.requests) {
		run_one(c, n, in_resend_sample(n));
		if (!g.quiet && (n + 1) % 250 == 0)
			fprintf(stderr, "serve-load: %d requests started\n", n + 1);
	}
	curl_easy_cleanup(c);
	return NULL;
}

/* ---- the report --------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double quantile(const double *s, int n, double q)
{
	if (n <= 0)
		return 0;
	double pos = q * (n - 1);
	int i = (int)pos;
	double f = pos - i;
	return i + 1 < n ? s[i] * (1 - f) + s[i + 1] * f : s[n - 1];
}

/* stitch_serve_stored_answers_total from /metrics, or -1. */
static long stored_answers(CURL *c)
{
	http_reply r = {0};
	char err[256];
	long v = -1;
	if (http(c, "/metrics", NULL, &r, err, sizeof err) == 200) {
		const char *p = strstr(r.body.p, "\nstitch_serve_stored_answers_total ");
		if (p)
			v = strtol(p + strlen("\nstitch_serve_stored_answers_total "), NULL, 10);
	}
	free(r.body.p);
	return v;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: serve-load --url http://HOST:PORT --requests N --mix FILE [--clients N]\n"
	           "       [--token T] [--json OUT] [--task ID] [--root DIR] [--reuse X]\n"
	           "       [--timing-share X] [--options JSON] [--resend N] [--workers N]\n"
	           "       [--run TAG] [--seed N] [--max-retries N] [--attempt-timeout S] [--quiet]\n"
	           "(the mix file's format and the checks: see the opening comment of "
	           "tests/load/serve_load.c)\n");
}

static int number(const char *opt, const char *v, double lo, double hi, double *out)
{
	char *end;
	double x = strtod(v, &end);
	if (end == v || *end || !(x >= lo && x <= hi)) {
		fprintf(stderr, "serve-load: %s wants a number from %g to %g, not '%s'\n", opt, lo, hi,
		        v);
		return -1;
	}
	*out = x;
	return 0;
}

int main(int argc, char **argv)
{
	g.clients = 32;
	g.task = "t1/scale";
	g.reuse = 0.5;
	g.timing_share = -1;
	g.resend = 100;
	g.max_retries = 1000;
	g.attempt_timeout = 900;
	g.seed = 1;
	pthread_mutex_init(&g.mu, NULL);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--quiet")) {
			g.quiet = 1;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "serve-load: %s needs a value (or is unknown)\n", a);
			usage(stderr);
			return 2;
		}
		const char *v = argv[++i];
		double x;
		const char **str = !strcmp(a, "--url")       ? &g.url
		                 : !strcmp(a, "--token")     ? &g.token
		                 : !strcmp(a, "--json")      ? &g.json_out
		                 : !strcmp(a, "--task")      ? &g.task
		                 : !strcmp(a, "--root")      ? &g.root
		                 : !strcmp(a, "--mix")       ? &g.mix
		                 : !strcmp(a, "--options")   ? &g.options
		                 : !strcmp(a, "--run")       ? &g.run : NULL;
		if (str) {
			*str = v;
			continue;
		}
		int bad = 0;
		if (!strcmp(a, "--clients"))
			bad = number(a, v, 1, 1024, &x), g.clients = (int)x;
		else if (!strcmp(a, "--requests"))
			bad = number(a, v, 1, 1e8, &x), g.requests = (int)x;
		else if (!strcmp(a, "--resend"))
			bad = number(a, v, 0, 1e8, &x), g.resend = (int)x;
		else if (!strcmp(a, "--workers"))
			bad = number(a, v, 1, 1e6, &x), g.workers = (int)x;
		else if (!strcmp(a, "--max-retries"))
			bad = number(a, v, 0, 1e8, &x), g.max_retries = (int)x;
		else if (!strcmp(a, "--seed"))
			bad = number(a, v, 0, 1e15, &x), g.seed = (uint64_t)x;
		else if (!strcmp(a, "--reuse"))
			bad = number(a, v, 0, 1, &g.reuse);
		else if (!strcmp(a, "--timing-share"))
			bad = number(a, v, 0, 1, &g.timing_share);
		else if (!strcmp(a, "--attempt-timeout"))
			bad = number(a, v, 0.1, 1e6, &g.attempt_timeout);
		else {
			fprintf(stderr, "serve-load: unknown option %s\n", a);
			usage(stderr);
			return 2;
		}
		if (bad)
			return 2;
	}
	if (!g.url || !g.mix || g.requests <= 0) {
		usage(stderr);
		return 2;
	}
	if (g.options) {
		const char *o = skip_ws(g.options), *e = strrchr(g.options, '}');
		if (*o != '{' || !e || *skip_ws(e + 1)) {
			fprintf(stderr, "serve-load: --options wants a JSON object, e.g. '{\"sets\":\"small\"}'\n");
			return 2;
		}
		if (g.timing_share >= 0 && strstr(g.options, "\"timing\"")) {
			fprintf(stderr, "serve-load: --options has timing; --timing-share sets it too\n");
			return 2;
		}
	}
	if (g.run)
		snprintf(g.run_tag, sizeof g.run_tag, "%s", g.run);
	else
		snprintf(g.run_tag, sizeof g.run_tag, "%ld%d", (long)time(NULL), (int)getpid());
	for (const char *p = g.run_tag; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:", *p)) {
			fprintf(stderr, "serve-load: --run: letters, digits, . _ : only\n");
			return 2;
		}
	if (load_mix(g.mix))
		return 2;
	if (!(g.res = calloc((size_t)g.requests, sizeof *g.res))) {
		fprintf(stderr, "serve-load: out of memory\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!g.quiet)
		fprintf(stderr, "serve-load: %d requests, %d clients, run %s, %s\n", g.requests,
		        g.clients, g.run_tag, g.url);

	double t0 = now_s();
	pthread_t *th = calloc((size_t)g.clients, sizeof *th);
	int started = 0;
	for (int i = 0; i < g.clients; i++)
		if (!pthread_create(&th[i], NULL, client_main, NULL))
			started++;
		else
			th[i] = 0;
	if (!started) {
		fprintf(stderr, "serve-load: cannot start the client threads\n");
		return 2;
	}
	for (int i = 0; i < g.clients; i++)
		if (th[i])
			pthread_join(th[i], NULL);
	double wall = now_s() - t0;
	free(th);

	/* The resend: the same ids and bodies again, one by one; each answer must be the stored
	 * one, byte for byte, and each must come from the store (the metric rises by one). */
	CURL *c = curl_easy_init();
	long resent = 0, resend_mismatch = 0;
	long stored0 = stored_answers(c);
	for (int n = 0; n < g.requests; n++) {
		if (!in_resend_sample(n) || !g.res[n].answer)
			continue;
		char *body = request_body(n), path[32], err[256] = "", id[128];
		snprintf(path, sizeof path, "/v1/%s", endpoint(n));
		request_id(n, id, sizeof id);
		http_reply r = {0};
		long code = http(c, path, body, &r, err, sizeof err);
		resent++;
		if (code != 200 || strcmp(r.body.p, g.res[n].answer)) {
			resend_mismatch++;
			note("%s resent: HTTP %ld %s, answer %s the first", id, code, err,
			     code == 200 ? "differs from" : "is not");
		}
		free(r.body.p);
		free(body);
	}
	long stored1 = stored_answers(c);
	long stored_delta = stored0 >= 0 && stored1 >= 0 ? stored1 - stored0 : -1;
	if (resent && stored_delta >= 0 && stored_delta != resent) {
		note("resend: %ld ids sent again, but stitch_serve_stored_answers_total rose by %ld",
		     resent, stored_delta);
		resend_mismatch += labs(resent - stored_delta);
	}
	curl_easy_cleanup(c);

	long answered = 0, lost = 0, duplicated = 0, total_retries = 0;
	double *lat = malloc((size_t)g.requests * sizeof *lat);
	int n_lat = 0;
	long final_codes[MAX_CODES] = {0};
	for (int n = 0; n < g.requests; n++) {
		result *r = &g.res[n];
		if (r->answers == 0)
			lost++;
		if (r->answers > 1)
			duplicated += r->answers - 1;
		if (r->answers >= 1)
			answered++;
		if (r->final_code == 200)
			lat[n_lat++] = r->latency_s;
		else
			final_codes[r->final_code > 0 && r->final_code < MAX_CODES ? r->final_code : 0]++;
	}
	qsort(lat, (size_t)n_lat, sizeof *lat, cmp_double);
	double p50 = quantile(lat, n_lat, 0.5), p90 = quantile(lat, n_lat, 0.9),
	       p99 = quantile(lat, n_lat, 0.99), pmax = n_lat ? lat[n_lat - 1] : 0;
	for (int i = 0; i < MAX_CODES; i++)
		total_retries += g.retries[i];
	double per_min = wall > 0 ? n_lat / wall * 60 : 0;

	printf("requests        %d (%d clients, run %s)\n", g.requests, g.clients, g.run_tag);
	printf("answers         %ld\n", answered);
	printf("lost            %ld\n", lost);
	printf("duplicated      %ld\n", duplicated);
	printf("wrong status    %ld\n", g.wrong_status);
	printf("id mismatches   %ld\n", g.id_mismatch);
	printf("no reward       %ld\n", g.no_reward);
	printf("resent          %ld (mismatches %ld, stored answers +%ld)\n", resent,
	       resend_mismatch, stored_delta);
	printf("retries         %ld", total_retries);
	for (int i = 0; i < MAX_CODES; i++)
		if (g.retries[i])
			printf("  %s%d: %ld", i ? "" : "no answer/", i, g.retries[i]);
	printf("\n");
	for (int i = 0; i < MAX_CODES; i++)
		if (final_codes[i])
			printf("gave up on      %ld with HTTP %d\n", final_codes[i], i);
	printf("wall            %.1f s\n", wall);
	printf("throughput      %.1f verdicts/min", per_min);
	if (g.workers)
		printf(" (%.1f per worker, %d workers)", per_min / g.workers, g.workers);
	printf("\n");
	printf("latency         p50 %.3f s  p90 %.3f s  p99 %.3f s  max %.3f s\n", p50, p90, p99,
	       pmax);
	int slow = -1;
	for (int n = 0; n < g.requests; n++)
		if (g.res[n].final_code == 200 && (slow < 0 || g.res[n].latency_s > g.res[slow].latency_s))
			slow = n;
	if (slow >= 0) {
		char id[128];
		request_id(slow, id, sizeof id);
		printf("slowest         %s (%s, %d attempts, %.3f s)\n", id,
		       g.kinds[g.res[slow].kind].name, g.res[slow].attempts, g.res[slow].latency_s);
	}
	for (int i = 0; i < g.n_kinds; i++) {
		kind *k = &g.kinds[i];
		printf("  %-10s %6ld sent  %6ld as expected (%s)  %ld wrong\n", k->name, k->sent, k->ok,
		       k->expected, k->wrong);
	}

	if (g.json_out) {
		FILE *f = fopen(g.json_out, "w");
		if (!f) {
			fprintf(stderr, "serve-load: cannot write %s\n", g.json_out);
		} else {
			fprintf(f, "{\"requests\": %d, \"clients\": %d, \"run\": \"%s\", \"answers\": %ld, "
			           "\"lost\": %ld, \"duplicated\": %ld, \"wrong_status\": %ld, "
			           "\"id_mismatches\": %ld, \"no_reward\": %ld, \"resent\": %ld, "
			           "\"resend_mismatches\": %ld, \"stored_answers_delta\": %ld, "
			           "\"retries\": {",
			        g.requests, g.clients, g.run_tag, answered, lost, duplicated, g.wrong_status,
			        g.id_mismatch, g.no_reward, resent, resend_mismatch, stored_delta);
			int first = 1;
			for (int i = 0; i < MAX_CODES; i++)
				if (g.retries[i]) {
					fprintf(f, "%s\"%d\": %ld", first ? "" : ", ", i, g.retries[i]);
					first = 0;
				}
			fprintf(f, "}, \"retries_total\": %ld, \"wall_s\": %.3f, \"verdicts_per_min\": %.2f, ",
			        total_retries, wall, per_min);
			if (g.workers)
				fprintf(f, "\"workers\": %d, \"verdicts_per_min_per_worker\": %.2f, ", g.workers,
				        per_min / g.workers);
			fprintf(f, "\"latency_s\": {\"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f, "
			           "\"max\": %.4f}, \"kinds\": {", p50, p90, p99, pmax);
			for (int i = 0; i < g.n_kinds; i++)
				fprintf(f, "%s\"%s\": {\"sent\": %ld, \"expected\": %ld, \"wrong\": %ld}",
				        i ? ", " : "", g.kinds[i].name, g.kinds[i].sent, g.kinds[i].ok,
				        g.kinds[i].wrong);
			fprintf(f, "}}\n");
			fclose(f);
		}
	}
	for (int n = 0; n < g.requests; n++)
		free(g.res[n].answer);
	free(g.res);
	free(lat);
	for (int i = 0; i < g.n_kinds; i++)
		free(g.kinds[i].code);
	curl_global_cleanup();
	return lost || duplicated || g.wrong_status || g.id_mismatch || g.no_reward ||
	               resend_mismatch
	           ? 1
	           : 0;
}
