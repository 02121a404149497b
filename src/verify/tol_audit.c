/* The tolerance audit: for every size set of a task, each trivial answer (include/stitch/
 * audit_answer.h) is written out as a solution and verified with st_verify on that set alone,
 * without timing. The verdict's status is the finding: "incorrect" means the task rejects the
 * answer, "ok" that it admits it (the task's check is too weak), anything else that the answer
 * never got judged. Answers that cannot apply to a set are skipped with the reason. */
#include "verify/tol_audit.h"
#include "verify/set_select.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fs.h"
#include "common/paths.h"
#include "common/progress.h"
#include "stitch/stitch.h"
#include "task/dtype.h"
#include "task/task.h"

static const char *const answer_names[ST_AUDIT_N] = {"zeros", "nan", "mean", "passthrough",
                                                     "other_seed"};

const char *st_audit_answer_name(int answer)
{
	return answer >= 0 && answer < ST_AUDIT_N ? answer_names[answer] : "?";
}

/* One audit's state: the task, the backend and the generated answers' paths. */
typedef struct audit {
	const st_audit_opts *o;
	st_task task;
	int host;
	char dir[4096];                   /* private folder of the generated solutions */
	char path[ST_AUDIT_N][4200];      /* "" where the answer cannot be built (no reference) */
	int admitted, errors;
} audit;

/* The generated solution of one answer: the template after the answer's number and, for the
 * answers built on the reference, the reference's text with its three entry points renamed.
 * The text, not an #include, so the compile cache's key covers the reference. */
static st_status write_answer(audit *a, int answer, const char *tmpl, size_t tmpl_len,
                              st_err *err)
{
	const char *ref = st_task_reference(&a->task, a->host);
	int needs_ref = answer == ST_AUDIT_MEAN || answer == ST_AUDIT_OTHER_SEED;
	int checks_ref = answer == ST_AUDIT_ZEROS || answer == ST_AUDIT_PASSTHROUGH;
	int uses_ref = needs_ref || (checks_ref && ref);
	a->path[answer][0] = '\0';
	if (needs_ref && !ref)
		return ST_OK;
	char *ref_text = NULL;
	size_t ref_len = 0;
	if (uses_ref) {
		st_status s = st_read_file(ref, &ref_text, &ref_len, err);
		if (s)
			return st_err_wrap(err, s, "audit: the reference");
	}
	st_buf b = {0};
	st_buf_printf(&b, "/* stitch tasks --audit: the '%s' answer for %s */\n"
	              "#include \"stitch/solution.h\"\n#define ST_AUDIT_ANSWER %d\n"
	              "#define ST_AUDIT_SAME %d\n#define ST_AUDIT_REPEAT %d\n",
	              answer_names[answer], a->task.id, answer, ST_AUDIT_SAME, ST_AUDIT_REPEAT);
	if (uses_ref) {
		st_buf_printf(&b, "#define ST_AUDIT_HAS_REF 1\n#define st_init st_audit_ref_init\n"
		              "#define st_run st_audit_ref_run\n"
		              "#define st_free st_audit_ref_free\n#line 1 \"%s\"\n", ref);
		st_buf_add(&b, ref_text, ref_len);
		st_buf_printf(&b, "\n#undef st_init\n#undef st_run\n#undef st_free\n");
	}
	st_buf_printf(&b, "#line 1 \"stitch/audit_answer.h\"\n");
	st_buf_add(&b, tmpl, tmpl_len);
	free(ref_text);
	if (b.oom) {
		st_buf_free(&b);
		return st_err_set(err, ST_E_NOMEM, "audit: out of memory");
	}
	snprintf(a->path[answer], sizeof a->path[answer], "%s/%s.%s", a->dir, answer_names[answer],
	         a->host ? "c" : "cu");
	st_status s = st_write_file_atomic(a->path[answer], b.p, b.n, err);
	st_buf_free(&b);
	return s;
}

static st_status write_answers(audit *a, st_err *err)
{
	char tmpl_path[4096];
	snprintf(tmpl_path, sizeof tmpl_path, "%s/include/stitch/audit_answer.h", st_home());
	char *tmpl;
	size_t len;
	st_status s = st_read_file(tmpl_path, &tmpl, &len, err);
	if (s)
		return st_err_wrap(err, s, "audit: the answers' template");
	for (int k = 0; k < ST_AUDIT_N && !s; k++)
		s = write_answer(a, k, tmpl, len, err);
	free(tmpl);
	return s;
}

static int64_t numel_of(const st_tensor_spec *t, const st_size_set *set)
{
	int64_t n = 0;
	st_err e;
	return st_task_numel(t, set, &n, &e) ? -1 : n;
}

/* Why `answer` does not apply to `set` (into why), or 0 when it does. */
static int skip_reason(const audit *a, int answer, const st_size_set *set, char *why, size_t len)
{
	const st_task *t = &a->task;
	if (!a->path[answer][0]) {
		snprintf(why, len, "the task has no %sreference to build it on", a->host ? "host " : "");
		return 1;
	}
	if (answer == ST_AUDIT_NAN) {
		for (int j = 0; j < t->n_outputs; j++)
			if (st_dtype_is_float(t->outputs[j].dtype))
				return 0;
		snprintf(why, len, "no float output (integers have no NaN)");
		return 1;
	}
	if (answer == ST_AUDIT_MEAN) {
		for (int j = 0; j < t->n_outputs; j++)
			if (numel_of(&t->outputs[j], set) > 1)
				return 0;
		snprintf(why, len, "every output is one element: its mean is the answer itself");
		return 1;
	}
	if (answer != ST_AUDIT_PASSTHROUGH)
		return 0;
	if (t->n_inputs < 1 || t->n_outputs < 1) {
		snprintf(why, len, "no input to pass through");
		return 1;
	}
	const st_tensor_spec *x = &t->inputs[0], *y = &t->outputs[0];
	int64_t dx[ST_MAX_DIMS], dy[ST_MAX_DIMS];
	st_err e;
	int fits = x->dtype == y->dtype && x->ndim == y->ndim && !st_task_shape(x, set, dx, &e) &&
	           !st_task_shape(y, set, dy, &e) && !memcmp(dx, dy, sizeof dx[0] * (size_t)x->ndim);
	if (fits)
		return 0;
	snprintf(why, len, "input %s (%s) does not fit output %s (%s) in dtype or shape", x->name,
	         st_dtype_name(x->dtype), y->name, st_dtype_name(y->dtype));
	return 1;
}

/* The verdict's reason says st_run returned `code` (ST_AUDIT_SAME or ST_AUDIT_REPEAT). */
static int returned(const char *reason, int code)
{
	char key[48];
	snprintf(key, sizeof key, "st_run returned %d", code);
	return reason && strstr(reason, key);
}

static const char *const same_why[ST_AUDIT_N] = {
	[ST_AUDIT_ZEROS] = "the reference's output is all zeros here",
	[ST_AUDIT_MEAN] = "the reference's output is constant here: its mean is the right answer",
	[ST_AUDIT_PASSTHROUGH] = "the reference's output is the input here",
	[ST_AUDIT_OTHER_SEED] = "the reference's output does not depend on the inputs here",
};

/* Verify one answer on one set; the outcome as the report names it, the reason in why. */
static const char *judge_answer(audit *a, int answer, const st_size_set *set, char *why,
                                size_t len)
{
	st_verify_opts vo;
	st_verify_opts_default(&vo);
	vo.backend = a->o->backend;
	vo.sets = set->label;
	vo.time_set = set->label;
	vo.seeds = a->o->seeds;
	vo.seed = a->o->seed;
	vo.timing = 0;
	vo.profile = 0;
	vo.timeout_s = a->o->timeout_s;
	vo.no_policy = 1;         /* our own code, and the reference's */
	vo.candidate_trusted = 1; /* mean and other_seed link what the reference links */
	json_t *verdict = NULL;
	st_err e;
	st_status s = st_verify(a->task.dir, a->path[answer], &vo, NULL, &verdict, &e);
	const char *status = s ? NULL : json_string_value(json_object_get(verdict, "status"));
	const char *reason = json_string_value(json_object_get(verdict, "reason"));
	const char *outcome;
	if (s || !status) {
		snprintf(why, len, "the verifier failed: %s", s ? e.msg : "no status in the verdict");
		outcome = "error";
	} else if (!strcmp(status, "incorrect")) {
		snprintf(why, len, "%s", reason ? reason : "");
		outcome = "rejected";
	} else if (returned(reason, ST_AUDIT_SAME) && same_why[answer]) {
		snprintf(why, len, "%s", same_why[answer]);
		outcome = "skipped";
	} else if (returned(reason, ST_AUDIT_REPEAT)) {
		snprintf(why, len, "the seeds drew the same inputs (the set's input space is tiny): "
		         "no other inputs' answer to give");
		outcome = "skipped";
	} else if (!strcmp(status, "ok")) {
		snprintf(why, len, "the task's check passed it on every seed");
		outcome = "admitted";
	} else {
		snprintf(why, len, "the answer did not run (%s): %s", status, reason ? reason : "");
		outcome = "error";
	}
	json_decref(verdict);
	return outcome;
}

static void say(const audit *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const audit *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	/* room for audit_set's line, whose `why` alone may take 1100 bytes */
	st_vprogress(a->o->progress, a->o->progress_arg, 1200, fmt, ap);
	va_end(ap);
}

static json_t *audit_set(audit *a, const st_size_set *set)
{
	json_t *answers = json_object();
	for (int k = 0; k < ST_AUDIT_N; k++) {
		char why[1100];
		const char *outcome = skip_reason(a, k, set, why, sizeof why)
		                    ? "skipped" : judge_answer(a, k, set, why, sizeof why);
		a->admitted += !strcmp(outcome, "admitted");
		a->errors += !strcmp(outcome, "error");
		say(a, "%s %s %s: %s (%s)", a->task.id, set->label, answer_names[k], outcome, why);
		json_object_set_new(answers, answer_names[k],
		                    json_pack("{s:s,s:s}", "outcome", outcome, "why", why));
	}
	return json_pack("{s:s,s:o}", "set", set->label, "answers", answers);
}

st_status st_audit_task(const char *task_dir, const st_audit_opts *o, json_t **report,
                        st_err *err)
{
	*report = NULL;
	st_audit_opts oo = *o;
	oo.backend = oo.backend ? oo.backend : "host";
	oo.seeds = oo.seeds > 0 ? oo.seeds : 3;
	oo.seed = oo.seed ? oo.seed : 0x5eed;
	oo.timeout_s = oo.timeout_s > 0 ? oo.timeout_s : 120;
	audit a = {.o = &oo, .host = !strcmp(oo.backend, "host")};
	const char *sets = oo.sets ? oo.sets : a.host ? "small,hidden" : "small,eval,hidden";
	st_status s = st_task_load(task_dir, &a.task, err);
	if (s)
		return s;
	const char *tmp = getenv("TMPDIR");
	snprintf(a.dir, sizeof a.dir, "%s/stitch-audit.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(a.dir)) {
		st_task_free(&a.task);
		return st_err_set(err, ST_E_SYSTEM, "audit: cannot make a folder in %s",
		                  tmp && *tmp ? tmp : "/tmp");
	}
	s = write_answers(&a, err);
	json_t *list = json_array();
	const st_size_set *all[64];
	int n = s ? 0 : st_task_size_sets(&a.task, all, 64);
	for (int i = 0; i < n; i++)
		if (st_set_selected(sets, all[i]->label))
			json_array_append_new(list, audit_set(&a, all[i]));
	if (!s)
		*report = json_pack("{s:s,s:s,s:o,s:i,s:i}", "task", a.task.id, "backend", oo.backend,
		                    "sets", list, "admitted", a.admitted, "errors", a.errors);
	else
		json_decref(list);
	st_rm_tree(a.dir);
	st_task_free(&a.task);
	if (!s && !*report)
		return st_err_set(err, ST_E_NOMEM, "audit: out of memory");
	return s;
}

/* The outcome of `answer` in a set entry of a report. */
static const char *outcome_of(const json_t *set, const char *answer, const char **why)
{
	const json_t *a = json_object_get(json_object_get(set, "answers"), answer);
	*why = json_string_value(json_object_get(a, "why"));
	const char *o = json_string_value(json_object_get(a, "outcome"));
	return o ? o : "?";
}

void st_audit_print(const json_t *report, FILE *f)
{
	const json_t *sets = json_object_get(report, "sets");
	fprintf(f, "%s (%s backend): %s\n", json_string_value(json_object_get(report, "task")),
	        json_string_value(json_object_get(report, "backend")),
	        json_integer_value(json_object_get(report, "admitted")) ? "BROKEN: admits a trivial answer"
	        : json_integer_value(json_object_get(report, "errors")) ? "answers not judged"
	        : "every trivial answer rejected");
	fprintf(f, "  %-9s", "SET");
	for (int k = 0; k < ST_AUDIT_N; k++)
		fprintf(f, k + 1 < ST_AUDIT_N ? " %-11s" : " %s\n", answer_names[k]);
	size_t i;
	const json_t *set;
	json_array_foreach(sets, i, set) {
		fprintf(f, "  %-9s", json_string_value(json_object_get(set, "set")));
		for (int k = 0; k < ST_AUDIT_N; k++) {
			const char *why;
			fprintf(f, k + 1 < ST_AUDIT_N ? " %-11s" : " %s\n",
			        outcome_of(set, answer_names[k], &why));
		}
	}
	/* Only the exceptions get their reasons: a rejection's is the verifier's usual line. */
	json_array_foreach(sets, i, set)
		for (int k = 0; k < ST_AUDIT_N; k++) {
			const char *why, *o = outcome_of(set, answer_names[k], &why);
			if (strcmp(o, "rejected"))
				fprintf(f, "    %s %s %s: %s\n", json_string_value(json_object_get(set, "set")),
				        answer_names[k], o, why ? why : "");
		}
}
