/* The compile cache's entries: a json record per key (the log, the exit status, the command
 * line) beside the shared object, the folder modes of a cache shared between users, and the
 * per-key lock that lets one compile of a key run while the others wait for its entry. Anything
 * unreadable in the cache is a miss, so a damaged cache only costs a recompile. */
#include "verify/compile_int.h"

#include "common/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

/* The cache is shared between users of a machine: folder 0755 when it is ours to set. */
st_status st_dir_mode(const char *dir, st_err *err)
{
	struct stat st;
	if (stat(dir, &st) != 0)
		return st_err_set(err, ST_E_IO, "cannot stat '%s': %s", dir, strerror(errno));
	if ((st.st_mode & 07777) == 0755 || st.st_uid != geteuid())
		return ST_OK;
	if (chmod(dir, 0755) != 0)
		return st_err_set(err, ST_E_IO, "cannot chmod '%s': %s", dir, strerror(errno));
	return ST_OK;
}

/* ---- the cache ----------------------------------------------------------------------------- */

/* 1 on a usable entry (r filled), 0 on a miss; anything unreadable or inconsistent is a miss, so
 * a damaged cache only costs a recompile. */
int st_cache_load(const char *json_path, const char *so_path, st_compile_result *r,
                         int *exit_code)
{
	if (!st_file_exists(json_path))
		return 0;
	json_error_t jerr;
	json_t *j = json_load_file(json_path, 0, &jerr);
	if (!j)
		return 0;
	json_t *ok = json_object_get(j, "ok"), *log = json_object_get(j, "log");
	json_t *fmt = json_object_get(j, "format"), *ec = json_object_get(j, "exit_code");
	int hit = json_is_boolean(ok) && json_is_string(log) && json_is_string(fmt) &&
	          strcmp(json_string_value(fmt), ST_COMPILE_FORMAT) == 0;
	if (hit && json_is_true(ok) && !st_file_exists(so_path))
		hit = 0;
	if (hit) {
		r->log = strdup(json_string_value(log));
		if (!r->log)
			hit = 0;
		r->ok = json_is_true(ok);
		*exit_code = json_is_integer(ec) ? (int)json_integer_value(ec) : 1;
	}
	json_decref(j);
	return hit;
}

st_status st_cache_store(const char *json_path, const st_compile_result *r, int exit_code,
                                char *const argv[], int out_idx, const char *so_path,
                                st_err *err)
{
	json_t *j = json_object(), *args = json_array();
	if (!j || !args) {
		json_decref(j);
		json_decref(args);
		return st_err_set(err, ST_E_NOMEM, "compile cache: out of memory");
	}
	/* The output argument names the temp file; the cache entry's own name is clearer. */
	for (int i = 0; argv[i]; i++)
		json_array_append_new(args, json_string(i == out_idx ? so_path : argv[i]));
	json_object_set_new(j, "format", json_string(ST_COMPILE_FORMAT));
	json_object_set_new(j, "ok", json_boolean(r->ok));
	json_object_set_new(j, "exit_code", json_integer(exit_code));
	json_object_set_new(j, "seconds", json_real(r->seconds));
	json_object_set_new(j, "argv", args);
	json_object_set_new(j, "log", json_string(r->log));
	char *text = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(j);
	if (!text)
		return st_err_set(err, ST_E_NOMEM, "compile cache: cannot encode '%s'", json_path);
	st_status s = st_write_file_atomic(json_path, text, strlen(text), err);
	free(text);
	if (s != ST_OK)
		return st_err_wrap(err, s, "compile cache");
	if (chmod(json_path, 0644) != 0)
		return st_err_set(err, ST_E_IO, "compile cache: cannot chmod '%s': %s", json_path,
		                  strerror(errno));
	return ST_OK;
}
/* One compile of a key at a time, across threads and processes sharing the cache: a service
 * given the same code by many clients at once (an RL group's identical samples) runs the
 * compiler once, and the others wait and find its entry. The lock is an flock on one of 4096
 * files under locks/, picked by the key's first three hex digits, so their number stays bounded;
 * two keys that share one only wait for each other. Best effort: without a lock file (a cache of
 * another user's, a full disk) each compile runs, which is correct, only slower. Returns the
 * locked descriptor to close, or -1. */
int st_key_lock(const char *dir, const char *key)
{
	char path[PATH_MAX];
	if ((size_t)snprintf(path, sizeof path, "%s/locks", dir) >= sizeof path)
		return -1;
	st_err ignore;
	if (st_mkdirs(path, &ignore) != ST_OK)
		return -1;
	if ((size_t)snprintf(path, sizeof path, "%s/locks/%.3s.lock", dir, key) >= sizeof path)
		return -1;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_EX) != 0)
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	return fd;
}
