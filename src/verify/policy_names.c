/* Rules 1 and 2 of the policy check (policy.h): the headers a candidate includes, checked
 * against allowlists and the task's libraries, and the names it uses, checked as whole tokens
 * against the forbidden list, with the names token pasting could build and the sections the
 * loader runs. */
#include "verify/policy_int.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

/* ---- rule 1: includes --------------------------------------------------------------------- */

/* Headers any solution may include. Patterns are fnmatch(3) without FNM_PATHNAME, so cuda/ *
 * covers libcu++'s nested folders; ".." and absolute paths are refused before this is read. */
static const char *const ok_headers[] = {
	"stitch/solution.h",
	/* CUDA toolkit, device code */
	"cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "cuda_fp16.h", "cuda_fp16.hpp",
	"cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp8.h", "cuda_fp8.hpp", "cuda_fp6.h", "cuda_fp6.hpp",
	"cuda_fp4.h", "cuda_fp4.hpp", "cuda_pipeline*.h", "cuda_awbarrier*.h", "mma.h",
	"cooperative_groups.h", "cooperative_groups/*", "cuda/*", "crt/*",
	"device_launch_parameters.h", "device_functions.h", "device_types.h", "driver_types.h",
	"vector_types.h", "vector_functions.h", "vector_functions.hpp", "builtin_types.h",
	"host_defines.h", "math_constants.h", "math_functions.h", "sm_*.h", "cuComplex.h",
	"cuda_texture_types.h", "texture_types.h", "surface_types.h", "channel_descriptor.h",
	"library_types.h", "cuda_occupancy.h", "cuda_device_runtime_api.h",
	/* C, no I/O */
	"stdint.h", "stddef.h", "stdbool.h", "float.h", "limits.h", "math.h", "string.h",
	"stdlib.h", "assert.h", "inttypes.h", "stdarg.h", "stdalign.h", "errno.h",
	/* C++, no I/O, threads or clocks */
	"cstdint", "cstddef", "cfloat", "climits", "cmath", "cstring", "cstdlib", "cassert",
	"cinttypes", "cstdarg", "cerrno", "algorithm", "type_traits", "utility", "limits", "array",
	"vector", "new", "memory", "initializer_list", "tuple", "numeric", "functional", "iterator",
	"optional", "bit", "complex", "string", "string_view", "map", "set", "unordered_map",
	"unordered_set", "span", "numbers", "stdexcept", "exception", "cstdbool",
	/* Console output only: a runner's stdout and stderr go to its private log, never to the
	 * user, so a printed message cannot pass for a result; the file calls stay forbidden. */
	"stdio.h", "cstdio",
	NULL,
};

/* Headers of the libraries a task's policy may allow. */
static const struct { const char *pattern, *library; } lib_headers[] = {
	{"cublas_v2.h", "cublas"},   {"cublas_api.h", "cublas"}, {"cublas.h", "cublas"},
	{"cublasLt.h", "cublasLt"},  {"cusparse*.h", "cusparse"}, {"cufft*.h", "cufft"},
	{"curand*.h", "curand"},     {"cub/*", "cub"},            {"thrust/*", "cub"},
};

/* Why the usual suspects are refused; anything else not on the lists gets a generic reason. */
static const struct { const char *pattern, *why; } bad_headers[] = {
	{"cuda/std/chrono", "reads the clock"}, {"cuda/std/ctime", "reads the clock"},
	{"iostream", "file and console I/O"},   {"fstream", "file and console I/O"},
	{"ostream", "file and console I/O"},    {"istream", "file and console I/O"},
	{"sstream", "file and console I/O"},    {"iomanip", "file and console I/O"},
	{"filesystem", "file access"},          {"fcntl.h", "file access"},
	{"dirent.h", "file access"},            {"unistd.h", "operating-system calls"},
	{"sys/*", "operating-system calls"},    {"dlfcn.h", "loads code at run time"},
	{"spawn.h", "runs other programs"},     {"signal.h", "signals"},
	{"csignal", "signals"},                 {"pthread.h", "threads"},
	{"threads.h", "threads"},               {"thread", "threads"},
	{"mutex", "threads"},                   {"future", "threads"},
	{"condition_variable", "threads"},      {"time.h", "reads the clock"},
	{"ctime", "reads the clock"},           {"chrono", "reads the clock"},
	{"random", "std::random_device reads the operating system's entropy source"},
	{"cupti*.h", "profiling is the harness's"}, {"nvml.h", "device management is the harness's"},
	{"cuda_profiler_api.h", "profiling is the harness's"},
};

static int match(const char *pattern, const char *name)
{
	return fnmatch(pattern, name, 0) == 0;
}

static int task_allows(const st_task *task, const char *library)
{
	/* CUB and Thrust are header-only prebuilt algorithms: fine when libraries are, not in expert
	 * mode, where the work must be hand-written. task.json cannot list "cub" yet. */
	if (!strcmp(library, "cub") && task->policy == ST_POLICY_ENGINEERING)
		return 1;
	for (int i = 0; i < task->n_libraries; i++)
		if (!strcmp(task->libraries[i], library))
			return 1;
	return 0;
}

void pol_check_include(checker *C, int line, const char *h)
{
	if (h[0] == '/' || strstr(h, "..") || strchr(h, '\\') || !h[0]) {
		pol_hit(C, line, "forbidden-include",
		    "'%s' may not be included (absolute and parent paths reach outside the toolkit)", h);
		return;
	}
	for (size_t i = 0; i < sizeof bad_headers / sizeof bad_headers[0]; i++)
		if (match(bad_headers[i].pattern, h)) {
			pol_hit(C, line, "forbidden-include", "'%s' may not be included (%s)", h,
			    bad_headers[i].why);
			return;
		}
	for (const char *const *p = ok_headers; *p; p++)
		if (match(*p, h))
			return;
	for (size_t i = 0; i < sizeof lib_headers / sizeof lib_headers[0]; i++) {
		if (!match(lib_headers[i].pattern, h))
			continue;
		const char *lib = lib_headers[i].library;
		if (task_allows(C->task, lib))
			return;
		if (C->task->policy == ST_POLICY_EXPERT)
			pol_hit(C, line, "forbidden-include",
			    "'%s' may not be included (library %s; this task is expert mode, hand-written "
			    "CUDA only)", h, lib);
		else
			pol_hit(C, line, "forbidden-include",
			    "'%s' may not be included (library %s is not among this task's libraries)", h,
			    lib);
		return;
	}
	pol_hit(C, line, "forbidden-include",
	    "'%s' may not be included (not a header solutions may use: CUDA toolkit, C/C++ headers "
	    "without I/O, the task's libraries)", h);
}

/* ---- rule 2: names ------------------------------------------------------------------------ */

#define F_PREFIX 1 /* every name that starts with it */
#define F_CALL 2   /* a common word: only as a call, name( or (name) */
#define F_STD 4    /* only as std::name */

#define R_LOAD "loads code at run time"
#define R_EXEC "runs other programs or processes"
#define R_FILE "file access"
#define R_CONSOLE "console I/O"
#define R_ENV "the environment"
#define R_NET "network access"
#define R_PROC "signals, traces or controls processes"
#define R_THREAD "starts threads"
#define R_CLOCK "reads the host clock"
#define R_TIMER "reads the timer the harness measures with"
#define R_DEVICE "the device is the harness's to control"
#define R_L2 "keeps data in L2 across the harness's cache flush"
#define R_LOOKUP "looks up driver functions by name at run time"
#define R_PROFILER "profiling is the harness's"
#define R_ATLOAD "runs code at load or exit time"
#define R_HARNESS "part of the harness, not of the solution ABI"
#define R_SELF "reads or rewrites the loaded program's own tables"

typedef struct fsym {
	const char *name;
	int flags;
	const char *why;
} fsym;

static const fsym forbidden[] = {
	{"dlopen", 0, R_LOAD}, {"dlmopen", 0, R_LOAD}, {"dlsym", 0, R_LOAD}, {"dlvsym", 0, R_LOAD},
	{"dlinfo", 0, R_LOAD}, {"__libc_", F_PREFIX, R_LOAD},

	{"system", F_CALL, R_EXEC}, {"popen", 0, R_EXEC}, {"pclose", 0, R_EXEC},
	{"execl", 0, R_EXEC}, {"execlp", 0, R_EXEC}, {"execle", 0, R_EXEC}, {"execv", 0, R_EXEC},
	{"execvp", 0, R_EXEC}, {"execvpe", 0, R_EXEC}, {"execve", 0, R_EXEC},
	{"fexecve", 0, R_EXEC}, {"fork", 0, R_EXEC}, {"vfork", 0, R_EXEC},
	{"clone", F_CALL, R_EXEC}, {"clone3", 0, R_EXEC}, {"posix_spawn", 0, R_EXEC},
	{"posix_spawnp", 0, R_EXEC},

	{"fopen", 0, R_FILE}, {"fopen64", 0, R_FILE}, {"freopen", 0, R_FILE}, {"fdopen", 0, R_FILE},
	{"tmpfile", 0, R_FILE}, {"tmpnam", 0, R_FILE}, {"mkstemp", 0, R_FILE},
	{"mkdtemp", 0, R_FILE}, {"fread", 0, R_FILE}, {"fwrite", 0, R_FILE}, {"fgets", 0, R_FILE},
	{"fgetc", 0, R_FILE}, {"fscanf", 0, R_FILE}, {"fputs", 0, R_FILE}, {"fputc", 0, R_FILE},
	{"open", F_CALL, R_FILE}, {"open64", 0, R_FILE}, {"openat", 0, R_FILE},
	{"creat", 0, R_FILE}, {"remove", F_CALL, R_FILE}, {"unlink", 0, R_FILE},
	{"unlinkat", 0, R_FILE}, {"rename", F_CALL, R_FILE}, {"renameat", 0, R_FILE},
	{"mkdir", 0, R_FILE}, {"rmdir", 0, R_FILE}, {"opendir", 0, R_FILE}, {"readdir", 0, R_FILE},
	{"chdir", 0, R_FILE}, {"chmod", 0, R_FILE}, {"truncate", 0, R_FILE},
	{"ftruncate", 0, R_FILE}, {"symlink", 0, R_FILE}, {"readlink", 0, R_FILE},
	{"realpath", 0, R_FILE}, {"mmap", 0, R_FILE}, {"mmap64", 0, R_FILE},
	{"mprotect", 0, R_FILE}, {"munmap", 0, R_FILE}, {"shm_open", 0, R_FILE},
	{"memfd_create", 0, R_FILE}, {"dup2", 0, R_FILE}, {"ioctl", 0, R_FILE},
	{"ifstream", 0, R_FILE}, {"ofstream", 0, R_FILE}, {"fstream", 0, R_FILE},
	{"filebuf", 0, R_FILE},

	/* printf, fprintf(stderr, ...), puts and perror are allowed: see stdio.h above. The C++
	 * streams are common variable names (cin: channels in; clog: a complex log) and their
	 * headers are refused by rule 1, so only std::cin and the like count here. */
	{"scanf", 0, R_CONSOLE}, {"stdin", 0, R_CONSOLE}, {"cout", F_STD, R_CONSOLE},
	{"cin", F_STD, R_CONSOLE}, {"cerr", F_STD, R_CONSOLE}, {"clog", F_STD, R_CONSOLE},

	{"getenv", 0, R_ENV}, {"secure_getenv", 0, R_ENV}, {"environ", 0, R_ENV},
	{"__environ", 0, R_ENV}, {"setenv", 0, R_ENV}, {"putenv", 0, R_ENV},
	{"unsetenv", 0, R_ENV}, {"clearenv", 0, R_ENV},

	{"socket", F_CALL, R_NET}, {"connect", F_CALL, R_NET}, {"bind", F_CALL, R_NET},
	{"listen", F_CALL, R_NET}, {"accept", F_CALL, R_NET}, {"accept4", 0, R_NET},
	{"sendto", 0, R_NET}, {"recvfrom", 0, R_NET}, {"sendmsg", 0, R_NET},
	{"recvmsg", 0, R_NET}, {"getaddrinfo", 0, R_NET}, {"gethostbyname", 0, R_NET},

	{"ptrace", 0, R_PROC}, {"syscall", 0, R_PROC}, {"kill", F_CALL, R_PROC},
	{"signal", F_CALL, R_PROC}, {"sigaction", 0, R_PROC}, {"prctl", 0, R_PROC},
	{"process_vm_readv", 0, R_PROC}, {"process_vm_writev", 0, R_PROC},
	{"setrlimit", 0, R_PROC}, {"prlimit", 0, R_PROC},

	{"pthread_create", 0, R_THREAD}, {"thrd_create", 0, R_THREAD},
	{"thread", F_STD, R_THREAD}, {"jthread", F_STD, R_THREAD}, {"async", F_STD, R_THREAD},

	{"clock_gettime", 0, R_CLOCK}, {"gettimeofday", 0, R_CLOCK}, {"time", F_CALL, R_CLOCK},
	{"timespec_get", 0, R_CLOCK}, {"rdtsc", 0, R_CLOCK}, {"__rdtsc", 0, R_CLOCK},
	{"__rdtscp", 0, R_CLOCK}, {"chrono", 0, R_CLOCK}, {"steady_clock", 0, R_CLOCK},
	{"system_clock", 0, R_CLOCK}, {"high_resolution_clock", 0, R_CLOCK},

	{"cudaEventElapsedTime", 0, R_TIMER}, {"cuEventElapsedTime", F_PREFIX, R_TIMER},

	{"cudaDeviceReset", 0, R_DEVICE}, {"cudaSetDevice", 0, R_DEVICE},
	{"cudaIpc", F_PREFIX, R_DEVICE}, {"cuIpc", F_PREFIX, R_DEVICE},
	{"cuDevicePrimaryCtxReset", F_PREFIX, R_DEVICE},

	{"cudaLimitPersistingL2CacheSize", 0, R_L2}, {"cudaAccessPropertyPersisting", 0, R_L2},
	{"CU_LIMIT_PERSISTING_L2_CACHE_SIZE", 0, R_L2}, {"CU_ACCESS_PROPERTY_PERSISTING", 0, R_L2},

	{"cudaGetDriverEntryPoint", F_PREFIX, R_LOOKUP}, {"cuGetProcAddress", F_PREFIX, R_LOOKUP},
	{"cudaGetExportTable", 0, R_LOOKUP}, {"cuGetExportTable", 0, R_LOOKUP},

	{"cudaProfilerStart", 0, R_PROFILER}, {"cudaProfilerStop", 0, R_PROFILER},
	{"cuProfilerStart", 0, R_PROFILER}, {"cuProfilerStop", 0, R_PROFILER},
	{"cupti", F_PREFIX, R_PROFILER},

	{"constructor", 0, R_ATLOAD}, {"destructor", 0, R_ATLOAD},
	{"__constructor__", 0, R_ATLOAD}, {"__destructor__", 0, R_ATLOAD},
	{"atexit", 0, R_ATLOAD}, {"at_quick_exit", 0, R_ATLOAD}, {"on_exit", 0, R_ATLOAD},
	{"__cxa_atexit", 0, R_ATLOAD},

	{"dl_iterate_phdr", 0, R_SELF}, {"_DYNAMIC", 0, R_SELF}, {"_r_debug", 0, R_SELF},
	{"link_map", 0, R_SELF}, {"pkey_mprotect", 0, R_SELF}, {"getauxval", 0, R_SELF},
	{"rb_", F_PREFIX, R_HARNESS}, {"st_proto", F_PREFIX, R_HARNESS},
	{"st_runner", F_PREFIX, R_HARNESS}, {"st_sandbox", F_PREFIX, R_HARNESS},
};

#define N_FORBIDDEN (sizeof forbidden / sizeof forbidden[0])

static const fsym *lookup_forbidden(const char *name)
{
	for (size_t i = 0; i < N_FORBIDDEN; i++) {
		const fsym *f = &forbidden[i];
		if (f->flags & F_PREFIX ? !strncmp(name, f->name, strlen(f->name))
		                        : !strcmp(name, f->name))
			return f;
	}
	return NULL;
}


/* The driver functions a solution may look up by name: the TMA descriptor encoders. Hopper's
 * tensor-memory copies need a CUtensorMap, which only the driver builds, and the runtime reaches
 * it only through cudaGetDriverEntryPoint*. A call whose first argument is one string literal
 * naming an encoder is allowed; any other lookup could reach any driver function (IPC, context
 * resets, the export tables) and stays a hit. An escape or a concatenation in the literal does
 * not match, so it stays a hit too. */
static const char *const entry_points_allowed[] = {"cuTensorMapEncodeTiled",
                                                   "cuTensorMapEncodeIm2col"};

static int entry_point_allowed(const lexed *L, int i)
{
	static const char lookup[] = "cudaGetDriverEntryPoint";
	if (strncmp(txt(L, i), lookup, sizeof lookup - 1) || !punct(L, i + 1, "(") ||
	    i + 3 >= L->n || L->v[i + 2].kind != T_STRING || !punct(L, i + 3, ","))
		return 0;
	for (size_t k = 0; k < sizeof entry_points_allowed / sizeof *entry_points_allowed; k++)
		if (!strcmp(txt(L, i + 2), entry_points_allowed[k]))
			return 1;
	return 0;
}

static int std_qualified(const lexed *L, int i)
{
	return punct(L, i - 1, "::") && is(L, i - 2, T_IDENT, "std");
}

/* A member declared in a class body (`int open(int);`, `bool bind(...)`) rather than a call in a
 * default member initializer (`int x = system("ls");`), which runs like any other code. */
static int member_declaration(const checker *C, int i)
{
	const lexed *L = &C->L;
	if (C->scope[i] != S_CLASS || i == 0)
		return 0;
	return L->v[i - 1].kind == T_IDENT || punct(L, i - 1, "*") || punct(L, i - 1, "&") ||
	       punct(L, i - 1, "&&") || punct(L, i - 1, ">") || punct(L, i - 1, "~");
}

void pol_check_names(checker *C)
{
	const lexed *L = &C->L;
	for (int i = 0; i < L->n; i++) {
		const tok *t = &L->v[i];
		if (t->kind != T_IDENT || t->dir == D_MESSAGE || t->dir == D_INCLUDE)
			continue;
		const char *name = txt(L, i);
		const fsym *f = lookup_forbidden(name);
		if (!f || not_global(L, i) || member_declaration(C, i))
			continue;
		if (!strcmp(f->why, R_LOOKUP) && entry_point_allowed(L, i))
			continue;
		if ((f->flags & F_STD) && !std_qualified(L, i))
			continue;
		if (f->flags & F_CALL) {
			int called = punct(L, i + 1, "(") || (punct(L, i - 1, "(") && punct(L, i + 1, ")"));
			/* std::remove (<algorithm>) and std::bind (<functional>) are not the C functions */
			if (!called ||
			    (std_qualified(L, i) && (!strcmp(name, "remove") || !strcmp(name, "bind"))))
				continue;
		}
		pol_hit(C, t->line, "forbidden-symbol", "'%s' may not be used (%s)", name, f->why);
	}
}


/* Token pasting builds a name the compiler sees but this check does not: with ## in the file,
 * a forbidden name that splits into two tokens the file spells is a hit. */
void pol_check_pasting(checker *C)
{
	const lexed *L = &C->L;
	int line = 0;
	for (int i = 0; i < L->n && !line; i++)
		if (punct(L, i, "##"))
			line = L->v[i].line;
	if (!line)
		return;
	const char **words = malloc((size_t)L->n * sizeof *words);
	if (!words) {
		C->oom = 1;
		return;
	}
	int nw = 0;
	for (int i = 0; i < L->n; i++)
		if (L->v[i].kind == T_IDENT || L->v[i].kind == T_NUMBER)
			words[nw++] = txt(L, i);
	qsort(words, (size_t)nw, sizeof *words, cmp_str);
	for (size_t f = 0; f < N_FORBIDDEN; f++) {
		const char *name = forbidden[f].name;
		size_t len = strlen(name);
		char a[64], b[64];
		if ((forbidden[f].flags & (F_PREFIX | F_STD)) || len >= sizeof a)
			continue;
		for (size_t k = 1; k < len; k++) {
			memcpy(a, name, k);
			a[k] = 0;
			memcpy(b, name + k, len - k + 1);
			const char *pa = a, *pb = b;
			if (bsearch(&pa, words, (size_t)nw, sizeof *words, cmp_str) &&
			    bsearch(&pb, words, (size_t)nw, sizeof *words, cmp_str)) {
				pol_hit(C, line, "forbidden-symbol",
				    "'%s' may not be used (%s; token pasting can build it from '%s' ## '%s')",
				    name, forbidden[f].why, a, b);
				break;
			}
		}
	}
	free(words);
}

/* Sections whose functions the loader runs: constructors by another name. */
void pol_check_sections(checker *C)
{
	static const char *const sections[] = {".init_array", ".preinit_array", ".fini_array",
	                                       ".ctors", ".dtors", NULL};
	const lexed *L = &C->L;
	for (int i = 0; i < L->n; i++) {
		if (L->v[i].kind != T_STRING)
			continue;
		for (const char *const *s = sections; *s; s++)
			if (strstr(txt(L, i), *s))
				pol_hit(C, L->v[i].line, "forbidden-symbol", "section '%s' may not be used (%s)",
				    *s, R_ATLOAD);
	}
}
