/* What the two SQLite stores of src/store (bench runs in db.c, eval runs in eval_db.c) share:
 * opening a store file with its schema (and the handle that names it in errors), binding
 * jansson values to statement parameters and reading columns back as jansson values, naming a
 * run by reference ("42", "last", "last~N"), and where a store lives when no path is given.
 * Internal to src/store. */
#ifndef ST_STORE_SQL_H
#define ST_STORE_SQL_H

#include <jansson.h>
#include <sqlite3.h>
#include <stddef.h>

#include "common/st_error.h"

/* Open (or create, parent folders included) the store at path and run its CREATE ... IF NOT
 * EXISTS schema. `what` names the store in messages ("bench", "eval"). A file that is not a
 * database, or not one of ours, is ST_E_INVALID; one that cannot be created or written ST_E_IO. */
st_status st_sql_open(const char *path, const char *schema, const char *what, sqlite3 **db,
                      st_err *err);

/* A store: its connection and its file, which every message names. */
typedef struct st_sql_store {
	sqlite3 *db;
	char path[4096];
} st_sql_store;

/* st_sql_open into s, which keeps the path for messages; st_sql_store_close closes it. */
st_status st_sql_store_open(st_sql_store *s, const char *path, const char *schema,
                            const char *what, st_err *err);
void st_sql_store_close(st_sql_store *s);
/* ST_E_SYSTEM, "PATH: WHAT: SQLite's last message". */
st_status st_sql_store_error(const st_sql_store *s, st_err *err, const char *what);

/* o[k] as parameter i: a string, a number (true/false as 1/0), or NULL when absent or of
 * another type. */
void st_sql_bind_text(sqlite3_stmt *st, int i, const json_t *o, const char *k);
void st_sql_bind_num(sqlite3_stmt *st, int i, const json_t *o, const char *k);
/* x as compact JSON text; NULL for a NULL x. */
void st_sql_bind_json(sqlite3_stmt *st, int i, const json_t *x);
/* Step a statement that returns no rows and make it ready for the next bindings: 1 when done. */
int st_sql_step_done(sqlite3_stmt *st);
/* Column i of the current row as an integer, real, string or null. */
json_t *st_sql_column_json(sqlite3_stmt *st, int i);

/* The id a run reference names in `table` (an id column, newest highest): a number as it is,
 * "last", or "last~N" (N runs before the last); *id = 0 when "last~N" reaches past the first.
 * A malformed reference is ST_E_INVALID. */
st_status st_sql_resolve_ref(sqlite3 *db, const char *path, const char *table, const char *ref,
                             long long *id, st_err *err);

/* Where a store lives by default: $ENV when set and not empty, else NAME under st_data_path.
 * buf or the variable's value; NULL when neither can be had (no home folder). */
const char *st_sql_default_path(const char *env, const char *name, char *buf, size_t len);

#endif
