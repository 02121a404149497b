/* The --suite option of bench, eval, export and serve: one table entry and one reading of it, so
 * that the four commands say and do the same thing (the names themselves are src/task/suite.c). */
#include "suite_opt.h"

#include <stdio.h>

#include "cli.h"

st_opt st_cli_suite_opt(const char **target)
{
	return (st_opt){ST_OPT_LIST, .name = "suite", 0, target, "NAMES",
	                "the tasks, a comma list of: suite (the bundled tasks),\n"
	                "kb1, kb2, kb3 (KernelBench levels imported under\n"
	                "TASKS/kb/level1..3), or a folder of tasks",
	                .unset = "suite"};
}

int st_cli_suite(const char *verb, const char *names, const char *queue, st_suite *s)
{
	s->v = NULL;
	s->n = 0;
	/* The queue's workers find a task by its id under their own task root; an id of another
	 * suite means nothing to them. */
	if (queue && !st_suite_is_default(names)) {
		st_cli_error("%s: --suite %s goes without --queue (the workers find tasks by id under "
		             "their own task root, which holds the bundled suite)", verb, names);
		return ST_EXIT_USAGE;
	}
	st_err err;
	st_status r = st_suite_select(names, st_cli_tasks_root(), s, &err);
	if (r) {
		st_cli_error("%s: %s", verb, err.msg);
		return r == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	return ST_EXIT_OK;
}
