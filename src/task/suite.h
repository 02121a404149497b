/* Suites by name: which tasks a command works on. `suite` is the bundled tasks (the task root's
 * <tier folder>/<task> folders), `kb1`, `kb2`, `kb3` the KernelBench programs imported under the
 * task root's kb/level1..3, and any other name that is a folder is a task root of its own (or a
 * single tier folder, or one task folder). bench, eval, export and serve all choose their tasks
 * here, so the names mean the same thing to each of them. */
#ifndef ST_SUITE_H
#define ST_SUITE_H

#include <stddef.h>

#include "common/st_error.h"

/* The names a user may give, for messages and --help. */
#define ST_SUITE_NAMES "kb1, kb2, kb3, suite, or a folder of tasks"

typedef struct st_suite_task {
	char *dir;  /* absolute task folder */
	char *id;   /* "<tier folder>/<name>", as st_task_load names the task */
} st_suite_task;

typedef struct st_suite {
	st_suite_task *v;  /* in the order of the names, each suite's tasks sorted by id */
	int n;
} st_suite;

/* The tasks of `names` (a comma list; NULL or "" means "suite") under the task root `root`.
 * ST_E_INVALID with a message for an unknown name (naming the valid ones), a suite with no
 * tasks, or two different folders with the same task id; the same folder named twice counts
 * once. ST_E_IO / ST_E_NOMEM for the machine's failures. Free with st_suite_free. */
st_status st_suite_select(const char *names, const char *root, st_suite *s, st_err *err);

void st_suite_free(st_suite *s);

/* The folder of the task with this id, or NULL when the suite has none. */
const char *st_suite_find(const st_suite *s, const char *id);

/* What a program that takes an optional suite (NULL: every task under `root`, as before suites
 * had names) needs: a task id resolved (st_task_resolve under root without a suite; with one,
 * only its ids), and its task folders listed (st_task_list; free with st_task_list_free). */
st_status st_suite_resolve(const st_suite *s, const char *id, const char *root, char *out,
                           size_t len, st_err *err);
st_status st_suite_dirs(const st_suite *s, const char *root, char ***dirs, int *n, st_err *err);

/* 1 when `names` is only the bundled suite (NULL, "" or "suite"): what a command did before
 * suites had names, e.g. the queue's workers resolve ids under their own root. */
int st_suite_is_default(const char *names);

#endif
