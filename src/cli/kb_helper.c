/* Running stitch's PyTorch helpers (the KernelBench import's, the vendor baselines') from a
 * command: which python, where the helper is, its exit status in the commands' terms. */
#include "kb_helper.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "common/paths.h"

int st_kb_helper_run(const char *const *args, int quiet_stdout)
{
	return st_py_helper_run("kb_import.py", "the KernelBench helper", args, quiet_stdout);
}

int st_py_helper_paths(const char *script, const char *what, char *py, size_t py_len,
                       char *helper, size_t helper_len)
{
	char why[PATH_MAX + 128];
	if (st_python_helper(script, py, py_len, helper, helper_len, why, sizeof why)) {
		st_cli_error("%s: %s", what, why);
		return ST_EXIT_ENV;
	}
	return ST_EXIT_OK;
}

int st_py_helper_run(const char *script, const char *what, const char *const *args,
                     int quiet_stdout)
{
	char py[PATH_MAX], helper[PATH_MAX];
	int prc = st_py_helper_paths(script, what, py, sizeof py, helper, sizeof helper);
	if (prc)
		return prc;
	const char *argv[40];
	int n = 0;
	argv[n++] = py;
	argv[n++] = helper;
	for (int i = 0; args[i] && n < 39; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		st_cli_error("fork: %s", strerror(errno));
		return ST_EXIT_ENV;
	}
	if (pid == 0) {
		if (quiet_stdout)
			dup2(STDERR_FILENO, STDOUT_FILENO);
		execv(py, (char *const *)argv);
		fprintf(stderr, "stitch: cannot run %s: %s\n", py, strerror(errno));
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			st_cli_error("waitpid: %s", strerror(errno));
			return ST_EXIT_ENV;
		}
	if (WIFSIGNALED(status)) {
		st_cli_error("%s was killed by signal %d", what, WTERMSIG(status));
		return ST_EXIT_ENV;
	}
	int rc = WEXITSTATUS(status);
	if (rc == ST_EXIT_OK || rc == ST_EXIT_USAGE || rc == ST_EXIT_ENV)
		return rc;
	if (rc != 127)
		st_cli_error("%s failed (exit %d)", what, rc);
	return ST_EXIT_ENV;
}
