/* Finding tasks: resolve what a user typed (a folder, or an id such as t1/softmax under the suite
 * root) and list the suite. The suite is exactly two levels deep, <tier folder>/<task folder>, so
 * the walk is two readdir loops rather than a recursive search that could wander into solution
 * build folders. Listings are sorted by id so every report orders tasks the same way. */
#include "task.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "common/grow.h"

typedef struct entry {
	char *id;   /* "t1/softmax": the sort key */
	char *path; /* absolute folder */
} entry;

typedef struct entry_list {
	entry *v;
	int n, cap;
} entry_list;

static int is_dir(const char *path)
{
	struct stat st;
	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
	struct stat st;
	return !stat(path, &st) && S_ISREG(st.st_mode);
}

st_status st_task_resolve(const char *arg, const char *root, char *out, size_t outlen,
                          st_err *err)
{
	char joined[PATH_MAX], real[PATH_MAX];
	const char *found = NULL;
	int k = snprintf(joined, sizeof joined, "%s/%s", root ? root : ".", arg);
	if (is_dir(arg))
		found = arg;
	else if (root && k > 0 && (size_t)k < sizeof joined && is_dir(joined))
		found = joined;
	if (!found)
		return st_err_set(err, ST_E_INVALID, "no task '%s' (looked in %s and %s)", arg, arg,
		                  joined);
	if (!realpath(found, real))
		return st_err_set(err, ST_E_IO, "%s: %s", found, strerror(errno));
	/* A folder is a task only with its task.json: "t1", "" (the suite root) or "../../etc"
	 * are the user's mistake, said here rather than as a failed read later. */
	char json[PATH_MAX + 16];
	snprintf(json, sizeof json, "%s/task.json", real);
	if (access(json, F_OK))
		return st_err_set(err, ST_E_INVALID, "not a task folder: %s (no task.json)", real);
	if (strlen(real) >= outlen)
		return st_err_set(err, ST_E_INVALID, "%s: path too long", real);
	memcpy(out, real, strlen(real) + 1);
	return ST_OK;
}

static void entries_free(entry_list *l)
{
	for (int i = 0; i < l->n; i++) {
		free(l->v[i].id);
		free(l->v[i].path);
	}
	free(l->v);
}

static st_status entries_add(entry_list *l, const char *root, const char *tier,
                             const char *name, st_err *err)
{
	if (ST_GROW(l->v, l->cap, l->n + 1, 32))
		return st_err_set(err, ST_E_NOMEM, "out of memory listing tasks");
	entry *e = &l->v[l->n];
	if (asprintf(&e->id, "%s/%s", tier, name) < 0)
		return st_err_set(err, ST_E_NOMEM, "out of memory listing tasks");
	if (asprintf(&e->path, "%s/%s/%s", root, tier, name) < 0) {
		free(e->id);
		return st_err_set(err, ST_E_NOMEM, "out of memory listing tasks");
	}
	l->n++;
	return ST_OK;
}

/* Add every <tier>/<name> folder holding a task.json. */
static st_status scan_tier(entry_list *l, const char *root, const char *tier, st_err *err)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof path, "%s/%s", root, tier);
	if (n < 0 || (size_t)n >= sizeof path)
		return ST_OK; /* too long to be a folder of ours */
	DIR *d = opendir(path);
	if (!d)
		return ST_OK; /* a plain file beside the tier folders */
	st_status s = ST_OK;
	struct dirent *de;
	while (!s && (de = readdir(d))) {
		char json[PATH_MAX];
		if (de->d_name[0] == '.')
			continue;
		int k = snprintf(json, sizeof json, "%s/%s/task.json", path, de->d_name);
		if (k > 0 && (size_t)k < sizeof json && is_file(json))
			s = entries_add(l, root, tier, de->d_name, err);
	}
	closedir(d);
	return s;
}

static int by_id(const void *a, const void *b)
{
	return strcmp(((const entry *)a)->id, ((const entry *)b)->id);
}

st_status st_task_list(const char *root, char ***dirs, int *n, st_err *err)
{
	char real[PATH_MAX];
	*dirs = NULL;
	*n = 0;
	if (!realpath(root, real))
		return st_err_set(err, ST_E_IO, "%s: cannot list tasks: %s", root, strerror(errno));
	DIR *d = opendir(real);
	if (!d)
		return st_err_set(err, ST_E_IO, "%s: cannot list tasks: %s", root, strerror(errno));
	entry_list l = {0};
	st_status s = ST_OK;
	struct dirent *de;
	while (!s && (de = readdir(d)))
		if (de->d_name[0] != '.')
			s = scan_tier(&l, real, de->d_name, err);
	closedir(d);
	char **out = NULL;
	if (!s && l.n > 0 && !(out = calloc((size_t)l.n, sizeof *out)))
		s = st_err_set(err, ST_E_NOMEM, "out of memory listing tasks");
	if (s) {
		entries_free(&l);
		return s;
	}
	qsort(l.v, (size_t)l.n, sizeof *l.v, by_id);
	for (int i = 0; i < l.n; i++) {
		out[i] = l.v[i].path; /* ownership moves to the caller */
		free(l.v[i].id);
	}
	free(l.v);
	*dirs = out;
	*n = l.n;
	return ST_OK;
}

void st_task_list_free(char **dirs, int n)
{
	for (int i = 0; dirs && i < n; i++)
		free(dirs[i]);
	free(dirs);
}
