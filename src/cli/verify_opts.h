/* Options shared by `stitch verify` and `stitch bench`: backend, arch, size sets, seeds, timing
 * and the stop rule. One parser, so both commands accept and document the same flags. */
#ifndef ST_CLI_VERIFY_OPTS_H
#define ST_CLI_VERIFY_OPTS_H

#include <stdio.h>
#include "stitch/stitch.h"

#define ST_VERIFY_OPTS_HELP                                                                    \
	"  --backend B      cuda (default) or host (C solutions on the CPU; no GPU needed)\n"         \
	"  --arch A         target architecture, e.g. sm_90a (default: the GPU's own)\n"              \
	"  --sets LIST      size sets checked: small,eval,hidden (default: all; host: small)\n"      \
	"  --time-set S     size set that is timed (default: eval; host: small)\n"                   \
	"  --seeds N        correctness seeds per size set (default 3)\n"                            \
	"  --seed N         reproducible seeds instead of fresh secret ones\n"                        \
	"  --no-timing      check correctness only\n"                                                 \
	"  --min-time MS    GPU time to gather per solution before stopping (default 300)\n"         \
	"  --max-rse X      stop when the median's relative standard error (from the quartiles:\n" \
	"                   a disturbed sample does not prolong timing) is below X (default 0.005)\n" \
	"  --max-samples N  cap on timed samples per solution (default 20000)\n"                    \
	"  --timeout S      limit for one runner request: st_init, a call, a batch (default 120)\n" \
	"  --compare-threads N  threads comparing outputs with the reference's (default: the\n"  \
	"                   CPUs this process may use, at most 16)\n"                              \
	"  --no-cache       compile even when the cache has the result\n"                             \
	"  --no-sandbox     run solutions without the runner sandbox (verdicts flagged unsandboxed)\n" \
	"  --no-policy      skip the static source check (flagged unchecked_source); for testing\n"   \
	"  --quiet          no progress lines on stderr\n"

#define ST_PROFILE_OPTS_HELP                                                                   \
	"  --trace FILE     write the profiled st_run as a Chrome trace (Perfetto, chrome://tracing)\n" \
	"  --ncu            also measure the kernels with Nsight Compute ($STITCH_NCU or ncu on\n"  \
	"                   PATH): a second pass on the timed set, one seed, NOT sandboxed (run it\n" \
	"                   on code that passed a sandboxed verify); without ncu the profile says so\n"

/* --trace FILE and --ncu (verify and profile). 1: consumed; 0: not it; -1: missing value
 * (printed). */
int st_profile_opt_parse(st_verify_opts *o, int argc, char **argv, int *i);

/* Parse argv[*i] (and maybe its value). 1: consumed; 0: not one of ours; -1: bad value
 * (message printed). */
int st_verify_opt_parse(st_verify_opts *o, int argc, char **argv, int *i, int *quiet);

void st_verify_progress_stderr(void *arg, const char *line);

/* Whether the folder a file option names exists; otherwise an error saying so. Checked when the
 * option is read: a file that cannot be written should not cost a whole verify first. */
int st_cli_output_folder_ok(const char *opt, const char *path);

/* The argument loop `verify` and `profile` share: --json, --trace, the options above, the
 * command's own options through `extra` (1: consumed, with any value, by moving *i; -1: a
 * bad value, already reported), and TASK SOLUTION into pos. 0 when done;
 * -1 after printing an error; -2 when the positional arguments are not exactly two (the caller
 * prints its usage). */
int st_verify_cli_args(const char *verb, int argc, char **argv, st_verify_opts *o,
                       int (*extra)(st_verify_opts *o, int argc, char **argv, int *i),
                       int *json, int *quiet, const char *pos[2]);

/* Resolve TASK, run st_verify and print the verdict (JSON or text). ST_EXIT_OK with *verdict
 * set for the caller to judge; otherwise the exit code, the error printed, *verdict NULL. */
int st_verify_cli_run(const char *task, const char *solution, const st_verify_opts *o, int json,
                      json_t **verdict);

#endif
