/* The compile step: a solution file (.cu with nvcc, .c with cc for the host backend) to a shared
 * object in a content-addressed cache keyed by source + flags + compiler version, so an unchanged
 * candidate is never compiled twice (failures are cached too). Diagnostics are parsed into
 * file/line/message records for the verdict. */
#ifndef ST_COMPILE_H
#define ST_COMPILE_H

#include "../common/st_error.h"

typedef struct st_diag {
	char *file;
	int line;       /* 0 when the compiler gave none */
	int col;        /* 0 when the compiler gave none */
	char *severity; /* "error", "warning", "note" */
	char *message;
} st_diag;

typedef struct st_compile_opts {
	const char *arch;               /* e.g. "sm_90a"; CUDA only */
	const char *include_dir;        /* folder holding stitch/solution.h */
	const char *const *libraries;   /* e.g. "cublas", "cublasLt": linked as -l<name> */
	int n_libraries;
	double timeout_s;               /* default 120 */
	const char *cache_dir;          /* NULL: st_cache_dir() */
	int no_cache;                   /* compile even if cached (result still stored) */
} st_compile_opts;

typedef struct st_compile_result {
	int ok;              /* 1: so_path holds a loadable shared object */
	int cached;          /* 1: served from the cache, no compiler run */
	int timed_out;
	double seconds;      /* compiler wall time (0 when cached) */
	char key[65];        /* sha256 of everything that determines the output */
	char so_path[4096];
	char *log;           /* compiler output, NUL-terminated, maybe empty */
	st_diag *diags;
	int n_diags;
} st_compile_result;

/* ST_OK whenever the compiler could be run (r->ok says whether it succeeded). ST_E_INVALID for a
 * missing file or one that is not C/CUDA source; ST_E_SYSTEM when no compiler is found. */
st_status st_compile(const char *src_path, const st_compile_opts *o, st_compile_result *r,
                     st_err *err);
void st_compile_result_free(st_compile_result *r);

/* Parse nvcc/gcc/ptxas/ld diagnostics ("f.cu(12): error: ...", "f.c:3:5: error: ...",
 * "ptxas error   : ...", "undefined reference to ..."). */
int st_diag_parse(const char *log, st_diag **out, int *n);
void st_diags_free(st_diag *d, int n);
/* Reorder d so its errors come first, each group in log order: a failed build's cause is its
 * first error (a linker's "undefined reference" after a dozen warnings), and readers that take
 * d[0] as the reason must never get a warning. st_compile does this for failed compiles. */
void st_diags_errors_first(st_diag *d, int n);
/* The first error of a compile (severity "error": compiler errors, fatal errors, ptxas/nvlink
 * errors, the linker's undefined references); NULL when it has none. The reason to give for a
 * compile that failed, never a warning. */
const st_diag *st_compile_first_error(const st_compile_result *r);

#endif
