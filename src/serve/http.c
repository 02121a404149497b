/* The HTTP front of stitch serve on libmicrohttpd: one thread per connection (a verify request
 * waits for its answer, seconds to minutes, on its own thread), bodies gathered up to the limit
 * (413 beyond it), the bearer token checked in constant time, routes to the service, JSON
 * answers with an X-Request-Id and, for a 429, a Retry-After. */
#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CONNECTIONS 1024

typedef struct conn {
	char *body;
	size_t len, cap;
	int too_big;
} conn;

struct st_http {
	struct MHD_Daemon *d;
	int active;              /* requests between their first call and their completion */
	st_service *svc;
	const st_serve_opts *o;
	int port;
};

static enum MHD_Result reply(struct MHD_Connection *c, int code, char *text, const char *type,
                             const char *id, double retry_after)
{
	if (!text)
		text = strdup("{\"error\":\"out of memory\"}");
	struct MHD_Response *r = MHD_create_response_from_buffer(text ? strlen(text) : 0, text,
	                                                         MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	if (id && *id)
		MHD_add_response_header(r, "X-Request-Id", id);
	if (retry_after > 0) {
		char v[32];
		snprintf(v, sizeof v, "%.0f", retry_after < 1 ? 1 : retry_after);
		MHD_add_response_header(r, "Retry-After", v);
	}
	if (code == 401)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
	enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_error(st_http *h, struct MHD_Connection *c, int code,
                                   const char *msg)
{
	st_service_count(h->svc, code);
	json_t *o = json_pack("{s:s}", "error", msg);
	char *t = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return reply(c, code, t, "application/json", NULL, 0);
}

/* Constant time in the token's length: the comparison does not tell how much of it was right. */
static int token_ok(const char *want, const char *header)
{
	if (!header || strncmp(header, "Bearer ", 7))
		return 0;
	const char *got = header + 7;
	size_t n = strlen(want), m = strlen(got);
	unsigned char diff = (unsigned char)(n != m);
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(want[i] ^ (i < m ? got[i] : 0));
	return diff == 0;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
	(void)version;
	st_http *h = cls;
	conn *k = *con_cls;
	if (!k) {
		if (!(k = calloc(1, sizeof *k)))
			return MHD_NO;
		*con_cls = k;
		__atomic_add_fetch(&h->active, 1, __ATOMIC_SEQ_CST);
		return MHD_YES;
	}
	if (*upload_size) {
		/* Gathered up to the limit, then only counted: the client gets its 413 after sending. */
		if (!k->too_big && k->len + *upload_size > h->o->body_max) {
			k->too_big = 1;
			free(k->body);
			k->body = NULL;
		}
		if (!k->too_big) {
			if (k->len + *upload_size + 1 > k->cap) {
				size_t cap = (k->len + *upload_size + 1) * 2;
				if (cap > h->o->body_max + 1)
					cap = h->o->body_max + 1;
				char *b = realloc(k->body, cap);
				if (!b)
					return MHD_NO;
				k->body = b;
				k->cap = cap;
			}
			memcpy(k->body + k->len, upload, *upload_size);
			k->len += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
	if (!strcmp(url, "/healthz") && get) {
		int code;
		char *t = st_service_health(h->svc, &code);
		return reply(c, code, t, "application/json", NULL, 0);
	}
	if (!strcmp(url, "/metrics") && get)
		return reply(c, 200, st_service_metrics_text(h->svc),
		             "text/plain; version=0.0.4; charset=utf-8", NULL, 0);
	int tasks = !strcmp(url, "/v1/tasks");
	const char *kind = !strcmp(url, "/v1/verify") ? "verify"
	                 : !strcmp(url, "/v1/reward") ? "reward" : NULL;
	if (!tasks && !kind)
		return reply_error(h, c, 404, "no such path (POST /v1/verify, POST /v1/reward, "
		                              "GET /v1/tasks, /healthz, /metrics)");
	if ((tasks && !get) || (kind && !post)) {
		char msg[128];
		snprintf(msg, sizeof msg, "%s takes %s", url, tasks ? "GET" : "POST");
		return reply_error(h, c, 405, msg);
	}
	if (h->o->token && !token_ok(h->o->token, MHD_lookup_connection_value(
	                                                c, MHD_HEADER_KIND, "Authorization")))
		return reply_error(h, c, 401, "missing or wrong bearer token (Authorization: Bearer ...)");
	if (tasks)
		return reply(c, 200, st_service_tasks(h->svc), "application/json", NULL, 0);
	if (k->too_big) {
		char msg[128];
		snprintf(msg, sizeof msg, "the body is larger than the %zu bytes this service takes",
		         h->o->body_max);
		return reply_error(h, c, 413, msg);
	}
	char *answer = NULL, id[160];
	double retry = 0;
	int code = st_service_request(h->svc, kind, k->body ? k->body : "", k->len, &answer, &retry,
	                              id, sizeof id);
	return reply(c, code, answer, "application/json", id, retry);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode why)
{
	(void)c, (void)why;
	st_http *h = cls;
	conn *k = *con_cls;
	if (k) {
		free(k->body);
		free(k);
		*con_cls = NULL;
		__atomic_sub_fetch(&h->active, 1, __ATOMIC_SEQ_CST);
	}
}

static st_status parse_listen(const char *spec, struct sockaddr_in *sa, st_err *err)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof host)
		return st_err_set(err, ST_E_INVALID, "--listen %s: not HOST:PORT", spec);
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end || port < 0 || port > 65535)
		return st_err_set(err, ST_E_INVALID, "--listen %s: port must be 0 to 65535", spec);
	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return st_err_set(err, ST_E_INVALID, "--listen %s: '%s' is not an IPv4 address", spec,
		                  host);
	return ST_OK;
}

st_status st_http_start(const st_serve_opts *o, st_service *svc, st_http **out, st_err *err)
{
	*out = NULL;
	struct sockaddr_in sa;
	st_status s = parse_listen(o->listen, &sa, err);
	if (s)
		return s;
	st_http *h = calloc(1, sizeof *h);
	if (!h)
		return st_err_set(err, ST_E_NOMEM, "serve: out of memory");
	h->svc = svc;
	h->o = o;
	h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
	                        MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, h,
	                        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	                        MHD_OPTION_NOTIFY_COMPLETED, completed, h,
	                        MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
	                        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
	                        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
	                        MHD_OPTION_END);
	if (!h->d) {
		free(h);
		return st_err_set(err, ST_E_SYSTEM, "cannot listen on %s (in use, or not an address of "
		                  "this machine?)", o->listen);
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info ? info->port : ntohs(sa.sin_port);
	*out = h;
	return ST_OK;
}

int st_http_port(const st_http *h)
{
	return h->port;
}

void st_http_stop(st_http *h)
{
	if (!h)
		return;
	/* The last answers may still be on their way out: give them up to 10 s. */
	for (int i = 0; i < 1000 && __atomic_load_n(&h->active, __ATOMIC_SEQ_CST) > 0; i++)
		usleep(10000);
	if (h->d)
		MHD_stop_daemon(h->d);
	free(h);
}
