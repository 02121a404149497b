/* stitch export: the suite and `stitch solve` trajectories as JSONL datasets for RL trainers
 * (verl, TRL); the records are made by st_export_records (agents/dataset.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agents/dataset.h"
#include "cli.h"
#include "common/buf.h"
#include "suite_opt.h"
#include "verify_opts.h"
#include "common/fs.h"
#include "common/opt.h"
#include "common/paths.h"

#define MAX_DIRS 256

typedef struct export_args {
	st_export_opts o;
	const char *out, *format, *prompts, *suite;
	const char *traj[MAX_DIRS], *tdirs[MAX_DIRS];
	st_opt_strings traj_list, tdir_list;
} export_args;

static const char *const skills[] = {"gen", "opt", NULL};
static const char *const backends[] = {"cuda", "host", NULL};
static const char *const formats[] = {"jsonl", NULL};

static void export_defaults(export_args *a)
{
	memset(a, 0, sizeof *a);
	a->o.tasks_root = st_cli_tasks_root();
	a->format = "jsonl";
	a->traj_list = (st_opt_strings){a->traj, 0, MAX_DIRS};
	a->tdir_list = (st_opt_strings){a->tdirs, 0, MAX_DIRS};
}

static void own_table(export_args *a, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_ENUM, .name = "skill", 0, &a->o.skill, "gen|opt", "which prompts (required)",
		 .values = skills},
		{ST_OPT_MULTI, .name = "trajectories", 0, &a->traj_list, "DIR",
		 "a `stitch solve` output folder (with trajectory.jsonl), or a\n"
		 "folder of such folders; repeatable; opt only"},
		{ST_OPT_STRING, .name = "tasks", 0, &a->o.glob, "GLOB",
		 "only tasks whose id matches (fnmatch), e.g. 't1/*'", .unset = "all"},
		st_cli_suite_opt(&a->suite),
		{ST_OPT_MULTI, .name = "task-dir", 0, &a->tdir_list, "DIR",
		 "a task folder to use instead of the suite; repeatable",
		 .unset = "the suite, $STITCH_TASKS or this stitch's tasks/"},
		{ST_OPT_ENUM, .name = "backend", 0, &a->o.backend, "B",
		 "cuda or host; gen: the backend the prompts are for; opt: only\n"
		 "runs made on this backend", .values = backends,
		 .unset = "gen: cuda; opt: runs of every backend"},
		{ST_OPT_STRING, .name = "prompts", 0, &a->prompts, "DIR", "prompt templates",
		 .unset = "the prompts/ of this stitch"},
		{ST_OPT_STRING, .name = "out", 0, &a->out, "FILE", "write FILE atomically (- : stdout)",
		 .unset = "stdout"},
		{ST_OPT_ENUM, .name = "format", 0, &a->format, "jsonl", "the only format",
		 .values = formats},
		{ST_OPT_END},
	};
	memcpy(t, table, sizeof table);
}

static void usage(FILE *f)
{
	export_args a;
	export_defaults(&a);
	st_opt own[11];
	own_table(&a, own);
	fprintf(f,
	        "usage: stitch export --skill gen|opt [options]\n\n"
	        "Write a training dataset for RL trainers (verl, TRL): one JSON object per line, each\n"
	        "a prompt as the Coder agent is sent it plus what a reward function needs.\n"
	        "  gen  one record per task of the suite (%s; --suite chooses others,\n"
	        "       e.g. kb1,kb2,kb3): the first-draft prompt (coder-draft)\n"
	        "  opt  one record per verified version with feedback in the --trajectories runs:\n"
	        "       coder-optimise for a correct version, coder-repair for any other, with that\n"
	        "       version's code and the Verifier's recorded feedback\n\n"
	        "options:\n",
	        st_cli_tasks_root());
	st_opt_usage(f, own);
	fprintf(f,
	        "\nrecord (one line; docs/datasets.md has an example):\n"
	        "  {\"prompt\": [{\"role\": \"user\", \"content\": PROMPT}],\n"
	        "   \"data_source\": \"stitch\", \"ability\": \"cuda\",\n"
	        "   \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"\"},\n"
	        "   \"extra_info\": {\"task_id\", \"skill\", \"template\", \"size_set\": \"eval\",\n"
	        "                  \"backend\",\n"
	        "                  \"baseline_ms\": {\"reference\", \"expert\"} or null,\n"
	        "                  \"source\": \"suite\" or TRAJECTORY#VERSION, \"index\"}}\n"
	        "Order: tasks by id; trajectories by path, then attempt.\n"
	        "Not together: --suite and --task-dir.\n\n"
	        "exit: 0 written, 2 bad input (a line that is not JSON is named FILE:LINE),\n"
	        "      3 environment (cannot write, out of memory)\n");
}

/* ---- the command ----------------------------------------------------------------------------- */

static int write_output(const json_t *records, const char *out, st_err *err)
{
	st_buf b = {0};
	size_t i;
	json_t *rec;
	st_buf_add(&b, "", 0);
	json_array_foreach(records, i, rec) {
		char *line = b.oom ? NULL : json_dumps(rec, JSON_PRESERVE_ORDER);
		if (!line)
			b.oom = 1;
		else
			st_buf_printf(&b, "%s\n", line);
		free(line);
	}
	if (b.oom) {
		st_buf_free(&b);
		return st_err_set(err, ST_E_NOMEM, "out of memory");
	}
	st_status s = ST_OK;
	if (!out || !strcmp(out, "-")) {
		if (fwrite(b.p, 1, b.n, stdout) != b.n || fflush(stdout))
			s = st_err_set(err, ST_E_IO, "cannot write the records to stdout: %s",
			               strerror(errno));
	} else {
		s = st_write_file_atomic(out, b.p, b.n, err);
		if (!s)
			fprintf(stderr, "stitch: export: %zu records in %s\n", json_array_size(records), out);
	}
	free(b.p);
	return s;
}

int cmd_export(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	static export_args a; /* two arrays of MAX_DIRS: not on the stack */
	export_defaults(&a);
	st_opt own[11];
	own_table(&a, own);
	const st_opt *const tables[] = {own, NULL};
	static const st_opt_conflict conflicts[] = {{"suite", "task-dir"}, {NULL, NULL}};
	int n_pos;
	st_err err;
	if (st_opt_parse(tables, conflicts, argc, argv, NULL, 0, &n_pos, &err)) {
		st_cli_error("export: %s; see 'stitch export --help'", err.msg);
		return ST_EXIT_USAGE;
	}
	st_export_opts o = a.o;
	const char *out = a.out, *prompts_arg = a.prompts, **tdirs = a.tdirs;
	o.traj_dirs = a.traj;
	o.n_traj_dirs = a.traj_list.n;
	o.task_dirs = a.tdirs;
	o.n_task_dirs = a.tdir_list.n;
	if (!o.skill) {
		st_cli_error("export: --skill gen or opt is required; see 'stitch export --help'");
		return ST_EXIT_USAGE;
	}
	int opt = !strcmp(o.skill, "opt");
	if (opt && !o.n_traj_dirs) {
		st_cli_error("export: --skill opt needs --trajectories DIR");
		return ST_EXIT_USAGE;
	}
	if (!opt && o.n_traj_dirs) {
		st_cli_error("export: --trajectories is for --skill opt only");
		return ST_EXIT_USAGE;
	}
	if (prompts_arg && !st_dir_exists(prompts_arg)) {
		st_cli_error("export: --prompts %s: no such folder", prompts_arg);
		return ST_EXIT_USAGE;
	}
	for (int i = 0; i < o.n_task_dirs; i++)
		if (!st_dir_exists(tdirs[i])) {
			st_cli_error("export: --task-dir %s: no such folder", tdirs[i]);
			return ST_EXIT_USAGE;
		}
	/* Checked before the work, which on many runs is not instant, finds it cannot write. */
	if (out && strcmp(out, "-") && !st_cli_output_folder_ok("export: --out", out))
		return ST_EXIT_USAGE;
	char prompts[4200];
	if (prompts_arg)
		snprintf(prompts, sizeof prompts, "%s", prompts_arg);
	else
		snprintf(prompts, sizeof prompts, "%s/prompts", st_home());
	o.prompts_dir = prompts;
	/* A named suite's folders are the tasks, as --task-dir's are; without one, the task root
	 * as before (which also resolves opt's trajectories). */
	st_suite su = {0};
	const char **sdirs = NULL;
	if (a.suite) {
		int rc = st_cli_suite("export", a.suite, NULL, &su);
		if (rc)
			return rc;
		if (!(sdirs = calloc((size_t)su.n, sizeof *sdirs))) {
			st_suite_free(&su);
			st_cli_error("export: out of memory");
			return ST_EXIT_ENV;
		}
		for (int i = 0; i < su.n; i++)
			sdirs[i] = su.v[i].dir;
		o.task_dirs = sdirs;
		o.n_task_dirs = su.n;
	}
	json_t *records = NULL;
	st_status s = st_export_records(&o, &records, &err);
	free(sdirs);
	st_suite_free(&su);
	if (!s)
		s = write_output(records, out, &err);
	json_decref(records);
	if (s) {
		st_cli_error("export: %s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	return ST_EXIT_OK;
}
