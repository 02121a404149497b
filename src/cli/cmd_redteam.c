/* stitch redteam: verify every red-team solution (one exploit per file, tests/redteam/<backend>/)
 * and check that each gets the verdict its header demands; print `caught N of M`.
 * Header, on the file's first line, fields split by " | ":
 *   / * redteam: <exploit> | expect: <status>[|<status>...] | task: <task folder or id>
 *       [| speedup_at_most: X] [| options: --no-policy]
 * `speedup_at_most` is for an exploit whose answers are right but whose aim is a speedup it has
 * not earned (slowing its baselines, hiding its time): an `ok` is caught only when its speedup
 * over the reference is at most X too; a first figure above X is timed again over a window ten
 * times as long before the file counts as missed, since the exploits it bounds gain on every
 * call while a 20-ms window on a busy host can be 1.3x off by chance (front_load.c measured
 * 1.33x in one run of the suite on the 2-core development machine, 0.89-0.95x in six alone).
 * `--no-policy` runs the file with the source check off,
 * for exploits whose point is that the runtime defences hold on their own (a forged protocol
 * frame, a closed channel). A file without a readable header is a failure, never a skip. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/fs.h"
#include "common/paths.h"
#include "task/task.h"
#include "verify_opts.h"

typedef struct rt_case {
	char file[512];
	char exploit[200];
	char expect[120];
	char task[300];
	int no_policy;          /* options: --no-policy */
	double speedup_at_most; /* 0: no bound */
} rt_case;

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '*' ||
	             s[n - 1] == '/'))
		s[--n] = 0;
	size_t k = strspn(s, " \t");
	memmove(s, s + k, strlen(s + k) + 1);
}

/* One header field "key: value" into out; 0 when `field` is that key's. */
static int header_field(const char *field, const char *key, char *out, size_t len)
{
	size_t k = strlen(key);
	if (strncmp(field, key, k) || field[k] != ':')
		return -1;
	snprintf(out, len, "%s", field + k + 1);
	trim(out);
	return 0;
}

static int parse_header(const char *path, rt_case *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->file, sizeof c->file, "%s", path);
	FILE *f = fopen(path, "r");
	char line[1024] = "";
	if (!f)
		return -1;
	if (!fgets(line, sizeof line, f))
		line[0] = 0;
	fclose(f);
	char *at = strstr(line, "redteam:"), options[120] = "", bound[32] = "";
	if (!at)
		return -1;
	for (char *field = at; field;) {
		char *next = strstr(field, " | ");
		if (next) {
			*next = 0;
			next += 3;
		}
		if (header_field(field, "redteam", c->exploit, sizeof c->exploit) &&
		    header_field(field, "expect", c->expect, sizeof c->expect) &&
		    header_field(field, "task", c->task, sizeof c->task) &&
		    header_field(field, "options", options, sizeof options) &&
		    header_field(field, "speedup_at_most", bound, sizeof bound))
			return -1; /* a field this harness does not know */
		field = next;
	}
	if (!c->exploit[0] || !c->expect[0] || !c->task[0])
		return -1;
	char *end = bound;
	if (bound[0] && !((c->speedup_at_most = strtod(bound, &end)) > 0 && !*end))
		return -1;
	c->no_policy = !strcmp(options, "--no-policy");
	return options[0] && !c->no_policy ? -1 : 0; /* an option this harness does not know */
}

static int expected(const char *list, const char *status)
{
	char buf[120];
	snprintf(buf, sizeof buf, "%s", list);
	for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|")) {
		trim(tok);
		if (!strcmp(tok, status))
			return 1;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Exploits show in correctness and in the flags, not in fine timing: keep timing short. */
static void redteam_defaults(st_verify_opts *o)
{
	st_verify_opts_default(o);
	o->stop.min_time_ms = 20;
	o->stop.max_rse = 0.05;
	o->stop.max_samples = 400;
	o->timeout_s = 20;
	o->sets = "small,eval,hidden";
}

static void own_table(const char **dir, int *json, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_STRING, .name = "dir", 0, dir, "DIR", "folder of red-team files",
		 .unset = "tests/redteam/<backend>"},
		{ST_OPT_FLAG, .name = "json", 0, json, NULL,
		 "print an array of {file, exploit, expect, got, caught, reason,\n"
		 "wall_s, deadline_s, verdict}"},
		{ST_OPT_END},
	};
	memcpy(t, table, sizeof table);
}

static void usage(FILE *f)
{
	st_verify_opts o;
	redteam_defaults(&o);
	const char *dir = NULL;
	int json = 0, quiet = 0;
	st_opt own[3], ver[ST_VERIFY_OPT_N];
	own_table(&dir, &json, own);
	st_verify_opt_table(&o, &quiet, 0, ver);
	fprintf(f, "usage: stitch redteam [options]\n\n"
	           "Verify every exploit in tests/redteam/<backend>/ (or --dir) and check that each\n"
	           "gets the verdict its first line demands; print a table and 'caught N of M'.\n"
	           "The first line: /* redteam: WHAT | expect: STATUS[|STATUS...] | task: TASK\n"
	           "[| speedup_at_most: X] [| options: --no-policy]; with speedup_at_most, a file\n"
	           "that gets ok is caught only when its speedup over the reference is at most X\n"
	           "as well (an exploit with right answers that slows its baselines or hides its\n"
	           "time); a first figure above X is timed again over a window ten times as long\n"
	           "(--min-time x 10) and the file judged by that one.\n\n"
	           "options:\n");
	st_opt_usage(f, own);
	st_opt_usage(f, ver);
	fprintf(f, "\nexit: 0 every file caught, 1 some missed or unclassified, 2 bad usage,\n"
	           "      3 environment (no GPU, no compiler)\n");
}

/* One verify of a red-team file against its task, min_time_ms scaled by `longer`; *v is the
 * verdict (or NULL). ST_E_NODEVICE and ST_E_SYSTEM (the environment failed) are said here. */
static st_status verify_case(const rt_case *c, const char *file, const char *base,
                             const st_verify_opts *o, double longer, json_t **v, st_err *err)
{
	char tdir[4096], tpath[4400];
	*v = NULL;
	snprintf(tpath, sizeof tpath, "%s/%s", st_home(), c->task);
	st_status s = st_task_resolve(st_dir_exists(tpath) ? tpath : c->task, st_cli_tasks_root(),
	                              tdir, sizeof tdir, err);
	st_verify_opts one = *o;
	one.no_policy = o->no_policy || c->no_policy;
	one.stop.min_time_ms *= longer;
	if (!s)
		s = st_verify(tdir, file, &one, NULL, v, err);
	if (s == ST_E_NODEVICE || s == ST_E_SYSTEM)
		st_cli_error("redteam: %s: %s", base, err->msg);
	return s;
}

static const char *status_of(const json_t *v)
{
	return json_string_value(json_object_get(v, "status"));
}

static double vs_reference(const json_t *v)
{
	return json_number_value(json_object_get(json_object_get(v, "speedup"), "vs_reference"));
}

/* The file got what its header demands, ok, and a speedup above its bound: right answers with
 * an unearned speedup. No speedup without timing (--no-timing): nothing to bound; a file found
 * out (hacking, ...) is caught whatever figure its verdict still shows. */
static int over_bound(const rt_case *c, const json_t *v)
{
	return c->speedup_at_most > 0 && expected(c->expect, status_of(v)) &&
	       !strcmp(status_of(v), "ok") && vs_reference(v) > c->speedup_at_most;
}

/* What one file got: its status, whether that is what its header demands, the reason, the
 * table's "got" (with the speedup where the header bounds it) and the verdict (for --json). */
typedef struct {
	char got[64], reason[600], shown[96];
	int ok;
	double wall, deadline;
	json_t *verdict;
} rt_result;

/* Verify one file into *r. An ok above the header's speedup bound is timed again over a
 * longer window (the file header above says why) and judged by that figure. Returns the exit
 * code to stop with (ST_EXIT_ENV when the environment failed), else ST_EXIT_OK. */
static int judge_case(const rt_case *c, const char *file, const char *base, const st_verify_opts *o,
                      rt_result *r)
{
	st_err err;
	json_t *v = NULL;
	st_status s = verify_case(c, file, base, o, 1, &v, &err);
	if (s == ST_E_NODEVICE || s == ST_E_SYSTEM) {
		json_decref(v);
		return ST_EXIT_ENV;
	}
	if (!v) {
		snprintf(r->got, sizeof r->got, "error");
		snprintf(r->reason, sizeof r->reason, "%.500s", err.msg);
		return ST_EXIT_OK;
	}
	const double first = vs_reference(v);
	if (over_bound(c, v)) {
		json_t *again = NULL;
		s = verify_case(c, file, base, o, 10, &again, &err);
		if (s == ST_E_NODEVICE || s == ST_E_SYSTEM) {
			json_decref(v);
			json_decref(again);
			return ST_EXIT_ENV;
		}
		if (again) {
			json_decref(v);
			v = again;
		}
	}
	const double vs_ref = vs_reference(v);
	snprintf(r->got, sizeof r->got, "%s", status_of(v));
	snprintf(r->reason, sizeof r->reason, "%s", json_string_value(json_object_get(v, "reason")));
	r->wall = json_number_value(json_object_get(v, "wall_s"));
	r->deadline = json_number_value(json_object_get(v, "deadline_s"));
	if (c->speedup_at_most > 0 && vs_ref > 0)
		snprintf(r->shown, sizeof r->shown, "%s at %.2fx", r->got, vs_ref);
	r->ok = expected(c->expect, r->got) && !over_bound(c, v);
	if (over_bound(c, v))
		snprintf(r->reason, sizeof r->reason, "right answers, but %.2fx the reference where at "
		         "most %.2fx was earned (%.2fx first, then %.2fx over a window ten times as "
		         "long): its baselines were slowed or its time misjudged", vs_ref,
		         c->speedup_at_most, first, vs_ref);
	else if (first != vs_ref)
		snprintf(r->reason, sizeof r->reason, "%.2fx the reference at first, above the %.2fx "
		         "bound; %.2fx over a window ten times as long", first, c->speedup_at_most, vs_ref);
	r->verdict = v;
	return ST_EXIT_OK;
}

/* The files of `dir` ending in `ext`, by name, into files[0..max) (strdup'd): how many, or -1
 * (said) when the folder cannot be read. */
static int list_files(const char *dir, const char *ext, char **files, int max)
{
	DIR *d = opendir(dir);
	if (!d) {
		st_cli_error("redteam: cannot open %s", dir);
		return -1;
	}
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) && n < max;) {
		size_t l = strlen(e->d_name), el = strlen(ext);
		if (l > el && !strcmp(e->d_name + l - el, ext)) {
			char p[4800];
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			files[n++] = strdup(p);
		}
	}
	closedir(d);
	qsort(files, (size_t)n, sizeof files[0], by_name);
	return n;
}

int cmd_redteam(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_verify_opts o;
	redteam_defaults(&o);
	int json = 0, quiet = 0;
	const char *dir = NULL;
	st_opt own[3], ver[ST_VERIFY_OPT_N];
	own_table(&dir, &json, own);
	st_verify_opt_table(&o, &quiet, 0, ver);
	const st_opt *const tables[] = {own, ver, NULL};
	const char *pos[1];
	int n_pos;
	if (st_cli_parse("redteam", tables, NULL, argc, argv, pos, 0, &n_pos))
		return ST_EXIT_USAGE;
	int host = !strcmp(o.backend, "host");
	char dbuf[4200];
	if (!dir) {
		snprintf(dbuf, sizeof dbuf, "%s/tests/redteam/%s", st_home(), host ? "host" : "cuda");
		dir = dbuf;
	}
	char *files[512];
	const char *ext = host ? ".c" : ".cu";
	int n = list_files(dir, ext, files, 512);
	if (n < 0)
		return ST_EXIT_USAGE;
	if (!n) {
		st_cli_error("redteam: no red-team files (*%s, the %s backend's) in %s", ext,
		             host ? "host" : "cuda", dir);
		return ST_EXIT_USAGE;
	}

	json_t *all = json_array();
	int caught = 0, rc = ST_EXIT_OK;
	for (int k = 0; k < n && rc == ST_EXIT_OK; k++) {
		rt_case c;
		const char *base = strrchr(files[k], '/') ? strrchr(files[k], '/') + 1 : files[k];
		rt_result r = {.got = "unclassified",
		               .reason = "no 'redteam: | expect: | task:' header"};
		if (parse_header(files[k], &c) == 0)
			rc = judge_case(&c, files[k], base, &o, &r);
		else {
			snprintf(c.exploit, sizeof c.exploit, "?");
			snprintf(c.expect, sizeof c.expect, "?");
		}
		const int ok = rc == ST_EXIT_OK && r.ok;
		caught += ok;
		if (json)
			json_array_append_new(all, json_pack("{s:s,s:s,s:s,s:s,s:b,s:s,s:f,s:f,s:o}", "file",
			                                     base, "exploit", c.exploit, "expect", c.expect,
			                                     "got", r.got, "caught", ok, "reason", r.reason,
			                                     "wall_s", r.wall, "deadline_s", r.deadline,
			                                     "verdict", r.verdict ? r.verdict : json_null()));
		else {
			json_decref(r.verdict);
			printf("%-7s %-24s %-18s got %-14s %s\n", ok ? "caught" : "MISSED", base, c.expect,
			       r.shown[0] ? r.shown : r.got, c.exploit);
		}
		fflush(stdout);
	}
	for (int k = 0; k < n; k++)
		free(files[k]);
	if (json)
		json_dumpf(all, stdout, JSON_INDENT(2)), fputc('\n', stdout);
	json_decref(all);
	if (rc != ST_EXIT_OK)
		return rc;
	fprintf(json ? stderr : stdout, "caught %d of %d\n", caught, n);
	return caught == n && n > 0 ? ST_EXIT_OK : ST_EXIT_NO;
}
