/* The KernelBench import's PyTorch helper (scripts/kb_import.py), run for `stitch import
 * kernelbench`, and the vendor baselines' helper (scripts/vendor_baselines.py, `stitch bench
 * --vendor`): which python runs them and how they are started. (A verify's live reference,
 * scripts/kb_reference.py, is started by src/verify/live_ref.c.) */
#ifndef ST_KB_HELPER_H
#define ST_KB_HELPER_H

#include <stddef.h>

/* Run the helper with `args` (NULL-terminated) after its path. Its stderr is ours, so its
 * progress reaches the user as it happens; its stdout too, or ours goes to stderr with
 * `quiet_stdout` (a --json caller keeps stdout for the verdict). Returns ST_EXIT_OK,
 * ST_EXIT_USAGE (the helper refused the program) or ST_EXIT_ENV (no python, torch or helper),
 * having said why. */
int st_kb_helper_run(const char *const *args, int quiet_stdout);

/* The same for any helper in <STITCH_HOME>/scripts/: `script` is its file name, `what` names it
 * in messages ("the vendor baselines helper"). */
int st_py_helper_run(const char *script, const char *what, const char *const *args,
                     int quiet_stdout);

/* Where the helper's python (STITCH_PYTHON, else python3, found on PATH) and the helper itself
 * (<STITCH_HOME>/scripts/<script>) are: ST_EXIT_OK, or ST_EXIT_ENV having said which is
 * missing. For callers that start the helper themselves (the folder import runs several). */
int st_py_helper_paths(const char *script, const char *what, char *py, size_t py_len,
                       char *helper, size_t helper_len);

#endif
