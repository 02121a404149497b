/* Unit tests of the static policy check: every shipped solution passes its own task's policy
 * (no false positives on real code), and every rule has a case it must catch and a look-alike
 * it must let through (comments, strings, members, other namespaces, ordinary PTX). Sources are
 * small strings built around a minimal valid solution; the shipped tasks give the policies. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/fs.h"
#include "task/task.h"
#include "verify/policy.h"

/* A minimal valid solution: a kernel and the three ABI functions. */
#define HEAD "#include <cuda_runtime.h>\n#include \"stitch/solution.h\"\n"
#define BODY                                                                                 \
	"__global__ void k(float *y) { y[threadIdx.x] = 0.0f; }\n"                                 \
	"extern \"C\" int st_init(const st_config *c, const st_tensor *p, int32_t np,\n"           \
	"                         cudaStream_t s, void **ctx) { *ctx = 0; return 0; }\n"            \
	"extern \"C\" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,\n"  \
	"                        int32_t n_out, cudaStream_t s) {\n"                                 \
	"    k<<<1, 32, 0, s>>>((float *)out[0].data);\n"                                            \
	"    return 0;\n"                                                                            \
	"}\n"                                                                                        \
	"extern \"C\" void st_free(void *ctx) {}\n"
#define BASE HEAD BODY

static st_task softmax, gemm;

static void load(const char *id, st_task *t)
{
	char dir[PATH_MAX];
	st_err err = {""};
	snprintf(dir, sizeof dir, "%s/tasks/%s", STITCH_SOURCE_DIR, id);
	if (st_task_load(dir, t, &err) != ST_OK)
		fail_msg("%s", err.msg);
}

static int setup(void **state)
{
	(void)state;
	load("t1/softmax", &softmax);
	load("t1/gemm_bf16", &gemm);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	st_task_free(&softmax);
	st_task_free(&gemm);
	return 0;
}

static void check(const st_task *t, const char *src, st_policy_report *rep)
{
	st_err err = {""};
	if (st_policy_check_text(src, strlen(src), t, rep, &err) != ST_OK)
		fail_msg("%s", err.msg);
}

/* The hit of `rule` whose message contains `needle` (NULL: any), or NULL. */
static const st_policy_hit *find(const st_policy_report *rep, const char *rule, const char *needle)
{
	for (int i = 0; i < rep->n_hits; i++)
		if (!strcmp(rep->hits[i].rule, rule) &&
		    (!needle || strstr(rep->hits[i].message, needle)))
			return &rep->hits[i];
	return NULL;
}

static void dump(const st_policy_report *rep)
{
	for (int i = 0; i < rep->n_hits; i++) {
		char line[400];
		st_policy_describe(&rep->hits[i], line, sizeof line);
		print_message("  %s\n", line);
	}
}

/* src must pass under t with no hits at all. */
static void expect_clean(const st_task *t, const char *src)
{
	st_policy_report rep;
	check(t, src, &rep);
	if (rep.n_hits)
		dump(&rep);
	assert_int_equal(rep.n_hits, 0);
	st_policy_report_free(&rep);
}

/* src must have a hit of `rule` mentioning `needle` on `line` (-1: any line). */
static void expect_hit(const st_task *t, const char *src, const char *rule, const char *needle,
                       int line)
{
	st_policy_report rep;
	check(t, src, &rep);
	const st_policy_hit *h = find(&rep, rule, needle);
	if (!h) {
		print_message("no %s hit naming '%s' in:\n", rule, needle ? needle : "");
		dump(&rep);
	}
	assert_non_null(h);
	if (line >= 0)
		assert_int_equal(h->line, line);
	st_policy_report_free(&rep);
}

/* src must have no hit of `rule` (other rules may fire). */
static void expect_no(const st_task *t, const char *src, const char *rule)
{
	st_policy_report rep;
	check(t, src, &rep);
	if (find(&rep, rule, NULL))
		dump(&rep);
	assert_null(find(&rep, rule, NULL));
	st_policy_report_free(&rep);
}

/* ---- shipped solutions -------------------------------------------------------------------- */

static void check_shipped(const st_task *t, const char *path, int *n_files)
{
	st_policy_report rep;
	st_err err = {""};
	if (st_policy_check(path, t, &rep, &err) != ST_OK)
		fail_msg("%s", err.msg);
	int unexpected = 0, shipped_library = 0;
	for (int i = 0; i < rep.n_hits; i++) {
		/* A shipped solution may include a library the task ships it with (the eager reference
		 * of an expert-mode attention task calls cuBLAS); a candidate may not. */
		int allowed = 0;
		for (int l = 0; l < t->n_solution_libraries && !strcmp(rep.hits[i].rule, "forbidden-include"); l++) {
			char tag[64];
			snprintf(tag, sizeof tag, "(library %s;", t->solution_libraries[l]);
			allowed |= strstr(rep.hits[i].message, tag) != NULL;
		}
		shipped_library += allowed;
		if (allowed)
			continue;
		char line[400];
		st_policy_describe(&rep.hits[i], line, sizeof line);
		print_message("%s (%s): %s\n", path, t->id, line);
		unexpected++;
	}
	assert_int_equal(unexpected, 0);
	/* checked against itself among the task's solutions */
	assert_true(rep.similarity > 0.999);
	/* every shipped .cu of an expert-mode task is hand-written CUDA, unless it is a baseline
	 * built on a library the task ships it with */
	if (t->policy == ST_POLICY_EXPERT && !shipped_library)
		assert_true(rep.has_kernel);
	st_policy_report_free(&rep);
	(*n_files)++;
}

static void test_shipped_solutions_pass(void **state)
{
	(void)state;
	char **dirs;
	int n, n_files = 0;
	st_err err = {""};
	assert_int_equal(st_task_list(STITCH_SOURCE_DIR "/tasks", &dirs, &n, &err), ST_OK);
	assert_true(n >= 4);
	for (int i = 0; i < n; i++) {
		st_task t;
		if (st_task_load(dirs[i], &t, &err) != ST_OK)
			fail_msg("%s", err.msg);
		check_shipped(&t, t.reference, &n_files);
		for (int e = 0; e < t.n_experts; e++)
			check_shipped(&t, t.experts[e], &n_files);
		st_task_free(&t);
	}
	st_task_list_free(dirs, n);
	assert_true(n_files >= 8);
}

/* ---- rule 1: includes --------------------------------------------------------------------- */

static void test_include_line(void **state)
{
	(void)state;
	expect_clean(&softmax, BASE);
	expect_hit(&softmax, HEAD "#include <stdint.h>\n#include <fstream>\n" BODY,
	           "forbidden-include", "'fstream'", 4);
	/* a continued line still counts from where it starts */
	expect_hit(&softmax, HEAD "\n#inc\\\nlude <dlfcn.h>\n" BODY, "forbidden-include",
	           "'dlfcn.h'", 4);
	/* console output is allowed: it lands in the runner's private log */
	expect_clean(&softmax, HEAD "#include <stdio.h>\n" BODY);
	/* digraph # and spaces around it */
	expect_hit(&softmax, HEAD "  %:  include <unistd.h>\n" BODY, "forbidden-include",
	           "'unistd.h'", 3);
	expect_hit(&softmax, HEAD "#include \"../reference.cu\"\n" BODY, "forbidden-include",
	           "reference.cu", 3);
	expect_hit(&softmax, HEAD "#include \"helper.h\"\n" BODY, "forbidden-include", "helper.h",
	           3);
	expect_hit(&softmax, HEAD "#include <sys/mman.h>\n" BODY, "forbidden-include",
	           "operating-system", 3);
	expect_hit(&softmax, HEAD "#include <chrono>\n" BODY, "forbidden-include", "clock", 3);
	expect_hit(&softmax, HEAD "#include <cuda/std/chrono>\n" BODY, "forbidden-include",
	           "clock", 3);
	expect_hit(&softmax, HEAD "#define H <stdio.h>\n#include H\n" BODY, "forbidden-include",
	           "computed", 4);
	expect_hit(&softmax, HEAD "#include_next <math.h>\n" BODY, "forbidden-include",
	           "include_next", 3);
}

static void test_include_allowed(void **state)
{
	(void)state;
	expect_clean(&softmax, HEAD "#include <cuda_bf16.h>\n#include <cuda_fp8.h>\n"
	                            "#include <mma.h>\n#include <cooperative_groups.h>\n"
	                            "#include <cooperative_groups/reduce.h>\n"
	                            "#include <cuda/pipeline>\n#include <cuda/std/atomic>\n"
	                            "#include <cuda_pipeline_primitives.h>\n"
	                            "#include <cuda_awbarrier_primitives.h>\n"
	                            "#include <sm_90_rt.h>\n#include <math_constants.h>\n"
	                            "#include <stdint.h>\n#include <cmath>\n#include <algorithm>\n"
	                            "#include <type_traits>\n#include <vector>\n" BODY);
	/* in a comment, or a string, an include is just text */
	expect_clean(&softmax, HEAD "// #include <stdio.h>\n/* #include <dlfcn.h> */\n"
	                            "static const char *doc = \"#include <stdio.h>\";\n" BODY);
}

static void test_include_libraries(void **state)
{
	(void)state;
	/* softmax is expert mode with no libraries; gemm_bf16 allows cublas and cublasLt */
	expect_hit(&softmax, HEAD "#include <cublasLt.h>\n" BODY, "forbidden-include",
	           "'cublasLt.h'", 3);
	expect_clean(&gemm, HEAD "#include <cublasLt.h>\n#include <cublas_v2.h>\n" BODY);
	expect_hit(&gemm, HEAD "#include <cufft.h>\n" BODY, "forbidden-include", "cufft", 3);
	expect_hit(&gemm, HEAD "#include <curand_kernel.h>\n" BODY, "forbidden-include", "curand",
	           3);
	/* CUB and Thrust: prebuilt algorithms, engineering mode only */
	expect_hit(&softmax, HEAD "#include <cub/cub.cuh>\n" BODY, "forbidden-include", "cub", 3);
	expect_hit(&softmax, HEAD "#include <thrust/sort.h>\n" BODY, "forbidden-include", "thrust",
	           3);
	expect_clean(&gemm, HEAD "#include <cub/block/block_reduce.cuh>\n" BODY);
}

/* ---- rule 2: names ------------------------------------------------------------------------ */

static void test_symbols(void **state)
{
	(void)state;
	expect_hit(&softmax, BASE "static void *h(void) { return dlopen(\"x.so\", 2); }\n",
	           "forbidden-symbol", "'dlopen'", 12);
	/* a declaration made by hand, no header needed */
	expect_hit(&softmax, BASE "extern \"C\" char *getenv(const char *);\n", "forbidden-symbol",
	           "'getenv'", 12);
	expect_hit(&softmax, BASE "static int f(void) { return std::system(\"ls\"); }\n",
	           "forbidden-symbol", "'system'", 12);
	expect_hit(&softmax, BASE "static int f(void) { return (system)(\"ls\"); }\n",
	           "forbidden-symbol", "'system'", 12);
	expect_hit(&softmax, BASE "static long f(void) { return time(0); }\n", "forbidden-symbol",
	           "'time'", 12);
	expect_hit(&softmax, BASE "static void f(void) { std::thread t([] {}); t.detach(); }\n",
	           "forbidden-symbol", "'thread'", 12);
	expect_hit(&softmax, BASE "static void f(float *ms, cudaEvent_t a, cudaEvent_t b) {\n"
	                          "    cudaEventElapsedTime(ms, a, b); }\n",
	           "forbidden-symbol", "cudaEventElapsedTime", 13);
	expect_hit(&softmax, BASE "static void f(void) { cudaDeviceReset(); }\n",
	           "forbidden-symbol", "cudaDeviceReset", 12);
	expect_hit(&softmax, BASE "__attribute__((constructor)) static void early(void) {}\n",
	           "forbidden-symbol", "'constructor'", 12);
	expect_hit(&softmax,
	           BASE "__attribute__((section(\".init_array\"))) static void (*p)(void) = 0;\n",
	           "forbidden-symbol", ".init_array", 12);
	expect_hit(&softmax, BASE "extern \"C\" int rb_time_sample(void);\n", "forbidden-symbol",
	           "'rb_time_sample'", 12);
	expect_hit(&softmax, BASE "#define IN scanf\n", "forbidden-symbol", "'scanf'", 12);
	expect_hit(&softmax, BASE "static void f(int x) { std::cout << x; }\n", "forbidden-symbol",
	           "'cout'", 12);
	/* a default member initializer runs like any other code */
	expect_hit(&softmax, BASE "struct S { int x = system(\"ls\"); };\n", "forbidden-symbol",
	           "'system'", 12);
	/* dl\u006fpen is the identifier dlopen */
	expect_hit(&softmax, BASE "extern \"C\" void *dl\\u006fpen(const char *, int);\n",
	           "forbidden-symbol", "'dlopen'", 12);
	/* names built by token pasting */
	expect_hit(&softmax, BASE "#define CAT(a, b) a##b\nstatic int dl = 0, open = 1;\n",
	           "forbidden-symbol", "'dl' ## 'open'", 12);
}

/* Looking up a driver function by name is a hit, but for the TMA descriptor encoders named by
 * one literal (Hopper's tensor-memory copies need them). */
#define LOOKUP(arg) "static void *e(void) { void *f = 0; cudaDriverEntryPointQueryResult q;\n" \
	"    cudaGetDriverEntryPointByVersion(" arg ", &f, 12000, cudaEnableDefault, &q);\n" \
	"    return f; }\n"

static void test_driver_lookup(void **state)
{
	(void)state;
	expect_clean(&softmax, BASE LOOKUP("\"cuTensorMapEncodeTiled\""));
	expect_clean(&softmax, BASE LOOKUP("\"cuTensorMapEncodeIm2col\""));
	expect_clean(&softmax, BASE "static void *e(void) { void *f = 0;\n"
	                            "    cudaGetDriverEntryPoint(\"cuTensorMapEncodeTiled\", &f, 0);\n"
	                            "    return f; }\n");
	expect_hit(&softmax, BASE LOOKUP("\"cuIpcOpenMemHandle\""), "forbidden-symbol",
	           "'cudaGetDriverEntryPointByVersion'", 13);
	/* a name the check cannot read: a variable, a concatenation, an escape */
	expect_hit(&softmax, BASE "static const char *n = \"cuCtxDestroy\";\n" LOOKUP("n"),
	           "forbidden-symbol", "'cudaGetDriverEntryPointByVersion'", 14);
	expect_hit(&softmax, BASE LOOKUP("\"cuTensorMap\" \"EncodeTiled\""), "forbidden-symbol",
	           "'cudaGetDriverEntryPointByVersion'", 13);
	expect_hit(&softmax, BASE LOOKUP("\"cuTensorMap\\x45ncodeTiled\""), "forbidden-symbol",
	           "'cudaGetDriverEntryPointByVersion'", 13);
	/* the name alone (a function pointer to the lookup) and the driver's own lookup */
	expect_hit(&softmax, BASE "static void *p = (void *)&cudaGetDriverEntryPoint;\n",
	           "forbidden-symbol", "'cudaGetDriverEntryPoint'", 12);
	expect_hit(&softmax, BASE "static void *e(void) { void *f = 0;\n"
	                          "    cuGetProcAddress(\"cuTensorMapEncodeTiled\", &f, 12000, 0, 0);\n"
	                          "    return f; }\n",
	           "forbidden-symbol", "'cuGetProcAddress'", 13);
}

static void test_symbols_not_code(void **state)
{
	(void)state;
	/* comments, strings, character literals, raw strings, #error text */
	expect_clean(&softmax, BASE "// dlopen(\"x\"); system(\"rm\"); getenv(\"HOME\")\n"
	                            "/* fopen printf\n   std::thread */\n"
	                            "static const char *a = \"dlopen getenv(\\\"x\\\") printf\";\n"
	                            "static const char b = '\"';  static const char *c = \"fork\";\n"
	                            "static const char *d = R\"x(system(\"ls\") )\" dlopen)x\";\n"
	                            "#if 0\n#error don't call printf or getenv\n#endif\n");
	/* a // comment continued by a backslash swallows the next line too */
	expect_clean(&softmax, BASE "// trailing backslash \\\nsystem(\"ls\");\n");
	/* common words that are forbidden only as calls, members, other namespaces */
	expect_clean(&softmax, BASE "static int time = 0, signal = 1, remove = 2;\n"
	                            "struct io { int open(int); int bind(int); };\n"
	                            "static int g(io *p, io &q) { return p->open(1) + q.bind(2); }\n"
	                            "struct my { static int connect(int x) { return x; } };\n"
	                            "static int h(void) { return ::my::connect(1) + my::connect(2); }\n"
	                            "static int thread = 3;\n"
	                            "static __device__ long long tick(void) { return clock64(); }\n");
	/* the C++ streams' names are fine as variables (channels in); std::cin is not */
	expect_clean(&softmax, BASE "static int cin = 3, cout = 16, clog = 0;\n");
	/* clock() and events for stream joins are fine */
	expect_clean(&softmax, BASE "static void j(cudaStream_t a, cudaStream_t b, cudaEvent_t e) {\n"
	                            "    cudaEventRecord(e, a); cudaStreamWaitEvent(b, e, 0); }\n");
}

/* ---- rule 3: asm -------------------------------------------------------------------------- */

static void test_asm(void **state)
{
	(void)state;
	expect_hit(&softmax,
	           BASE "__device__ unsigned long long now(void) {\n"
	                "    unsigned long long t;\n"
	                "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
	                "    return t; }\n",
	           "forbidden-asm", "globaltimer", 14);
	expect_hit(&softmax, BASE "__device__ unsigned f(void) { unsigned t;\n"
	                          "  __asm__ __volatile__(\"mov.u32 %0, \" \"%%clo\" \"ck;\" : \"=r\"(t));\n"
	                          "  return t; }\n",
	           "forbidden-asm", "clock", 13);
	/* through a macro */
	expect_hit(&softmax, BASE "#define GT \"mov.u64 %0, %%globaltimer;\"\n", "forbidden-asm",
	           "globaltimer", 12);
	expect_hit(&softmax, BASE "static unsigned long long c(void) { unsigned lo, hi;\n"
	                          "  asm volatile(\"rdtsc\" : \"=a\"(lo), \"=d\"(hi)); return lo; }\n",
	           "forbidden-asm", "time-stamp", 13);
	expect_hit(&softmax, BASE "asm(\".incbin \\\"/etc/passwd\\\"\");\n", "forbidden-asm",
	           "build time", 12);
	expect_hit(&softmax, BASE "__device__ unsigned p(void) { unsigned v;\n"
	                          "  asm(\"mov.u32 %0, %%pm0;\" : \"=r\"(v)); return v; }\n",
	           "forbidden-asm", "%pm", 13);
	/* ordinary PTX */
	expect_clean(&softmax,
	             BASE "__device__ void mma(unsigned *d, const unsigned *a, const unsigned *b) {\n"
	                  "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"
	                  "               \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
	                  "               : \"+r\"(d[0]), \"+r\"(d[1]), \"+r\"(d[2]), \"+r\"(d[3])\n"
	                  "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]),\n"
	                  "                 \"r\"(b[0]), \"r\"(b[1]));\n"
	                  "  asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
	                  "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"\n"
	                  "               : \"=r\"(d[0]), \"=r\"(d[1]), \"=r\"(d[2]), \"=r\"(d[3]) : \"r\"(a[0]));\n"
	                  "}\n");
}

/* ---- rules 4 and 6: kernel and ABI -------------------------------------------------------- */

#define NO_KERNEL                                                                            \
	HEAD "extern \"C\" int st_init(const st_config *c, const st_tensor *p, int32_t np,\n"       \
	     "                         cudaStream_t s, void **ctx) { *ctx = 0; return 0; }\n"        \
	     "extern \"C\" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,\n" \
	     "                        int32_t n_out, cudaStream_t s) {\n"                              \
	     "    return cudaMemsetAsync(out[0].data, 0, 4, s) != cudaSuccess; }\n"                   \
	     "extern \"C\" void st_free(void *ctx) {}\n"

static void test_required_kernel(void **state)
{
	(void)state;
	st_policy_report rep;
	expect_hit(&softmax, NO_KERNEL, "required-kernel", NULL, 0);
	/* a declared kernel is not a defined one */
	expect_hit(&softmax, NO_KERNEL "__global__ void k(float *y);\n", "required-kernel", NULL,
	           0);
	expect_no(&softmax, BASE, "required-kernel");
	expect_no(&softmax,
	          NO_KERNEL "template <int N> __global__ void __launch_bounds__(256) k(float *y) {}\n",
	          "required-kernel");
	expect_no(&softmax, NO_KERNEL "#define KERNEL __global__\nKERNEL void k(float *y) {}\n",
	          "required-kernel");
	/* engineering mode: not required, but reported */
	check(&gemm, NO_KERNEL, &rep);
	assert_int_equal(rep.n_hits, 0);
	assert_int_equal(rep.has_kernel, 0);
	st_policy_report_free(&rep);
	check(&gemm, BASE, &rep);
	assert_int_equal(rep.has_kernel, 1);
	st_policy_report_free(&rep);
}

static void test_abi(void **state)
{
	(void)state;
	const char *no_run = HEAD "__global__ void k(float *y) { y[0] = 0; }\n"
	                          "extern \"C\" int st_init(const st_config *c, const st_tensor *p,\n"
	                          "    int32_t np, cudaStream_t s, void **ctx) { return 0; }\n"
	                          "extern \"C\" void st_free(void *ctx) {}\n";
	expect_hit(&softmax, no_run, "abi", "st_run", 0);
	char src[2048];
	snprintf(src, sizeof src, "%sextern \"C\" int st_run(void *, const st_tensor *, int32_t,\n"
	                          "    st_tensor *, int32_t, cudaStream_t);\n", no_run);
	expect_hit(&softmax, src, "abi", "st_run", 0);
	/* only a comment mentions it */
	snprintf(src, sizeof src, "%s// int st_run(void) { return 0; }\n", no_run);
	expect_hit(&softmax, src, "abi", "st_run", 0);
	expect_no(&softmax, BASE, "abi");
	/* inside an extern "C" block, with noexcept */
	expect_no(&softmax, HEAD "__global__ void k(float *y) { y[0] = 0; }\n"
	                         "extern \"C\" {\nint st_run(void *c, const st_tensor *i, int32_t ni,\n"
	                         "  st_tensor *o, int32_t no, cudaStream_t s) noexcept { return 0; }\n}\n",
	          "abi");
}

/* ---- interposition ------------------------------------------------------------------------ */

static void test_interpose(void **state)
{
	(void)state;
	expect_hit(&softmax,
	           BASE "extern \"C\" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {\n"
	                "    return cudaSuccess; }\n",
	           "interpose", "cudaEventRecord", 12);
	expect_hit(&softmax,
	           BASE "extern \"C\" int cuLaunchKernel(void) { return 0; }\n",
	           "interpose", "cuLaunchKernel", 12);
	/* static helpers, device functions and calls are not replacements */
	expect_clean(&softmax,
	             BASE "static void cudaCheck(cudaError_t e) { if (e != cudaSuccess) return; }\n"
	                  "namespace { void cudaAssert(int ok) { if (!ok) return; } }\n"
	                  "struct Timer { cudaError_t cudaEventRecord(cudaEvent_t e) { return cudaSuccess; } };\n"
	                  "__device__ float cudaHelper(float x) { return x; }\n"
	                  "static void z(void *p) { if (cudaFree(p)) { return; } cudaCheck(cudaFree(p)); }\n");
}

/* ---- rule 5: similarity ------------------------------------------------------------------- */

/* src with identifiers renamed by the table (whole words), as a copier would. */
static char *rename_ids(const char *src, const char *const (*map)[2], int n)
{
	size_t cap = 2 * strlen(src) + 1, k = 0;
	char *out = malloc(cap);
	assert_non_null(out);
	for (const char *p = src; *p;) {
		if (p[0] == '_' || (p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z')) {
			const char *b = p;
			while (*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			       (*p >= '0' && *p <= '9'))
				p++;
			size_t len = (size_t)(p - b);
			const char *to = NULL;
			for (int i = 0; i < n && !to; i++)
				if (strlen(map[i][0]) == len && !strncmp(map[i][0], b, len))
					to = map[i][1];
			if (to) {
				memcpy(out + k, to, strlen(to));
				k += strlen(to);
			} else {
				memcpy(out + k, b, len);
				k += len;
			}
		} else {
			out[k++] = *p++;
		}
	}
	out[k] = 0;
	return out;
}

static void test_similarity(void **state)
{
	(void)state;
	static const char *const map[][2] = {
		{"softmax_ctx", "state_t"}, {"rows", "n_rows"},       {"cols", "n_cols"},
		{"row_max", "maxes"},       {"row_sum", "sums"},      {"block_reduce", "reduce"},
		{"buf", "scratch"},         {"is_max", "take_max"},   {"stride", "half"},
		{"row_max_kernel", "k1"},   {"exp_sum_kernel", "k2"}, {"divide_kernel", "k3"},
		{"xr", "src_row"},          {"yr", "dst_row"},        {"m", "mx"},
		{"s", "acc"},               {"e", "ex"},              {"cfg_get", "lookup"},
		{"tensor_ok", "valid"},     {"value", "result"},      {"name", "key"},
		{"c", "st"},                {"x", "input"},           {"y", "output"},
		{"j", "col"},               {"BLOCK", "THREADS"},     {"other", "peer"},
	};
	char *ref, *exp;
	size_t ref_len, exp_len;
	st_err err = {""};
	assert_int_equal(st_read_file(softmax.reference, &ref, &ref_len, &err), ST_OK);
	assert_int_equal(st_read_file(softmax.experts[0], &exp, &exp_len, &err), ST_OK);
	char *copy = rename_ids(ref, map, (int)(sizeof map / sizeof map[0]));
	assert_string_not_equal(copy, ref);

	st_policy_report rep;
	check(&softmax, copy, &rep);
	print_message("renamed reference: %.3f to the %s\n", rep.similarity, rep.similar_to);
	assert_true(rep.similarity >= 0.9);
	assert_string_equal(rep.similar_to, "reference");
	assert_int_equal(rep.n_hits, 0); /* similarity is reported, not a hit */
	st_policy_report_free(&rep);

	double indep = st_policy_similarity(exp, exp_len, ref, ref_len);
	print_message("expert vs reference: %.3f\n", indep);
	assert_true(indep < 0.5);
	assert_true(indep > 0.0);
	assert_true(st_policy_similarity(ref, ref_len, ref, ref_len) == 1.0);
	assert_true(st_policy_similarity("int x;", 6, ref, ref_len) == 0.0);

	/* the expert checked as a candidate is closest to the expert */
	check(&softmax, exp, &rep);
	assert_string_equal(rep.similar_to, "expert");
	assert_true(rep.similarity > 0.999);
	st_policy_report_free(&rep);
	/* a small original solution is far from both */
	check(&softmax, BASE, &rep);
	assert_true(rep.similarity < 0.2);
	st_policy_report_free(&rep);

	free(copy);
	free(ref);
	free(exp);
}

/* ---- size, bytes, files ------------------------------------------------------------------- */

static void test_not_source(void **state)
{
	(void)state;
	st_policy_report rep;
	st_err err = {""};
	const char nul[] = BASE "int a;\0int b;\n";
	assert_int_equal(st_policy_check_text(nul, sizeof nul - 1, &softmax, &rep, &err), ST_OK);
	assert_int_equal(rep.n_hits, 1);
	assert_string_equal(rep.hits[0].rule, "not-source");
	assert_int_equal(rep.hits[0].line, 12);
	st_policy_report_free(&rep);
	expect_hit(&softmax, BASE "static const char *s = \"\xff\xfe\";\n", "not-source", "UTF-8",
	           12);
	expect_hit(&softmax, BASE "static const char *s = \"\xc0\xaf\";\n", "not-source", "UTF-8",
	           12); /* overlong '/' */
	expect_hit(&softmax, BASE "static const char *s = \"\x1b[2J\";\n", "not-source", "0x1b",
	           12);
	/* real UTF-8 in comments and strings is fine */
	expect_clean(&softmax, BASE "// softmax: σ(x)ᵢ = eˣⁱ / Σ eˣʲ\nstatic const char *u = \"μs\";\n");
}

static void test_files(void **state)
{
	(void)state;
	char dir[] = "/tmp/st_test_policy.XXXXXX", path[PATH_MAX];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/big.cu", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(BASE, f);
	const char *pad = "// padding padding padding padding\n";
	for (size_t n = strlen(BASE); n <= ST_POLICY_MAX_BYTES; n += strlen(pad))
		fputs(pad, f);
	assert_int_equal(fclose(f), 0);

	st_policy_report rep;
	st_err err = {""};
	assert_int_equal(st_policy_check(path, &softmax, &rep, &err), ST_OK);
	assert_int_equal(rep.n_hits, 1);
	assert_string_equal(rep.hits[0].rule, "too-large");
	st_policy_report_free(&rep);
	assert_int_equal(unlink(path), 0);

	snprintf(path, sizeof path, "%s/ok.cu", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(BASE, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(st_policy_check(path, &softmax, &rep, &err), ST_OK);
	assert_int_equal(rep.n_hits, 0);
	assert_int_equal(rep.has_kernel, 1);
	st_policy_report_free(&rep);
	assert_int_equal(unlink(path), 0);

	/* an unreadable candidate is an error, not a verdict */
	assert_int_equal(st_policy_check(path, &softmax, &rep, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "ok.cu"));
	assert_int_equal(rep.n_hits, 0);
	st_policy_report_free(&rep);
	assert_int_equal(rmdir(dir), 0);
}

static void test_describe(void **state)
{
	(void)state;
	st_policy_hit h = {12, "forbidden-symbol", "'dlopen' may not be used (loads code at run time)"};
	char buf[300];
	st_policy_describe(&h, buf, sizeof buf);
	assert_string_equal(buf, "line 12: forbidden-symbol: 'dlopen' may not be used (loads code at "
	                         "run time)");
	st_policy_hit whole = {0, "abi", "no st_run definition"};
	st_policy_describe(&whole, buf, sizeof buf);
	assert_string_equal(buf, "abi: no st_run definition");
	char small[8];
	st_policy_describe(&h, small, sizeof small);
	assert_string_equal(small, "line 12");
	/* the same finding twice is reported once, at its first line */
	st_policy_report rep;
	check(&softmax, BASE "static void f(void) { getenv(\"A\");\n getenv(\"B\"); }\n", &rep);
	assert_int_equal(rep.n_hits, 1);
	assert_int_equal(rep.hits[0].line, 12);
	st_policy_report_free(&rep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shipped_solutions_pass),
		cmocka_unit_test(test_include_line),
		cmocka_unit_test(test_include_allowed),
		cmocka_unit_test(test_include_libraries),
		cmocka_unit_test(test_symbols),
		cmocka_unit_test(test_driver_lookup),
		cmocka_unit_test(test_symbols_not_code),
		cmocka_unit_test(test_asm),
		cmocka_unit_test(test_required_kernel),
		cmocka_unit_test(test_abi),
		cmocka_unit_test(test_interpose),
		cmocka_unit_test(test_similarity),
		cmocka_unit_test(test_not_source),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_describe),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
