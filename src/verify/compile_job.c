/* What a compile runs and under which key: the compiler (found once, its identity hashed once
 * per process), its command line for the solution's kind, and the content-addressed key over
 * everything that decides the output (source, full command line, compiler identity, the ABI
 * header), so that an unchanged candidate is never compiled twice. */
#include "common/paths.h"
#include "verify/compile_int.h"

#include "common/arch.h"
#include "common/fs.h"
#include "common/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define ST_VERSION_TIMEOUT 30.0
/* Binary-file check: a source file has no NUL bytes; object files and archives do early on. */
#define ST_BINARY_PROBE 65536

#ifndef STITCH_SOURCE_DIR
#define STITCH_SOURCE_DIR "."
#endif

/* ---- compiler lookup and identity ---------------------------------------------------------- */

static st_status st_find_compiler(int cuda, char *out, size_t len, st_err *err)
{
	const char *var = cuda ? "STITCH_NVCC" : "STITCH_CC";
	const char *env = getenv(var);
	if (env && *env) {
		if (st_which(env, out, len))
			return ST_OK;
		return st_err_set(err, ST_E_SYSTEM, "%s='%s' is not an executable program", var, env);
	}
	if (!cuda) {
		if (st_which("cc", out, len))
			return ST_OK;
		return st_err_set(err, ST_E_SYSTEM,
		                  "no C compiler: 'cc' is not on PATH (install one or set STITCH_CC)");
	}
	if (st_which("nvcc", out, len))
		return ST_OK;
	const char *home = getenv("CUDA_HOME");
	if (home && *home) {
		char cand[PATH_MAX];
		if ((size_t)snprintf(cand, sizeof cand, "%s/bin/nvcc", home) < sizeof cand &&
		    st_which(cand, out, len))
			return ST_OK;
	}
	if (st_which("/usr/local/cuda/bin/nvcc", out, len))
		return ST_OK;
	return st_err_set(err, ST_E_SYSTEM,
	                  "no CUDA compiler: 'nvcc' is not on PATH, in $CUDA_HOME/bin or in "
	                  "/usr/local/cuda/bin (install the CUDA toolkit or set STITCH_NVCC)");
}

/* `<compiler> --version` once per compiler path per process: it costs ~100 ms for nvcc, and a
 * compiler does not change under a running process often enough to matter. Fixed-size table so
 * nothing is left allocated at exit; past it we just run --version again. */
#define ST_ID_MEMO 16
static pthread_mutex_t st_id_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char path[PATH_MAX];
	char hash[65];
} st_id_memo[ST_ID_MEMO];
static int st_id_n;

static st_status st_compiler_identity_run(const char *path, char hash[65], st_err *err)
{
	char *argv[] = { (char *)path, "--version", NULL };
	st_proc_result pr;
	st_status s = st_proc_run(argv, NULL, ST_VERSION_TIMEOUT, 65536, &pr, err);
	if (s != ST_OK)
		return st_err_wrap(err, ST_E_SYSTEM, "compiler identity");
	if (pr.timed_out) {
		st_proc_result_free(&pr);
		return st_err_set(err, ST_E_SYSTEM, "'%s --version' did not finish within %.0f s", path,
		                  ST_VERSION_TIMEOUT);
	}
	st_sha256 h;
	if (st_sha256_init(&h) != ST_OK) {
		st_proc_result_free(&pr);
		return st_err_set(err, ST_E_NOMEM, "compiler identity: cannot start SHA-256");
	}
	char status[64];
	snprintf(status, sizeof status, "exit=%d signal=%d\n", pr.exit_code, pr.signal);
	st_sha256_update(&h, status, strlen(status));
	st_sha256_update(&h, pr.out, pr.out_len);
	st_sha256_final(&h, hash);
	st_proc_result_free(&pr);
	return ST_OK;
}

static st_status st_compiler_identity(const char *path, char hash[65], st_err *err)
{
	/* Held across the run, so concurrent first calls run --version once, not once each. */
	int rc = pthread_mutex_lock(&st_id_lock);
	if (rc != 0)
		return st_err_set(err, ST_E_SYSTEM, "compiler identity: mutex: %s", strerror(rc));
	for (int i = 0; i < st_id_n; i++)
		if (strcmp(st_id_memo[i].path, path) == 0) {
			memcpy(hash, st_id_memo[i].hash, 65);
			pthread_mutex_unlock(&st_id_lock);
			return ST_OK;
		}
	st_status s = st_compiler_identity_run(path, hash, err);
	if (s == ST_OK && st_id_n < ST_ID_MEMO && strlen(path) < PATH_MAX) {
		snprintf(st_id_memo[st_id_n].path, PATH_MAX, "%s", path);
		memcpy(st_id_memo[st_id_n].hash, hash, 65);
		st_id_n++;
	}
	pthread_mutex_unlock(&st_id_lock);
	return s;
}
static void st_key_field(st_sha256 *h, const char *tag, const void *data, size_t len)
{
	uint64_t n = len;
	st_sha256_update(h, tag, strlen(tag) + 1);
	st_sha256_update(h, &n, sizeof n);
	st_sha256_update(h, data, len);
}

static int st_valid_libname(const char *s)
{
	if (!s || !*s || *s == '-')
		return 0;
	for (; *s; s++)
		if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') || ('0' <= *s && *s <= '9') ||
		      *s == '_' || *s == '-' || *s == '.' || *s == '+'))
			return 0;
	return 1;
}

static void st_args_add(st_args *a, const char *fmt, const char *x)
{
	if (a->oom || a->n >= ST_MAX_ARGS) {
		a->oom = 1;
		return;
	}
	char *s;
	if (asprintf(&s, fmt, x) < 0) {
		a->oom = 1;
		return;
	}
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

void st_args_free(st_args *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->v[i]);
	a->n = 0;
}

static int st_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Job j's source: its kind from the name (.cu or .c), its real path and its bytes, refused when
 * they are binary. */
static st_status job_read_source(st_job *j, const char *src_path, st_err *err)
{
	if (st_ends_with(src_path, ".cu"))
		j->cuda = 1;
	else if (st_ends_with(src_path, ".c"))
		j->cuda = 0;
	else
		return st_err_set(err, ST_E_INVALID, "%s: not a C or CUDA source (expected .cu or .c)",
		                  src_path);
	if (!realpath(src_path, j->src))
		return st_err_set(err, ST_E_INVALID, "cannot read '%s': %s", src_path, strerror(errno));
	if (st_read_file(j->src, &j->source, &j->source_len, err) != ST_OK)
		return ST_E_INVALID; /* err already names the path and the reason */
	size_t probe = j->source_len < ST_BINARY_PROBE ? j->source_len : ST_BINARY_PROBE;
	const char *nul = memchr(j->source, '\0', probe);
	if (nul)
		return st_err_set(err, ST_E_INVALID,
		                  "%s: a binary file (NUL byte at offset %zu), not C or CUDA source",
		                  src_path, (size_t)(nul - j->source));
	return ST_OK;
}

/* The compiler's command line for job j (the output and source paths are placeholders until
 * the key is known). */
static void job_args(st_job *j, const char *arch, const st_compile_opts *o, int n_libs)
{
	/* The output path differs on every run (temp name); it is filled in after the key. */
	st_args *a = &j->args;
	st_args_add(a, "%s", j->compiler);
	if (j->cuda) {
		st_args_add(a, "%s", "-std=c++17");
		st_args_add(a, "%s", "-O3");
		st_args_add(a, "-arch=%s", arch);
		st_args_add(a, "%s", "-Xcompiler");
		st_args_add(a, "%s", "-fPIC");
		st_args_add(a, "%s", "-shared");
	} else {
		st_args_add(a, "%s", "-std=c11");
		st_args_add(a, "%s", "-O2");
		st_args_add(a, "%s", "-fPIC");
		st_args_add(a, "%s", "-shared");
		st_args_add(a, "%s", "-Wall");
	}
	st_args_add(a, "-I%s", j->include_dir);
	st_args_add(a, "%s", "-o");
	j->out_idx = a->n;
	st_args_add(a, "%s", "(output)");
	j->src_idx = a->n;
	st_args_add(a, "%s", j->src);
	if (!j->cuda)
		st_args_add(a, "%s", "-lm");
	for (int i = 0; i < n_libs; i++)
		st_args_add(a, "-l%s", o->libraries[i]);
}

/* Job j's cache key into r->key: the source, the command line but for its two paths, the
 * compiler's identity, the solution.h it compiles against and the environment that changes
 * what compilers do. */
static st_status job_key(st_job *j, st_compile_result *r, st_err *err)
{
	st_args *a = &j->args;
	char ident[65];
	st_status s = st_compiler_identity(j->compiler, ident, err);
	if (s != ST_OK)
		return s;

	st_sha256 h;
	if (st_sha256_init(&h) != ST_OK)
		return st_err_set(err, ST_E_NOMEM, "compile: cannot start SHA-256");
	st_key_field(&h, "format", ST_COMPILE_FORMAT, strlen(ST_COMPILE_FORMAT));
	st_key_field(&h, "source", j->source, j->source_len);
	for (int i = 0; i < a->n; i++)
		if (i != j->out_idx && i != j->src_idx)
			st_key_field(&h, "arg", a->v[i], strlen(a->v[i]));
	st_key_field(&h, "compiler", ident, strlen(ident));
	char hdr[PATH_MAX + 32];
	snprintf(hdr, sizeof hdr, "%s/stitch/solution.h", j->include_dir);
	char *hbytes = NULL;
	size_t hlen = 0;
	if (st_read_file(hdr, &hbytes, &hlen, NULL) == ST_OK) {
		st_key_field(&h, "solution.h", hbytes, hlen);
		free(hbytes);
	} else {
		st_key_field(&h, "solution.h-missing", "", 0);
	}
	/* These change what the compilers do without showing on the command line. */
	static const char *env_vars[] = { "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN",
	                                  "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
	                                  "LIBRARY_PATH" };
	for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++) {
		const char *v = getenv(env_vars[i]);
		if (v)
			st_key_field(&h, env_vars[i], v, strlen(v));
	}
	st_sha256_final(&h, r->key);
	if (strlen(r->key) != 64)
		return st_err_set(err, ST_E_SYSTEM, "compile: SHA-256 failed");
	return ST_OK;
}

st_status st_job_prepare(st_job *j, const char *src_path, const st_compile_opts *o,
                                st_compile_result *r, st_err *err)
{
	st_status s = job_read_source(j, src_path, err);
	if (s != ST_OK)
		return s;
	const char *arch = o ? o->arch : NULL;
	if (j->cuda && !arch)
		return st_err_set(err, ST_E_INVALID, "%s: no target architecture given (e.g. sm_90a)",
		                  src_path);
	if (j->cuda && st_arch_valid(arch) != 0)
		return st_err_set(err, ST_E_INVALID, "'%s' is not a GPU architecture (expected e.g. sm_90a)",
		                  arch);
	int n_libs = o && o->libraries ? o->n_libraries : 0;
	if (n_libs < 0 || n_libs > 32)
		return st_err_set(err, ST_E_INVALID, "%d libraries to link: expected 0 to 32", n_libs);
	for (int i = 0; i < n_libs; i++)
		if (!st_valid_libname(o->libraries[i]))
			return st_err_set(err, ST_E_INVALID, "'%s' is not a library name",
			                  o->libraries[i] ? o->libraries[i] : "(null)");

	char home_inc[PATH_MAX];
	snprintf(home_inc, sizeof home_inc, "%.4000s/include", st_home());
	const char *inc = o && o->include_dir ? o->include_dir : home_inc;
	if (!realpath(inc, j->include_dir))
		return st_err_set(err, ST_E_INVALID, "include folder '%s': %s", inc, strerror(errno));

	char cache[PATH_MAX];
	if (o && o->cache_dir) {
		if ((size_t)snprintf(cache, sizeof cache, "%s", o->cache_dir) >= sizeof cache)
			return st_err_set(err, ST_E_INVALID, "cache folder path too long");
	} else {
		s = st_cache_dir(cache, sizeof cache, err);
		if (s != ST_OK)
			return s;
	}
	if ((size_t)snprintf(j->dir, sizeof j->dir, "%s/compile", cache) >= sizeof j->dir)
		return st_err_set(err, ST_E_INVALID, "cache folder path too long");
	s = st_mkdirs(j->dir, err);
	if (s == ST_OK)
		s = st_dir_mode(j->dir, err);
	if (s != ST_OK)
		return st_err_wrap(err, s, "compile cache");

	s = st_find_compiler(j->cuda, j->compiler, sizeof j->compiler, err);
	if (s != ST_OK)
		return s;

	st_args *a = &j->args;
	job_args(j, arch, o, n_libs);
	if (a->oom)
		return st_err_set(err, ST_E_NOMEM, "compile: out of memory");

	s = job_key(j, r, err);
	if (s != ST_OK)
		return s;

	if ((size_t)snprintf(r->so_path, sizeof r->so_path, "%s/%s.so", j->dir, r->key) >=
	        sizeof r->so_path ||
	    (size_t)snprintf(j->json_path, sizeof j->json_path, "%s/%s.json", j->dir, r->key) >=
	        sizeof j->json_path)
		return st_err_set(err, ST_E_INVALID, "cache folder path too long");
	unsigned long long rnd = 0;
	if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
		static _Atomic unsigned long long counter;
		rnd = (unsigned long long)(uintptr_t)j ^ atomic_fetch_add(&counter, 1);
	}
	if ((size_t)snprintf(j->tmp_so, sizeof j->tmp_so, "%s/%s.tmp.%ld.%llx.so", j->dir, r->key,
	                     (long)getpid(), rnd) >= sizeof j->tmp_so)
		return st_err_set(err, ST_E_INVALID, "cache folder path too long");
	/* The compiler reads a copy in the cache folder: the same bytes from any folder share one
	 * cache entry, and a solution cannot pull in files beside it with a relative #include. The
	 * copy is this compile's own, like the .so: two compiles of one key at once (a service given
	 * the same code twice) each remove their copy when done, and with one shared name the first
	 * to finish took the file from under the other's nvcc. */
	if ((size_t)snprintf(j->src_copy, sizeof j->src_copy, "%s/%s.%ld.%llx.src%s", j->dir, r->key,
	                     (long)getpid(), rnd, j->cuda ? ".cu" : ".c") >= sizeof j->src_copy)
		return st_err_set(err, ST_E_INVALID, "cache folder path too long");
	free(a->v[j->src_idx]);
	a->v[j->src_idx] = strdup(j->src_copy);
	if (!a->v[j->src_idx]) {
		a->v[j->src_idx] = strdup("");
		return st_err_set(err, ST_E_NOMEM, "compile: out of memory");
	}
	free(a->v[j->out_idx]);
	a->v[j->out_idx] = strdup(j->tmp_so);
	if (!a->v[j->out_idx]) {
		/* keep the array walkable for st_args_free */
		for (int i = j->out_idx; i < a->n; i++)
			a->v[i] = a->v[i + 1];
		a->n--;
		return st_err_set(err, ST_E_NOMEM, "compile: out of memory");
	}
	return ST_OK;
}
