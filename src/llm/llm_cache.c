/* The response cache: an SQLite table of (request key, request, response body). The key is the
 * SHA-256 of the whole request (endpoint, model, body, sample index); the body is stored as the
 * server sent it, so a replay parses exactly what a live run parsed. WAL mode, a busy timeout
 * and a setup that waits its turn (common/sqlite_setup.h) let several stitch processes and
 * threads share one file. */
#include "llm_cache.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "common/sqlite_setup.h"

struct st_llm_cache {
	sqlite3 *db;
};

static st_status db_fail(sqlite3 *db, const char *what, st_err *err)
{
	return st_err_set(err, ST_E_IO, "LLM cache: %s: %s", what, db ? sqlite3_errmsg(db) : "?");
}

st_status st_llm_cache_open(const char *path, st_llm_cache **out, st_err *err)
{
	*out = NULL;
	st_llm_cache *c = calloc(1, sizeof *c);
	if (!c)
		return st_err_set(err, ST_E_NOMEM, "LLM cache: out of memory");
	if (sqlite3_open(path, &c->db) != SQLITE_OK) {
		st_status s = st_err_set(err, ST_E_IO, "LLM cache %s: %s", path,
		                         c->db ? sqlite3_errmsg(c->db) : "cannot open");
		sqlite3_close(c->db);
		free(c);
		return s;
	}
	sqlite3_busy_timeout(c->db, 10000);
	char *msg = NULL;
	if (st_sqlite_setup(c->db,
	                    "PRAGMA journal_mode=WAL;"
	                    "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, request TEXT, "
	                    "body BLOB NOT NULL, created REAL DEFAULT (julianday('now')));",
	                    &msg) != SQLITE_OK) {
		st_status s = st_err_set(err, ST_E_IO, "LLM cache %s: %s", path, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_close(c->db);
		free(c);
		return s;
	}
	*out = c;
	return ST_OK;
}

void st_llm_cache_close(st_llm_cache *c)
{
	if (!c)
		return;
	sqlite3_close(c->db);
	free(c);
}

int st_llm_cache_get(st_llm_cache *c, const char *key, char **body, size_t *len, st_err *err)
{
	*body = NULL;
	*len = 0;
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(c->db, "SELECT body FROM responses WHERE key = ?", -1, &st, NULL) !=
	    SQLITE_OK) {
		db_fail(c->db, "lookup", err);
		return -1;
	}
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st), found = 0;
	if (rc == SQLITE_ROW) {
		int n = sqlite3_column_bytes(st, 0);
		const void *p = sqlite3_column_blob(st, 0);
		*body = malloc((size_t)n + 1);
		if (!*body) {
			sqlite3_finalize(st);
			st_err_set(err, ST_E_NOMEM, "LLM cache: out of memory");
			return -1;
		}
		if (n)
			memcpy(*body, p, (size_t)n);
		(*body)[n] = '\0';
		*len = (size_t)n;
		found = 1;
	} else if (rc != SQLITE_DONE) {
		db_fail(c->db, "lookup", err);
		found = -1;
	}
	sqlite3_finalize(st);
	return found;
}

st_status st_llm_cache_put(st_llm_cache *c, const char *key, const char *request,
                           const char *body, size_t len, st_err *err)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(c->db,
	                       "INSERT OR REPLACE INTO responses (key, request, body) VALUES (?, ?, ?)",
	                       -1, &st, NULL) != SQLITE_OK)
		return db_fail(c->db, "store", err);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, request, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 3, body, (int)len, SQLITE_STATIC);
	st_status s = sqlite3_step(st) == SQLITE_DONE ? ST_OK : db_fail(c->db, "store", err);
	sqlite3_finalize(st);
	return s;
}
