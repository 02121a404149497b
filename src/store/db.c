/* The bench results store: one SQLite file holding every run (device, driver, CUDA, commit,
 * options), its per-task rows with the full verdict, and the raw timing samples, so that runs
 * made on different days or machines can be compared (`stitch bench --compare A B`). The schema
 * is documented in docs/bench.md; a run is written in one transaction or not at all. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "sql.h"

struct st_bench_db {
	st_sql_store store;
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS runs("
	" id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL, solutions TEXT NOT NULL,"
	" backend TEXT NOT NULL, baseline TEXT NOT NULL, device TEXT, arch TEXT, driver INTEGER,"
	" runtime INTEGER, commit_id TEXT, host TEXT, options TEXT, score TEXT);"
	"CREATE TABLE IF NOT EXISTS results("
	" run INTEGER NOT NULL REFERENCES runs(id), seq INTEGER NOT NULL, task TEXT NOT NULL,"
	" tier INTEGER NOT NULL, status TEXT NOT NULL, reason TEXT, compiled INTEGER NOT NULL,"
	" correct INTEGER NOT NULL, reference_ms REAL, expert_ms REAL, solution_ms REAL,"
	" vs_reference REAL, vs_expert REAL, sol_fraction REAL, suspicious TEXT, flags TEXT,"
	" verdict TEXT, PRIMARY KEY(run, task));"
	"CREATE TABLE IF NOT EXISTS samples("
	" run INTEGER NOT NULL REFERENCES runs(id), task TEXT NOT NULL, role TEXT NOT NULL,"
	" i INTEGER NOT NULL, ms REAL NOT NULL, wall_ms REAL, sm_mhz INTEGER, throttled INTEGER);"
	"CREATE INDEX IF NOT EXISTS samples_by_task ON samples(run, task, role);";

st_status st_bench_db_open(const char *path, st_bench_db **out, st_err *err)
{
	*out = NULL;
	st_bench_db *d = calloc(1, sizeof *d);
	if (!d)
		return st_err_set(err, ST_E_NOMEM, "bench db: out of memory");
	st_status s = st_sql_store_open(&d->store, path, schema, "bench", err);
	if (s) {
		free(d);
		return s;
	}
	*out = d;
	return ST_OK;
}

const char *st_bench_db_default_path(char *buf, size_t len)
{
	return st_sql_default_path("STITCH_BENCH_DB", "bench.db", buf, len);
}

void st_bench_db_close(st_bench_db *d)
{
	if (!d)
		return;
	st_sql_store_close(&d->store);
	free(d);
}

/* ---- writing ---------------------------------------------------------------------------------- */

static int save_samples(sqlite3_stmt *st, sqlite3_int64 run, const char *task,
                        const json_t *verdict)
{
	const json_t *timing = json_object_get(verdict, "timing");
	const char *roles[] = {"candidate", "reference", "expert"};
	for (int k = 0; k < 3; k++) {
		/* a run of the expert itself times one solution under two roles: store it once */
		if (k == 2 && json_equal(json_object_get(timing, "expert"),
		                         json_object_get(timing, "candidate")))
			continue;
		const json_t *raw = json_object_get(json_object_get(timing, roles[k]), "raw");
		size_t i;
		const json_t *x;
		json_array_foreach(raw, i, x) {
			sqlite3_bind_int64(st, 1, run);
			sqlite3_bind_text(st, 2, task, -1, SQLITE_TRANSIENT);
			sqlite3_bind_text(st, 3, roles[k], -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 4, (sqlite3_int64)i);
			sqlite3_bind_double(st, 5, json_number_value(json_array_get(x, 0)));
			sqlite3_bind_double(st, 6, json_number_value(json_array_get(x, 1)));
			sqlite3_bind_int64(st, 7, json_integer_value(json_array_get(x, 2)));
			sqlite3_bind_int(st, 8, json_is_true(json_array_get(x, 3)));
			if (!st_sql_step_done(st))
				return 1;
		}
	}
	return 0;
}

/* The verdict without its raw samples, which have their own table. */
static json_t *verdict_lean(const json_t *v)
{
	if (!v || json_is_null(v))
		return NULL;
	json_t *c = json_deep_copy(v);
	json_t *timing = json_object_get(c, "timing");
	const char *key;
	json_t *role;
	json_object_foreach(timing, key, role)
		if (json_is_object(role))
			json_object_del(role, "raw");
	return c;
}

st_status st_bench_db_save(st_bench_db *d, const json_t *run, const json_t *rows,
                           const json_t *verdicts, long long *id, st_err *err)
{
	sqlite3_stmt *ins_run = NULL, *ins_row = NULL, *ins_sample = NULL;
	st_status s = ST_OK;
	if (sqlite3_exec(d->store.db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return st_sql_store_error(&d->store, err, "cannot start a transaction");
	if (sqlite3_prepare_v2(d->store.db,
	                       "INSERT INTO runs(started, solutions, backend, baseline, device, arch,"
	                       " driver, runtime, commit_id, host, options, score)"
	                       " VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", -1, &ins_run, NULL) ||
	    sqlite3_prepare_v2(d->store.db,
	                       "INSERT INTO results VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1,
	                       &ins_row, NULL) ||
	    sqlite3_prepare_v2(d->store.db, "INSERT INTO samples VALUES(?,?,?,?,?,?,?,?)", -1, &ins_sample,
	                       NULL)) {
		s = st_sql_store_error(&d->store, err, "cannot prepare");
		goto out;
	}
	const char *run_text[] = {"started", "solutions", "backend", "baseline", "device", "arch"};
	for (int i = 0; i < 6; i++)
		st_sql_bind_text(ins_run, i + 1, run, run_text[i]);
	st_sql_bind_num(ins_run, 7, run, "driver");
	st_sql_bind_num(ins_run, 8, run, "runtime");
	st_sql_bind_text(ins_run, 9, run, "commit");
	st_sql_bind_text(ins_run, 10, run, "host");
	st_sql_bind_text(ins_run, 11, run, "options");
	json_t *score = st_bench_score(rows);
	st_sql_bind_json(ins_run, 12, score);
	json_decref(score);
	if (!st_sql_step_done(ins_run)) {
		s = st_sql_store_error(&d->store, err, "cannot record the run");
		goto out;
	}
	sqlite3_int64 run_id = sqlite3_last_insert_rowid(d->store.db);
	size_t i;
	const json_t *r;
	json_array_foreach(rows, i, r) {
		sqlite3_bind_int64(ins_row, 1, run_id);
		sqlite3_bind_int64(ins_row, 2, (sqlite3_int64)i);
		st_sql_bind_text(ins_row, 3, r, "task");
		st_sql_bind_num(ins_row, 4, r, "tier");
		st_sql_bind_text(ins_row, 5, r, "status");
		st_sql_bind_text(ins_row, 6, r, "reason");
		sqlite3_bind_int(ins_row, 7, json_is_true(json_object_get(r, "compiled")));
		sqlite3_bind_int(ins_row, 8, json_is_true(json_object_get(r, "correct")));
		const char *nums[] = {"reference_ms", "expert_ms", "solution_ms", "vs_reference",
		                      "vs_expert", "sol_fraction"};
		for (int k = 0; k < 6; k++)
			st_sql_bind_num(ins_row, 9 + k, r, nums[k]);
		st_sql_bind_json(ins_row, 15, json_object_get(r, "suspicious"));
		st_sql_bind_json(ins_row, 16, json_object_get(r, "flags"));
		const json_t *v = json_array_get(verdicts, i);
		json_t *lean = verdict_lean(v);
		st_sql_bind_json(ins_row, 17, lean);
		json_decref(lean);
		if (!st_sql_step_done(ins_row)) {
			s = st_sql_store_error(&d->store, err, "cannot record a result");
			goto out;
		}
		if (v && !json_is_null(v) &&
		    save_samples(ins_sample, run_id, json_string_value(json_object_get(r, "task")), v)) {
			s = st_sql_store_error(&d->store, err, "cannot record samples");
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
	sqlite3_finalize(ins_sample);
	return s;
}

/* ---- reading ---------------------------------------------------------------------------------- */

st_status st_bench_db_load(st_bench_db *d, const char *ref, json_t **run, json_t **rows,
                           st_err *err)
{
	*run = *rows = NULL;
	long long id = 0;
	st_status s = st_sql_resolve_ref(d->store.db, d->store.path, "runs", ref, &id, err);
	if (s)
		return s;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(d->store.db,
	                       "SELECT id, started, solutions, backend, baseline, device, arch, driver,"
	                       " runtime, commit_id, host, options FROM runs WHERE id = ?", -1, &st,
	                       NULL))
		return st_sql_store_error(&d->store, err, "cannot prepare");
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return st_err_set(err, ST_E_INVALID, "%s: no run '%s'", d->store.path, ref);
	}
	json_t *r = json_object();
	const char *run_keys[] = {"id", "started", "solutions", "backend", "baseline", "device",
	                          "arch", "driver", "runtime", "commit", "host", "options"};
	for (int i = 0; i < 12; i++)
		json_object_set_new(r, run_keys[i], st_sql_column_json(st, i));
	sqlite3_finalize(st);

	if (sqlite3_prepare_v2(d->store.db,
	                       "SELECT task, tier, status, reason, compiled, correct, reference_ms,"
	                       " expert_ms, solution_ms, vs_reference, vs_expert, sol_fraction,"
	                       " suspicious, flags, verdict FROM results WHERE run = ? ORDER BY seq",
	                       -1, &st,
	                       NULL)) {
		json_decref(r);
		return st_sql_store_error(&d->store, err, "cannot prepare");
	}
	sqlite3_bind_int64(st, 1, id);
	json_t *a = json_array();
	const char *keys[] = {"task", "tier", "status", "reason", "compiled", "correct",
	                      "reference_ms", "expert_ms", "solution_ms", "vs_reference", "vs_expert",
	                      "sol_fraction"};
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *row = json_object();
		for (int i = 0; i < 12; i++) {
			json_t *x = st_sql_column_json(st, i);
			if (i == 4 || i == 5) {
				json_t *b = json_boolean(json_integer_value(x));
				json_decref(x);
				x = b;
			}
			json_object_set_new(row, keys[i], x);
		}
		for (int i = 12; i < 14; i++) {
			const char *text = (const char *)sqlite3_column_text(st, i);
			json_t *x = text ? json_loads(text, 0, NULL) : NULL;
			json_object_set_new(row, i == 12 ? "suspicious" : "flags", x ? x : json_array());
		}
		/* the "best" bar's figures and the SOL's roof live in the stored verdict: no columns */
		const char *vt = (const char *)sqlite3_column_text(st, 14);
		json_t *v = vt ? json_loads(vt, 0, NULL) : NULL;
		st_bench_row_roof(row, v);
		st_bench_row_best(row, v);
		json_decref(v);
		json_array_append_new(a, row);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		json_decref(r);
		json_decref(a);
		return st_sql_store_error(&d->store, err, "cannot read results");
	}
	*run = r;
	*rows = a;
	return ST_OK;
}
