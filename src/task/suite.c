/* Suites by name (suite.h): a comma list of names turned into task folders. The names are few
 * and fixed (suite, kb1..kb3) so a typo is refused with the valid ones rather than read as a
 * folder that does not exist; a folder is recognised by being one. A folder may be a task root
 * (<tier folder>/<task>), a tier folder (<task>/task.json, as an import's kb/level1 is) or one
 * task, so a user can point at whatever they have. */
#include "suite.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "task.h"

static int has_task_json(const char *dir)
{
	char json[PATH_MAX + 16];
	struct stat st;
	int k = snprintf(json, sizeof json, "%s/task.json", dir);
	return k > 0 && (size_t)k < sizeof json && !stat(json, &st) && S_ISREG(st.st_mode);
}

/* The id st_task_load gives the task in `dir`: its parent folder's name and its own. */
static char *id_of(const char *dir)
{
	const char *name = strrchr(dir, '/');
	if (!name || name == dir)
		return strdup(name ? name + 1 : dir);
	const char *p = name - 1;
	while (p > dir && *p != '/')
		p--;
	return strdup(*p == '/' ? p + 1 : p);
}

/* Add one task folder (absolute): a folder already there is skipped, another folder with the
 * same id is an error (every report and result keys a task by its id). */
static st_status add(st_suite *s, const char *dir, st_err *err)
{
	char *id = id_of(dir);
	if (!id)
		return st_err_set(err, ST_E_NOMEM, "out of memory choosing tasks");
	for (int i = 0; i < s->n; i++) {
		if (strcmp(s->v[i].id, id))
			continue;
		int same = !strcmp(s->v[i].dir, dir);
		st_status r = same ? ST_OK
		                   : st_err_set(err, ST_E_INVALID, "two tasks with the id '%s': %s and "
		                                "%s (choose suites whose task ids differ)", id,
		                                s->v[i].dir, dir);
		free(id);
		return r;
	}
	st_suite_task *v = realloc(s->v, (size_t)(s->n + 1) * sizeof *v);
	char *d = strdup(dir);
	if (!v || !d) {
		free(id);
		free(d);
		if (v)
			s->v = v;
		return st_err_set(err, ST_E_NOMEM, "out of memory choosing tasks");
	}
	s->v = v;
	s->v[s->n++] = (st_suite_task){.dir = d, .id = id};
	return ST_OK;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every <dir>/<task>/task.json, sorted by name; *found says how many. A missing folder has
 * none. */
static st_status add_tier_folder(st_suite *s, const char *dir, int *found, st_err *err)
{
	*found = 0;
	char real[PATH_MAX];
	DIR *d = realpath(dir, real) ? opendir(real) : NULL;
	if (!d)
		return ST_OK;
	char **names = NULL;
	int n = 0;
	st_status r = ST_OK;
	struct dirent *de;
	while (!r && (de = readdir(d))) {
		char sub[PATH_MAX + 256];
		snprintf(sub, sizeof sub, "%s/%s", real, de->d_name);
		if (de->d_name[0] == '.' || !has_task_json(sub))
			continue;
		char **grown = realloc(names, (size_t)(n + 1) * sizeof *grown);
		if (grown)
			names = grown;
		if (!grown || !(names[n] = strdup(sub)))
			r = st_err_set(err, ST_E_NOMEM, "out of memory choosing tasks");
		else
			n++;
	}
	closedir(d);
	if (n > 1)
		qsort(names, (size_t)n, sizeof *names, by_name);
	for (int i = 0; i < n; i++) {
		if (!r)
			r = add(s, names[i], err);
		free(names[i]);
	}
	free(names);
	*found = r ? 0 : n;
	return r;
}

/* A task root's tasks (st_task_list); *found says how many. */
static st_status add_root(st_suite *s, const char *root, int *found, st_err *err)
{
	char **dirs = NULL;
	int n = 0;
	*found = 0;
	st_status r = st_task_list(root, &dirs, &n, err);
	for (int i = 0; !r && i < n; i++)
		r = add(s, dirs[i], err);
	st_task_list_free(dirs, n);
	*found = r ? 0 : n;
	return r;
}

/* A folder the user named: one task, a task root or a tier folder, whichever it is. */
static st_status add_folder(st_suite *s, const char *path, st_err *err)
{
	char real[PATH_MAX];
	if (!realpath(path, real))
		return st_err_set(err, ST_E_INVALID, "suite '%s': %s", path, strerror(errno));
	if (has_task_json(real))
		return add(s, real, err);
	int found = 0;
	st_status r = add_root(s, real, &found, err);
	if (!r && !found)
		r = add_tier_folder(s, real, &found, err);
	if (!r && !found)
		r = st_err_set(err, ST_E_INVALID, "suite '%s': no tasks in %s (a task folder holds a "
		               "task.json; a task root holds <tier folder>/<task>)", path, real);
	return r;
}

/* One name of the list. */
static st_status add_name(st_suite *s, const char *name, const char *root, st_err *err)
{
	int found = 0;
	st_status r;
	struct stat st;
	if (!strcmp(name, "suite")) {
		r = add_root(s, root, &found, err);
		if (!r && !found)
			r = st_err_set(err, ST_E_INVALID, "suite 'suite': no tasks in %s", root);
		return r;
	}
	if (!strncmp(name, "kb", 2) && name[2] >= '1' && name[2] <= '3' && !name[3]) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s/kb/level%c", root, name[2]);
		r = add_tier_folder(s, dir, &found, err);
		if (!r && !found)
			r = st_err_set(err, ST_E_INVALID, "suite '%s': no imported tasks in %s (`stitch "
			               "import kernelbench DIR` imports a KernelBench level there)", name,
			               dir);
		return r;
	}
	if (!stat(name, &st) && S_ISDIR(st.st_mode))
		return add_folder(s, name, err);
	return st_err_set(err, ST_E_INVALID, "unknown suite '%s' (suites: %s)", name,
	                  ST_SUITE_NAMES);
}

st_status st_suite_select(const char *names, const char *root, st_suite *s, st_err *err)
{
	s->v = NULL;
	s->n = 0;
	char *copy = strdup(names && *names ? names : "suite"), *save = NULL;
	if (!copy)
		return st_err_set(err, ST_E_NOMEM, "out of memory choosing tasks");
	st_status r = ST_OK;
	int any = 0;
	for (char *n = strtok_r(copy, ",", &save); n && !r; n = strtok_r(NULL, ",", &save), any++)
		r = add_name(s, n, root, err);
	free(copy);
	if (!r && !any)
		r = st_err_set(err, ST_E_INVALID, "no suite named (suites: %s)", ST_SUITE_NAMES);
	if (r)
		st_suite_free(s);
	return r;
}

void st_suite_free(st_suite *s)
{
	for (int i = 0; s->v && i < s->n; i++) {
		free(s->v[i].dir);
		free(s->v[i].id);
	}
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

const char *st_suite_find(const st_suite *s, const char *id)
{
	for (int i = 0; s && i < s->n; i++)
		if (!strcmp(s->v[i].id, id))
			return s->v[i].dir;
	return NULL;
}

int st_suite_is_default(const char *names)
{
	return !names || !*names || !strcmp(names, "suite");
}

st_status st_suite_resolve(const st_suite *s, const char *id, const char *root, char *out,
                           size_t len, st_err *err)
{
	if (!s)
		return st_task_resolve(id, root, out, len, err);
	const char *dir = st_suite_find(s, id);
	if (!dir)
		return st_err_set(err, ST_E_INVALID, "no task '%s' in the suites served", id);
	if (strlen(dir) >= len)
		return st_err_set(err, ST_E_INVALID, "%s: path too long", dir);
	memcpy(out, dir, strlen(dir) + 1);
	return ST_OK;
}

st_status st_suite_dirs(const st_suite *s, const char *root, char ***dirs, int *n, st_err *err)
{
	if (!s)
		return st_task_list(root, dirs, n, err);
	*dirs = calloc((size_t)s->n + 1, sizeof **dirs);
	*n = 0;
	if (!*dirs)
		return st_err_set(err, ST_E_NOMEM, "out of memory listing tasks");
	for (int i = 0; i < s->n; i++) {
		if (!((*dirs)[i] = strdup(s->v[i].dir))) {
			st_task_list_free(*dirs, i);
			*dirs = NULL;
			return st_err_set(err, ST_E_NOMEM, "out of memory listing tasks");
		}
	}
	*n = s->n;
	return ST_OK;
}
