/* The service behind the HTTP front: admission of requests, the queues (compile, run, judge),
 * the worker threads and the answers. http.c calls it; serve.c starts and stops it. */
#ifndef ST_SERVE_SERVICE_H
#define ST_SERVE_SERVICE_H

#include <jansson.h>

#include "serve.h"

typedef struct st_service st_service;

/* Open the store, queue again what it holds unanswered, start the threads. */
st_status st_service_start(const st_serve_opts *o, st_service **out, st_err *err);

/* One POST of `kind` ("verify" or "reward") with its body: validate, admit (or answer from the
 * store, or attach to the same id in flight), wait for the answer until the deadline. Returns
 * the HTTP status; *answer is the JSON text (allocated), *retry_after > 0 for a 429. */
int st_service_request(st_service *s, const char *kind, const char *body, size_t len,
                       char **answer, double *retry_after, char *id_out, size_t id_len);

/* GET /v1/tasks, /healthz and /metrics (allocated text). */
char *st_service_tasks(st_service *s);
char *st_service_health(st_service *s, int *http_status);
char *st_service_metrics_text(st_service *s);
/* An answer that never reached the service (bad path, auth, size): counted. */
void st_service_count(st_service *s, int http_status);

/* Refuse new work (503), finish what was admitted, wait until every waiting client has its
 * answer; then stop the threads. */
void st_service_drain(st_service *s);
void st_service_stop(st_service *s);

#endif
