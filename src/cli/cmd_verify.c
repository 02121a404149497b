/* stitch verify: compile, check and time one solution against a task; print the verdict. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common/fs.h"
#include "kb_helper.h"
#include "task/task.h"
#include "verify_opts.h"

#include <limits.h>

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch verify [options] TASK SOLUTION\n\n"
	        "Compile SOLUTION (.cu for the cuda backend, .c for host), run it in its own process\n"
	        "against the task's reference (and expert) over secret seeds and every size set,\n"
	        "then time it interleaved with the baselines on cold L2; a correct candidate's st_run\n"
	        "is then profiled once (CUPTI timeline, roofline, findings; cuda backend). TASK is a\n"
	        "task folder or an id such as t1/softmax under the suite (%s). An imported\n"
	        "KernelBench task (stitch import) has no reference: SOLUTION is judged against the\n"
	        "stored outputs of every stored seed and timed against the PyTorch baselines.\n\n"
	        "options:\n"
	        "  --json           print the verdict as one JSON object\n"
	        "  --no-profile     leave the profile out (correctness and speed only)\n"
	        "  --samples        put every timed sample in the JSON verdict, as timing.ROLE.raw:\n"
	        "                   [event ms, wall ms, SM MHz, throttled] per sample, dropped ones too\n"
	        "  --dump FILE      write the params, the inputs of the first seed on the timed set\n"
	        "                   and the solution's outputs for them to FILE (safetensors; the\n"
	        "                   sizes, task and set as metadata), e.g. to compare with PyTorch\n"
	        "  --params FILE    take the params from FILE (safetensors, by the task's names,\n"
	        "                   its dtypes and shapes; other tensors are ignored, so a --dump\n"
	        "                   file works) instead of generating them, e.g. real weights\n"
	        "  --fresh-seeds    imported KernelBench task: judge on --seeds new seeds drawn now\n"
	        "                   under a secret seed by the import's PyTorch helper (needs\n"
	        "                   python3 with torch, STITCH_PYTHON) instead of the stored ones\n"
	        ST_PROFILE_OPTS_HELP ST_VERIFY_OPTS_HELP
	        "\nexit: 0 correct, 1 not correct (compile error, crash, timeout, incorrect),\n"
	        "      2 bad input, 3 environment (no GPU, compiler, broken baseline)\n",
	        st_cli_tasks_root());
}

static int fresh_seeds;

static int verify_flag(st_verify_opts *o, int argc, char **argv, int *i)
{
	if (!strcmp(argv[*i], "--no-profile")) {
		o->profile = 0;
		return 1;
	}
	if (!strcmp(argv[*i], "--samples")) {
		o->keep_samples = 1;
		return 1;
	}
	if (!strcmp(argv[*i], "--fresh-seeds")) {
		fresh_seeds = 1;
		return 1;
	}
	int dump = !strcmp(argv[*i], "--dump");
	if (!dump && strcmp(argv[*i], "--params"))
		return 0;
	if (*i + 1 >= argc || !argv[*i + 1][0]) {
		st_cli_error("%s needs a file name", argv[*i]);
		return -1;
	}
	if (!dump) {
		o->params_path = argv[++*i];
		return 1;
	}
	o->dump_path = argv[++*i];
	return st_cli_output_folder_ok("--dump", o->dump_path) ? 1 : -1;
}

int cmd_verify(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_verify_opts o;
	st_verify_opts_default(&o);
	int json = 0, quiet = 0;
	const char *pos[2];
	int r = st_verify_cli_args("verify", argc, argv, &o, verify_flag, &json, &quiet, pos);
	if (r == -2)
		usage(stderr);
	if (r)
		return ST_EXIT_USAGE;
	if (o.trace_path && (strcmp(o.backend, "cuda") || !o.profile)) {
		st_cli_error("verify: --trace needs the cuda backend and the profile (no --no-profile)");
		return ST_EXIT_USAGE;
	}
	if (!quiet) {
		o.progress = st_verify_progress_stderr;
		o.progress_arg = "verify: ";
	}
	/* Fresh seeds: a copy of the imported task with new ones, judged in its place. */
	char tmp_root[PATH_MAX] = "", fresh[PATH_MAX] = "", task_dir[PATH_MAX];
	const char *task = pos[0];
	if (fresh_seeds) {
		st_err err;
		if (st_task_resolve(pos[0], st_cli_tasks_root(), task_dir, sizeof task_dir, &err)) {
			st_cli_error("verify: %s", err.msg);
			return ST_EXIT_USAGE;
		}
		if (!quiet)
			fprintf(stderr, "verify: drawing %d fresh seeds with the import's helper\n", o.seeds);
		int frc = st_kb_fresh_task(task_dir, o.seeds, tmp_root, sizeof tmp_root, fresh,
		                           sizeof fresh);
		if (frc) {
			if (tmp_root[0])
				st_rm_tree(tmp_root);
			return frc;
		}
		task = fresh;
	}
	json_t *verdict = NULL;
	int rc = st_verify_cli_run(task, pos[1], &o, json, &verdict);
	if (tmp_root[0])
		st_rm_tree(tmp_root);
	if (rc)
		return rc;
	int ok = !strcmp(json_string_value(json_object_get(verdict, "status")), "ok");
	json_decref(verdict);
	return ok ? ST_EXIT_OK : ST_EXIT_NO;
}
