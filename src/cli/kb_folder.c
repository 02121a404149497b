/* `stitch import kernelbench DIR`: every program of a KernelBench level folder (or of the
 * level1..level4 folders under a checkout's KernelBench/) imported by its own helper process
 * (scripts/kb_import.py), several at once. Each import takes seconds to a minute and a whole
 * level hundreds of programs, so the run is resumable (a task whose task.json records the same
 * program source, by sha256, is skipped), says each program's outcome as it ends, and ends with
 * a table. The helper's exit status sorts the outcomes: 2 is a real limit of the program
 * (refused, with the helper's reason), 3 is the machine (no torch: nothing else can work
 * either, so the run stops), anything else is a helper that broke (failed, the run goes on). */
#include "kb_folder.h"

#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "common/clock.h"
#include "common/cpus.h"
#include "common/fs.h"
#include "common/proc.h"
#include "common/threads.h"
#include "kb_helper.h"
#include "task/task.h"

enum { P_PENDING, P_IMPORTED, P_REFUSED, P_SKIPPED, P_FAILED };
static const char *const state_names[] = {"pending", "imported", "refused", "skipped", "failed"};

typedef struct kb_prog {
	char file[PATH_MAX];
	char name[128];
	char id[160];          /* level<N>/<name>: how the table and the task name it */
	char out[PATH_MAX];
	int level, state;
	int deferred;          /* ran out of memory beside other imports: tried again with fewer */
	char reason[512];
	double secs;
	long long bytes;
} kb_prog;

typedef struct kb_run {
	const st_kb_folder_opts *o;
	kb_prog *p;
	int n, next, done;
	int jobs;              /* helpers at once */
	int pass;              /* 0: every program; then the deferred ones, fewer at once a pass */
	char py[PATH_MAX], helper[PATH_MAX];
	pthread_mutex_t mu;
	int stop;              /* an environment failure: start no more */
	char stop_reason[768];
} kb_run;

void st_kb_default_name(const char *file, char *out, size_t len)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	size_t n = strlen(base);
	if (n > 3 && !strcmp(base + n - 3, ".py"))
		n -= 3;
	if (n >= len)
		n = len - 1;
	for (size_t i = 0; i < n; i++) {
		char c = base[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		out[i] = ok ? c : '_';
	}
	out[n] = '\0';
}

int st_kb_level_from_path(const char *path)
{
	char real[PATH_MAX];
	const char *p = realpath(path, real) ? real : path;
	for (const char *q = strstr(p, "level"); q; q = strstr(q + 1, "level")) {
		const char *d = q + 5;
		if (*d == '_' || *d == '-')
			d++;
		if (*d >= '1' && *d <= '4')
			return *d - '0';
	}
	return 1;
}

/* ---- finding the programs -------------------------------------------------------------------- */

static int is_program(const char *dir, const char *name)
{
	size_t n = strlen(name);
	char path[PATH_MAX + 256];
	struct stat st;
	/* __init__.py and the like are a package's, not KernelBench programs */
	if (name[0] == '.' || name[0] == '_' || n <= 3 || strcmp(name + n - 3, ".py"))
		return 0;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return !stat(path, &st) && S_ISREG(st.st_mode);
}

static int by_file(const void *a, const void *b)
{
	return strcmp(((const kb_prog *)a)->file, ((const kb_prog *)b)->file);
}

/* The programs directly in `dir`, as level `level`, appended to r->p: how many, or -1 when out
 * of memory. */
static int add_level(kb_run *r, const char *dir, int level)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int added = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!is_program(dir, de->d_name))
			continue;
		kb_prog *grown = realloc(r->p, (size_t)(r->n + 1) * sizeof *grown);
		if (!grown) {
			closedir(d);
			return -1;
		}
		r->p = grown;
		kb_prog *p = memset(&r->p[r->n++], 0, sizeof *p);
		snprintf(p->file, sizeof p->file, "%s/%s", dir, de->d_name);
		st_kb_default_name(de->d_name, p->name, sizeof p->name);
		p->level = level;
		snprintf(p->id, sizeof p->id, "level%d/%s", level, p->name);
		snprintf(p->out, sizeof p->out, "%s/level%d/%s", r->o->root, level, p->name);
		added++;
	}
	closedir(d);
	qsort(r->p + r->n - added, (size_t)added, sizeof *r->p, by_file);
	return added;
}

/* A level folder's programs, or those of its level1..level4 folders: ST_EXIT_OK, or the exit
 * code having said why. */
static int find_programs(kb_run *r)
{
	const st_kb_folder_opts *o = r->o;
	int got = add_level(r, o->dir, o->level ? o->level : st_kb_level_from_path(o->dir));
	int direct = got; /* programs in the folder itself: a level folder, no level folders under it */
	for (int lv = 1; direct == 0 && got >= 0 && lv <= 4; lv++) {
		char sub[PATH_MAX + 16];
		snprintf(sub, sizeof sub, "%s/level%d", o->dir, lv);
		int k = add_level(r, sub, lv);
		if (k > 0 && o->level) {
			st_cli_error("import: --level goes with one level folder; %s holds level folders",
			             o->dir);
			return ST_EXIT_USAGE;
		}
		got = k < 0 ? k : got + k;
		if (k < 0)
			break;
	}
	if (got < 0) {
		st_cli_error("import: out of memory");
		return ST_EXIT_ENV;
	}
	if (!r->n) {
		st_cli_error("import: %s: no KernelBench programs (*.py) in it or in its level1..level4 "
		             "folders", o->dir);
		return ST_EXIT_USAGE;
	}
	for (int i = 0; i < r->n; i++)
		for (int j = i + 1; j < r->n; j++)
			if (!strcmp(r->p[i].id, r->p[j].id)) {
				st_cli_error("import: %s and %s both make the task %s; rename one",
				             r->p[i].file, r->p[j].file, r->p[i].id);
				return ST_EXIT_USAGE;
			}
	return ST_EXIT_OK;
}

/* ---- one program ----------------------------------------------------------------------------- */

/* The sha256 the helper records for the program: of its text as Python reads it (universal
 * newlines: \r\n and \r become \n). "" when it cannot be read. */
static void source_sha256(const char *file, char hex[65])
{
	char *data = NULL;
	size_t len = 0, k = 0;
	st_err e;
	hex[0] = '\0';
	if (st_read_file(file, &data, &len, &e))
		return;
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\r') {
			data[k++] = '\n';
			if (i + 1 < len && data[i + 1] == '\n')
				i++;
		} else {
			data[k++] = data[i];
		}
	}
	st_sha256_hex(data, k, hex);
	free(data);
}

/* 1 when out/task.json was imported from this very program. */
static int already_imported(const kb_prog *p)
{
	char path[PATH_MAX + 16], hex[65];
	snprintf(path, sizeof path, "%s/task.json", p->out);
	json_t *t = json_load_file(path, 0, NULL);
	const char *had = json_string_value(json_object_get(json_object_get(t, "source"), "sha256"));
	int same = 0;
	if (had) {
		source_sha256(p->file, hex);
		same = hex[0] && !strcmp(had, hex);
	}
	json_decref(t);
	return same;
}

static long long tree_bytes_sum;

static int add_bytes(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (flag == FTW_F)
		tree_bytes_sum += (long long)st->st_size;
	return 0;
}

/* The bytes of the files under dir (nftw keeps its sum in a static: callers hold r->mu). */
static long long tree_bytes(const char *dir)
{
	tree_bytes_sum = 0;
	nftw(dir, add_bytes, 16, FTW_PHYS);
	return tree_bytes_sum;
}

/* The helper's reason: its last "import: error: " line, else its last line. */
static void reason_of(const char *out, char *reason, size_t len)
{
	const char *tag = "import: error: ", *best = NULL, *last = NULL;
	for (const char *line = out; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);
		if (n)
			last = line;
		if (!strncmp(line, tag, strlen(tag)))
			best = line + strlen(tag);
		line = end ? end + 1 : NULL;
	}
	const char *from = best ? best : last ? last : "(no output)";
	size_t n = strcspn(from, "\n");
	snprintf(reason, len, "%.*s", (int)(n < len ? n : len - 1), from);
}

/* The outcome of a helper that ran: the program's state and reason from its exit status (and,
 * on success, from loading what it wrote, as every task is loaded). 1 when the machine failed
 * (exit 3: no torch, no GPU asked for) and the run must stop. */
static int judge_helper(kb_prog *p, const st_proc_result *res, double timeout_s)
{
	char why[400];
	reason_of(res->out, why, sizeof why);
	p->state = P_FAILED;
	if (res->timed_out) {
		snprintf(p->reason, sizeof p->reason, "timed out after %g s", timeout_s);
	} else if (res->signal) {
		snprintf(p->reason, sizeof p->reason, "the helper was killed by signal %d",
		         res->signal);
	} else if (res->exit_code == ST_EXIT_USAGE) {
		p->state = P_REFUSED;
		snprintf(p->reason, sizeof p->reason, "%s", why);
	} else if (res->exit_code == ST_EXIT_ENV) {
		snprintf(p->reason, sizeof p->reason, "%s", why);
		return 1;
	} else if (res->exit_code) {
		snprintf(p->reason, sizeof p->reason, "the helper exited %d: %s", res->exit_code, why);
	} else {
		st_task t;
		st_err err;
		if (st_task_load(p->out, &t, &err)) {
			snprintf(p->reason, sizeof p->reason, "the helper wrote a task stitch cannot load: "
			         "%.300s", err.msg);
		} else {
			p->state = P_IMPORTED;
			st_task_free(&t);
		}
	}
	return 0;
}

/* Import one program (or skip it): 1 when the run must stop. */
static int import_one(const kb_run *r, kb_prog *p)
{
	const st_kb_folder_opts *o = r->o;
	double t0 = st_now_s();
	p->reason[0] = '\0'; /* a deferred program's first answer is not its last */
	if (!o->force && already_imported(p)) {
		p->state = P_SKIPPED;
		return 0;
	}
	int made = !st_dir_exists(p->out); /* a failed import takes away only what it made */
	st_err err;
	if (st_mkdirs(p->out, &err)) {
		p->state = P_FAILED;
		snprintf(p->reason, sizeof p->reason, "%.500s", err.msg);
		return 0;
	}
	char level[8];
	snprintf(level, sizeof level, "%d", p->level);
	const char *argv[] = {r->py, r->helper, p->file, "--out", p->out, "--name", p->name,
	                      "--level", level, "--seeds", o->seeds, "--store", o->store,
	                      "--device", o->device,
	                      "--compile-mode", o->compile_mode,
	                      o->no_baselines ? "--no-baselines" : NULL, NULL};
	st_proc_result res = {0};
	int stop = 0;
	if (st_proc_run((char *const *)argv, NULL, o->timeout_s, 1 << 20, &res, &err)) {
		p->state = P_FAILED;
		snprintf(p->reason, sizeof p->reason, "%.500s", err.msg);
		stop = 1; /* the helper cannot be started: no other program will fare better */
	} else {
		stop = judge_helper(p, &res, o->timeout_s);
	}
	st_proc_result_free(&res);
	p->secs = st_now_s() - t0;
	if (p->state != P_IMPORTED && made)
		st_rm_tree(p->out);
	return stop;
}

/* ---- the run --------------------------------------------------------------------------------- */

/* A program refused or failed for memory while other helpers held theirs (KernelBench's own
 * sizes take up to tens of GB of GPU memory a program) is no finding about the program: it is
 * tried again once the others are done, with a third as many helpers at once each pass, and
 * only an answer given alone counts as a refusal for memory. */
static int out_of_memory(const kb_run *r, const kb_prog *p)
{
	return r->jobs > 1 && (p->state == P_REFUSED || p->state == P_FAILED) &&
	       (strstr(p->reason, "does not fit in memory") || strstr(p->reason, "OutOfMemoryError") ||
	        strstr(p->reason, "out of memory"));
}

static int deferred_left(const kb_run *r)
{
	for (int i = 0; i < r->n; i++)
		if (r->p[i].deferred && r->p[i].state == P_PENDING)
			return 1;
	return 0;
}

static void *worker(void *arg)
{
	kb_run *r = arg;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		kb_prog *p = NULL;
		while (!r->stop && !p && r->next < r->n) {
			kb_prog *c = &r->p[r->next++];
			if (c->state == P_PENDING && (!r->pass || c->deferred))
				p = c;
		}
		pthread_mutex_unlock(&r->mu);
		if (!p)
			return NULL;
		int stop = import_one(r, p);
		pthread_mutex_lock(&r->mu);
		if (out_of_memory(r, p)) {
			p->deferred = 1;
			fprintf(stderr, "[-/%d] %-40s %-8s %7.1f s  out of memory beside other imports: "
			        "tried again with fewer at once\n", r->n, p->id, "deferred", p->secs);
			p->state = P_PENDING;
			pthread_mutex_unlock(&r->mu);
			continue;
		}
		if (stop && !r->stop) {
			r->stop = 1;
			snprintf(r->stop_reason, sizeof r->stop_reason, "%s: %s", p->id, p->reason);
		}
		if (p->state == P_IMPORTED || p->state == P_SKIPPED)
			p->bytes = tree_bytes(p->out);
		r->done++;
		fprintf(stderr, "[%d/%d] %-40s %-8s %7.1f s %10lld B%s%s\n", r->done, r->n, p->id,
		        state_names[p->state], p->secs, p->bytes, p->reason[0] ? "  " : "", p->reason);
		pthread_mutex_unlock(&r->mu);
	}
}

static void print_table(const kb_run *r, const int *count, double wall, long long bytes)
{
	printf("%-40s %-12s %8s %12s  %s\n", "program", "status", "seconds", "bytes", "reason");
	for (int i = 0; i < r->n; i++) {
		const kb_prog *p = &r->p[i];
		printf("%-40s %-12s %8.1f %12lld  %s\n", p->id,
		       p->state == P_PENDING ? "not started" : state_names[p->state], p->secs, p->bytes,
		       p->reason);
	}
	printf("\n%d programs: %d imported, %d refused, %d skipped, %d failed, %d not started; "
	       "%.1f s, %lld bytes on disk in %s\n",
	       r->n, count[P_IMPORTED], count[P_REFUSED], count[P_SKIPPED], count[P_FAILED],
	       count[P_PENDING], wall, bytes, r->o->root);
	if (r->stop)
		printf("stopped: %s\n", r->stop_reason);
}

static void print_json(const kb_run *r, const int *count, double wall, long long bytes)
{
	json_t *rows = json_array();
	for (int i = 0; i < r->n; i++) {
		const kb_prog *p = &r->p[i];
		json_array_append_new(rows, json_pack("{s:s,s:s,s:s,s:s,s:s?,s:f,s:I}", "program",
		                                      p->id, "file", p->file, "task", p->out, "status",
		                                      p->state == P_PENDING ? "not_started"
		                                                            : state_names[p->state],
		                                      "reason", p->reason[0] ? p->reason : NULL,
		                                      "seconds", p->secs, "bytes", (json_int_t)p->bytes));
	}
	json_t *all = json_pack("{s:s,s:s,s:o,s:{s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:I},s:s?}", "folder",
	                        r->o->dir, "root", r->o->root, "programs", rows, "totals", "programs",
	                        r->n, "imported", count[P_IMPORTED], "refused", count[P_REFUSED],
	                        "skipped", count[P_SKIPPED], "failed", count[P_FAILED], "not_started",
	                        count[P_PENDING], "seconds", wall, "bytes", (json_int_t)bytes,
	                        "stopped", r->stop ? r->stop_reason : NULL);
	json_dumpf(all, stdout, JSON_INDENT(2));
	fputc('\n', stdout);
	json_decref(all);
}

/* Helpers at once: --jobs, else 2 where the helpers share a GPU (each holds its memory), else
 * half the CPUs (each CPU torch runs threads of its own). */
static int default_jobs(const st_kb_folder_opts *o)
{
	if (o->jobs)
		return o->jobs;
	int gpu = !strcmp(o->device, "cuda") ||
	          (!strcmp(o->device, "auto") && !access("/dev/nvidiactl", F_OK));
	return gpu ? 2 : st_cpus_share(2, 1 << 20);
}

int st_kb_import_folder(const st_kb_folder_opts *o)
{
	kb_run r = {.o = o};
	int rc = find_programs(&r);
	if (!rc)
		rc = st_py_helper_paths("kb_import.py", "the KernelBench helper", r.py, sizeof r.py,
		                        r.helper, sizeof r.helper);
	if (rc) {
		free(r.p);
		return rc;
	}
	int jobs = default_jobs(o);
	jobs = jobs < r.n ? jobs : r.n;
	/* CPU torch starts a thread per core in every helper; split the cores among them instead
	 * (the user's own setting wins). */
	char threads[16];
	snprintf(threads, sizeof threads, "%d", st_cpus_share(jobs, 1 << 20));
	setenv("OMP_NUM_THREADS", threads, 0);
	fprintf(stderr, "import: %d programs from %s into %s, %d at once\n", r.n, o->dir, o->root,
	        jobs);
	pthread_mutex_init(&r.mu, NULL);
	double t0 = st_now_s();
	r.jobs = jobs;
	st_threads_run(worker, &r, 0, jobs);
	/* The deferred ones, a third as many at once each pass, until one at a time. */
	for (r.pass = 1; r.jobs > 1 && deferred_left(&r); r.pass++) {
		r.jobs = r.jobs / 3 > 1 ? r.jobs / 3 : 1;
		r.next = 0;
		st_threads_run(worker, &r, 0, r.jobs);
	}
	double wall = st_now_s() - t0;
	pthread_mutex_destroy(&r.mu);
	int count[5] = {0};
	long long bytes = 0;
	for (int i = 0; i < r.n; i++) {
		count[r.p[i].state]++;
		bytes += r.p[i].bytes;
	}
	if (o->json)
		print_json(&r, count, wall, bytes);
	else
		print_table(&r, count, wall, bytes);
	fflush(stdout);
	if (r.stop)
		st_cli_error("import: stopped: %s", r.stop_reason);
	rc = r.stop || count[P_FAILED] ? ST_EXIT_ENV : count[P_REFUSED] ? ST_EXIT_NO : ST_EXIT_OK;
	free(r.p);
	return rc;
}
