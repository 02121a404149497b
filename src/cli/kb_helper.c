/* Running stitch's PyTorch helpers (the KernelBench import's, the vendor baselines'), and the fresh-seed copy of an imported task
 * that `stitch verify --fresh-seeds` judges instead of the stored seeds: the stored ones are on
 * disk for as long as the task exists, fresh ones exist only for one verify. */
#include "kb_helper.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "common/fs.h"
#include "common/paths.h"
#include "task/task.h"

int st_kb_helper_run(const char *const *args, int quiet_stdout)
{
	return st_py_helper_run("kb_import.py", "the KernelBench helper", args, quiet_stdout);
}

int st_py_helper_paths(const char *script, const char *what, char *py, size_t py_len,
                       char *helper, size_t helper_len)
{
	const char *python = getenv("STITCH_PYTHON");
	const char *want = python && *python ? python : "python3";
	if (!st_which(want, py, py_len)) {
		st_cli_error("no %s here: %s needs python3 with torch (set STITCH_PYTHON to one)", want,
		             what);
		return ST_EXIT_ENV;
	}
	snprintf(helper, helper_len, "%s/scripts/%s", st_home(), script);
	if (!st_file_exists(helper)) {
		st_cli_error("%s %s is missing (STITCH_HOME?)", what, helper);
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

static int same_file(const char *a, const char *b)
{
	char *da = NULL, *db = NULL;
	size_t la = 0, lb = 0;
	st_err e;
	int same = !st_read_file(a, &da, &la, &e) && !st_read_file(b, &db, &lb, &e) && la == lb &&
	           !memcmp(da, db, la);
	free(da);
	free(db);
	return same;
}

/* The stored baselines into the fresh copy's task.json. */
static int carry_baselines(const char *out, const json_t *baselines)
{
	if (!baselines)
		return 0;
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/task.json", out);
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	if (!root)
		return -1;
	json_object_set_new(root, "baselines", json_deep_copy(baselines));
	char *text = json_dumps(root, JSON_INDENT(1));
	json_decref(root);
	st_err e;
	int bad = !text || st_write_file_atomic(path, text, strlen(text), &e);
	free(text);
	return bad ? -1 : 0;
}

int st_kb_fresh_task(const char *task_dir, int seeds, char *tmp_root, size_t root_len,
                     char *out, size_t out_len)
{
	tmp_root[0] = out[0] = '\0';
	st_task t;
	st_err err;
	if (st_task_load(task_dir, &t, &err)) {
		st_cli_error("%s", err.msg);
		return ST_EXIT_USAGE;
	}
	const char *kind = json_string_value(json_object_get(t.source, "kind"));
	const char *file = json_string_value(json_object_get(t.source, "file"));
	int rc = ST_EXIT_USAGE;
	char model[PATH_MAX + 8], parent[PATH_MAX], level[16], nseeds[16], base[32], params[PATH_MAX + 64];
	if (!t.n_data_seeds || !kind || strcmp(kind, "kernelbench") || !file) {
		st_cli_error("--fresh-seeds: %s is not an imported KernelBench task (stitch import "
		             "kernelbench makes them)", t.id);
		goto done;
	}
	snprintf(model, sizeof model, "%s/%s", t.dir, file);
	if (!st_file_exists(model)) {
		st_cli_error("--fresh-seeds: %s: the program is missing", model);
		goto done;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(tmp_root, root_len, "%s/stitch-fresh.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tmp_root)) {
		st_cli_error("--fresh-seeds: mkdtemp %s: %s", tmp_root, strerror(errno));
		tmp_root[0] = '\0';
		rc = ST_EXIT_ENV;
		goto done;
	}
	/* The copy keeps the task's id: the same tier folder and name. */
	const char *slash = strrchr(t.id, '/');
	snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - t.id) : 0, t.id);
	snprintf(out, out_len, "%s/%s/%s", tmp_root, parent, t.name);
	uint64_t r = 0;
	while (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
		;
	snprintf(base, sizeof base, "%" PRIu64, r >> 1);
	snprintf(level, sizeof level, "%d", (int)json_integer_value(json_object_get(t.source, "level")));
	snprintf(nseeds, sizeof nseeds, "%d", seeds);
	const char *args[] = {model, "--out", out, "--name", t.name, "--level",
	                      strcmp(level, "0") ? level : "1", "--seeds", nseeds, "--seed-base",
	                      base, "--no-baselines", NULL};
	rc = st_kb_helper_run(args, 1);
	if (rc)
		goto done;
	snprintf(params, sizeof params, "%s/data/params.safetensors", out);
	if (!same_file(params, t.data_params)) {
		st_cli_error("--fresh-seeds: %s no longer builds the params stored with %s (the "
		             "program or torch changed); import it again", model, t.id);
		rc = ST_EXIT_USAGE;
		goto done;
	}
	if (carry_baselines(out, t.baselines)) {
		st_cli_error("--fresh-seeds: cannot carry the baselines into %s/task.json", out);
		rc = ST_EXIT_ENV;
	}
done:
	st_task_free(&t);
	return rc;
}
