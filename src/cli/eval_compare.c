/* `stitch eval --compare RUN...` and `stitch eval --list`: the leaderboard of stored model
 * evaluations. Runs are read back from the eval store (the one `stitch eval` records into) and
 * set side by side as a terminal table, as JSON, or as a self-contained HTML page. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/opt.h"
#include "store/eval.h"

typedef struct compare_args {
	const char *db, *html;
	const char **refs;
	int n_refs, list, json, help, compare;
} compare_args;

static void own_table(compare_args *a, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_FLAG, .name = "compare", 0, &a->compare, NULL,
		 "set the runs given as RUN side by side; RUN is a run id, 'last'\n"
		 "or 'last~N' (N runs before the last)"},
		{ST_OPT_FLAG, .name = "list", 0, &a->list, NULL, "the recorded runs, newest first"},
		{ST_OPT_STRING, .name = "db", 0, &a->db, "FILE", "the eval store (SQLite)",
		 .unset = "$STITCH_EVAL_DB, else\n"
		 "$XDG_DATA_HOME/stitch/eval.db or ~/.local/share/stitch/eval.db"},
		{ST_OPT_STRING, .name = "html", 0, &a->html, "FILE",
		 "--compare: also write the comparison as one HTML page with SVG\n"
		 "charts (no scripts, no network)"},
		{ST_OPT_FLAG, .name = "json", 0, &a->json, NULL,
		 "print the runs' scores ({runs: [{id, scores}]}), or the list, as JSON"},
		{ST_OPT_FLAG, .name = "help", 'h', &a->help, NULL, "this text"},
		{ST_OPT_END},
	};
	memcpy(t, table, sizeof table);
}

/* --list writes no page */
static const st_opt_conflict conflicts[] = {{"list", "html"}, {NULL, NULL}};

static void usage(FILE *f)
{
	compare_args a = {0};
	st_opt own[8];
	own_table(&a, own);
	fprintf(f,
	        "usage: stitch eval --compare RUN... [--db FILE] [--html FILE] [--json]\n"
	        "       stitch eval --list [--db FILE] [--json]\n\n"
	        "Set recorded `stitch eval` runs side by side: per run the pass@1 compile and\n"
	        "correct rates, fast_1 against the reference and the expert, the geomean speedup,\n"
	        "tokens and cost; fast_p (p = 0, 1, 1.5, 2, 5) per tier; correctness and speedup by\n"
	        "round for refine and agent runs (a loop drifting toward slow safe code shows); and\n"
	        "the suspicious results.\n\n"
	        "options:\n");
	st_opt_usage(f, own);
	fprintf(f, "\nexit: 0 done, 2 bad input (an unknown run, not an eval store), 3 a file that\n"
	           "      cannot be written\n");
}

/* 0 ok, otherwise an exit code */
static int parse(int argc, char **argv, compare_args *a)
{
	st_opt own[8];
	own_table(a, own);
	const st_opt *const tables[] = {own, NULL};
	st_err err;
	if (st_opt_parse(tables, conflicts, argc, argv, a->refs, argc, &a->n_refs, &err)) {
		st_cli_error("eval --compare: %s; see 'stitch eval --compare --help'", err.msg);
		return ST_EXIT_USAGE;
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
			st_buf text = {0};
			st_eval_print_compare(cs, ids, n, &text);
			rc = st_cli_print(&text);
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
