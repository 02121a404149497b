/* The serve journal: every request the service accepted and every answer it gave, in one SQLite
 * file, so that a restart loses nothing (unanswered requests are queued again) and a request id
 * seen before gets the stored answer instead of a second run. */
#ifndef ST_SERVE_JOURNAL_H
#define ST_SERVE_JOURNAL_H

#include <jansson.h>

#include "common/st_error.h"

typedef struct st_serve_store st_serve_store;

/* Open (create) the file; ST_E_INVALID when it cannot be opened or is not ours. */
st_status st_serve_store_open(const char *path, st_serve_store **out, st_err *err);
void st_serve_store_close(st_serve_store *s);

/* A new request: id, kind ("verify", "reward"), the hash of what was asked (the request without
 * its id) and the request itself. */
st_status st_serve_store_add(st_serve_store *s, const char *id, const char *kind,
                             const char *hash, const char *request, st_err *err);
/* The answer (HTTP status and JSON body) of a request; it is done from now on. */
st_status st_serve_store_finish(st_serve_store *s, const char *id, int http_status,
                                const char *answer, st_err *err);

typedef struct st_serve_record {
	char *kind, *hash, *request;
	char *answer;     /* NULL while not done */
	int http_status;
} st_serve_record;

/* 1 and *r filled when the id is known, 0 when not, -1 on a database error (err set). */
int st_serve_store_get(st_serve_store *s, const char *id, st_serve_record *r, st_err *err);
void st_serve_record_free(st_serve_record *r);

/* Call fn for every request without an answer, oldest first (a restart queues them again). */
st_status st_serve_store_pending(st_serve_store *s,
                                 void (*fn)(void *arg, const char *id, const char *kind,
                                            const char *hash, const char *request),
                                 void *arg, st_err *err);

/* Requests and answered requests in the file. */
void st_serve_store_counts(st_serve_store *s, long *requests, long *answered);

#endif
