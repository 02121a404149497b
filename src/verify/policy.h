/* The static policy check of a candidate source, run before it is compiled (DESIGN.md §5.5):
 * which headers it includes, which names it uses, what its inline assembly reads, whether it
 * defines the ABI and a kernel, and how close it is to the task's own solutions. It reads the
 * text with a small tokenizer (comments, string and character literals and line continuations
 * handled), not a parser, so it is one layer on top of the sandbox, never instead of it. */
#ifndef ST_POLICY_H
#define ST_POLICY_H

#include <stddef.h>

#include "../common/st_error.h"
#include "../task/task.h"

/* Rules (the `rule` of a hit):
 *   forbidden-include  a header outside the allowlist. Allowed: stitch/solution.h; CUDA
 *                      toolkit headers for device code (cuda_runtime*.h, cuda.h,
 *                      cuda_fp16/bf16/fp8.h, mma.h, cooperative_groups*, cuda/ (libcu++, but
 *                      not cuda/std/chrono or ctime), crt/, cuda_pipeline*, cuda_awbarrier*,
 *                      sm_*.h, vector and math helpers); C and C++ headers without I/O,
 *                      threads or clocks (stdint.h, stddef.h, stdbool.h, float.h, limits.h,
 *                      math.h, string.h, stdlib.h, assert.h, inttypes.h, stdarg.h, errno.h
 *                      and their <c...> forms; algorithm, type_traits, utility, limits, array,
 *                      vector, new, memory, initializer_list, tuple, numeric, functional,
 *                      iterator, optional, bit, complex, string, map, set, unordered_*, span,
 *                      numbers, stdexcept, exception); library headers only when the task's
 *                      policy lists the library (cublas*.h: cublas, cublasLt.h: cublasLt,
 *                      cusparse*.h, cufft*.h, curand*.h); CUB and Thrust in engineering mode
 *                      (or when "cub" is listed). Everything else is a hit, and so are
 *                      computed includes, #include_next, #import, #embed and paths with "..",
 *                      a leading '/' or a backslash.
 *   forbidden-symbol   a name that loads code, runs programs, touches files, the console,
 *                      the environment, the network, signals or other processes, starts
 *                      threads, reads the host clock, reads the harness's timer
 *                      (cudaEventElapsedTime), controls the device or L2 persistence, looks
 *                      up driver functions by name, runs code at load time (constructor,
 *                      destructor, .init_array), names the harness's internals (rb_*,
 *                      st_proto*, st_runner*, st_sandbox*), or is built by token pasting.
 *   forbidden-asm      inline assembly that reads %clock, %clock64, %globaltimer or the %pm
 *                      counters, or issues rdtsc, syscall, sysenter, int 0x80, .incbin or
 *                      .include; ordinary PTX (mma, ldmatrix, cp.async, ...) is fine.
 *   interpose          an exported definition of a CUDA, driver or library API name
 *                      (cuda*, cu*, __cuda*, cublas*, ...), i.e. an attempt to replace it.
 *   required-kernel    expert mode only: no __global__ function is defined.
 *   abi                no st_run definition.
 *   too-large          the file is over ST_POLICY_MAX_BYTES (nothing else is checked).
 *   not-source         NUL or control bytes, or invalid UTF-8 (nothing else is checked).
 *
 * Similarity is reported, not judged: the highest Jaccard similarity of normalised token
 * 8-grams (identifiers -> ID, numbers -> NUM, literals -> STR/CHR, keywords and operators kept)
 * to the task's reference and experts. Renaming variables does not lower it; the verifier flags
 * a near copy from ST_POLICY_NEAR_COPY on. */

#define ST_POLICY_MAX_BYTES ((size_t)1 << 20)
#define ST_POLICY_NEAR_COPY 0.9

typedef struct st_policy_hit {
	int line;          /* 1-based line of the source; 0 for the file as a whole */
	char rule[32];     /* "forbidden-include", "forbidden-symbol", ... (see above) */
	char message[256];
} st_policy_hit;

typedef struct st_policy_report {
	st_policy_hit *hits; /* violations, in source order, one per distinct rule + message */
	int n_hits;          /* > 0: the candidate is "forbidden" */
	double similarity;   /* highest token similarity to the task's reference/experts, 0..1 */
	char similar_to[64]; /* "reference" or "expert" ("" when there was nothing to compare) */
	int has_kernel;      /* defines at least one __global__ function */
} st_policy_report;

/* Check the candidate at src_path against the task's policy. ST_OK whenever the file could be
 * read (violations go into rep); ST_E_IO when it, the reference or an expert cannot be read. */
st_status st_policy_check(const char *src_path, const st_task *task, st_policy_report *rep,
                          st_err *err);

/* The same on source text already in memory (len bytes, need not be NUL-terminated). */
st_status st_policy_check_text(const char *src, size_t len, const st_task *task,
                               st_policy_report *rep, st_err *err);

/* Token 8-gram Jaccard similarity of two sources, 0..1 (0 when either is too short). */
double st_policy_similarity(const char *a, size_t alen, const char *b, size_t blen);

void st_policy_report_free(st_policy_report *rep);

/* One line for a verdict, e.g.
 * "line 12: forbidden-symbol: 'dlopen' may not be used (loads code at run time)". */
void st_policy_describe(const st_policy_hit *h, char *buf, size_t len);

#endif
