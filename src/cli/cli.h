/* The command table: one cmd_<verb> per subcommand, each in its own cmd_<verb>.c.
 * Exit codes: 0 success, 1 the job ran and the answer is "no" (e.g. a candidate is incorrect),
 * 2 bad input or usage, 3 the environment cannot do the job (no GPU, no compiler). */
#ifndef ST_CLI_H
#define ST_CLI_H

#include <jansson.h>
#include <stdio.h>

#include "common/buf.h"

#define ST_EXIT_OK 0
#define ST_EXIT_NO 1
#define ST_EXIT_USAGE 2
#define ST_EXIT_ENV 3

int cmd_tasks(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_solve(int argc, char **argv);
int cmd_redteam(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_queue(int argc, char **argv);
int cmd_eval(int argc, char **argv);
/* `stitch eval --compare RUN... | --list` (eval_compare.c), called by cmd_eval with its argv. */
int cmd_eval_compare(int argc, char **argv);

/* One line to stderr: "stitch: <message>". */
void st_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The text built in b written to stdout, and b freed: 0, or ST_EXIT_ENV after saying that the
 * text ran out of memory (nothing is printed then: half a table would read as a whole one). */
int st_cli_print(st_buf *b);

/* v as a number in [lo, hi] into *out: 0, or -1 after saying "OPT: 'V' is not a number
 * between LO and HI". */
int st_cli_number(const char *opt, const char *v, double lo, double hi, double *out);
/* The suite root: $STITCH_TASKS, else tasks/ under st_home(). */
const char *st_cli_tasks_root(void);

/* The commit of the checkout stitch runs from, for a run's record: $STITCH_COMMIT, else the
 * checkout's HEAD (`abc1234`, `abc1234-dirty` when its tree has changes not committed), else
 * null. */
json_t *st_cli_commit_id(void);

/* 1 when argv[i] is -h or --help. */
int st_cli_wants_help(int argc, char **argv);

#endif
