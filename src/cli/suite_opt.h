/* --suite NAMES for the commands that run over many tasks (bench, eval, export, serve): the
 * option's table entry (the same help text everywhere) and its reading into an st_suite. */
#ifndef ST_SUITE_OPT_H
#define ST_SUITE_OPT_H

#include "common/opt.h"
#include "task/suite.h"

/* The table entry: --suite NAMES into *target (a comma list). */
st_opt st_cli_suite_opt(const char **target);

/* The tasks of `names` (NULL: the bundled suite) under the task root: ST_EXIT_OK, or the exit
 * code after saying why (2 unknown name, empty suite; 3 the machine). `queue` (the command's
 * --queue, NULL without) refuses suites the queue's workers cannot find. */
int st_cli_suite(const char *verb, const char *names, const char *queue, st_suite *s);

#endif
