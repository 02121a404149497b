/* stitch bench's model: one row per task of a run (what the solution did against the task's
 * reference and expert), the scores a suite run is judged by (compile and correctness rates,
 * fast_p, geometric-mean speedups, SOL fractions, per tier), the SQLite store that keeps runs and
 * their raw samples for comparison, and the table/CSV/Markdown/HTML renderings. Rows are jansson
 * objects so that a fresh run and one read back from the store go through the same code. */
#ifndef ST_BENCH_H
#define ST_BENCH_H

#include <jansson.h>

#include "common/buf.h"
#include "common/st_error.h"

/* The thresholds fast_p is reported at: the share of tasks that are correct AND more than p
 * times faster than the baseline (fast_0 is the correctness rate). */
#define ST_BENCH_NP 5
extern const double st_bench_p[ST_BENCH_NP];

/* The baselines fast_p and geomean are scored against: "reference", "expert" and "best" (the
 * faster of the expert and the vendor's PyTorch figure for the GPU; the expert where there is
 * none: docs/bench.md). */
#define ST_BENCH_NB 3
extern const char *const st_bench_bases[ST_BENCH_NB];

/* A speedup over the expert above this, or a SOL fraction above ST_BENCH_SUSPICIOUS_SOL (faster
 * than the roofline allows), marks a row suspicious: most likely a measurement or verification
 * gap, worth a look before anyone believes it. */
#define ST_BENCH_SUSPICIOUS_VS_EXPERT 3.0
/* The roofs are measured peaks (a vendor GEMM, a copy, a probe kernel), so the kernel they were
 * measured with lands at 1.0 give or take the spread between two measurements of one GPU (up to
 * 3 % seen: bf16 789 and 812 TFLOP/s on H200s); t4/gemm_fp8's expert is the fp8 probe's own
 * cuBLASLt kernel and showed 1.001. Beyond this margin the row is faster than anything the
 * probe saw. */
#define ST_BENCH_SUSPICIOUS_SOL 1.05

/* One row from a verdict (NULL verdict: the solution was missing from DIR). Keys: task, tier,
 * status, reason, compiled, correct, reference_ms, expert_ms, solution_ms, vs_reference,
 * vs_expert, sol_fraction, sol_roof (the roof that set the SOL floor: "dram", "l2" or a FLOP
 * unit), suspicious (array of strings), flags (the verdict's), and the "best" bar's: vendor_ms,
 * best_ms, best ("expert" or "vendor": which set the bar), vs_vendor, vs_best. Times, speedups
 * and the roof are null when unknown. */
json_t *st_bench_row(const char *task_id, int tier, const json_t *verdict);

/* Sets row r's sol_roof from the verdict (NULL: none), where r is correct and has a SOL; the
 * store rebuilds it with this, as the roof has no column of its own. */
void st_bench_row_roof(json_t *r, const json_t *verdict);

/* Sets row r's "best" keys from the verdict (NULL: none); a verdict without a bar (from before
 * it, or an imported task) makes the expert the bar. The store rebuilds them with it. */
void st_bench_row_best(json_t *r, const json_t *verdict);

/* Scores of a set of rows: {"all": S, "tiers": {"1": S, ...}} where S = {tasks, compiled,
 * correct, compile_rate, correct_rate, fast_p: {reference: {"0": x, "1": x, "1.5": x, "2": x,
 * "5": x}, expert: {...}, best: {...}}, geomean: {reference: {correct, faster}, expert: {...},
 * best: {...}}, sol: {mean, median, n}, suspicious, bar: {with_vendor, vendor} (rows with a
 * vendor figure, rows whose bar it set)}. Rates are over every row, missing solutions included. */
json_t *st_bench_score(const json_t *rows);

/* Renderings. `baseline` ("reference" or "expert") picks the headline speedup column. */
void st_bench_print_table(const json_t *rows, const json_t *score, const char *baseline,
                          st_buf *out);
void st_bench_print_csv(const json_t *rows, st_buf *out);
void st_bench_print_md(const json_t *run, const json_t *rows, const json_t *score,
                       const char *baseline, st_buf *out);
void st_bench_print_html(const json_t *run, const json_t *rows, const json_t *score,
                         const char *baseline, st_buf *out);
/* A per-task comparison of two runs (rows of A and of B) with the change in time and scores. */
void st_bench_print_compare(const json_t *run_a, const json_t *rows_a, const json_t *run_b,
                            const json_t *rows_b, st_buf *out);

/* Write report.md and report.html into dir (created if missing). */
st_status st_bench_report(const char *dir, const json_t *run, const json_t *rows,
                          const json_t *score, const char *baseline, st_err *err);

/* The results store (SQLite; schema in docs/bench.md). */
typedef struct st_bench_db st_bench_db;
/* Opens, or creates with its parent folders, the store at path. */
st_status st_bench_db_open(const char *path, st_bench_db **db, st_err *err);
void st_bench_db_close(st_bench_db *db);
/* Record a run: `run` holds started, solutions, backend, baseline, device, arch, driver, runtime,
 * commit, host, options; rows as from st_bench_row; verdicts parallel to rows (entries may be
 * null) give the raw samples. Sets *id. */
st_status st_bench_db_save(st_bench_db *db, const json_t *run, const json_t *rows,
                           const json_t *verdicts, long long *id, st_err *err);
/* Read a run back by reference: an id, "last" or "last~N" (N runs before the last). */
st_status st_bench_db_load(st_bench_db *db, const char *ref, json_t **run, json_t **rows,
                           st_err *err);
/* $STITCH_BENCH_DB, else bench.db under st_data_path (common/fs.h): buf or the variable's value,
 * NULL when there is no home folder to put it in. */
const char *st_bench_db_default_path(char *buf, size_t len);

#endif
