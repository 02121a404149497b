/* The compile step of the verifier: one solution file to one shared object, through a
 * content-addressed cache. Agents resubmit the same candidate often (retries, re-verification,
 * benchmark reruns), and nvcc takes seconds, so the key covers everything that decides the
 * output (source, full command line, compiler identity, the ABI header) and failures are cached
 * as well. The parent only compiles; it never loads what it built (DESIGN.md §5), so all that is
 * trusted here is that the compiler runs in its own process group under a timeout.
 *
 * This file holds st_compile, the compiler's run and the diagnostics of a result; what to run and
 * under which key is compile_job.c, the cache's entries and lock compile_cache.c (compile_int.h
 * says what they share), the parsing of diagnostics compile_diag.c. */
#include "verify/compile_int.h"

#include "common/fs.h"
#include "common/proc.h"
#include "common/utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define ST_COMPILE_LOG_MAX ((size_t)4 << 20)
#define ST_COMPILE_TIMEOUT_DEFAULT 120.0

static int st_diag_push(st_compile_result *r, const char *file, const char *sev, const char *msg)
{
	st_diag *nd = realloc(r->diags, (size_t)(r->n_diags + 1) * sizeof *nd);
	if (!nd)
		return -1;
	r->diags = nd;
	st_diag *d = &nd[r->n_diags];
	memset(d, 0, sizeof *d);
	d->file = strdup(file);
	d->severity = strdup(sev);
	d->message = strdup(msg);
	if (!d->file || !d->severity || !d->message) {
		free(d->file);
		free(d->severity);
		free(d->message);
		return -1;
	}
	r->n_diags++;
	return 0;
}

const st_diag *st_compile_first_error(const st_compile_result *r)
{
	for (int i = 0; r && i < r->n_diags; i++)
		if (!strcmp(r->diags[i].severity, "error"))
			return &r->diags[i];
	return NULL;
}

/* Diagnostics for r->log, the errors of a failed compile first (see st_diags_errors_first).
 * `why` (a timeout, a killed compiler) is always added; otherwise a
 * failed compile that printed no error we recognise gets one record saying so, so a
 * compile_error verdict never comes without a reason. */
static st_status st_fill_diags(st_compile_result *r, const char *src, int exit_code,
                               const char *why, st_err *err)
{
	if (st_diag_parse(r->log, &r->diags, &r->n_diags) != 0)
		return st_err_set(err, ST_E_NOMEM, "parsing compiler output: out of memory");
	if (r->ok)
		return ST_OK;
	st_diags_errors_first(r->diags, r->n_diags);
	char msg[160];
	if (why && *why) {
		snprintf(msg, sizeof msg, "%s", why);
	} else {
		for (int i = 0; i < r->n_diags; i++)
			if (strcmp(r->diags[i].severity, "error") == 0)
				return ST_OK;
		snprintf(msg, sizeof msg,
		         "compiler failed (exit status %d) without a recognised error message", exit_code);
	}
	if (st_diag_push(r, src, "error", msg) != 0)
		return st_err_set(err, ST_E_NOMEM, "compile diagnostics: out of memory");
	return ST_OK;
}

void st_compile_result_free(st_compile_result *r)
{
	if (!r)
		return;
	free(r->log);
	st_diags_free(r->diags, r->n_diags);
	r->log = NULL;
	r->diags = NULL;
	r->n_diags = 0;
}

/* A new string with every `from` in `text` replaced by `to`; NULL when out of memory. */
static char *st_replace_all(const char *text, const char *from, const char *to)
{
	size_t nf = strlen(from), nt = strlen(to), count = 0;
	for (const char *p = text; nf && (p = strstr(p, from)); p += nf)
		count++;
	char *out = malloc(strlen(text) + count * (nt > nf ? nt - nf : 0) + 1);
	if (!out)
		return NULL;
	char *w = out;
	for (const char *p = text;;) {
		const char *hit = nf ? strstr(p, from) : NULL;
		if (!hit) {
			strcpy(w, p);
			break;
		}
		memcpy(w, p, (size_t)(hit - p));
		w += hit - p;
		memcpy(w, to, nt);
		w += nt;
		p = hit + nf;
	}
	return out;
}

/* Runs the compiler and fills r; the exit status goes to *exit_code for the cache. *cacheable
 * is 0 for a timeout or a killed compiler (those say more about the machine than about the
 * source), and then `why` says what happened. */
static st_status st_job_run(st_job *j, double timeout_s, st_compile_result *r, int *exit_code,
                            int *cacheable, char *why, size_t why_len, st_err *err)
{
	st_proc_result pr;
	st_status s = st_write_file_atomic(j->src_copy, j->source, j->source_len, err);
	if (s != ST_OK)
		return st_err_wrap(err, s, "compile cache");
	s = st_proc_run(j->args.v, j->dir, timeout_s, ST_COMPILE_LOG_MAX, &pr, err);
	unlink(j->src_copy);
	if (s != ST_OK)
		return st_err_wrap(err, ST_E_SYSTEM, "compile");
	r->seconds = pr.wall_s;
	char *clean = st_utf8_clean(pr.out, pr.out_len, 0);
	/* Diagnostics name the file the user gave, not the cache's copy. */
	r->log = clean ? st_replace_all(clean, j->src_copy, j->src) : NULL;
	free(clean);
	*exit_code = pr.exit_code;
	int timed_out = pr.timed_out, sig = pr.signal;
	st_proc_result_free(&pr);
	if (!r->log) {
		unlink(j->tmp_so);
		return st_err_set(err, ST_E_NOMEM, "compile: out of memory");
	}
	*cacheable = !timed_out && sig == 0;
	if (timed_out)
		snprintf(why, why_len, "compile timed out after %g s", timeout_s);
	else if (sig != 0)
		snprintf(why, why_len, "compiler killed by signal %d (%s)", sig, strsignal(sig));
	if (timed_out || sig != 0 || *exit_code != 0) {
		if (unlink(j->tmp_so) != 0 && errno != ENOENT)
			return st_err_set(err, ST_E_IO, "cannot remove '%s': %s", j->tmp_so,
			                  strerror(errno));
		r->ok = 0;
		r->timed_out = timed_out;
		return ST_OK;
	}
	if (!st_file_exists(j->tmp_so)) {
		r->ok = 0;
		*cacheable = 0;
		snprintf(why, why_len, "compiler reported success but wrote no output file");
		return ST_OK;
	}
	/* Readable by the other users of a shared cache; renamed last so no partial .so is seen. */
	if (chmod(j->tmp_so, 0644) != 0 || rename(j->tmp_so, r->so_path) != 0) {
		st_err_set(err, ST_E_IO, "cannot move '%s' to '%s': %s", j->tmp_so, r->so_path,
		           strerror(errno));
		unlink(j->tmp_so);
		return ST_E_IO;
	}
	r->ok = 1;
	return ST_OK;
}

st_status st_compile(const char *src_path, const st_compile_opts *o, st_compile_result *r,
                     st_err *err)
{
	memset(r, 0, sizeof *r);
	if (!src_path || !*src_path)
		return st_err_set(err, ST_E_INVALID, "no solution file given");
	st_job *j = calloc(1, sizeof *j);
	if (!j)
		return st_err_set(err, ST_E_NOMEM, "compile: out of memory");
	st_status s = st_job_prepare(j, src_path, o, r, err);
	int exit_code = 0, cacheable = 0;
	char why[160] = "";
	int use_cache = !(o && o->no_cache), lock = -1;
	if (s == ST_OK && use_cache && st_cache_load(j->json_path, r->so_path, r, &exit_code)) {
		r->cached = 1;
	} else if (s == ST_OK && use_cache && (lock = st_key_lock(j->dir, r->key)) >= 0 &&
	           st_cache_load(j->json_path, r->so_path, r, &exit_code)) {
		r->cached = 1; /* another compile of this key finished while this one waited */
	} else if (s == ST_OK) {
		double timeout = o && o->timeout_s > 0 ? o->timeout_s : ST_COMPILE_TIMEOUT_DEFAULT;
		s = st_job_run(j, timeout, r, &exit_code, &cacheable, why, sizeof why, err);
		if (s == ST_OK && cacheable)
			s = st_cache_store(j->json_path, r, exit_code, j->args.v, j->out_idx,
			                   r->so_path, err);
	}
	if (lock >= 0)
		close(lock); /* after the store: a waiter must find the entry complete */
	if (s == ST_OK)
		s = st_fill_diags(r, j->src, exit_code, why, err);
	if (!r->ok)
		r->so_path[0] = '\0';
	st_args_free(&j->args);
	free(j->source);
	free(j);
	if (s != ST_OK)
		st_compile_result_free(r);
	return s;
}
