/* Locating the source tree at run time, so a build folder that travels with its tree works. */
#include "paths.h"

#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"

/* Worked out once under pthread_once: snprintf clears its target's first byte before it
 * writes, so a second thread filling the same buffer made a reader see "" for a moment. */
static char g_home[PATH_MAX];
static pthread_once_t g_home_once = PTHREAD_ONCE_INIT;

static void home_find(void)
{
	const char *env = getenv("STITCH_HOME");
	if (env && *env) {
		snprintf(g_home, sizeof g_home, "%s", env);
		return;
	}
	char exe[PATH_MAX], probe[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = 0;
		char *dir = dirname(exe);
		char *parent = dirname(dir);
		snprintf(probe, sizeof probe, "%s/include/stitch/solution.h", parent);
		if (access(probe, R_OK) == 0) {
			snprintf(g_home, sizeof g_home, "%s", parent);
			return;
		}
	}
	snprintf(g_home, sizeof g_home, "%s", STITCH_SOURCE_DIR);
}

const char *st_home(void)
{
	pthread_once(&g_home_once, home_find);
	return g_home;
}

int st_python_helper(const char *script, char *py, size_t py_len, char *helper,
                     size_t helper_len, char *why, size_t why_len)
{
	const char *python = getenv("STITCH_PYTHON");
	const char *want = python && *python ? python : "python3";
	if (!st_which(want, py, py_len)) {
		snprintf(why, why_len, "no %s here (it needs python3 with torch; set STITCH_PYTHON to "
		         "one)", want);
		return -1;
	}
	snprintf(helper, helper_len, "%s/scripts/%s", st_home(), script);
	if (!st_file_exists(helper)) {
		snprintf(why, why_len, "%s is missing (STITCH_HOME?)", helper);
		return -1;
	}
	return 0;
}
