/* The eval leaderboard's store: every `stitch eval` run as its scores (scores.json, whole) and
 * its rows (results.jsonl, one per sample and round), so that models, modes and days can be set
 * side by side (`stitch eval --compare`). The key figures get columns of their own for queries
 * by hand; the JSON text is what is read back, so a run comes out exactly as it went in. The
 * tables are apart from bench's (db.c), so one file may hold both. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "sql.h"

struct st_eval_db {
	st_sql_store store;
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS eval_runs("
	" id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT, model TEXT NOT NULL, mode TEXT NOT NULL,"
	" samples INTEGER, rounds INTEGER, backend TEXT, device TEXT, commit_id TEXT,"
	" scores TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS eval_results("
	" run INTEGER NOT NULL REFERENCES eval_runs(id), seq INTEGER NOT NULL, task TEXT,"
	" sample INTEGER, round INTEGER, final INTEGER, status TEXT, compiled INTEGER,"
	" correct INTEGER, vs_reference REAL, vs_expert REAL, row TEXT NOT NULL,"
	" PRIMARY KEY(run, seq));";

st_status st_eval_db_open(const char *path, st_eval_db **out, st_err *err)
{
	*out = NULL;
	st_eval_db *d = calloc(1, sizeof *d);
	if (!d)
		return st_err_set(err, ST_E_NOMEM, "eval db: out of memory");
	st_status s = st_sql_store_open(&d->store, path, schema, "eval", err);
	if (s) {
		free(d);
		return s;
	}
	*out = d;
	return ST_OK;
}

void st_eval_db_close(st_eval_db *d)
{
	if (!d)
		return;
	st_sql_store_close(&d->store);
	free(d);
}

const char *st_eval_db_default_path(char *buf, size_t len)
{
	return st_sql_default_path("STITCH_EVAL_DB", "eval.db", buf, len);
}

/* ---- writing --------------------------------------------------------------------------------- */

st_status st_eval_db_save(st_eval_db *d, const json_t *scores, const json_t *rows, long long *id,
                          st_err *err)
{
	if (!json_is_object(scores) || !json_is_string(json_object_get(scores, "model")) ||
	    !json_is_string(json_object_get(scores, "mode")))
		return st_err_set(err, ST_E_INVALID, "eval scores: an object with model and mode "
		                  "expected");
	if (rows && !json_is_array(rows))
		return st_err_set(err, ST_E_INVALID, "eval rows: an array expected");
	sqlite3_stmt *ins_run = NULL, *ins_row = NULL;
	st_status s = ST_OK;
	if (sqlite3_exec(d->store.db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return st_sql_store_error(&d->store, err, "cannot start a transaction");
	if (sqlite3_prepare_v2(d->store.db,
	                       "INSERT INTO eval_runs(started, model, mode, samples, rounds, backend,"
	                       " device, commit_id, scores) VALUES(?,?,?,?,?,?,?,?,?)", -1, &ins_run,
	                       NULL) ||
	    sqlite3_prepare_v2(d->store.db, "INSERT INTO eval_results VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", -1,
	                       &ins_row, NULL)) {
		s = st_sql_store_error(&d->store, err, "cannot prepare");
		goto out;
	}
	st_sql_bind_text(ins_run, 1, scores, "started");
	st_sql_bind_text(ins_run, 2, scores, "model");
	st_sql_bind_text(ins_run, 3, scores, "mode");
	st_sql_bind_num(ins_run, 4, scores, "samples");
	st_sql_bind_num(ins_run, 5, scores, "rounds");
	st_sql_bind_text(ins_run, 6, scores, "backend");
	st_sql_bind_text(ins_run, 7, scores, "device");
	st_sql_bind_text(ins_run, 8, scores, "commit");
	st_sql_bind_json(ins_run, 9, scores);
	if (!st_sql_step_done(ins_run)) {
		s = st_sql_store_error(&d->store, err, "cannot record the eval run");
		goto out;
	}
	sqlite3_int64 run_id = sqlite3_last_insert_rowid(d->store.db);
	size_t i;
	const json_t *r;
	json_array_foreach(rows, i, r) {
		sqlite3_bind_int64(ins_row, 1, run_id);
		sqlite3_bind_int64(ins_row, 2, (sqlite3_int64)i);
		st_sql_bind_text(ins_row, 3, r, "task");
		st_sql_bind_num(ins_row, 4, r, "sample");
		st_sql_bind_num(ins_row, 5, r, "round");
		st_sql_bind_num(ins_row, 6, r, "final");
		st_sql_bind_text(ins_row, 7, r, "status");
		st_sql_bind_num(ins_row, 8, r, "compiled");
		st_sql_bind_num(ins_row, 9, r, "correct");
		st_sql_bind_num(ins_row, 10, r, "vs_reference");
		st_sql_bind_num(ins_row, 11, r, "vs_expert");
		st_sql_bind_json(ins_row, 12, r);
		if (!st_sql_step_done(ins_row)) {
			s = st_sql_store_error(&d->store, err, "cannot record an eval result");
			goto out;
		}
	}
	if (sqlite3_exec(d->store.db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		s = st_sql_store_error(&d->store, err, "cannot commit");
		goto out;
	}
	*id = run_id;
out:
	if (s)
		sqlite3_exec(d->store.db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_finalize(ins_run);
	sqlite3_finalize(ins_row);
	return s;
}

/* ---- reading --------------------------------------------------------------------------------- */

/* Column i, JSON text as written by save, parsed back. */
static json_t *column_parsed(sqlite3_stmt *st, int i)
{
	const char *text = (const char *)sqlite3_column_text(st, i);
	return text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
}

static st_status load_rows(st_eval_db *d, long long id, json_t **rows, st_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(d->store.db, "SELECT row FROM eval_results WHERE run = ? ORDER BY seq", -1,
	                       &st, NULL))
		return st_sql_store_error(&d->store, err, "cannot prepare");
	sqlite3_bind_int64(st, 1, id);
	json_t *a = json_array();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *row = column_parsed(st, 0);
		if (!row) {
			rc = SQLITE_CORRUPT;
			break;
		}
		json_array_append_new(a, row);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		json_decref(a);
		return rc == SQLITE_CORRUPT
		               ? st_err_set(err, ST_E_INVALID, "%s: eval run %lld: a result row is not "
		                            "JSON", d->store.path, id)
		               : st_sql_store_error(&d->store, err, "cannot read eval results");
	}
	*rows = a;
	return ST_OK;
}

st_status st_eval_db_resolve(st_eval_db *d, const char *ref, long long *id, st_err *err)
{
	*id = 0;
	st_status s = st_sql_resolve_ref(d->store.db, d->store.path, "eval_runs", ref, id, err);
	if (s == ST_E_INVALID)
		return st_err_set(err, ST_E_INVALID, "no eval run '%s' in %s (expected an id, 'last' "
		                  "or 'last~N')", ref, d->store.path);
	if (s)
		return s;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(d->store.db, "SELECT 1 FROM eval_runs WHERE id = ?", -1, &st, NULL))
		return st_sql_store_error(&d->store, err, "cannot prepare");
	sqlite3_bind_int64(st, 1, *id);
	int found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	if (!found) {
		*id = 0;
		return st_err_set(err, ST_E_INVALID, "no eval run '%s' in %s", ref, d->store.path);
	}
	return ST_OK;
}

st_status st_eval_db_load(st_eval_db *d, const char *ref, json_t **scores, json_t **rows,
                          st_err *err)
{
	*scores = NULL;
	if (rows)
		*rows = NULL;
	long long id;
	st_status rs = st_eval_db_resolve(d, ref, &id, err);
	if (rs)
		return rs;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(d->store.db, "SELECT scores FROM eval_runs WHERE id = ?", -1, &st, NULL))
		return st_sql_store_error(&d->store, err, "cannot prepare");
	sqlite3_bind_int64(st, 1, id);
	int found = sqlite3_step(st) == SQLITE_ROW;
	json_t *s = found ? column_parsed(st, 0) : NULL;
	sqlite3_finalize(st);
	if (!found)
		return st_err_set(err, ST_E_INVALID, "no eval run '%s' in %s", ref, d->store.path);
	if (!json_is_object(s)) {
		json_decref(s);
		return st_err_set(err, ST_E_INVALID, "%s: eval run %lld: its scores are not a JSON "
		                  "object", d->store.path, id);
	}
	if (rows) {
		rs = load_rows(d, id, rows, err);
		if (rs) {
			json_decref(s);
			return rs;
		}
	}
	*scores = s;
	return ST_OK;
}

st_status st_eval_db_list(st_eval_db *d, json_t **runs, st_err *err)
{
	*runs = NULL;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(d->store.db, "SELECT id, started, model, mode, samples, rounds, backend"
	                       " FROM eval_runs ORDER BY id DESC", -1, &st, NULL))
		return st_sql_store_error(&d->store, err, "cannot prepare");
	static const char *const keys[] = {"id", "started", "model", "mode", "samples", "rounds",
	                                   "backend"};
	json_t *a = json_array();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *o = json_object();
		for (int i = 0; i < 7; i++)
			json_object_set_new(o, keys[i], st_sql_column_json(st, i));
		json_array_append_new(a, o);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		json_decref(a);
		return st_sql_store_error(&d->store, err, "cannot list eval runs");
	}
	*runs = a;
	return ST_OK;
}
