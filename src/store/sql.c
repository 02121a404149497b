/* The SQLite plumbing the bench and eval stores share (sql.h): a store is one file that any
 * number of stitch processes may open at once, so writers wait for each other (busy timeout)
 * instead of failing, and a value goes in and comes out as the jansson value it was. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/sqlite_setup.h"
#include "sql.h"

st_status st_sql_open(const char *path, const char *schema, const char *what, sqlite3 **out,
                      st_err *err)
{
	*out = NULL;
	char dir[PATH_MAX];
	if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir)
		return st_err_set(err, ST_E_INVALID, "%s database path too long", what);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		st_status s = st_mkdirs(dir, err);
		if (s)
			return st_err_wrap(err, s, "%s database %s", what, path);
	}
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
	    SQLITE_OK) {
		st_status s = st_err_set(err, ST_E_IO, "%s: cannot open the %s database: %s", path, what,
		                         db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return s;
	}
	sqlite3_busy_timeout(db, 10000);
	char *msg = NULL;
	/* sqlite opens lazily: a folder we may not write to shows up here, not at open */
	int rc = st_sqlite_setup(db, schema, &msg);
	if (rc != SQLITE_OK) {
		int io = rc == SQLITE_CANTOPEN || rc == SQLITE_READONLY || rc == SQLITE_PERM ||
		         rc == SQLITE_IOERR || rc == SQLITE_FULL;
		st_status s = io ? st_err_set(err, ST_E_IO, "%s: cannot open the %s database: %s", path,
		                              what, msg ? msg : "?")
		                 : st_err_set(err, ST_E_INVALID, "%s: not a stitch %s database (%s)",
		                              path, what, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_close(db);
		return s;
	}
	*out = db;
	return ST_OK;
}

st_status st_sql_store_open(st_sql_store *s, const char *path, const char *schema,
                            const char *what, st_err *err)
{
	snprintf(s->path, sizeof s->path, "%s", path);
	return st_sql_open(path, schema, what, &s->db, err);
}

void st_sql_store_close(st_sql_store *s)
{
	sqlite3_close(s->db);
	s->db = NULL;
}

st_status st_sql_store_error(const st_sql_store *s, st_err *err, const char *what)
{
	return st_err_set(err, ST_E_SYSTEM, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

void st_sql_bind_text(sqlite3_stmt *st, int i, const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

void st_sql_bind_num(sqlite3_stmt *st, int i, const json_t *o, const char *k)
{
	const json_t *x = json_object_get(o, k);
	if (json_is_integer(x))
		sqlite3_bind_int64(st, i, json_integer_value(x));
	else if (json_is_number(x))
		sqlite3_bind_double(st, i, json_number_value(x));
	else if (json_is_boolean(x))
		sqlite3_bind_int(st, i, json_is_true(x));
	else
		sqlite3_bind_null(st, i);
}

void st_sql_bind_json(sqlite3_stmt *st, int i, const json_t *x)
{
	char *s = x ? json_dumps(x, JSON_COMPACT) : NULL;
	if (s)
		sqlite3_bind_text(st, i, s, -1, free);
	else
		sqlite3_bind_null(st, i);
}

int st_sql_step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE;
}

json_t *st_sql_column_json(sqlite3_stmt *st, int i)
{
	switch (sqlite3_column_type(st, i)) {
	case SQLITE_INTEGER: return json_integer(sqlite3_column_int64(st, i));
	case SQLITE_FLOAT: return json_real(sqlite3_column_double(st, i));
	case SQLITE_TEXT: return json_string((const char *)sqlite3_column_text(st, i));
	default: return json_null();
	}
}

st_status st_sql_resolve_ref(sqlite3 *db, const char *path, const char *table, const char *ref,
                             long long *id, st_err *err)
{
	char *end;
	if (strncmp(ref, "last", 4)) {
		long long v = strtoll(ref, &end, 10);
		if (*ref == 0 || *end || v < 1)
			return st_err_set(err, ST_E_INVALID, "'%s' is not a run (expected an id, 'last' or "
			                  "'last~N')", ref);
		*id = v;
		return ST_OK;
	}
	long long back = 0;
	if (ref[4] == '~') {
		back = strtoll(ref + 5, &end, 10);
		if (ref[5] == 0 || *end || back < 0)
			return st_err_set(err, ST_E_INVALID, "'%s' is not a run (expected 'last~N')", ref);
	} else if (ref[4]) {
		return st_err_set(err, ST_E_INVALID, "'%s' is not a run (expected an id, 'last' or "
		                  "'last~N')", ref);
	}
	char sql[128];
	snprintf(sql, sizeof sql, "SELECT id FROM %s ORDER BY id DESC LIMIT 1 OFFSET ?", table);
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL))
		return st_err_set(err, ST_E_SYSTEM, "%s: cannot prepare: %s", path, sqlite3_errmsg(db));
	sqlite3_bind_int64(st, 1, back);
	*id = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_finalize(st);
	return ST_OK;
}

const char *st_sql_default_path(const char *env, const char *name, char *buf, size_t len)
{
	const char *v = getenv(env);
	if (v && *v)
		return v;
	st_err err;
	return st_data_path(name, buf, len, &err) ? NULL : buf;
}
