/* The compile step of the verifier: one solution file to one shared object, through a
 * content-addressed cache. Agents resubmit the same candidate often (retries, re-verification,
 * benchmark reruns), and nvcc takes seconds, so the key covers everything that decides the
 * output (source, full command line, compiler identity, the ABI header) and failures are cached
 * as well. The parent only compiles; it never loads what it built (DESIGN.md §5), so all that is
 * trusted here is that the compiler runs in its own process group under a timeout. */
#include "common/paths.h"
#include "verify/compile.h"

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

/* Bump when the key's inputs or the cached json change meaning. */
#define ST_COMPILE_FORMAT "stitch-compile-v1"
#define ST_COMPILE_LOG_MAX ((size_t)4 << 20)
#define ST_COMPILE_TIMEOUT_DEFAULT 120.0
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

/* ---- small helpers ------------------------------------------------------------------------- */

/* jansson only stores valid UTF-8, and a cached log must read back byte for byte as the fresh
 * one did (diagnostics are re-parsed from it), so invalid bytes and NULs become '?' up front. */
static char *st_utf8_clean(const char *in, size_t n)
{
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t len = 0;
		unsigned cp = 0, min = 0;
		if (c == 0) {
			out[i++] = '?';
			continue;
		}
		if (c < 0x80) {
			out[i] = (char)c;
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			len = 2;
			cp = c & 0x1F;
			min = 0x80;
		} else if ((c & 0xF0) == 0xE0) {
			len = 3;
			cp = c & 0x0F;
			min = 0x800;
		} else if ((c & 0xF8) == 0xF0) {
			len = 4;
			cp = c & 0x07;
			min = 0x10000;
		}
		int ok = len > 0 && i + len <= n;
		for (size_t k = 1; ok && k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				ok = 0;
			else
				cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
			ok = 0;
		if (!ok) {
			out[i++] = '?';
			continue;
		}
		memcpy(out + i, s + i, len);
		i += len;
	}
	out[n] = '\0';
	return out;
}

static int st_diag_push(st_compile_result *r, const char *file, const char *sev, const char *msg)
{
	st_diag *nd = realloc(r->diags, (size_t)(r->n_diags + 1) * sizeof *nd);
	if (!nd)
		return -1;
	r->diags = nd;
	st_diag *d = &nd[r->n_diags];
	memset(d, 0, sizeof *d);
	d->file = strdup(file);
	d->severity = strdup(sev);
	d->message = strdup(msg);
	if (!d->file || !d->severity || !d->message) {
		free(d->file);
		free(d->severity);
		free(d->message);
		return -1;
	}
	r->n_diags++;
	return 0;
}

const st_diag *st_compile_first_error(const st_compile_result *r)
{
	for (int i = 0; r && i < r->n_diags; i++)
		if (!strcmp(r->diags[i].severity, "error"))
			return &r->diags[i];
	return NULL;
}

/* Diagnostics for r->log, the errors of a failed compile first (see st_diags_errors_first).
 * `why` (a timeout, a killed compiler) is always added; otherwise a
 * failed compile that printed no error we recognise gets one record saying so, so a
 * compile_error verdict never comes without a reason. */
static st_status st_fill_diags(st_compile_result *r, const char *src, int exit_code,
                               const char *why, st_err *err)
{
	if (st_diag_parse(r->log, &r->diags, &r->n_diags) != 0)
		return st_err_set(err, ST_E_NOMEM, "parsing compiler output: out of memory");
	if (r->ok)
		return ST_OK;
	st_diags_errors_first(r->diags, r->n_diags);
	char msg[160];
	if (why && *why) {
		snprintf(msg, sizeof msg, "%s", why);
	} else {
		for (int i = 0; i < r->n_diags; i++)
			if (strcmp(r->diags[i].severity, "error") == 0)
				return ST_OK;
		snprintf(msg, sizeof msg,
		         "compiler failed (exit status %d) without a recognised error message", exit_code);
	}
	if (st_diag_push(r, src, "error", msg) != 0)
		return st_err_set(err, ST_E_NOMEM, "compile diagnostics: out of memory");
	return ST_OK;
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

/* The cache is shared between users of a machine: folder 0755 when it is ours to set. */
static st_status st_dir_mode(const char *dir, st_err *err)
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
static int st_cache_load(const char *json_path, const char *so_path, st_compile_result *r,
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

static st_status st_cache_store(const char *json_path, const st_compile_result *r, int exit_code,
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

/* ---- st_compile ---------------------------------------------------------------------------- */

#define ST_MAX_ARGS 64

typedef struct st_args {
	char *v[ST_MAX_ARGS + 1];
	int n;
	int oom;
} st_args;

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

static void st_args_free(st_args *a)
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

void st_compile_result_free(st_compile_result *r)
{
	if (!r)
		return;
	free(r->log);
	st_diags_free(r->diags, r->n_diags);
	r->log = NULL;
	r->diags = NULL;
	r->n_diags = 0;
}

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

static st_status st_job_prepare(st_job *j, const char *src_path, const st_compile_opts *o,
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

/* A new string with every `from` in `text` replaced by `to`; NULL when out of memory. */
static char *st_replace_all(const char *text, const char *from, const char *to)
{
	size_t nf = strlen(from), nt = strlen(to), count = 0;
	for (const char *p = text; nf && (p = strstr(p, from)); p += nf)
		count++;
	char *out = malloc(strlen(text) + count * (nt > nf ? nt - nf : 0) + 1);
	if (!out)
		return NULL;
	char *w = out;
	for (const char *p = text;;) {
		const char *hit = nf ? strstr(p, from) : NULL;
		if (!hit) {
			strcpy(w, p);
			break;
		}
		memcpy(w, p, (size_t)(hit - p));
		w += hit - p;
		memcpy(w, to, nt);
		w += nt;
		p = hit + nf;
	}
	return out;
}

/* Runs the compiler and fills r; the exit status goes to *exit_code for the cache. *cacheable
 * is 0 for a timeout or a killed compiler (those say more about the machine than about the
 * source), and then `why` says what happened. */
static st_status st_job_run(st_job *j, double timeout_s, st_compile_result *r, int *exit_code,
                            int *cacheable, char *why, size_t why_len, st_err *err)
{
	st_proc_result pr;
	st_status s = st_write_file_atomic(j->src_copy, j->source, j->source_len, err);
	if (s != ST_OK)
		return st_err_wrap(err, s, "compile cache");
	s = st_proc_run(j->args.v, j->dir, timeout_s, ST_COMPILE_LOG_MAX, &pr, err);
	unlink(j->src_copy);
	if (s != ST_OK)
		return st_err_wrap(err, ST_E_SYSTEM, "compile");
	r->seconds = pr.wall_s;
	char *clean = st_utf8_clean(pr.out, pr.out_len);
	/* Diagnostics name the file the user gave, not the cache's copy. */
	r->log = clean ? st_replace_all(clean, j->src_copy, j->src) : NULL;
	free(clean);
	*exit_code = pr.exit_code;
	int timed_out = pr.timed_out, sig = pr.signal;
	st_proc_result_free(&pr);
	if (!r->log) {
		unlink(j->tmp_so);
		return st_err_set(err, ST_E_NOMEM, "compile: out of memory");
	}
	*cacheable = !timed_out && sig == 0;
	if (timed_out)
		snprintf(why, why_len, "compile timed out after %g s", timeout_s);
	else if (sig != 0)
		snprintf(why, why_len, "compiler killed by signal %d (%s)", sig, strsignal(sig));
	if (timed_out || sig != 0 || *exit_code != 0) {
		if (unlink(j->tmp_so) != 0 && errno != ENOENT)
			return st_err_set(err, ST_E_IO, "cannot remove '%s': %s", j->tmp_so,
			                  strerror(errno));
		r->ok = 0;
		r->timed_out = timed_out;
		return ST_OK;
	}
	if (!st_file_exists(j->tmp_so)) {
		r->ok = 0;
		*cacheable = 0;
		snprintf(why, why_len, "compiler reported success but wrote no output file");
		return ST_OK;
	}
	/* Readable by the other users of a shared cache; renamed last so no partial .so is seen. */
	if (chmod(j->tmp_so, 0644) != 0 || rename(j->tmp_so, r->so_path) != 0) {
		st_err_set(err, ST_E_IO, "cannot move '%s' to '%s': %s", j->tmp_so, r->so_path,
		           strerror(errno));
		unlink(j->tmp_so);
		return ST_E_IO;
	}
	r->ok = 1;
	return ST_OK;
}

/* One compile of a key at a time, across threads and processes sharing the cache: a service
 * given the same code by many clients at once (an RL group's identical samples) runs the
 * compiler once, and the others wait and find its entry. The lock is an flock on one of 4096
 * files under locks/, picked by the key's first three hex digits, so their number stays bounded;
 * two keys that share one only wait for each other. Best effort: without a lock file (a cache of
 * another user's, a full disk) each compile runs, which is correct, only slower. Returns the
 * locked descriptor to close, or -1. */
static int st_key_lock(const char *dir, const char *key)
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

st_status st_compile(const char *src_path, const st_compile_opts *o, st_compile_result *r,
                     st_err *err)
{
	memset(r, 0, sizeof *r);
	if (!src_path || !*src_path)
		return st_err_set(err, ST_E_INVALID, "no solution file given");
	st_job *j = calloc(1, sizeof *j);
	if (!j)
		return st_err_set(err, ST_E_NOMEM, "compile: out of memory");
	st_status s = st_job_prepare(j, src_path, o, r, err);
	int exit_code = 0, cacheable = 0;
	char why[160] = "";
	int use_cache = !(o && o->no_cache), lock = -1;
	if (s == ST_OK && use_cache && st_cache_load(j->json_path, r->so_path, r, &exit_code)) {
		r->cached = 1;
	} else if (s == ST_OK && use_cache && (lock = st_key_lock(j->dir, r->key)) >= 0 &&
	           st_cache_load(j->json_path, r->so_path, r, &exit_code)) {
		r->cached = 1; /* another compile of this key finished while this one waited */
	} else if (s == ST_OK) {
		double timeout = o && o->timeout_s > 0 ? o->timeout_s : ST_COMPILE_TIMEOUT_DEFAULT;
		s = st_job_run(j, timeout, r, &exit_code, &cacheable, why, sizeof why, err);
		if (s == ST_OK && cacheable)
			s = st_cache_store(j->json_path, r, exit_code, j->args.v, j->out_idx,
			                   r->so_path, err);
	}
	if (lock >= 0)
		close(lock); /* after the store: a waiter must find the entry complete */
	if (s == ST_OK)
		s = st_fill_diags(r, j->src, exit_code, why, err);
	if (!r->ok)
		r->so_path[0] = '\0';
	st_args_free(&j->args);
	free(j->source);
	free(j);
	if (s != ST_OK)
		st_compile_result_free(r);
	return s;
}
