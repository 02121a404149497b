/* Where stitch finds its own files at run time: the folder that holds include/stitch/ and
 * tasks/. A build tree moved to another machine (or an install) must still find them. */
#ifndef ST_PATHS_H
#define ST_PATHS_H

#include <stddef.h>

/* $STITCH_HOME, else the parent of the folder holding this executable when it has
 * include/stitch/solution.h (a build folder inside the source tree), else the configured
 * source folder. */
const char *st_home(void);

/* A Python helper of stitch's: its python (STITCH_PYTHON, else python3, found on PATH) into
 * py[py_len] and the helper <STITCH_HOME>/scripts/<script> into helper[helper_len]. 0, or -1
 * with why[why_len] naming which is missing. */
int st_python_helper(const char *script, char *py, size_t py_len, char *helper,
                     size_t helper_len, char *why, size_t why_len);

#endif
