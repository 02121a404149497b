/* `stitch eval --compare RUN...` and `stitch eval --list`: the leaderboard of stored model
 * evaluations. Runs are read back from the eval store (the one `stitch eval` records into) and
 * set side by side as a terminal table, as JSON, or as a self-contained HTML page. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "store/eval.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch eval --compare RUN... [--db FILE] [--html FILE] [--json]\n"
	        "       stitch eval --list [--db FILE] [--json]\n\n"
	        "Set recorded `stitch eval` runs side by side: per run the pass@1 compile and\n"
	        "correct rates, fast_1 against the reference and the expert, the geomean speedup,\n"
	        "tokens and cost; fast_p (p = 0, 1, 1.5, 2, 5) per tier; correctness and speedup by\n"
	        "round for refine and agent runs (a loop drifting toward slow safe code shows); and\n"
	        "the suspicious results.\n\n"
	        "options:\n"
	        "  RUN          a run id, 'last' or 'last~N' (N runs before the last)\n"
	        "  --list       the recorded runs, newest first\n"
	        "  --db FILE    the eval store (SQLite; default $STITCH_EVAL_DB, else\n"
	        "               $XDG_DATA_HOME/stitch/eval.db or ~/.local/share/stitch/eval.db)\n"
	        "  --html FILE  also write the comparison as one HTML page with SVG charts (no\n"
	        "               scripts, no network)\n"
	        "  --json       print the runs' scores ({runs: [{id, scores}]}) instead of the table\n"
	        "\nexit: 0 done, 2 bad input (an unknown run, not an eval store), 3 a file that\n"
	        "      cannot be written\n");
}

typedef struct compare_args {
	const char *db, *html;
	const char **refs;
	int n_refs, list, json, help;
} compare_args;

/* 0 ok, otherwise an exit code */
static int parse(int argc, char **argv, compare_args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *x = argv[i];
		if (!strcmp(x, "--compare")) {
			continue;
		} else if (!strcmp(x, "--list")) {
			a->list = 1;
		} else if (!strcmp(x, "--json")) {
			a->json = 1;
		} else if (!strcmp(x, "-h") || !strcmp(x, "--help")) {
			a->help = 1;
		} else if (!strcmp(x, "--db") || !strcmp(x, "--html")) {
			if (i + 1 >= argc || !*argv[i + 1]) {
				st_cli_error("%s needs a file; see 'stitch eval --help'", x);
				return ST_EXIT_USAGE;
			}
			*(x[2] == 'd' ? &a->db : &a->html) = argv[++i];
		} else if (x[0] == '-') {
			st_cli_error("eval --compare: '%s' is not an option of a comparison; see "
			             "'stitch eval --help'", x);
			return ST_EXIT_USAGE;
		} else {
			a->refs[a->n_refs++] = x;
		}
	}
	if (a->help)
		return 0;
	if (a->list && a->n_refs) {
		st_cli_error("eval --list takes no runs (got '%s')", a->refs[0]);
		return ST_EXIT_USAGE;
	}
	if (!a->list && !a->n_refs) {
		st_cli_error("eval --compare needs at least one run: an id, 'last' or 'last~N' "
		             "('stitch eval --list' shows them)");
		return ST_EXIT_USAGE;
	}
	if (a->list && a->html) {
		st_cli_error("eval --list writes no page; --html goes with --compare RUN...");
		return ST_EXIT_USAGE;
	}
	return 0;
}

static int exit_for(st_status s)
{
	return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
}

static int list_runs(st_eval_db *db, const char *path, int json)
{
	json_t *runs;
	st_err err;
	st_status s = st_eval_db_list(db, &runs, &err);
	if (s) {
		st_cli_error("%s", err.msg);
		return exit_for(s);
	}
	if (json) {
		json_dumpf(runs, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else if (!json_array_size(runs)) {
		printf("no eval runs in %s\n", path);
	} else {
		printf("%5s  %-20s  %-8s %4s %3s  %-7s  %s\n", "id", "started", "mode", "K", "R",
		       "backend", "model");
		size_t i;
		const json_t *r;
		json_array_foreach(runs, i, r) {
			const char *started = json_string_value(json_object_get(r, "started")),
			           *backend = json_string_value(json_object_get(r, "backend"));
			printf("%5lld  %-20s  %-8s %4lld %3lld  %-7s  %s\n",
			       (long long)json_integer_value(json_object_get(r, "id")),
			       started ? started : "-", json_string_value(json_object_get(r, "mode")),
			       (long long)json_integer_value(json_object_get(r, "samples")),
			       (long long)json_integer_value(json_object_get(r, "rounds")),
			       backend ? backend : "-", json_string_value(json_object_get(r, "model")));
		}
	}
	json_decref(runs);
	return ST_EXIT_OK;
}

static int compare(st_eval_db *db, const compare_args *a)
{
	int n = a->n_refs, rc = ST_EXIT_OK;
	json_t **scores = calloc((size_t)n, sizeof *scores);
	long long *ids = calloc((size_t)n, sizeof *ids);
	if (!scores || !ids) {
		free(scores);
		free(ids);
		st_cli_error("eval --compare: out of memory");
		return ST_EXIT_ENV;
	}
	st_err err;
	for (int k = 0; k < n && !rc; k++) {
		/* by the id the store knows it by, whatever the reference ("last~2") */
		st_status s = st_eval_db_resolve(db, a->refs[k], &ids[k], &err);
		char id[32];
		snprintf(id, sizeof id, "%lld", ids[k]);
		if (!s)
			s = st_eval_db_load(db, id, &scores[k], NULL, &err);
		if (s) {
			st_cli_error("%s", err.msg);
			rc = exit_for(s);
		}
	}
	const json_t *const *cs = (const json_t *const *)scores;
	if (!rc) {
		if (a->json) {
			json_t *out = json_object(), *runs = json_array();
			for (int k = 0; k < n; k++)
				json_array_append_new(runs, json_pack("{s:I,s:O}", "id", (json_int_t)ids[k],
				                                      "scores", scores[k]));
			json_object_set_new(out, "runs", runs);
			json_dumpf(out, stdout, JSON_INDENT(2));
			fputc('\n', stdout);
			json_decref(out);
		} else {
			st_eval_print_compare(cs, ids, n, stdout);
		}
	}
	if (!rc && a->html) {
		st_status s = st_eval_write_html(a->html, cs, ids, n, &err);
		if (s) {
			st_cli_error("%s", err.msg);
			rc = exit_for(s);
		} else {
			fprintf(stderr, "wrote %s\n", a->html);
		}
	}
	for (int k = 0; k < n; k++)
		json_decref(scores[k]);
	free(scores);
	free(ids);
	return rc;
}

int cmd_eval_compare(int argc, char **argv)
{
	compare_args a = {0};
	a.refs = calloc((size_t)(argc > 0 ? argc : 1), sizeof *a.refs);
	if (!a.refs) {
		st_cli_error("eval --compare: out of memory");
		return ST_EXIT_ENV;
	}
	int rc = parse(argc, argv, &a);
	if (!rc && a.help)
		usage(stdout);
	if (rc || a.help) {
		free(a.refs);
		return rc;
	}
	char buf[PATH_MAX];
	const char *path = a.db ? a.db : st_eval_db_default_path(buf, sizeof buf);
	if (!path) {
		st_cli_error("eval: no eval store: no home folder for the default one; give --db FILE "
		             "or set STITCH_EVAL_DB");
		free(a.refs);
		return ST_EXIT_ENV;
	}
	st_eval_db *db;
	st_err err;
	st_status s = st_eval_db_open(path, &db, &err);
	if (s) {
		st_cli_error("%s", err.msg);
		free(a.refs);
		return exit_for(s);
	}
	rc = a.list ? list_runs(db, path, a.json) : compare(db, &a);
	st_eval_db_close(db);
	free(a.refs);
	return rc;
}
