/* stitch bench (minimal): run every task's shipped expert against its reference through the
 * normal verifier and print one table row per task: status, times, speedup, SOL. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "task/task.h"
#include "verify_opts.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch bench [options]\n\n"
	        "Verify every task's expert against its reference (on the GPU, or with --backend host\n"
	        "the host versions on the CPU) and print a table: task, status, reference ms,\n"
	        "expert ms, speedup, SOL %%. Tasks come from %s.\n\n"
	        "options:\n"
	        "  --task GLOB      only tasks whose id matches GLOB (e.g. 't1/*')\n"
	        "  --json           print an array of verdicts instead of the table\n" ST_VERIFY_OPTS_HELP
	        "\nexit: 0 every expert correct, 1 some expert failed, 2 bad input, 3 no GPU or\n"
	        "      another environment problem\n",
	        st_cli_tasks_root());
}

static void row(const json_t *v, const char *id, FILE *f)
{
	const json_t *b = json_object_get(v, "baselines"), *sol = json_object_get(v, "sol");
	double ref = json_number_value(json_object_get(b, "reference_ms"));
	double exp = json_number_value(json_object_get(b, "expert_ms"));
	fprintf(f, "%-20s %-14s", id, json_string_value(json_object_get(v, "status")));
	if (ref > 0 && exp > 0)
		fprintf(f, " %12.4f %12.4f %8.2fx", ref, exp, ref / exp);
	else
		fprintf(f, " %12s %12s %9s", "-", "-", "-");
	if (sol && json_object_get(sol, "fraction"))
		fprintf(f, " %6.1f%%", 100 * json_number_value(json_object_get(sol, "fraction")));
	else
		fprintf(f, " %7s", "-");
	fputc('\n', f);
	fflush(f);
}

int cmd_bench(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_verify_opts o;
	st_verify_opts_default(&o);
	o.candidate_trusted = 1;
	o.profile = 0; /* the table needs no profile; `stitch profile` gives one */
	int json = 0, quiet = 0;
	const char *glob = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(argv[i], "--task")) {
			if (i + 1 >= argc) {
				st_cli_error("--task needs a value");
				return ST_EXIT_USAGE;
			}
			glob = argv[++i];
			continue;
		}
		int r = st_verify_opt_parse(&o, argc, argv, &i, &quiet);
		if (r < 0)
			return ST_EXIT_USAGE;
		if (!r) {
			st_cli_error("bench: unknown argument '%s'; see 'stitch bench --help'", argv[i]);
			return ST_EXIT_USAGE;
		}
	}
	int host = !strcmp(o.backend, "host");
	if (!quiet) {
		o.progress = st_verify_progress_stderr;
		o.progress_arg = "  ";
	}
	char **dirs = NULL;
	int n = 0;
	st_err err;
	if (st_task_list(st_cli_tasks_root(), &dirs, &n, &err)) {
		st_cli_error("%s", err.msg);
		return ST_EXIT_USAGE;
	}
	json_t *all = json_array();
	int failed = 0, ran = 0, header = 0, rc = ST_EXIT_OK;
	for (int k = 0; k < n && rc == ST_EXIT_OK; k++) {
		st_task t;
		if (st_task_load(dirs[k], &t, &err)) {
			st_cli_error("%s", err.msg);
			rc = ST_EXIT_USAGE;
			break;
		}
		const char *expert = host ? t.host_expert : (t.n_experts ? t.experts[0] : NULL);
		if ((glob && fnmatch(glob, t.id, 0)) || !expert) {
			if (!expert && !quiet && !(glob && fnmatch(glob, t.id, 0)))
				fprintf(stderr, "  %s: no %sexpert, skipped\n", t.id, host ? "host " : "");
			st_task_free(&t);
			continue;
		}
		if (!quiet)
			fprintf(stderr, "%s: expert vs reference\n", t.id);
		json_t *v = NULL;
		st_status s = st_verify(dirs[k], expert, &o, &v, &err);
		ran++;
		if (s == ST_E_NODEVICE) {
			st_cli_error("%s\nstitch bench times the suite on the local GPU and found none; "
			             "'stitch bench --backend host' runs the host versions on the CPU", err.msg);
			rc = ST_EXIT_ENV;
		} else if (s) {
			st_cli_error("%s: %s", t.id, err.msg);
			rc = s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
		} else {
			if (strcmp(json_string_value(json_object_get(v, "status")), "ok"))
				failed++;
			if (json) {
				json_array_append(all, v);
			} else {
				if (!header++)
					printf("%-20s %-14s %12s %12s %9s %7s\n", "task", "status",
					       "reference ms", "expert ms", "speedup", "SOL");
				row(v, t.id, stdout);
			}
		}
		json_decref(v);
		st_task_free(&t);
	}
	for (int k = 0; k < n; k++)
		free(dirs[k]);
	free(dirs);
	if (json && rc == ST_EXIT_OK)
		json_dumpf(all, stdout, JSON_INDENT(2)), fputc('\n', stdout);
	json_decref(all);
	if (rc == ST_EXIT_OK && ran == 0) {
		st_cli_error("bench: no task matched");
		return ST_EXIT_USAGE;
	}
	return rc != ST_EXIT_OK ? rc : failed ? ST_EXIT_NO : ST_EXIT_OK;
}
