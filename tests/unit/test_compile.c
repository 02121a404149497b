/* Unit tests for the compile step with a private cache folder: a C solution compiles to a loadable
 * shared object, the cache answers repeat calls (failures too) without running the compiler,
 * any byte of the source changes the key, compiles of one key at once run the compiler once
 * (and all succeed without the cache), bad inputs are refused, a hanging compiler times out,
 * and, where nvcc is installed, a CUDA solution compiles for sm_90a. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs.h"
#include "verify/compile.h"

typedef struct fixture {
	char dir[256];   /* sources */
	char cache[300]; /* opts.cache_dir */
	st_compile_opts opts;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof *f);
	if (!f)
		return -1;
	snprintf(f->dir, sizeof f->dir, "/tmp/st_test_compile.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
	f->opts.include_dir = STITCH_SOURCE_DIR "/include";
	f->opts.cache_dir = f->cache;
	f->opts.timeout_s = 60;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	st_rm_tree(f->dir);
	free(f);
	unsetenv("STITCH_CC");
	return 0;
}

static void write_src(const fixture *f, const char *name, const char *text, char *path,
                      size_t len)
{
	snprintf(path, len, "%s/%s", f->dir, name);
	st_err err;
	assert_int_equal(st_write_file_atomic(path, text, strlen(text), &err), ST_OK);
}

/* STITCH_CC becomes a script that answers --version (the identity probe) at once and runs
 * `body` for a real compile. */
static void use_fake_cc(const fixture *f, const char *body)
{
	char script[512], text[1400]; /* room for the longest body a test passes (1200) */
	snprintf(text, sizeof text,
	         "#!/bin/sh\nif [ \"$1\" = --version ]; then echo fakecc 1.0; exit 0; fi\n%s", body);
	write_src(f, "fakecc", text, script, sizeof script);
	assert_int_equal(chmod(script, 0755), 0);
	setenv("STITCH_CC", script, 1);
}

static const char *GOOD_C =
	"#include \"stitch/solution.h\"\n"
	"#include <math.h>\n"
	"int st_answer(void) { return 42; }\n"
	"double st_root(double x) { return sqrt(x); }\n";

static int mode_of(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	return (int)(st.st_mode & 07777);
}

/* Every entry of the compile folder must be <key>.so, <key>.json or the folder of the key
 * locks: no temp files. */
static void assert_no_temp_files(const char *cache)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/compile", cache);
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		size_t n = strlen(e->d_name);
		int ok = (n == 67 && strcmp(e->d_name + 64, ".so") == 0) ||
		         (n == 69 && strcmp(e->d_name + 64, ".json") == 0) ||
		         strcmp(e->d_name, "locks") == 0;
		if (!ok)
			fail_msg("unexpected file in the compile cache: %s", e->d_name);
	}
	closedir(d);
}

static void test_good_c_and_cache(void **state)
{
	fixture *f = *state;
	char src[512];
	write_src(f, "good.c", GOOD_C, src, sizeof src);

	st_compile_result r;
	st_err err = { "" };
	double t0 = st_now_s();
	assert_int_equal(st_compile(src, &f->opts, &r, &err), ST_OK);
	double t_fresh = st_now_s() - t0;
	if (!r.ok)
		fail_msg("compile failed: %s", r.log);
	assert_int_equal(r.cached, 0);
	assert_int_equal(r.timed_out, 0);
	assert_true(r.seconds > 0);
	assert_int_equal(strlen(r.key), 64);
	assert_non_null(r.log);
	assert_true(st_file_exists(r.so_path));
	assert_non_null(strstr(r.so_path, r.key));
	assert_int_equal(mode_of(r.so_path), 0644);
	char compile_dir[512];
	snprintf(compile_dir, sizeof compile_dir, "%s/compile", f->cache);
	assert_int_equal(mode_of(compile_dir), 0755);
	char json[600];
	snprintf(json, sizeof json, "%s/%s.json", compile_dir, r.key);
	assert_true(st_file_exists(json));
	assert_int_equal(mode_of(json), 0644);
	assert_no_temp_files(f->cache);

	void *h = dlopen(r.so_path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen: %s", dlerror());
	int (*answer)(void) = (int (*)(void))dlsym(h, "st_answer");
	double (*root)(double) = (double (*)(double))dlsym(h, "st_root");
	assert_non_null(answer);
	assert_non_null(root);
	assert_int_equal(answer(), 42);
	assert_true(root(9.0) == 3.0);
	dlclose(h);

	char key1[65], so1[4096];
	strcpy(key1, r.key);
	strcpy(so1, r.so_path);
	st_compile_result_free(&r);

	/* Same source: served from the cache, no compiler run. */
	t0 = st_now_s();
	assert_int_equal(st_compile(src, &f->opts, &r, &err), ST_OK);
	double t_cached = st_now_s() - t0;
	assert_int_equal(r.ok, 1);
	assert_int_equal(r.cached, 1);
	assert_true(r.seconds == 0);
	assert_string_equal(r.key, key1);
	assert_string_equal(r.so_path, so1);
	assert_non_null(r.log);
	assert_true(t_cached < t_fresh / 4);
	st_compile_result_free(&r);

	/* no_cache: the compiler runs again, same key, result stored again. */
	f->opts.no_cache = 1;
	assert_int_equal(st_compile(src, &f->opts, &r, &err), ST_OK);
	f->opts.no_cache = 0;
	assert_int_equal(r.ok, 1);
	assert_int_equal(r.cached, 0);
	assert_string_equal(r.key, key1);
	st_compile_result_free(&r);

	/* One byte more: a new key and a fresh compile. */
	char src2[512];
	char *text = malloc(strlen(GOOD_C) + 2);
	assert_non_null(text);
	strcpy(text, GOOD_C);
	strcat(text, " ");
	write_src(f, "good.c", text, src2, sizeof src2);
	free(text);
	assert_int_equal(st_compile(src2, &f->opts, &r, &err), ST_OK);
	assert_int_equal(r.ok, 1);
	assert_int_equal(r.cached, 0);
	assert_string_not_equal(r.key, key1);
	st_compile_result_free(&r);

	/* A different library list is a different command line, so a different key. */
	const char *libs[] = { "m" };
	f->opts.libraries = libs;
	f->opts.n_libraries = 1;
	assert_int_equal(st_compile(src2, &f->opts, &r, &err), ST_OK);
	f->opts.libraries = NULL;
	f->opts.n_libraries = 0;
	assert_int_equal(r.ok, 1);
	assert_int_equal(r.cached, 0);
	st_compile_result_free(&r);
	assert_no_temp_files(f->cache);
}

static void test_compile_error_cached(void **state)
{
	fixture *f = *state;
	char src[512];
	write_src(f, "bad.c",
	          "int f(void)\n"
	          "{\n"
	          "\treturn undefined_var + 1;\n"
	          "}\n",
	          src, sizeof src);
	st_compile_result r;
	st_err err = { "" };
	for (int round = 0; round < 2; round++) {
		assert_int_equal(st_compile(src, &f->opts, &r, &err), ST_OK);
		assert_int_equal(r.ok, 0);
		assert_int_equal(r.cached, round); /* the failure is cached too */
		assert_int_equal(r.timed_out, 0);
		assert_string_equal(r.so_path, "");
		assert_non_null(strstr(r.log, "undefined_var"));
		assert_true(r.n_diags >= 1);
		const st_diag *d = &r.diags[0];
		assert_non_null(strstr(d->file, "bad.c"));
		assert_int_equal(d->line, 3);
		assert_true(d->col > 0);
		assert_string_equal(d->severity, "error");
		assert_non_null(strstr(d->message, "undefined_var"));
		st_compile_result_free(&r);
	}
	assert_no_temp_files(f->cache);
}

/* The cache is keyed by the bytes, not the path: a candidate written to a fresh temp file for every
 * request (the RL service's case) is compiled once; and the diagnostics name the user's file. */
static void test_same_bytes_other_path(void **state)
{
	fixture *f = *state;
	char a[512], b[512];
	write_src(f, "first.c", GOOD_C, a, sizeof a);
	write_src(f, "second.c", GOOD_C, b, sizeof b);
	st_compile_result r1, r2;
	st_err err = { "" };
	assert_int_equal(st_compile(a, &f->opts, &r1, &err), ST_OK);
	assert_int_equal(st_compile(b, &f->opts, &r2, &err), ST_OK);
	assert_int_equal(r1.cached, 0);
	assert_int_equal(r2.cached, 1);
	assert_string_equal(r1.key, r2.key);
	st_compile_result_free(&r1);
	st_compile_result_free(&r2);

	char bad[512];
	write_src(f, "wrong.c", "int f(void) { return nope; }\n", bad, sizeof bad);
	assert_int_equal(st_compile(bad, &f->opts, &r1, &err), ST_OK);
	assert_int_equal(r1.ok, 0);
	assert_true(r1.n_diags >= 1);
	assert_non_null(strstr(r1.diags[0].file, "wrong.c"));
	assert_null(strstr(r1.log, ".src.c"));
	st_compile_result_free(&r1);
	assert_no_temp_files(f->cache);
}

/* Several compiles of one source at once (a service given the same code by many clients). nvcc
 * opens the source in several passes over seconds; the compiler here counts its runs in a file
 * and reads its input 0.3 s after it starts, and the compiles start 0.1 s apart.
 * - With the cache, the compiler runs once: the others wait for its entry and find it.
 * - Without (no_cache), every one runs and must succeed: with one copy of the source per key,
 *   the first to finish removed it from under the rest, and the failure was cached. */
#define SAME_KEY_COMPILES 4
typedef struct same_key {
	const char *src;
	const st_compile_opts *opts;
	int delay_ms;
	st_compile_result r;
	st_status st;
	st_err err;
} same_key;

static void *compile_thread(void *arg)
{
	same_key *k = arg;
	usleep((useconds_t)k->delay_ms * 1000);
	k->st = st_compile(k->src, k->opts, &k->r, &k->err);
	return NULL;
}

/* Runs the compiles, checks every one succeeded; returns how many came from the cache. */
static int compile_same_key(const char *src, const st_compile_opts *opts)
{
	same_key k[SAME_KEY_COMPILES];
	pthread_t t[SAME_KEY_COMPILES];
	for (int i = 0; i < SAME_KEY_COMPILES; i++) {
		k[i] = (same_key){.src = src, .opts = opts, .delay_ms = 100 * i};
		assert_int_equal(pthread_create(&t[i], NULL, compile_thread, &k[i]), 0);
	}
	int failed = 0, cached = 0;
	for (int i = 0; i < SAME_KEY_COMPILES; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		if (k[i].st != ST_OK || !k[i].r.ok) {
			print_error("compile %d: status %d, ok %d: %s %s\n", i, (int)k[i].st, k[i].r.ok,
			            k[i].err.msg, k[i].r.log ? k[i].r.log : "");
			failed++;
		}
		cached += k[i].r.cached;
		st_compile_result_free(&k[i].r);
	}
	assert_int_equal(failed, 0);
	return cached;
}

static int lines_of(const char *path)
{
	FILE *f = fopen(path, "r");
	int n = 0;
	for (int c; f && (c = fgetc(f)) != EOF;)
		n += c == '\n';
	if (f)
		fclose(f);
	return n;
}

static void test_same_key_at_once(void **state)
{
	fixture *f = *state;
	char src[512], runs[512], body[1200];
	snprintf(runs, sizeof runs, "%s/runs", f->dir);
	snprintf(body, sizeof body, "echo run >>%s\nsleep 0.3\nexec cc \"$@\"\n", runs);
	use_fake_cc(f, body);
	write_src(f, "same.c", GOOD_C, src, sizeof src);

	assert_int_equal(compile_same_key(src, &f->opts), SAME_KEY_COMPILES - 1);
	assert_int_equal(lines_of(runs), 1);
	assert_no_temp_files(f->cache);

	f->opts.no_cache = 1;
	assert_int_equal(compile_same_key(src, &f->opts), 0);
	assert_int_equal(lines_of(runs), 1 + SAME_KEY_COMPILES);
	assert_no_temp_files(f->cache);
	unsetenv("STITCH_CC");
}

static void test_invalid_inputs(void **state)
{
	fixture *f = *state;
	char path[512];
	st_compile_result r;
	st_err err = { "" };

	write_src(f, "notes.txt", "int x;\n", path, sizeof path);
	assert_int_equal(st_compile(path, &f->opts, &r, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "notes.txt: not a C or CUDA source (expected .cu or .c)"));
	assert_null(r.log);
	assert_null(r.diags);

	snprintf(path, sizeof path, "%s/missing.c", f->dir);
	assert_int_equal(st_compile(path, &f->opts, &r, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "missing.c"));
	assert_non_null(strstr(err.msg, "No such file or directory"));

	snprintf(path, sizeof path, "%s/bin.c", f->dir);
	st_err e2;
	assert_int_equal(st_write_file_atomic(path, "int x;\0\x7f" "ELF", 10, &e2), ST_OK);
	assert_int_equal(st_compile(path, &f->opts, &r, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "bin.c"));
	assert_non_null(strstr(err.msg, "binary"));

	/* a CUDA file needs a valid architecture */
	write_src(f, "k.cu", "__global__ void k() {}\n", path, sizeof path);
	f->opts.arch = "sm_90 -o /etc/x";
	assert_int_equal(st_compile(path, &f->opts, &r, &err), ST_E_INVALID);
	f->opts.arch = NULL;
	assert_int_equal(st_compile(path, &f->opts, &r, &err), ST_E_INVALID);

	/* a library name that would be an option */
	const char *libs[] = { "-fplugin=x" };
	f->opts.libraries = libs;
	f->opts.n_libraries = 1;
	write_src(f, "ok.c", GOOD_C, path, sizeof path);
	assert_int_equal(st_compile(path, &f->opts, &r, &err), ST_E_INVALID);
	f->opts.libraries = NULL;
	f->opts.n_libraries = 0;
}

static void test_missing_compiler(void **state)
{
	fixture *f = *state;
	char path[512];
	write_src(f, "ok.c", GOOD_C, path, sizeof path);
	setenv("STITCH_CC", "/no/such/compiler-cc", 1);
	st_compile_result r;
	st_err err = { "" };
	assert_int_equal(st_compile(path, &f->opts, &r, &err), ST_E_SYSTEM);
	assert_non_null(strstr(err.msg, "STITCH_CC"));
	assert_non_null(strstr(err.msg, "/no/such/compiler-cc"));
	unsetenv("STITCH_CC");
}

static void test_timeout(void **state)
{
	fixture *f = *state;
	char src[512];
	use_fake_cc(f, "sleep 30\n"); /* hangs on a real compile */
	write_src(f, "ok.c", GOOD_C, src, sizeof src);
	f->opts.timeout_s = 1;

	st_compile_result r;
	st_err err = { "" };
	double t0 = st_now_s();
	assert_int_equal(st_compile(src, &f->opts, &r, &err), ST_OK);
	double dt = st_now_s() - t0;
	assert_true(dt < 4);
	assert_int_equal(r.ok, 0);
	assert_int_equal(r.timed_out, 1);
	assert_int_equal(r.cached, 0);
	int found = 0;
	for (int i = 0; i < r.n_diags; i++)
		if (strcmp(r.diags[i].message, "compile timed out after 1 s") == 0 &&
		    strcmp(r.diags[i].severity, "error") == 0)
			found = 1;
	assert_true(found);
	char json[600];
	snprintf(json, sizeof json, "%s/compile/%s.json", f->cache, r.key);
	assert_false(st_file_exists(json)); /* a timeout is not cached */
	st_compile_result_free(&r);
	assert_no_temp_files(f->cache);
	unsetenv("STITCH_CC");
}

static void test_default_cache_dir(void **state)
{
	fixture *f = *state;
	char src[512], env_cache[512], compile_dir[600];
	write_src(f, "ok.c", GOOD_C, src, sizeof src);
	snprintf(env_cache, sizeof env_cache, "%s/envcache", f->dir);
	char *saved = getenv("STITCH_CACHE_DIR") ? strdup(getenv("STITCH_CACHE_DIR")) : NULL;
	setenv("STITCH_CACHE_DIR", env_cache, 1);
	f->opts.cache_dir = NULL;
	st_compile_result r;
	st_err err = { "" };
	assert_int_equal(st_compile(src, &f->opts, &r, &err), ST_OK);
	assert_int_equal(r.ok, 1);
	snprintf(compile_dir, sizeof compile_dir, "%s/compile/", env_cache);
	assert_true(strncmp(r.so_path, compile_dir, strlen(compile_dir)) == 0);
	st_compile_result_free(&r);
	if (saved)
		setenv("STITCH_CACHE_DIR", saved, 1);
	else
		unsetenv("STITCH_CACHE_DIR");
	free(saved);
}

static int find_nvcc(void)
{
	char *argv0 = getenv("STITCH_NVCC");
	if (argv0 && *argv0)
		return 1;
	if (system("command -v nvcc >/dev/null 2>&1") == 0)
		return 1;
	const char *home = getenv("CUDA_HOME");
	char p[512];
	if (home) {
		snprintf(p, sizeof p, "%s/bin/nvcc", home);
		if (access(p, X_OK) == 0)
			return 1;
	}
	return access("/usr/local/cuda/bin/nvcc", X_OK) == 0;
}

static void test_cuda(void **state)
{
	fixture *f = *state;
	if (!find_nvcc()) {
		print_message("[  SKIP    ] nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)\n");
		skip();
	}
	char src[512];
	write_src(f, "k.cu",
	          "#include \"stitch/solution.h\"\n"
	          "__global__ void add1(float *x, int n)\n"
	          "{\n"
	          "\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	          "\tif (i < n) x[i] += 1.0f;\n"
	          "}\n"
	          "extern \"C\" int st_init(const st_config *c, const st_tensor *p, int32_t np,\n"
	          "                        cudaStream_t s, void **ctx) { *ctx = 0; return 0; }\n"
	          "extern \"C\" int st_run(void *ctx, const st_tensor *in, int32_t ni, st_tensor *out,\n"
	          "                       int32_t no, cudaStream_t s)\n"
	          "{\n"
	          "\tint n = (int)out[0].shape[0];\n"
	          "\tadd1<<<(n + 255) / 256, 256, 0, s>>>((float *)out[0].data, n);\n"
	          "\treturn 0;\n"
	          "}\n"
	          "extern \"C\" void st_free(void *ctx) {}\n",
	          src, sizeof src);
	f->opts.arch = "sm_90a";
	f->opts.timeout_s = 300;
	st_compile_result r;
	st_err err = { "" };
	assert_int_equal(st_compile(src, &f->opts, &r, &err), ST_OK);
	if (!r.ok)
		fail_msg("nvcc failed: %s", r.log);
	assert_int_equal(r.cached, 0);
	/* An ELF shared object (not loaded: the parent never loads solution code). */
	char *data;
	size_t len;
	assert_int_equal(st_read_file(r.so_path, &data, &len, &err), ST_OK);
	assert_true(len > 4 && memcmp(data, "\x7f" "ELF", 4) == 0);
	free(data);
	st_compile_result_free(&r);
	assert_int_equal(st_compile(src, &f->opts, &r, &err), ST_OK);
	assert_int_equal(r.cached, 1);
	st_compile_result_free(&r);

	/* nvcc's own diagnostic format comes back as records. */
	write_src(f, "bad.cu",
	          "#include \"stitch/solution.h\"\n"
	          "__global__ void k(float *x) { x[0] = not_declared; }\n",
	          src, sizeof src);
	assert_int_equal(st_compile(src, &f->opts, &r, &err), ST_OK);
	assert_int_equal(r.ok, 0);
	assert_true(r.n_diags >= 1);
	assert_non_null(strstr(r.diags[0].file, "bad.cu"));
	assert_int_equal(r.diags[0].line, 2);
	assert_string_equal(r.diags[0].severity, "error");
	assert_non_null(strstr(r.diags[0].message, "not_declared"));
	st_compile_result_free(&r);
	assert_no_temp_files(f->cache);
}

/* A compiler that prints `log_text` (kept in a file beside it) on stderr and fails; the
 * compile result of src then carries the log's diagnostics. */
static void compile_with_log(fixture *f, const char *log_text, st_compile_result *r)
{
	char log_path[512], body[700], src[512];
	write_src(f, "compiler.log", log_text, log_path, sizeof log_path);
	snprintf(body, sizeof body, "cat '%s' >&2\nexit 1\n", log_path);
	use_fake_cc(f, body);
	write_src(f, "cand.c", GOOD_C, src, sizeof src);
	st_err err = { "" };
	assert_int_equal(st_compile(src, &f->opts, r, &err), ST_OK);
	assert_int_equal(r->ok, 0);
}

/* Issue 31: a candidate that failed to link got nvcc's warning as its reason. The linker's
 * undefined reference, after the warning in the log, is the first error and comes first. */
static void test_link_error_after_warning(void **state)
{
	fixture *f = *state;
	st_compile_result r;
	compile_with_log(f,
		"cand.cu(12): warning #177-D: function \"ho_garbage\" was declared but never referenced\n"
		"  static void ho_garbage(void) {}\n"
		"              ^\n"
		"\n"
		"Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n"
		"\n"
		"/usr/bin/ld: /tmp/tmpxft_00002b1e_00000000-11_cand.o: in function `st_run':\n"
		"tmpxft_00002b1e_00000000-6_cand.cudafe1.cpp:(.text+0x1d4): undefined reference to "
		"`ho_missing_helper'\n"
		"collect2: error: ld returned 1 exit status\n",
		&r);
	assert_int_equal(r.n_diags, 3);
	const st_diag *e = st_compile_first_error(&r);
	assert_non_null(e);
	assert_ptr_equal(e, &r.diags[0]); /* what verify.c quotes as the reason */
	assert_string_equal(e->severity, "error");
	assert_non_null(strstr(e->message, "undefined reference to `ho_missing_helper'"));
	assert_non_null(strstr(r.diags[1].message, "ld returned 1 exit status"));
	assert_string_equal(r.diags[2].severity, "warning"); /* kept, after the errors */
	assert_non_null(strstr(r.diags[2].message, "ho_garbage"));
	st_compile_result_free(&r);
}

/* gcc: two warnings, then the error that stopped the build, then its note. */
static void test_error_after_warnings(void **state)
{
	fixture *f = *state;
	st_compile_result r;
	compile_with_log(f,
		"cand.c: In function 'st_init':\n"
		"cand.c:14:9: warning: unused variable 'spare' [-Wunused-variable]\n"
		"   14 |     int spare;\n"
		"      |         ^~~~~\n"
		"cand.c: In function 'st_run':\n"
		"cand.c:30:12: warning: implicit declaration of function 'helper' "
		"[-Wimplicit-function-declaration]\n"
		"   30 |     return helper(in, out);\n"
		"      |            ^~~~~~\n"
		"cand.c:41:5: error: 'out_ptr' undeclared (first use in this function)\n"
		"   41 |     out_ptr[0] = 1.0f;\n"
		"      |     ^~~~~~~\n"
		"cand.c:41:5: note: each undeclared identifier is reported only once for each function "
		"it appears in\n",
		&r);
	assert_int_equal(r.n_diags, 4);
	const st_diag *e = st_compile_first_error(&r);
	assert_ptr_equal(e, &r.diags[0]);
	assert_int_equal(e->line, 41);
	assert_non_null(strstr(e->message, "out_ptr"));
	/* The rest in log order. */
	assert_int_equal(r.diags[1].line, 14);
	assert_int_equal(r.diags[2].line, 30);
	assert_string_equal(r.diags[3].severity, "note");
	st_compile_result_free(&r);
}

/* The linker's own lines: its errors carry no severity word, its "in function" and NOTE lines
 * are no errors; a log with warnings only has no first error. */
static void test_linker_lines(void **state)
{
	(void)state;
	st_diag *d;
	int n;
	assert_int_equal(st_diag_parse(
		"/usr/bin/ld: warning: x.o: missing .note.GNU-stack section implies executable stack\n"
		"/usr/bin/ld: NOTE: This behaviour is deprecated and will be removed in a future "
		"version of the linker\n"
		"/usr/bin/ld: /tmp/ccA.o: in function `st_run':\n"
		"/usr/bin/ld: /tmp/ccB.o:(.bss+0x0): multiple definition of `g'; "
		"/tmp/ccA.o:(.bss+0x0): first defined here\n", &d, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(d[0].severity, "warning");
	assert_string_equal(d[1].severity, "error");
	assert_non_null(strstr(d[1].message, "multiple definition of `g'"));
	st_diags_errors_first(d, n);
	assert_string_equal(d[0].severity, "error");
	st_compile_result r = { .diags = d, .n_diags = 1 };
	r.diags = d + 1; /* the warning alone */
	assert_null(st_compile_first_error(&r));
	st_diags_free(d, n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_good_c_and_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compile_error_cached, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_bytes_other_path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_key_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_inputs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_compiler, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_cache_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cuda, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_error_after_warning, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error_after_warnings, setup, teardown),
		cmocka_unit_test(test_linker_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
