/* The serve journal on SQLite (WAL, one connection behind a mutex: the service's threads write a
 * row per request and per answer, far below what one connection sustains). */
#include "journal.h"
#include "common/clock.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct st_serve_store {
	sqlite3 *db;
	pthread_mutex_t mu;
	char path[4096];
};

static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	"CREATE TABLE IF NOT EXISTS serve_requests("
	" id TEXT PRIMARY KEY, kind TEXT NOT NULL, hash TEXT NOT NULL, request TEXT NOT NULL,"
	" received REAL NOT NULL, answered REAL, http_status INTEGER, answer TEXT);"
	"CREATE INDEX IF NOT EXISTS serve_pending ON serve_requests(answered, received);";

static st_status db_error(st_serve_store *s, st_err *err, const char *what)
{
	return st_err_set(err, ST_E_SYSTEM, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

st_status st_serve_store_open(const char *path, st_serve_store **out, st_err *err)
{
	*out = NULL;
	st_serve_store *s = calloc(1, sizeof *s);
	if (!s)
		return st_err_set(err, ST_E_NOMEM, "serve store: out of memory");
	snprintf(s->path, sizeof s->path, "%s", path);
	pthread_mutex_init(&s->mu, NULL);
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
	    SQLITE_OK) {
		st_status st = st_err_set(err, ST_E_INVALID, "%s: cannot open the serve database: %s",
		                          path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
		st_serve_store_close(s);
		return st;
	}
	sqlite3_busy_timeout(s->db, 10000);
	char *msg = NULL;
	if (sqlite3_exec(s->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		st_status st = st_err_set(err, ST_E_INVALID, "%s: not a stitch serve database (%s)",
		                          path, msg ? msg : "?");
		sqlite3_free(msg);
		st_serve_store_close(s);
		return st;
	}
	*out = s;
	return ST_OK;
}

void st_serve_store_close(st_serve_store *s)
{
	if (!s)
		return;
	sqlite3_close(s->db);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

st_status st_serve_store_add(st_serve_store *s, const char *id, const char *kind,
                             const char *hash, const char *request, st_err *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = NULL;
	st_status st = ST_OK;
	if (sqlite3_prepare_v2(s->db, "INSERT INTO serve_requests(id, kind, hash, request, received)"
	                       " VALUES(?, ?, ?, ?, ?)", -1, &q, NULL) != SQLITE_OK) {
		st = db_error(s, err, "prepare insert");
	} else {
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, kind, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 3, hash, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 4, request, -1, SQLITE_STATIC);
		sqlite3_bind_double(q, 5, st_wall_s());
		if (sqlite3_step(q) != SQLITE_DONE)
			st = db_error(s, err, "insert a request");
	}
	sqlite3_finalize(q);
	pthread_mutex_unlock(&s->mu);
	return st;
}

st_status st_serve_store_finish(st_serve_store *s, const char *id, int http_status,
                                const char *answer, st_err *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = NULL;
	st_status st = ST_OK;
	if (sqlite3_prepare_v2(s->db, "UPDATE serve_requests SET answered = ?, http_status = ?,"
	                       " answer = ? WHERE id = ?", -1, &q, NULL) != SQLITE_OK) {
		st = db_error(s, err, "prepare update");
	} else {
		sqlite3_bind_double(q, 1, st_wall_s());
		sqlite3_bind_int(q, 2, http_status);
		sqlite3_bind_text(q, 3, answer, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 4, id, -1, SQLITE_STATIC);
		if (sqlite3_step(q) != SQLITE_DONE)
			st = db_error(s, err, "store an answer");
		else if (sqlite3_changes(s->db) != 1)
			st = st_err_set(err, ST_E_SYSTEM, "%s: no request '%s' to answer", s->path, id);
	}
	sqlite3_finalize(q);
	pthread_mutex_unlock(&s->mu);
	return st;
}

static char *dup_col(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? strdup((const char *)t) : NULL;
}

int st_serve_store_get(st_serve_store *s, const char *id, st_serve_record *r, st_err *err)
{
	memset(r, 0, sizeof *r);
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = NULL;
	int found = -1;
	if (sqlite3_prepare_v2(s->db, "SELECT kind, hash, request, answer, http_status FROM"
	                       " serve_requests WHERE id = ?", -1, &q, NULL) != SQLITE_OK) {
		db_error(s, err, "prepare select");
	} else {
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
		int rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			r->kind = dup_col(q, 0);
			r->hash = dup_col(q, 1);
			r->request = dup_col(q, 2);
			r->answer = dup_col(q, 3);
			r->http_status = sqlite3_column_int(q, 4);
			found = 1;
		} else if (rc == SQLITE_DONE) {
			found = 0;
		} else {
			db_error(s, err, "read a request");
		}
	}
	sqlite3_finalize(q);
	pthread_mutex_unlock(&s->mu);
	return found;
}

void st_serve_record_free(st_serve_record *r)
{
	free(r->kind);
	free(r->hash);
	free(r->request);
	free(r->answer);
	memset(r, 0, sizeof *r);
}

st_status st_serve_store_pending(st_serve_store *s,
                                 void (*fn)(void *arg, const char *id, const char *kind,
                                            const char *hash, const char *request),
                                 void *arg, st_err *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = NULL;
	st_status st = ST_OK;
	if (sqlite3_prepare_v2(s->db, "SELECT id, kind, hash, request FROM serve_requests WHERE"
	                       " answered IS NULL ORDER BY received", -1, &q, NULL) != SQLITE_OK) {
		st = db_error(s, err, "prepare the pending query");
	} else {
		int rc;
		while ((rc = sqlite3_step(q)) == SQLITE_ROW)
			fn(arg, (const char *)sqlite3_column_text(q, 0),
			   (const char *)sqlite3_column_text(q, 1), (const char *)sqlite3_column_text(q, 2),
			   (const char *)sqlite3_column_text(q, 3));
		if (rc != SQLITE_DONE)
			st = db_error(s, err, "read the pending requests");
	}
	sqlite3_finalize(q);
	pthread_mutex_unlock(&s->mu);
	return st;
}

void st_serve_store_counts(st_serve_store *s, long *requests, long *answered)
{
	*requests = *answered = 0;
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT count(*), count(answered) FROM serve_requests", -1, &q,
	                       NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
		*requests = sqlite3_column_int64(q, 0);
		*answered = sqlite3_column_int64(q, 1);
	}
	sqlite3_finalize(q);
	pthread_mutex_unlock(&s->mu);
}
