/* The KernelBench import's PyTorch helper (scripts/kb_import.py), run for `stitch import
 * kernelbench` and for `stitch verify --fresh-seeds`, and the vendor baselines' helper
 * (scripts/vendor_baselines.py, `stitch bench --vendor`): which python runs them, how they are
 * started, and the fresh-seed copy of an imported task. */
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

/* A copy of the imported KernelBench task in task_dir whose correctness and check seeds are
 * drawn now, by the helper, under a secret seed: the program is rebuilt from the task's
 * model.py, its params must come out byte for byte as stored (else the program changed), and the
 * stored baselines are carried over. The copy is tmp_root/<tier folder>/<name> (tmp_root made
 * here; the caller removes it with st_rm_tree). Returns an ST_EXIT_* code, having said why. */
int st_kb_fresh_task(const char *task_dir, int seeds, char *tmp_root, size_t root_len,
                     char *out, size_t out_len);

#endif
