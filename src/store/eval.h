/* stitch eval's scores and leaderboard: the scores of a run from its rows (eval_score.c), the
 * SQLite store of model evaluations (each run's scores.json and
 * its rows, one per sample and round, as `stitch eval` writes them; docs/eval.md), and the
 * comparison of several stored runs as a terminal table and as a self-contained HTML page with
 * SVG charts. Scores and rows are jansson values, kept as they were given, so a run read back
 * from the store renders exactly like a fresh one. */
#ifndef ST_EVAL_H
#define ST_EVAL_H

#include <jansson.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/st_error.h"

/* ---- the store (eval_db.c) ------------------------------------------------------------------ */

/* Tables eval_runs and eval_results: the file may be bench's own or one of its own. */
typedef struct st_eval_db st_eval_db;
/* Opens, or creates with its parent folders, the store at path. ST_E_IO when it cannot be
 * created or written, ST_E_INVALID when the file is not a stitch database. */
st_status st_eval_db_open(const char *path, st_eval_db **db, st_err *err);
void st_eval_db_close(st_eval_db *db);
/* Record a run in one transaction: scores as scores.json holds it (model and mode required),
 * rows as results.jsonl's lines (NULL: none). Sets *id. */
st_status st_eval_db_save(st_eval_db *db, const json_t *scores, const json_t *rows,
                          long long *id, st_err *err);
/* A stored run by reference: its id, "last", or "last~N" (N runs before the last). Scores and
 * rows come back equal (json_equal) to what was saved; rows may be NULL when not wanted. An
 * unknown reference is ST_E_INVALID: "no eval run 'REF' in PATH". */
st_status st_eval_db_load(st_eval_db *db, const char *ref, json_t **scores, json_t **rows,
                          st_err *err);
/* The id of the stored run a reference names, with load's errors. */
st_status st_eval_db_resolve(st_eval_db *db, const char *ref, long long *id, st_err *err);
/* The stored runs, newest first: [{id, started, model, mode, samples, rounds, backend}]. */
st_status st_eval_db_list(st_eval_db *db, json_t **runs, st_err *err);
/* Where the store lives unless told: $STITCH_EVAL_DB, else eval.db under st_data_path
 * ($XDG_DATA_HOME/stitch or ~/.local/share/stitch). buf or the variable's value; NULL when there
 * is no home folder to put it in. */
const char *st_eval_db_default_path(char *buf, size_t len);

/* ---- comparisons (eval_render.c) ------------------------------------------------------------ */

/* n runs side by side, each as its scores with its store id: one line per run (pass@1 rates,
 * speedups, tokens, cost), fast_p vs the reference per tier, correctness and geomean speedup by
 * round for runs of more than one round, and the suspicious results. */
void st_eval_print_compare(const json_t *const *scores, const long long *ids, int n, st_buf *out);
/* The same as one HTML page: the runs table, charts <svg id="fastp"> (fast_p by tier) and
 * <svg id="rounds"> (speedup and correctness by round), per-tier tables, suspicious results. */
void st_eval_print_html(const json_t *const *scores, const long long *ids, int n, st_buf *out);
/* That page written whole to path (temp + rename; the folder is created if missing). */
st_status st_eval_write_html(const char *path, const json_t *const *scores, const long long *ids,
                             int n, st_err *err);

/* ---- scoring (eval_score.c) ----------------------------------------------------------------- */

#define ST_EVAL_MAX_SAMPLES 1000 /* --samples */
#define ST_EVAL_MAX_ROUNDS 64    /* --rounds */

/* Unbiased pass@k of n samples of which c succeeded: 1 - C(n-c, k) / C(n, k) (k > n: k = n). */
double st_eval_pass_at(int n, int c, int k);

/* Scores from rows (one per sample and round: task, sample, round (1-based), final, compiled,
 * correct, vs_reference, vs_expert, sol_fraction, suspicious, code) for K samples and R rounds:
 * {"tasks": {id: S}, "tiers": {"t1/": G, ...}, "overall": G, "suspicious": [...],
 * "unjudged": [...]}, as docs/eval.md describes. Rows of status "error" (the verifier or the task
 * failed) and "no_answer" (the model's endpoint never answered) count in no score: they are
 * listed under "unjudged". */
json_t *st_eval_scores(const json_t *rows, int K, int R);

#endif
