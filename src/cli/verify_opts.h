/* Options shared by `stitch verify`, `profile`, `bench` and `eval`: backend, arch, size sets,
 * seeds, timing and the stop rule, as one option table (common/opt.h), so every command accepts
 * and documents the same flags; and the argument loop and verdict printing verify and profile
 * share. */
#ifndef ST_CLI_VERIFY_OPTS_H
#define ST_CLI_VERIFY_OPTS_H

#include <stdio.h>
#include "common/opt.h"
#include "stitch/stitch.h"

/* Room for the verify options table, its end included. */
#define ST_VERIFY_OPT_N 20
/* Room for the profile options table (--trace, --ncu), its end included. */
#define ST_PROFILE_OPT_N 3

/* The verify options over o and *quiet, into t. For `stitch profile` (profile = 1) --backend
 * takes cuda only and the defaults it prints are profile's (one seed, no timing). */
void st_verify_opt_table(st_verify_opts *o, int *quiet, int profile, st_opt *t);

/* For commands that parse by hand around the verify options (solve, serve, worker): argv[*i]
 * (and maybe its value) against the verify table. 1 consumed; 0 not one of ours; -1 bad value
 * (message printed). And the table's help, with the defaults o holds. */
int st_verify_opt_parse(st_verify_opts *o, int argc, char **argv, int *i, int *quiet);
void st_verify_opts_usage(FILE *f, st_verify_opts *o);

/* --trace FILE and --ncu (verify and profile) over o, into t. */
void st_profile_opt_table(st_verify_opts *o, st_opt *t);

void st_verify_progress_stderr(void *arg, const char *line);

/* Whether the folder a file option names exists; otherwise an error saying so. Checked when the
 * option is read: a file that cannot be written should not cost a whole verify first. */
int st_cli_output_folder_ok(const char *opt, const char *path);

/* Parse argv with the tables (NULL-terminated) and conflicts, printing "VERB: <error>; see
 * 'stitch VERB --help'" on a bad command line. 0, or ST_EXIT_USAGE after printing. */
int st_cli_parse(const char *verb, const st_opt *const *tables, const st_opt_conflict *conflicts,
                 int argc, char **argv, const char **pos, int max_pos, int *n_pos);

/* The argument loop `verify` and `profile` share: the command's own table, then --trace and
 * --ncu, then the verify options; TASK SOLUTION into pos. 0 when done; -1 after printing an
 * error; -2 when the positional arguments are not exactly two (the caller prints its usage). */
int st_verify_cli_args(const char *verb, const st_opt *own, const st_opt_conflict *conflicts,
                       int argc, char **argv, st_verify_opts *o, int *quiet, const char *pos[2]);

/* Resolve TASK, check SOLUTION is a file, run st_verify in `slot` (its progress lines) and
 * print the verdict (JSON or text). ST_EXIT_OK with *verdict set for the caller to judge;
 * otherwise the exit code, the error printed, *verdict NULL. */
int st_verify_cli_run(const char *task, const char *solution, const st_verify_opts *o,
                      const st_verify_slot *slot, int json, json_t **verdict);

#endif
