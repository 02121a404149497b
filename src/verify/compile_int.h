/* What the files of the compile step share (compile.c: st_compile, the compiler run and the
 * diagnostics of a result; compile_job.c: the compiler, its command line and the cache key;
 * compile_cache.c: the cache's entries, folder mode and per-key lock). Internal to src/verify:
 * the public interface is compile.h. */
#ifndef ST_COMPILE_INT_H
#define ST_COMPILE_INT_H

#include "verify/compile.h"

#include <limits.h>
#include <stddef.h>

/* Bump when the key's inputs or the cached json change meaning. */
#define ST_COMPILE_FORMAT "stitch-compile-v1"

#define ST_MAX_ARGS 64

typedef struct st_args {
	char *v[ST_MAX_ARGS + 1];
	int n;
	int oom;
} st_args;

/* Everything up to the compiler run; split out so st_compile can free in one place. */
typedef struct st_job {
	char src[PATH_MAX];
	char include_dir[PATH_MAX];
	char dir[PATH_MAX];
	char compiler[PATH_MAX];
	char json_path[PATH_MAX];
	char tmp_so[PATH_MAX];
	char *source;
	size_t source_len;
	int cuda;
	st_args args;
	int out_idx; /* argv index of the output path, left out of the key */
	int src_idx; /* argv index of the source: the key has its bytes, not where it lives */
	char src_copy[PATH_MAX];
} st_job;

/* compile_job.c */
st_status st_job_prepare(st_job *j, const char *src_path, const st_compile_opts *o,
                         st_compile_result *r, st_err *err);
void st_args_free(st_args *a);

/* compile_cache.c (each function's comment there says why it is so) */
st_status st_dir_mode(const char *dir, st_err *err);
/* 1 on a usable entry (r filled), 0 on a miss. */
int st_cache_load(const char *json_path, const char *so_path, st_compile_result *r,
                  int *exit_code);
st_status st_cache_store(const char *json_path, const st_compile_result *r, int exit_code,
                         char *const argv[], int out_idx, const char *so_path,
                         st_err *err);
/* The lock of a key's compile: the locked descriptor to close, or -1 (then compile anyway). */
int st_key_lock(const char *dir, const char *key);

#endif
