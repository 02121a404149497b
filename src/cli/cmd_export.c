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
#include "verify_opts.h"
#include "common/fs.h"
#include "common/paths.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch export --skill gen|opt [options]\n\n"
	        "Write a training dataset for RL trainers (verl, TRL): one JSON object per line, each\n"
	        "a prompt as the Coder agent is sent it plus what a reward function needs.\n"
	        "  gen  one record per task of the suite: the first-draft prompt (coder-draft)\n"
	        "  opt  one record per verified version with feedback in the --trajectories runs:\n"
	        "       coder-optimise for a correct version, coder-repair for any other, with that\n"
	        "       version's code and the Verifier's recorded feedback\n\n"
	        "options:\n"
	        "  --skill gen|opt      which prompts (required)\n"
	        "  --trajectories DIR   a `stitch solve` output folder (with trajectory.jsonl), or a\n"
	        "                       folder of such folders; repeatable; opt only\n"
	        "  --tasks GLOB         only tasks whose id matches (fnmatch), e.g. 't1/*'\n"
	        "  --task-dir DIR       a task folder to use instead of the suite; repeatable\n"
	        "                       (default: the suite, %s)\n"
	        "  --backend cuda|host  gen: the backend the prompts are for (default cuda);\n"
	        "                       opt: only runs made on this backend (default all)\n"
	        "  --prompts DIR        prompt templates (default: the prompts/ of this stitch)\n"
	        "  --out FILE           write FILE atomically (default: stdout)\n"
	        "  --format jsonl       the only format (default)\n\n"
	        "record (one line; docs/datasets.md has an example):\n"
	        "  {\"prompt\": [{\"role\": \"user\", \"content\": PROMPT}],\n"
	        "   \"data_source\": \"stitch\", \"ability\": \"cuda\",\n"
	        "   \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"\"},\n"
	        "   \"extra_info\": {\"task_id\", \"skill\", \"template\", \"size_set\": \"eval\",\n"
	        "                  \"backend\",\n"
	        "                  \"baseline_ms\": {\"reference\", \"expert\"} or null,\n"
	        "                  \"source\": \"suite\" or TRAJECTORY#VERSION, \"index\"}}\n"
	        "Order: tasks by id; trajectories by path, then attempt.\n\n"
	        "exit: 0 written, 2 bad input (a line that is not JSON is named FILE:LINE),\n"
	        "      3 environment (cannot write, out of memory)\n",
	        st_cli_tasks_root());
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

#define MAX_DIRS 256

int cmd_export(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_export_opts o = {.tasks_root = st_cli_tasks_root()};
	const char *traj[MAX_DIRS], *tdirs[MAX_DIRS];
	const char *out = NULL, *format = "jsonl", *prompts_arg = NULL;
	o.traj_dirs = traj;
	o.task_dirs = tdirs;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char **str = !strcmp(a, "--skill")     ? &o.skill
		                   : !strcmp(a, "--tasks")   ? &o.glob
		                   : !strcmp(a, "--backend") ? &o.backend
		                   : !strcmp(a, "--out")     ? &out
		                   : !strcmp(a, "--format")  ? &format
		                   : !strcmp(a, "--prompts") ? &prompts_arg
		                                             : NULL;
		int *count = !strcmp(a, "--trajectories") ? &o.n_traj_dirs
		             : !strcmp(a, "--task-dir")   ? &o.n_task_dirs
		                                          : NULL;
		if (!str && !count) {
			st_cli_error("export: %s '%s'; see 'stitch export --help'",
			             a[0] == '-' ? "unknown option" : "unexpected argument", a);
			return ST_EXIT_USAGE;
		}
		if (i + 1 >= argc || !argv[i + 1][0]) {
			st_cli_error("export: %s needs a value", a);
			return ST_EXIT_USAGE;
		}
		if (str) {
			*str = argv[++i];
		} else if (*count == MAX_DIRS) {
			st_cli_error("export: more than %d %s folders", MAX_DIRS, a);
			return ST_EXIT_USAGE;
		} else {
			(count == &o.n_traj_dirs ? traj : tdirs)[(*count)++] = argv[++i];
		}
	}
	if (!o.skill || (strcmp(o.skill, "gen") && strcmp(o.skill, "opt"))) {
		st_cli_error("export: --skill must be gen or opt%s%s%s; see 'stitch export --help'",
		             o.skill ? " (not '" : "", o.skill ? o.skill : "", o.skill ? "')" : "");
		return ST_EXIT_USAGE;
	}
	if (strcmp(format, "jsonl")) {
		st_cli_error("export: --format %s: the only format is jsonl", format);
		return ST_EXIT_USAGE;
	}
	if (o.backend && strcmp(o.backend, "cuda") && strcmp(o.backend, "host")) {
		st_cli_error("export: --backend %s: expected cuda or host", o.backend);
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
	json_t *records = NULL;
	st_err err;
	st_status s = st_export_records(&o, &records, &err);
	if (!s)
		s = write_output(records, out, &err);
	json_decref(records);
	if (s) {
		st_cli_error("export: %s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	return ST_EXIT_OK;
}
