/* Before anything runs: the candidate's source against the task's policy, then the task hooks
 * and every solution compiled (in parallel, cached), and the compile's account in the verdict. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/paths.h"
#include "verify/policy.h"
#include "verify/verify_int.h"

/* The source is read before anything runs: forbidden headers, calls and timer asm make the
 * verdict `forbidden`; a near copy of the reference or an expert is flagged. */
st_status vx_policy_check(vctx *v, const char *solution, st_err *err)
{
	st_policy_report rep;
	st_status s = st_policy_check(solution, v->task, &rep, err);
	if (s)
		return st_err_wrap(err, s, "policy check");
	json_t *hits = json_array();
	for (int i = 0; i < rep.n_hits; i++) {
		char line[512];
		st_policy_describe(&rep.hits[i], line, sizeof line);
		json_array_append_new(hits, json_string(line));
	}
	json_object_set_new(v->verdict, "policy",
	                    json_pack("{s:o,s:f,s:s,s:b}", "hits", hits, "similarity", rep.similarity,
	                              "similar_to", rep.similar_to, "has_kernel", rep.has_kernel));
	if (rep.similarity >= ST_POLICY_NEAR_COPY && !v->o->candidate_trusted) {
		char f[80];
		snprintf(f, sizeof f, "near_copy_of_%s", rep.similar_to[0] ? rep.similar_to : "reference");
		vx_flag(v, f);
	}
	if (rep.n_hits) {
		char line[512];
		st_policy_describe(&rep.hits[0], line, sizeof line);
		vx_fail(v, "forbidden", "%s%s", line, rep.n_hits > 1 ? " (and more, see policy.hits)" : "");
	}
	st_policy_report_free(&rep);
	return ST_OK;
}

static json_t *compile_json(const st_compile_result *cr)
{
	json_t *d = json_array();
	for (int i = 0; i < cr->n_diags; i++)
		json_array_append_new(d, json_pack("{s:s,s:i,s:i,s:s,s:s}", "file", cr->diags[i].file,
		                                   "line", cr->diags[i].line, "col", cr->diags[i].col,
		                                   "severity", cr->diags[i].severity, "message",
		                                   cr->diags[i].message));
	return json_pack("{s:b,s:b,s:f,s:s,s:o,s:s}", "ok", cr->ok, "cached", cr->cached, "seconds",
	                 cr->seconds, "key", cr->key, "diagnostics", d, "log",
	                 cr->log ? cr->log : "");
}

struct compile_job {
	sol *so;
	st_compile_opts opts;
	st_status status;
	st_err err;
};

static void *compile_thread(void *arg)
{
	struct compile_job *j = arg;
	j->status = st_compile(j->so->path, &j->opts, &j->so->cr, &j->err);
	return NULL;
}

/* What every compile of this task shares; include_dir must outlive the options. */
static st_compile_opts base_compile_opts(const st_verify_opts *o, const char *arch,
                                         char *include_dir, size_t len)
{
	snprintf(include_dir, len, "%s/include", st_home());
	return (st_compile_opts){.arch = arch, .include_dir = include_dir,
	                         .timeout_s = o->compile_timeout_s, .no_cache = o->no_cache};
}

/* Shipped (trusted) solutions link what the task ships; a candidate only what its policy allows. */
static st_compile_opts solution_compile_opts(const st_task *t, st_compile_opts co, int trusted)
{
	co.libraries = (const char *const *)(trusted ? t->solution_libraries : t->libraries);
	co.n_libraries = trusted ? t->n_solution_libraries : t->n_libraries;
	return co;
}

st_status st_verify_precompile(const char *task_dir, const char *solution, const st_verify_opts *o,
                               const char *arch, st_err *err)
{
	if (o->no_cache)
		return ST_OK; /* st_verify compiles anyway */
	st_task t;
	st_status s = st_task_load(task_dir, &t, err);
	if (s)
		return s;
	int host = !strcmp(o->backend, "host");
	char include_dir[4096];
	st_compile_opts co = base_compile_opts(o, arch, include_dir, sizeof include_dir);
	const char *paths[4] = {t.hooks, st_task_reference(&t, host), st_task_expert(&t, host),
	                        solution};
	for (int i = 0; i < 4 && !s; i++) {
		if (!paths[i])
			continue;
		st_compile_opts one = i == 0 ? co : solution_compile_opts(&t, co, i < 3 || o->candidate_trusted);
		st_compile_result r;
		s = st_compile(paths[i], &one, &r, err);
		if (!s)
			st_compile_result_free(&r);
	}
	st_task_free(&t);
	return s;
}

st_status vx_compile_all(vctx *v, const char *arch, st_err *err)
{
	const st_task *t = v->task;
	char include_dir[4096];
	st_compile_opts co = base_compile_opts(v->o, arch, include_dir, sizeof include_dir);
	if (t->hooks) {
		st_compile_result hr;
		st_status s = st_compile(t->hooks, &co, &hr, err);
		if (s)
			return st_err_wrap(err, s, "task hooks");
		if (!hr.ok) {
			s = st_err_set(err, ST_E_SYSTEM, "task hooks %s do not compile: %s", t->hooks,
			               hr.log ? hr.log : "");
			st_compile_result_free(&hr);
			return s;
		}
		snprintf(v->hooks_so, sizeof v->hooks_so, "%s", hr.so_path);
		st_compile_result_free(&hr);
		v->hooks_dl = dlopen(v->hooks_so, RTLD_NOW | RTLD_LOCAL);
		if (!v->hooks_dl)
			return st_err_set(err, ST_E_SYSTEM, "cannot load task hooks: %s", dlerror());
		v->validate = (validate_fn)(uintptr_t)dlsym(v->hooks_dl, "st_task_validate");
		if (t->validator && !v->validate)
			return st_err_set(err, ST_E_INVALID, "%s: validator is \"task\" but task.c does "
			                  "not export st_task_validate", t->hooks);
		v->perturb = (perturb_fn)(uintptr_t)dlsym(v->hooks_dl, "st_task_perturb");
		v->validate_perturbed = (validate_perturbed_fn)(uintptr_t)dlsym(
			v->hooks_dl, "st_task_validate_perturbed");
		if (!v->perturb != !v->validate_perturbed)
			return st_err_set(err, ST_E_INVALID, "%s exports only one of st_task_perturb and "
			                  "st_task_validate_perturbed: both or neither", t->hooks);
	}
	/* nvcc takes seconds per file: the solutions compile at the same time. */
	struct compile_job jobs[MAX_SOLS];
	pthread_t threads[MAX_SOLS];
	int started[MAX_SOLS] = {0};
	for (int i = 0; i < v->n_sols; i++) {
		jobs[i].so = &v->sols[i];
		jobs[i].status = ST_OK;
		if (v->sols[i].stored || v->sols[i].calib)
			continue;
		jobs[i].opts = solution_compile_opts(t, co, v->sols[i].trusted);
		started[i] = pthread_create(&threads[i], NULL, compile_thread, &jobs[i]) == 0;
		if (!started[i])
			compile_thread(&jobs[i]);
	}
	for (int i = 0; i < v->n_sols; i++)
		if (started[i])
			pthread_join(threads[i], NULL);
	for (int i = 0; i < v->n_sols; i++) {
		sol *so = &v->sols[i];
		if (so->stored || so->calib)
			continue;
		if (jobs[i].status) {
			*err = jobs[i].err;
			return st_err_wrap(err, jobs[i].status, "%s", vx_role_of(v, i));
		}
		vx_progress(v, "compile %-9s %s (%.2f s)", vx_role_of(v, i),
		            so->cr.ok ? (so->cr.cached ? "cached" : "ok") : "FAILED", so->cr.seconds);
		if (i == v->cand)
			json_object_set_new(v->verdict, "compile", compile_json(&so->cr));
		if (!so->cr.ok) {
			if (i == v->cand) {
				/* the compiler's or linker's first error, never a warning before it */
				const st_diag *e = st_compile_first_error(&so->cr);
				const char *first = e ? e->message
				                  : so->cr.n_diags ? so->cr.diags[0].message
				                  : so->cr.timed_out ? "the compiler timed out" : "see log";
				vx_fail(v, "compile_error", "%s", first);
				continue;
			}
			return st_err_set(err, ST_E_SYSTEM, "the %s %s does not compile: %.400s",
			                  so->role, so->path, so->cr.log ? so->cr.log : "");
		}
	}
	return ST_OK;
}
