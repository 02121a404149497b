/* stitch bench: run a folder of solutions (default: the bundled experts) through the verifier
 * over the suite, one task at a time on the GPU while the next ones compile, and report compile
 * and correctness rates, fast_p, geometric-mean speedups and SOL per tier and per task. Every run
 * goes into a SQLite store with its raw samples; --compare sets two stored runs side by side. */
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/cpus.h"
#include "store/bench.h"
#include "queue/queue_sweep.h"
#include "bench/sweep.h"
#include "cli.h"
#include "common/fs.h"
#include "common/paths.h"
#include "task/task.h"
#include "kb_helper.h"
#include "task/vendor.h"
#include "suite_opt.h"
#include "verify_opts.h"

typedef struct bench_args {
	const char *solutions, *glob, *baseline, *report, *db, *cmp[2], *queue, *queue_arch, *suite;
	int tier, format, no_db, jobs, verbose, quiet, vendor;
} bench_args;

enum { FMT_TABLE, FMT_JSON, FMT_CSV, FMT_MD };

static const char *const baselines[] = {"reference", "expert", "best", NULL};

/* bench's own options, over a; room for 20 entries. */
static void own_table(bench_args *a, st_opt *t)
{
	const st_opt table[] = {
		st_cli_suite_opt(&a->suite),
		{ST_OPT_STRING, .name = "solutions", 0, &a->solutions, "DIR",
		 "solutions to run: DIR/<tier>/<task>.cu (.c for --backend host),\n"
		 "e.g. DIR/t1/softmax.cu, DIR/level1/19_ReLU.cu; a task without\n"
		 "one counts as missing",
		 .unset = "each task's bundled expert (trusted); an imported\n"
		 "KernelBench task has none, so --solutions is needed for kb1..3"},
		{ST_OPT_INT, .name = "tier", 0, &a->tier, "N",
		 "only tasks of tier N (1 kernels, 2 modules, 3 applications,\n4 challenges)", 1, 4,
		 .unset = "all"},
		{ST_OPT_STRING, .name = "task", 0, &a->glob, "GLOB",
		 "only tasks whose id matches GLOB (e.g. 't1/*')", .unset = "all"},
		{ST_OPT_ENUM, .name = "baseline", 0, &a->baseline, "B",
		 "reference, expert or best (the faster of expert and vendor):\n"
		 "the headline speedup", .values = baselines},
		{ST_OPT_CONST, .name = "json", 0, &a->format, NULL,
		 "print {run, score, rows, verdicts} as JSON instead of the table", .value = FMT_JSON},
		{ST_OPT_CONST, .name = "csv", 0, &a->format, NULL,
		 "print one CSV line per task instead of the table", .value = FMT_CSV},
		{ST_OPT_CONST, .name = "md", 0, &a->format, NULL,
		 "print the Markdown report instead of the table", .value = FMT_MD},
		{ST_OPT_STRING, .name = "report", 0, &a->report, "DIR",
		 "also write DIR/report.md and DIR/report.html (self-contained,\n"
		 "SVG charts, opens with no network)"},
		{ST_OPT_STRING, .name = "db", 0, &a->db, "FILE",
		 "results store (SQLite)", .unset = "$STITCH_BENCH_DB, else\n"
		 "$XDG_DATA_HOME/stitch/bench.db or ~/.local/share/stitch/bench.db"},
		{ST_OPT_FLAG, .name = "no-db", 0, &a->no_db, NULL, "do not record the run"},
		{ST_OPT_STRING, .name = "compare", 0, &a->cmp[0], "A B",
		 "compare two recorded runs (ids, 'last' or 'last~N') and exit"},
		{ST_OPT_INT, .name = "jobs", 0, &a->jobs, "N",
		 "compile workers ahead of the GPU, 1 to 64", 1, 64,
		 .unset = "the CPUs this process may use, at most 16"},
		{ST_OPT_STRING, .name = "queue", 0, &a->queue, "URL",
		 "run the sweep on the `stitch worker`s of a Redis queue\n"
		 "(redis://HOST:PORT) instead of this machine: every job is\n"
		 "submitted at once, the results gathered in order (docs/queue.md)"},
		{ST_OPT_STRING, .name = "queue-arch", 0, &a->queue_arch, "A",
		 "the arch whose workers take the jobs",
		 .unset = "--arch, else sm_90a; host with --backend host"},
		{ST_OPT_FLAG, .name = "verbose", 0, &a->verbose, NULL,
		 "the verifier's progress lines for every task"},
		{ST_OPT_FLAG, .name = "vendor", 0, &a->vendor, NULL,
		 "instead of verifying, time PyTorch's equivalent of each task\n"
		 "(--task, --tier) on this GPU with scripts/vendor_baselines.py\n"
		 "($STITCH_PYTHON, default python3, with torch) into\n"
		 "<device>.json in $STITCH_VENDOR_DIR, else in bench/vendor/:\n"
		 "the vendor half of the 'best' bar (docs/bench.md)"},
		{ST_OPT_END},
	};
	_Static_assert(sizeof table / sizeof table[0] <= 20, "room for bench's table");
	memcpy(t, table, sizeof table);
}

static const st_opt_conflict conflicts[] = {
	{"json", "csv"}, {"json", "md"}, {"csv", "md"}, {"db", "no-db"},
	{"no-timing", "time-set"}, {"vendor", "compare"}, {"vendor", "solutions"},
	{"vendor", "suite"}, {"compare", "suite"}, {NULL, NULL},
};

static void usage(FILE *f)
{
	bench_args a = {.baseline = "reference"};
	st_verify_opts o;
	st_verify_opts_default(&o);
	st_opt own[20], ver[ST_VERIFY_OPT_N];
	own_table(&a, own);
	st_verify_opt_table(&o, &a.quiet, 0, ver);
	fprintf(f,
	        "usage: stitch bench [options]\n"
	        "       stitch bench --compare A B [--db FILE]\n"
	        "       stitch bench --vendor [--task GLOB | --tier N]\n\n"
	        "Verify a solution for every task of the suite (%s; --suite chooses\n"
	        "others, e.g. kb1,kb2,kb3) against the task's reference and expert (an imported\n"
	        "KernelBench task: its stored outputs and baselines): one task at a time on the GPU\n"
	        "(or with --backend host on the CPU) while the next ones compile. Prints per task:\n"
	        "status, reference, expert and solution ms, speedups and SOL; then per tier and\n"
	        "overall: compile and correctness rates, fast_p (correct and more than p times\n"
	        "faster, p = 1, 1.5, 2, 5) against the reference, the expert and the best known (the\n"
	        "faster of the expert and the vendor's PyTorch figure for this GPU, where --vendor\n"
	        "has timed one; else the expert, and the report says so), geometric-mean speedups\n"
	        "and mean SOL. Rows that look too good (over 3x the expert, above the roofline) are\n"
	        "flagged suspicious.\n\n"
	        "options:\n",
	        st_cli_tasks_root());
	st_opt_usage(f, own);
	st_opt_usage(f, ver);
	fprintf(f,
	        "\nNot together: --json, --csv, --md; --db and --no-db; --no-timing and --time-set;\n"
	        "--vendor and --compare, --solutions or --suite; --compare and --suite; --queue and\n"
	        "a --suite other than suite.\n"
	        "\nA task the verifier cannot run (a broken task file or baseline) gets status 'error'\n"
	        "and the run goes on.\n"
	        "\nexit: 0 every solution correct, 1 some solution missing or not correct, 2 bad\n"
	        "      input, 3 no GPU, or some task could not be verified (status error)\n"
	        "      --vendor: 0 figures written (tasks that failed on every backend are listed),\n"
	        "      2 bad input, 3 no python, torch or GPU\n");
}

/* 0 ok, otherwise an exit code */
static int parse(int argc, char **argv, bench_args *a, st_verify_opts *o)
{
	st_opt own[20], ver[ST_VERIFY_OPT_N];
	own_table(a, own);
	st_verify_opt_table(o, &a->quiet, 0, ver);
	const st_opt *const tables[] = {own, ver, NULL};
	const char *pos[1];
	int n_pos;
	if (st_cli_parse("bench", tables, conflicts, argc, argv, pos, 1, &n_pos))
		return ST_EXIT_USAGE;
	/* --compare takes two runs: the second is bench's only positional argument */
	if (a->cmp[0] && n_pos == 1) {
		a->cmp[1] = pos[0];
	} else if (a->cmp[0]) {
		st_cli_error("bench: --compare needs two runs, e.g. --compare last~1 last");
		return ST_EXIT_USAGE;
	} else if (n_pos) {
		st_cli_error("bench: unexpected argument '%s'; see 'stitch bench --help'", pos[0]);
		return ST_EXIT_USAGE;
	}
	if (a->solutions && !st_dir_exists(a->solutions)) {
		st_cli_error("--solutions %s: no such folder", a->solutions);
		return ST_EXIT_USAGE;
	}
	return 0;
}

static int open_db(const char *path, st_bench_db **db)
{
	st_err err;
	if (st_bench_db_open(path, db, &err)) {
		st_cli_error("%s", err.msg);
		return ST_EXIT_USAGE;
	}
	return 0;
}

static int compare(const char *db_path, const char *a, const char *b)
{
	if (!db_path) {
		st_cli_error("--compare needs a results store: --db FILE");
		return ST_EXIT_USAGE;
	}
	st_bench_db *db;
	int rc = open_db(db_path, &db);
	if (rc)
		return rc;
	json_t *run[2] = {0}, *rows[2] = {0};
	st_err err;
	const char *ref[2] = {a, b};
	for (int k = 0; k < 2 && !rc; k++)
		if (st_bench_db_load(db, ref[k], &run[k], &rows[k], &err)) {
			st_cli_error("%s", err.msg);
			rc = ST_EXIT_USAGE;
		}
	if (!rc) {
		st_buf text = {0};
		st_bench_print_compare(run[0], rows[0], run[1], rows[1], &text);
		rc = st_cli_print(&text);
	}
	for (int k = 0; k < 2; k++) {
		json_decref(run[k]);
		json_decref(rows[k]);
	}
	st_bench_db_close(db);
	return rc;
}

/* ---- jobs ----------------------------------------------------------------------------------- */

typedef struct job_list {
	st_bench_job *jobs;
	char **owned;   /* strings the jobs point into */
	int n, n_owned;
} job_list;

static char *own(job_list *L, const char *s)
{
	char *d = strdup(s);
	char **grown = realloc(L->owned, (size_t)(L->n_owned + 1) * sizeof *grown);
	if (!d || !grown) {
		free(d);
		if (grown)
			L->owned = grown;
		return NULL;
	}
	L->owned = grown;
	return L->owned[L->n_owned++] = d;
}

static void jobs_free(job_list *L)
{
	for (int i = 0; i < L->n_owned; i++)
		free(L->owned[i]);
	free(L->owned);
	free(L->jobs);
}

/* The solution for task t: DIR/<tier folder>/<name>.<ext>, or the bundled expert. NULL with
 * *skip = 1 when the task has nothing to run on this backend (no host versions). An imported
 * task's reference is its stored outputs, which serve every backend. */
static const char *solution_for(const bench_args *a, const st_task *t, int host, job_list *L,
                                int *skip)
{
	*skip = 0;
	const char *ref = st_task_reference(t, host);
	if (!ref && !t->n_data_seeds) {
		*skip = 1;
		return NULL;
	}
	if (!a->solutions) {
		const char *e = st_task_expert(t, host);
		*skip = e == NULL;
		return e ? own(L, e) : NULL;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s.%s", a->solutions, t->id, host ? "c" : "cu");
	return st_file_exists(path) ? own(L, path) : NULL;
}

static int build_jobs(const bench_args *a, int host, job_list *L)
{
	st_suite su;
	st_err err;
	int rc = st_cli_suite("bench", a->suite, a->queue, &su);
	if (rc)
		return rc;
	int n = su.n;
	L->jobs = calloc((size_t)(n ? n : 1), sizeof *L->jobs);
	rc = L->jobs ? 0 : ST_EXIT_ENV;
	for (int k = 0; k < n && !rc; k++) {
		st_task t;
		if (st_task_load(su.v[k].dir, &t, &err)) {
			st_cli_error("%s", err.msg);
			rc = ST_EXIT_USAGE;
			break;
		}
		int skip;
		if ((a->glob && fnmatch(a->glob, t.id, 0)) || (a->tier && t.tier != a->tier)) {
			st_task_free(&t);
			continue;
		}
		const char *sol = solution_for(a, &t, host, L, &skip);
		if (skip) {
			if (!a->quiet)
				fprintf(stderr, "  %s: no %s%s, skipped\n", t.id, host ? "host " : "",
				        st_task_reference(&t, host) ? "expert" : "reference");
		} else {
			st_bench_job *j = &L->jobs[L->n++];
			j->task_dir = own(L, su.v[k].dir);
			j->task_id = own(L, t.id);
			j->tier = t.tier;
			j->solution = sol;
			if (!j->task_dir || !j->task_id)
				rc = ST_EXIT_ENV;
		}
		st_task_free(&t);
	}
	st_suite_free(&su);
	if (!rc && L->n == 0) {
		st_cli_error("bench: no task matched");
		rc = ST_EXIT_USAGE;
	}
	return rc;
}

/* ---- progress ------------------------------------------------------------------------------- */

typedef struct progress_state {
	double t0;
	int tty, quiet;
} progress_state;

static void on_progress(void *arg, int k, int n, const st_bench_job *job, const json_t *v)
{
	progress_state *p = arg;
	if (p->quiet)
		return;
	double el = st_now_s() - p->t0;
	if (!v && job->solution) {
		/* before: a live bar on a terminal, nothing in a log */
		if (p->tty)
			fprintf(stderr, "\r\033[K[%d/%d] %s ... (%.0f s)", k + 1, n, job->task_id, el);
		return;
	}
	const char *status = v ? json_string_value(json_object_get(v, "status")) : "missing";
	const json_t *sp = json_object_get(v, "speedup");
	double eta = k + 1 < n ? el / (k + 1) * (n - k - 1) : 0;
	fprintf(stderr, "%s[%d/%d] %-24s %-14s", p->tty ? "\r\033[K" : "", k + 1, n, job->task_id,
	        status ? status : "?");
	if (json_is_number(json_object_get(sp, "vs_reference")))
		fprintf(stderr, " %7.2fx vs reference", json_number_value(json_object_get(sp, "vs_reference")));
	fprintf(stderr, "  %.0f s elapsed, about %.0f s left\n", el, eta);
	const char *reason = json_string_value(json_object_get(v, "reason"));
	if (status && strcmp(status, "ok") && reason && *reason)
		fprintf(stderr, "        %.300s\n", reason);
}

/* ---- the run's facts --------------------------------------------------------------------------- */

static json_t *run_facts(const bench_args *a, const st_verify_opts *o, int argc, char **argv,
                         json_t *const *verdicts, int n)
{
	char when[32], host[256] = "";
	time_t now = time(NULL);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	gethostname(host, sizeof host - 1);
	char sols[PATH_MAX] = "bundled experts";
	if (a->solutions && !realpath(a->solutions, sols))
		snprintf(sols, sizeof sols, "%s", a->solutions);
	json_t *run = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "started", when, "solutions", sols,
	                        "backend", o->backend, "baseline", a->baseline, "host", host, "commit",
	                        st_cli_commit_id());
	const json_t *dev = NULL;
	for (int k = 0; k < n && !dev; k++)
		dev = verdicts[k] ? json_object_get(verdicts[k], "device") : NULL;
	const char *arch = NULL;
	for (int k = 0; k < n && !arch; k++)
		arch = verdicts[k] ? json_string_value(json_object_get(verdicts[k], "arch")) : NULL;
	if (dev) {
		json_object_set(run, "device", json_object_get(dev, "device"));
		json_object_set(run, "driver", json_object_get(dev, "driver"));
		json_object_set(run, "runtime", json_object_get(dev, "runtime"));
	}
	if (arch)
		json_object_set_new(run, "arch", json_string(arch));
	size_t len = 0;
	for (int i = 1; i < argc; i++)
		len += strlen(argv[i]) + 1;
	char *cmd = calloc(len + 16, 1);
	if (cmd) {
		strcpy(cmd, "bench");
		for (int i = 1; i < argc; i++)
			strcat(strcat(cmd, " "), argv[i]);
		json_object_set_new(run, "options", json_string(cmd));
		free(cmd);
	}
	return run;
}

/* The sweep's rows, score and run facts: stored, reported and printed in the chosen format.
 * The exit code: 0 all correct, 1 some not, 3 something could not be stored or verified. */
static int finish_run(const bench_args *a, const st_verify_opts *o, int argc, char **argv,
                      const job_list *L, json_t **verdicts, st_bench_db *db, const char *db_path)
{
	int rc = 0;
	st_err err;
	json_t *rows = json_array(), *vs = json_array();
	int failed = 0, broken = 0;
	for (int k = 0; k < L->n; k++) {
		json_t *row = st_bench_row(L->jobs[k].task_id, L->jobs[k].tier, verdicts[k]);
		failed += !json_is_true(json_object_get(row, "correct"));
		broken += !strcmp(json_string_value(json_object_get(row, "status")), "error");
		json_array_append_new(rows, row);
		json_array_append(vs, verdicts[k] ? verdicts[k] : json_null());
	}
	json_t *score = st_bench_score(rows);
	json_t *run = run_facts(a, o, argc, argv, verdicts, L->n);
	if (db) {
		long long id;
		if (st_bench_db_save(db, run, rows, vs, &id, &err)) {
			st_cli_error("%s (the results are printed but not stored)", err.msg);
			rc = ST_EXIT_ENV;
		} else {
			json_object_set_new(run, "id", json_integer(id));
			if (!a->quiet)
				fprintf(stderr, "recorded as run %lld in %s\n", id, db_path);
		}
	}
	if (a->report && st_bench_report(a->report, run, rows, score, a->baseline, &err)) {
		st_cli_error("%s", err.msg);
		rc = ST_EXIT_ENV;
	}
	if (a->format == FMT_JSON) {
		/* verdicts without raw samples: those are in the store */
		size_t i;
		json_t *v;
		json_array_foreach(vs, i, v) {
			const char *key;
			json_t *role;
			json_object_foreach(json_object_get(v, "timing"), key, role)
				if (json_is_object(role))
					json_object_del(role, "raw");
		}
		json_t *all = json_pack("{s:O,s:O,s:O,s:O}", "run", run, "score", score, "rows", rows,
		                        "verdicts", vs);
		json_dumpf(all, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
		json_decref(all);
	} else {
		st_buf text = {0};
		if (a->format == FMT_CSV)
			st_bench_print_csv(rows, &text);
		else if (a->format == FMT_MD)
			st_bench_print_md(run, rows, score, a->baseline, &text);
		else
			st_bench_print_table(rows, score, a->baseline, &text);
		int prc = st_cli_print(&text);
		if (!rc)
			rc = prc;
	}
	if (!rc && broken) {
		st_cli_error("bench: %d task%s could not be verified (status error: a broken task or "
		             "baseline, see the reasons above)", broken, broken == 1 ? "" : "s");
		rc = ST_EXIT_ENV;
	}
	if (!rc && failed)
		rc = ST_EXIT_NO;
	json_decref(run);
	json_decref(score);
	json_decref(rows);
	json_decref(vs);
	return rc;
}

/* ---- --vendor ----------------------------------------------------------------------------------- */

/* The vendor baselines helper over the suite (or --task / --tier of it); a filtered run merges
 * into the device's existing file instead of dropping the other tasks' figures. */
static int vendor_run(const bench_args *a)
{
	char dir[PATH_MAX], glob[64];
	st_vendor_dir(dir, sizeof dir);
	const char *args[16];
	int n = 0;
	args[n++] = "--tasks-dir";
	args[n++] = st_cli_tasks_root();
	args[n++] = "--out";
	args[n++] = dir;
	if (a->glob) {
		args[n++] = "--task";
		args[n++] = a->glob;
	}
	if (a->tier) {
		snprintf(glob, sizeof glob, "t%d/*", a->tier);
		args[n++] = "--task";
		args[n++] = glob;
	}
	if (a->glob || a->tier)
		args[n++] = "--merge";
	args[n] = NULL;
	if (a->glob && a->tier) {
		st_cli_error("bench --vendor: --task and --tier together would time the union; give one");
		return ST_EXIT_USAGE;
	}
	return st_py_helper_run("vendor_baselines.py", "the vendor baselines helper", args,
	                        a->format == FMT_JSON);
}

/* ---- the command ------------------------------------------------------------------------------ */

int cmd_bench(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_verify_opts o;
	st_verify_opts_default(&o);
	o.profile = 0; /* the tables need no profile; `stitch profile` gives one */
	bench_args a = {.baseline = "reference"};
	int rc = parse(argc, argv, &a, &o);
	if (rc)
		return rc;
	char db_buf[PATH_MAX];
	const char *db_path = a.db ? a.db
	                           : a.no_db ? NULL : st_bench_db_default_path(db_buf, sizeof db_buf);
	if (a.cmp[0])
		return compare(a.db ? a.db : st_bench_db_default_path(db_buf, sizeof db_buf), a.cmp[0],
		               a.cmp[1]);
	if (a.vendor)
		return vendor_run(&a);

	int host = !strcmp(o.backend, "host");
	/* shipped experts link what their task ships; solutions from a folder are candidates */
	o.candidate_trusted = a.solutions == NULL;
	o.keep_samples = db_path != NULL;
	st_verify_slot slot = {0};
	if (a.verbose && !a.quiet) {
		slot.progress = st_verify_progress_stderr;
		slot.progress_arg = "    ";
	}
	job_list L = {0};
	rc = build_jobs(&a, host, &L);
	st_bench_db *db = NULL;
	if (!rc && db_path)
		rc = open_db(db_path, &db);
	if (rc) {
		jobs_free(&L);
		return rc;
	}
	json_t **verdicts = calloc((size_t)L.n, sizeof *verdicts);
	if (!verdicts) {
		st_cli_error("bench: out of memory");
		jobs_free(&L);
		st_bench_db_close(db);
		return ST_EXIT_ENV;
	}
	int threads = a.jobs ? a.jobs : st_cpus_share(1, 16);
	progress_state ps = {.t0 = st_now_s(), .tty = isatty(2), .quiet = a.quiet};
	st_err err;
	const char *qarch = a.queue_arch ? a.queue_arch : o.arch ? o.arch : host ? "host" : "sm_90a";
	st_status s = a.queue ? st_queue_sweep(a.queue, qarch, L.jobs, L.n, &o, o.candidate_trusted,
	                                       on_progress, &ps, verdicts, &err)
	                      : st_bench_sweep(L.jobs, L.n, &o, &slot, threads, on_progress, &ps,
	                                       verdicts, &err);
	if (s == ST_E_NODEVICE) {
		st_cli_error("%s\nstitch bench times the suite on the local GPU and found none; "
		             "'stitch bench --backend host' runs the host versions on the CPU", err.msg);
		rc = ST_EXIT_ENV;
	} else if (s) {
		st_cli_error("%s", err.msg);
		rc = s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}

	if (!rc)
		rc = finish_run(&a, &o, argc, argv, &L, verdicts, db, db_path);
	for (int k = 0; k < L.n; k++)
		json_decref(verdicts[k]);
	free(verdicts);
	jobs_free(&L);
	st_bench_db_close(db);
	return rc;
}
