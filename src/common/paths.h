/* Where stitch finds its own files at run time: the folder that holds include/stitch/ and
 * tasks/. A build tree moved to another machine (or an install) must still find them. */
#ifndef ST_PATHS_H
#define ST_PATHS_H

/* $STITCH_HOME, else the parent of the folder holding this executable when it has
 * include/stitch/solution.h (a build folder inside the source tree), else the configured
 * source folder. */
const char *st_home(void);

#endif
