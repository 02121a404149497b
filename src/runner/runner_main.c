/* The runner: a child process that loads ONE solution and runs it on request from the parent.
 * It owns the device buffers, generates params and inputs from seeds the parent sends, poisons
 * outputs before every call, and copies outputs into the shared-memory block the parent reads.
 * The parent never loads solution code; this process never sees another solution's outputs.
 * Usage (by the parent only):
 *   stitch-runner-<backend> --fd N --workdir DIR [--uid U] [--no-sandbox] [--profile] */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "common/clock.h"
#include "common/digest.h"
#include "common/proto.h"
#include "dev_keep.h"
#include "rng.h"
#include "runner_gen.h"
#include "sandbox.h"
#include "stitch/task_hooks.h"
#include "task/dtype.h"
#include "task/task.h"

typedef int (*st_init_fn)(const st_config *, const st_tensor *, int32_t, cudaStream_t, void **);
typedef int (*st_run_fn)(void *, const st_tensor *, int32_t, st_tensor *, int32_t, cudaStream_t);
typedef void (*st_free_fn)(void *);
typedef int (*st_gen_fn)(const st_config *, uint64_t, st_tensor *, int32_t, char *, size_t);

#define N_SETS 2  /* two buffer sets, so input and output pointers change between calls */

static struct runner {
	void *dl;
	int loaded;           /* a solution is loaded: the module at dl, or the built-in null one */
	st_init_fn sol_init;
	st_run_fn sol_run;
	st_free_fn sol_free;
	void *hooks_dl;
	st_gen_fn hook_gen;
	st_gen_fn hook_perturb;  /* same signature: (sizes, seed, tensors, n, msg, len) */

	int ready;            /* setup done and st_init succeeded */
	void *ctx;
	int n_sizes;
	char **size_names;
	int64_t *size_values;
	st_config cfg;
	st_tensor *params;
	int n_params;
	st_tensor *in[N_SETS], *out[N_SETS];
	int n_in, n_out;
	void *block;          /* the device memory of all the tensors above, one allocation */
	size_t block_bytes;
	int keep;             /* the set-up said to keep the block after teardown (dev_keep.h) */
	rb_init *in_init;
	void **staging;       /* host copies of inputs when a task hook generates them */
	int staged;           /* staging holds the inputs of seed staged_seed (generate_inputs) */
	uint64_t staged_seed;
	size_t *out_off[2];   /* shm offsets of the outputs, per slot */
	size_t *in_off;       /* shm offsets of the inputs (dump) */
	unsigned char *shm;
	size_t shm_len;
	int in_ready[N_SETS]; /* the set's inputs hold generated data */
	uint64_t param_seed;
} R;

static char g_err[2048];

/* Where the present request's time went, in ms by stage (set-up: alloc, params, populate, init,
 * total; teardown: sol_free, free, total), and how many blocks came kept or new: sent back with
 * the reply, for a parent that wants to know why set-up or teardown grew. */
static json_t *g_ms;

static void ms_add(const char *stage, double ms)
{
	if (!g_ms)
		return;
	json_t *cur = json_object_get(g_ms, stage);
	json_object_set_new(g_ms, stage, json_real(json_number_value(cur) + ms));
}

static void seterr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void seterr(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g_err, sizeof g_err, fmt, ap);
	va_end(ap);
}

static json_t *reply_ok(void)
{
	return json_pack("{s:b}", "ok", 1);
}

static json_t *reply_fail(const char *status, const char *reason)
{
	return json_pack("{s:b,s:s,s:s}", "ok", 0, "status", status, "reason", reason);
}

static size_t tensor_bytes(const st_tensor *t)
{
	size_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	return n * st_dtype_size(t->dtype);
}

static int64_t tensor_numel(const st_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

/* ---- load -------------------------------------------------------------------------------- */

/* The null solution ("load" with "null": true): it does nothing, so a timed call of it is the
 * harness's own per-call work alone (fresh inputs, poison, flush, the sync and the round trip).
 * An imported task has no reference to measure that against the candidate's; this stands in. */
static int null_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                     cudaStream_t stream, void **ctx)
{
	(void)cfg;
	(void)params;
	(void)n_params;
	(void)stream;
	*ctx = NULL;
	return 0;
}

static int null_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                    cudaStream_t stream)
{
	(void)ctx;
	(void)in;
	(void)n_in;
	(void)out;
	(void)n_out;
	(void)stream;
	return 0;
}

static void null_free(void *ctx)
{
	(void)ctx;
}

static json_t *op_load(json_t *req)
{
	const char *path = json_string_value(json_object_get(req, "solution"));
	const char *hooks = json_string_value(json_object_get(req, "hooks"));
	int null = json_is_true(json_object_get(req, "null"));
	if (R.loaded)
		return reply_fail("harness", "load: a solution is already loaded");
	if (!path && !null)
		return reply_fail("harness", "load: no solution path");
	if (hooks) {
		R.hooks_dl = dlopen(hooks, RTLD_NOW | RTLD_LOCAL);
		if (!R.hooks_dl) {
			seterr("cannot load task hooks %s: %s", hooks, dlerror());
			return reply_fail("harness", g_err);
		}
		R.hook_gen = (st_gen_fn)(uintptr_t)dlsym(R.hooks_dl, "st_task_generate");
		R.hook_perturb = (st_gen_fn)(uintptr_t)dlsym(R.hooks_dl, "st_task_perturb");
	}
	if (null) {
		R.sol_init = null_init;
		R.sol_run = null_run;
		R.sol_free = null_free;
		R.loaded = 1;
		return reply_ok();
	}
	R.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!R.dl) {
		seterr("cannot load the solution: %s", dlerror());
		return reply_fail("abi", g_err);
	}
	const char *names[3] = {"st_init", "st_run", "st_free"};
	void *syms[3];
	for (int i = 0; i < 3; i++) {
		syms[i] = dlsym(R.dl, names[i]);
		if (!syms[i]) {
			seterr("the solution does not export %s (ABI v1 needs st_init, st_run and st_free "
			       "with C linkage)", names[i]);
			return reply_fail("abi", g_err);
		}
	}
	R.sol_init = (st_init_fn)(uintptr_t)syms[0];
	R.sol_run = (st_run_fn)(uintptr_t)syms[1];
	R.sol_free = (st_free_fn)(uintptr_t)syms[2];
	R.loaded = 1;
	return reply_ok();
}

/* ---- setup / teardown -------------------------------------------------------------------- */

static void free_tensors(st_tensor *t, int n)
{
	if (!t)
		return;
	for (int i = 0; i < n; i++)
		free((char *)t[i].name);
	free(t);
}

static void teardown(void)
{
	double t0 = st_now_s();
	if (R.ready && R.sol_free)
		R.sol_free(R.ctx);
	double t1 = st_now_s();
	R.ready = 0;
	R.ctx = NULL;
	memset(R.in_ready, 0, sizeof R.in_ready);
	free_tensors(R.params, R.n_params);
	for (int s = 0; s < N_SETS; s++) {
		free_tensors(R.in[s], R.n_in);
		free_tensors(R.out[s], R.n_out);
		R.in[s] = R.out[s] = NULL;
	}
	/* Poisoned before it is kept or freed: memory the next size set (or a later allocation of
	 * the solution) gets back must not still hold inputs or results of earlier calls. */
	dk_release(R.block, R.block_bytes, R.keep);
	R.block = NULL;
	R.block_bytes = 0;
	if (R.shm) { /* a set was up */
		ms_add("sol_free", (t1 - t0) * 1e3);
		ms_add("free", (st_now_s() - t1) * 1e3);
	}
	if (R.staging)
		for (int i = 0; i < R.n_in; i++)
			free(R.staging[i]);
	free(R.staging);
	free(R.in_init);
	free(R.out_off[0]);
	free(R.out_off[1]);
	free(R.in_off);
	for (int i = 0; i < R.n_sizes; i++)
		free(R.size_names[i]);
	free(R.size_names);
	free(R.size_values);
	if (R.shm)
		munmap(R.shm, R.shm_len);
	R.params = NULL;
	R.staging = NULL;
	R.staged = 0;
	R.in_init = NULL;
	R.out_off[0] = R.out_off[1] = R.in_off = NULL;
	R.size_names = NULL;
	R.size_values = NULL;
	R.shm = NULL;
	R.n_params = R.n_in = R.n_out = R.n_sizes = 0;
}

static int parse_init(json_t *j, rb_init *init)
{
	const char *d = json_string_value(json_object_get(j, "dist"));
	if (!d)
		return -1;
	memset(init, 0, sizeof *init);
	if (!strcmp(d, "normal"))
		init->dist = ST_DIST_NORMAL;
	else if (!strcmp(d, "uniform"))
		init->dist = ST_DIST_UNIFORM;
	else if (!strcmp(d, "randint"))
		init->dist = ST_DIST_RANDINT;
	else if (!strcmp(d, "const"))
		init->dist = ST_DIST_CONST;
	else if (!strcmp(d, "task"))
		init->dist = ST_DIST_TASK;
	else
		return -1;
	init->a = json_number_value(json_object_get(j, "a"));
	init->b = json_number_value(json_object_get(j, "b"));
	init->lo = json_integer_value(json_object_get(j, "lo"));
	init->hi = json_integer_value(json_object_get(j, "hi"));
	return 0;
}

/* n tensors described by a JSON array [{name, dtype, shape}], without memory yet
 * (place_tensors gives it). */
static int make_tensors(json_t *arr, st_tensor **out, int *n_out)
{
	size_t n = json_array_size(arr);
	st_tensor *t = calloc(n ? n : 1, sizeof *t);
	if (!t) {
		seterr("out of host memory");
		return -1;
	}
	*out = t;
	*n_out = (int)n;
	for (size_t i = 0; i < n; i++) {
		json_t *j = json_array_get(arr, i);
		const char *name = json_string_value(json_object_get(j, "name"));
		const char *dt = json_string_value(json_object_get(j, "dtype"));
		json_t *shape = json_object_get(j, "shape");
		if (!name || !dt || st_dtype_parse(dt, &t[i].dtype) || !json_is_array(shape) ||
		    json_array_size(shape) < 1 || json_array_size(shape) > 8) {
			seterr("setup: malformed tensor %zu", i);
			return -1;
		}
		t[i].name = strdup(name);
		t[i].ndim = (int32_t)json_array_size(shape);
		for (int d = 0; d < t[i].ndim; d++)
			t[i].shape[d] = json_integer_value(json_array_get(shape, (size_t)d));
	}
	return 0;
}

/* Where a tensor of `bytes` starts after `at` in the set's block: where cudaMalloc would align
 * it (2 MiB pages for large ones, 256 bytes for the rest), so that kernels see the alignment a
 * tensor of its own would have. */
static size_t place_at(size_t at, size_t bytes)
{
	size_t align = bytes >= (2u << 20) ? (2u << 20) : 256;
	return (at + align - 1) / align * align;
}

/* One device allocation for every tensor of the set-up (params, both buffer sets): one call
 * into the driver rather than one per tensor, and one block to keep for the set's next time
 * (dev_keep.h). 0, or -1 with g_err. */
static int place_tensors(void)
{
	st_tensor *lists[1 + 2 * N_SETS] = {R.params};
	int counts[1 + 2 * N_SETS] = {R.n_params};
	for (int s = 0; s < N_SETS; s++) {
		lists[1 + 2 * s] = R.in[s];
		counts[1 + 2 * s] = R.n_in;
		lists[2 + 2 * s] = R.out[s];
		counts[2 + 2 * s] = R.n_out;
	}
	size_t at = 0;
	for (int l = 0; l < 1 + 2 * N_SETS; l++)
		for (int i = 0; i < counts[l]; i++) {
			size_t bytes = tensor_bytes(&lists[l][i]);
			at = place_at(at, bytes) + (bytes ? bytes : 1);
		}
	dk_from from;
	double t0 = st_now_s();
	if (dk_alloc(&R.block, at ? at : 1, &from, g_err, sizeof g_err))
		return -1;
	R.block_bytes = at ? at : 1;
	ms_add("alloc", (st_now_s() - t0) * 1e3);
	ms_add(from == DK_ARENA ? "arena_blocks" : from == DK_KEPT ? "kept_blocks" : "new_blocks", 1);
	at = 0;
	for (int l = 0; l < 1 + 2 * N_SETS; l++)
		for (int i = 0; i < counts[l]; i++) {
			size_t bytes = tensor_bytes(&lists[l][i]);
			at = place_at(at, bytes);
			lists[l][i].data = (unsigned char *)R.block + at;
			at += bytes ? bytes : 1;
		}
	return 0;
}

static int read_offsets(json_t *arr, size_t **out, int n)
{
	*out = calloc((size_t)(n ? n : 1), sizeof **out);
	if (!*out)
		return -1;
	if ((int)json_array_size(arr) != n)
		return -1;
	for (int i = 0; i < n; i++)
		(*out)[i] = (size_t)json_integer_value(json_array_get(arr, (size_t)i));
	return 0;
}

/* The params between the device and the shared block at the parent's offsets: up (stitch verify
 * --params) or down (--dump). 0, or -1 with g_err set. */
static int copy_params(json_t *offsets, int up)
{
	size_t *off = NULL;
	g_err[0] = '\0';
	int bad = read_offsets(offsets, &off, R.n_params);
	for (int i = 0; i < R.n_params && !bad; i++) {
		size_t n = tensor_bytes(&R.params[i]);
		bad = off[i] > R.shm_len || n > R.shm_len - off[i] ||
		      (up ? rb_upload(R.params[i].data, R.shm + off[i], n, g_err, sizeof g_err)
		          : rb_download(R.shm + off[i], R.params[i].data, n, g_err, sizeof g_err));
	}
	free(off);
	if (bad && !g_err[0])
		seterr("setup: malformed params layout");
	return bad ? -1 : 0;
}

/* The size set's [name, value] pairs into R.cfg, the solution's st_config; -1 when out of
 * memory. */
static int read_sizes(json_t *sizes)
{
	R.n_sizes = (int)json_array_size(sizes);
	R.size_names = calloc((size_t)R.n_sizes + 1, sizeof *R.size_names);
	R.size_values = calloc((size_t)R.n_sizes + 1, sizeof *R.size_values);
	if (!R.size_names || !R.size_values)
		return -1;
	for (int i = 0; i < R.n_sizes; i++) {
		json_t *kv = json_array_get(sizes, (size_t)i);
		R.size_names[i] = strdup(json_string_value(json_array_get(kv, 0)));
		R.size_values[i] = json_integer_value(json_array_get(kv, 1));
	}
	R.cfg.n = R.n_sizes;
	R.cfg.names = (const char *const *)R.size_names;
	R.cfg.values = R.size_values;
	return 0;
}

static json_t *op_setup(json_t *req, int fd)
{
	if (!R.loaded)
		return reply_fail("harness", "setup before load");
	teardown();
	if (read_sizes(json_object_get(req, "sizes")))
		return reply_fail("harness", "out of host memory");

	if (fd < 0)
		return reply_fail("harness", "setup without a shared-memory block");
	R.shm_len = (size_t)json_integer_value(json_object_get(req, "shm_bytes"));
	R.shm = mmap(NULL, R.shm_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (R.shm == MAP_FAILED) {
		R.shm = NULL;
		seterr("mmap of %zu shared bytes: %s", R.shm_len, strerror(errno));
		return reply_fail("harness", g_err);
	}
	/* Not pinned (cudaHostRegister): pinning and unpinning the block for every size set cost
	 * more than the few faster copies it buys, and they serialise in the driver with the other
	 * GPUs' verifies (stitch serve, several GPUs). */

	json_t *params = json_object_get(req, "params");
	json_t *inputs = json_object_get(req, "inputs"), *outputs = json_object_get(req, "outputs");
	if (make_tensors(params, &R.params, &R.n_params))
		return reply_fail("runtime_error", g_err);
	R.keep = json_is_true(json_object_get(req, "keep"));
	if (!R.keep)
		dk_drop_all();
	else
		dk_unreserve();
	for (int s = 0; s < N_SETS; s++)
		if (make_tensors(inputs, &R.in[s], &R.n_in) || make_tensors(outputs, &R.out[s], &R.n_out))
			return reply_fail("runtime_error", g_err);
	/* set-up refuses more, so per-input arrays on the stack can be this long */
	if (R.n_in > ST_MAX_TENSORS) {
		seterr("setup: more inputs than the runner takes (%d)", ST_MAX_TENSORS);
		return reply_fail("harness", g_err);
	}
	if (place_tensors())
		return reply_fail("runtime_error", g_err);
	uint64_t pseed = (uint64_t)json_integer_value(json_object_get(req, "param_seed"));
	R.param_seed = pseed;
	/* Params the parent put into the shared block (stitch verify --params FILE) are uploaded
	 * instead of generated. */
	json_t *given = json_object_get(json_object_get(req, "layout"), "params_in");
	if (given && copy_params(given, 1))
		return reply_fail("harness", g_err);
	for (int i = 0; i < R.n_params && !given; i++) {
		rb_init init;
		if (parse_init(json_object_get(json_array_get(params, (size_t)i), "init"), &init) ||
		    init.dist == ST_DIST_TASK)
			return reply_fail("harness", "setup: params need an elementwise init");
		if (rb_fill(R.params[i].data, R.params[i].dtype, tensor_numel(&R.params[i]), &init,
		            st_tensor_seed(pseed, (uint64_t)i), g_err, sizeof g_err))
			return reply_fail("runtime_error", g_err);
	}
	R.in_init = calloc((size_t)R.n_in + 1, sizeof *R.in_init);
	int need_staging = 0;
	for (int i = 0; i < R.n_in; i++) {
		if (parse_init(json_object_get(json_array_get(inputs, (size_t)i), "init"), &R.in_init[i]))
			return reply_fail("harness", "setup: malformed input init");
		need_staging |= R.in_init[i].dist == ST_DIST_TASK;
	}
	if (need_staging) {
		if (!R.hook_gen)
			return reply_fail("harness", "an input needs the task generator, but no task hooks "
			                             "export st_task_generate");
		R.staging = calloc((size_t)R.n_in, sizeof *R.staging);
		for (int i = 0; i < R.n_in; i++)
			if (!(R.staging[i] = malloc(tensor_bytes(&R.in[0][i]) + 1)))
				return reply_fail("runtime_error", "out of host memory for input staging");
	}
	json_t *shm = json_object_get(req, "layout");
	if (read_offsets(json_object_get(shm, "out0"), &R.out_off[0], R.n_out) ||
	    read_offsets(json_object_get(shm, "out1"), &R.out_off[1], R.n_out) ||
	    read_offsets(json_object_get(shm, "in"), &R.in_off, R.n_in))
		return reply_fail("harness", "setup: malformed shared-memory layout");
	/* The parent allocated the memory this runner writes ("populate" bytes from the start: params
	 * and outputs); mapping it now, in one call, spares a page fault per 4 KiB in every first
	 * copy of outputs. Only a speed-up: a kernel without MADV_POPULATE_WRITE (before Linux
	 * 5.14) faults them in as before. */
	json_t *jpop = json_object_get(req, "populate");
	size_t used = json_is_integer(jpop) && json_integer_value(jpop) > 0
	                  ? (size_t)json_integer_value(jpop) : 0;
	double tp = st_now_s();
	madvise(R.shm, used < R.shm_len ? used : R.shm_len, MADV_POPULATE_WRITE);
	ms_add("populate", (st_now_s() - tp) * 1e3);
	/* The parent asked for the params too (stitch verify --dump): copied before st_init, so
	 * they are the ones the harness made, whatever the solution does with them later. */
	json_t *par = json_object_get(shm, "params");
	if (par && copy_params(par, 0))
		return reply_fail("harness", g_err);

	int fatal = 0;
	double tf = st_now_s();
	if (rb_check("generating params", &fatal, g_err, sizeof g_err))
		return reply_fail("runtime_error", g_err);
	double ti = st_now_s();
	ms_add("params", (ti - tf) * 1e3);
	int rc = R.sol_init(&R.cfg, R.params, R.n_params, rb_stream(), &R.ctx);
	ms_add("init", (st_now_s() - ti) * 1e3);
	if (rc) {
		seterr("st_init returned %d", rc);
		return reply_fail("runtime_error", g_err);
	}
	if (rb_check("st_init", &fatal, g_err, sizeof g_err)) {
		if (fatal) {
			json_t *r = reply_fail("runtime_error", g_err);
			json_object_set_new(r, "fatal", json_true());
			return r;
		}
		return reply_fail("runtime_error", g_err);
	}
	R.ready = 1;
	return reply_ok();
}

/* ---- run ----------------------------------------------------------------------------------- */

/* The host copies of the inputs of `seed`, made by the task's generator, in R.staging. They are
 * made again only for another seed: the audit re-runs timed calls from their buffer set's seed,
 * two seeds for all of them, and a task's generator takes seconds at eval (t3/bfs's graph:
 * 1.4-2 s). 0, or -1 with g_err. */
static int stage_inputs(uint64_t seed)
{
	if (R.staged && R.staged_seed == seed)
		return 0;
	R.staged = 0;
	st_tensor host[ST_MAX_TENSORS];
	for (int i = 0; i < R.n_in; i++) {
		host[i] = R.in[0][i];
		host[i].data = R.staging[i];
		st_gen_host(R.staging[i], host[i].dtype, tensor_numel(&host[i]), &R.in_init[i],
		            st_tensor_seed(seed, (uint64_t)i));
	}
	char msg[512] = "";
	if (R.hook_gen(&R.cfg, seed, host, R.n_in, msg, sizeof msg)) {
		seterr("task generator failed: %s", msg);
		return -1;
	}
	R.staged = 1;
	R.staged_seed = seed;
	return 0;
}

static int generate_inputs(int set, uint64_t seed)
{
	st_tensor *in = R.in[set];
	if (!R.staging) {
		for (int i = 0; i < R.n_in; i++)
			if (rb_fill(in[i].data, in[i].dtype, tensor_numel(&in[i]), &R.in_init[i],
			            st_tensor_seed(seed, (uint64_t)i), g_err, sizeof g_err))
				return -1;
		return 0;
	}
	if (stage_inputs(seed))
		return -1;
	/* uploaded every time, so that inputs a solution wrote over are made whole again */
	for (int i = 0; i < R.n_in; i++)
		if (rb_upload(in[i].data, R.staging[i], tensor_bytes(&in[i]), g_err, sizeof g_err))
			return -1;
	return 0;
}

/* Inputs the parent put into the shared block (an imported task's stored seeds) instead of
 * generated ones. */
static int given_inputs(int set)
{
	for (int i = 0; i < R.n_in; i++)
		if (rb_upload(R.in[set][i].data, R.shm + R.in_off[i], tensor_bytes(&R.in[set][i]), g_err,
		              sizeof g_err))
			return -1;
	return 0;
}

/* The metamorphic check's changed inputs: the generated ones, changed on the host by the task's
 * st_task_perturb. The shared block's input area is the host copy; the parent computes the same
 * change on its own and never reads this one back. */
static int perturb_inputs(int set, uint64_t perturb_seed)
{
	st_tensor *in = R.in[set], host[ST_MAX_TENSORS];
	if (!R.hook_perturb) {
		seterr("perturb: the task hooks export no st_task_perturb");
		return -1;
	}
	for (int i = 0; i < R.n_in; i++) {
		host[i] = in[i];
		host[i].data = R.shm + R.in_off[i];
		if (rb_download(host[i].data, in[i].data, tensor_bytes(&in[i]), g_err, sizeof g_err))
			return -1;
	}
	char msg[512] = "";
	if (R.hook_perturb(&R.cfg, perturb_seed, host, R.n_in, msg, sizeof msg)) {
		seterr("task perturbation failed: %s", msg);
		return -1;
	}
	for (int i = 0; i < R.n_in; i++)
		if (rb_upload(in[i].data, host[i].data, tensor_bytes(&in[i]), g_err, sizeof g_err))
			return -1;
	return 0;
}

/* A failure of the solution (the message is in g_err); `fatal` when the device context is lost. */
static json_t *fault_reply(int fatal)
{
	json_t *r = reply_fail("runtime_error", g_err);
	if (fatal)
		json_object_set_new(r, "fatal", json_true());
	return r;
}

/* Buffer set `set`'s outputs into the shared block's `slot`: 0, or -1 with g_err. */
static int download_outputs(int set, int slot)
{
	for (int i = 0; i < R.n_out; i++)
		if (rb_download(R.shm + R.out_off[slot][i], R.out[set][i].data,
		                tensor_bytes(&R.out[set][i]), g_err, sizeof g_err))
			return -1;
	return 0;
}

/* The word sums of buffer set `set`'s inputs into sums[0..n_in) (common/digest.h), taken whole
 * before it returns: before st_run no kernel of the solution may race the read. 0, or -1 with
 * g_err. */
static int inputs_digest(int set, uint64_t *sums)
{
	rb_span spans[ST_MAX_TENSORS];
	for (int i = 0; i < R.n_in; i++)
		spans[i] = (rb_span){R.in[set][i].data, tensor_bytes(&R.in[set][i])};
	if (rb_digest_begin(1, R.n_in, g_err, sizeof g_err) ||
	    rb_digest_add(0, spans, R.n_in, g_err, sizeof g_err) ||
	    rb_digest_end(1, R.n_in, sums, g_err, sizeof g_err))
		return -1;
	return 0;
}

/* "inputs_written": the inputs whose bytes st_run changed (the ABI's st_run reads in[] and
 * writes out[]), where the parent asked ("check_inputs"); nothing when none. */
static int inputs_written(json_t *reply, int set, const uint64_t *before)
{
	uint64_t after[ST_MAX_TENSORS];
	if (inputs_digest(set, after))
		return -1;
	json_t *w = NULL;
	for (int i = 0; i < R.n_in; i++)
		if (after[i] != before[i]) {
			if (!w)
				w = json_array();
			json_array_append_new(w, json_integer(i));
		}
	if (w)
		json_object_set_new(reply, "inputs_written", w);
	return 0;
}

static json_t *op_run(json_t *req)
{
	if (!R.ready)
		return reply_fail("harness", "run before a successful setup");
	uint64_t seed = (uint64_t)json_integer_value(json_object_get(req, "seed"));
	int set = (int)json_integer_value(json_object_get(req, "set")) % N_SETS;
	int slot = (int)json_integer_value(json_object_get(req, "slot")) % 2;
	int dump = json_is_true(json_object_get(req, "dump_inputs"));
	int fetch = !json_is_false(json_object_get(req, "fetch")); /* else a fetch request follows */
	int fatal = 0;
	if (json_is_true(json_object_get(req, "given")) ? given_inputs(set)
	                                                 : generate_inputs(set, seed))
		return reply_fail("harness", g_err);
	json_t *jperturb = json_object_get(req, "perturb");
	if (jperturb && perturb_inputs(set, (uint64_t)json_integer_value(jperturb)))
		return reply_fail("harness", g_err);
	for (int i = 0; i < R.n_out; i++)
		if (rb_poison(R.out[set][i].data, tensor_bytes(&R.out[set][i]), g_err, sizeof g_err))
			return reply_fail("harness", g_err);
	if (rb_check("preparing inputs", &fatal, g_err, sizeof g_err))
		return fault_reply(fatal);
	int check_in = json_is_true(json_object_get(req, "check_inputs"));
	uint64_t in_sums[ST_MAX_TENSORS];
	if (check_in && inputs_digest(set, in_sums))
		return fault_reply(1);
	double t0 = st_now_s();
	/* Only the first call is in the range: a profiler that filters by it (ncu) then sees the
	 * kernels of exactly one st_run. */
	static int ranged;
	if (!ranged)
		rb_range_push("stitch_st_run");
	int rc = R.sol_run(R.ctx, R.in[set], R.n_in, R.out[set], R.n_out, rb_stream());
	if (!ranged++)
		rb_range_pop();
	if (rc) {
		seterr("st_run returned %d", rc);
		rb_check("st_run", &fatal, g_err + strlen(g_err), sizeof g_err - strlen(g_err));
		return fault_reply(fatal);
	}
	if (rb_check("st_run", &fatal, g_err, sizeof g_err))
		return fault_reply(fatal);
	double t1 = st_now_s();
	R.in_ready[set] = 1;
	if (fetch && download_outputs(set, slot))
		return fault_reply(1);
	if (dump)
		for (int i = 0; i < R.n_in; i++)
			if (rb_download(R.shm + R.in_off[i], R.in[set][i].data, tensor_bytes(&R.in[set][i]),
			                g_err, sizeof g_err))
				return fault_reply(1);
	json_t *r = reply_ok();
	json_object_set_new(r, "wall_ms", json_real((t1 - t0) * 1e3));
	if (check_in && inputs_written(r, set, in_sums)) {
		json_decref(r);
		return fault_reply(1);
	}
	return r;
}

/* ---- time ---------------------------------------------------------------------------------- */

static int timed_set;

static int run_timed(void *arg)
{
	(void)arg;
	return R.sol_run(R.ctx, R.in[timed_set], R.n_in, R.out[timed_set], R.n_out, rb_stream());
}

/* The batch's commitment to the outputs each timed call left (docs/architecture.md, "commit,
 * then audit"): per call the digest of its outputs, taken after its sample and before the next
 * one, folded here from the word sums rb_digest_end copied out. The parent later re-runs calls of
 * its choice from their seeds and recomputes the digest from the bytes; a call whose work was not
 * done by the time its digest was taken cannot match. NULL when memory runs out. */
static json_t *fold_digests(const uint64_t *sums, int calls, const size_t *bytes)
{
	json_t *digests = json_array();
	for (int c = 0; digests && c < calls; c++) {
		uint64_t d = 0;
		for (int k = 0; k < R.n_out; k++)
			d = st_digest_fold(d, (uint64_t)k, bytes[k],
			                   sums[(size_t)c * (size_t)R.n_out + (size_t)k]);
		char hex[17];
		st_digest_hex(d, hex);
		if (json_array_append_new(digests, json_string(hex))) {
			json_decref(digests);
			digests = NULL;
		}
	}
	return digests;
}

/* The digests of a batch of `calls` calls whose sums are queued: NULL with g_err on a fault. */
static json_t *batch_digests(int calls)
{
	uint64_t *sums = malloc((size_t)calls * (size_t)(R.n_out ? R.n_out : 1) * sizeof *sums);
	size_t *bytes = malloc((size_t)(R.n_out ? R.n_out : 1) * sizeof *bytes);
	json_t *d = NULL;
	if (!sums || !bytes)
		seterr("out of memory for %d digests", calls);
	else if (!rb_digest_end(calls, R.n_out, sums, g_err, sizeof g_err)) {
		for (int k = 0; k < R.n_out; k++)
			bytes[k] = tensor_bytes(&R.out[0][k]);
		if (!(d = fold_digests(sums, calls, bytes)))
			seterr("out of memory for %d digests", calls);
	}
	free(sums);
	free(bytes);
	return d;
}

/* The spans a timed call on buffer set `set` makes cold before it: the params, its inputs and,
 * where they are not poisoned, its outputs. Their count. */
static int cold_spans(int set, int with_outputs, rb_span *cold)
{
	int n = 0;
	for (int k = 0; k < R.n_params; k++)
		cold[n++] = (rb_span){R.params[k].data, tensor_bytes(&R.params[k])};
	for (int k = 0; k < R.n_in; k++)
		cold[n++] = (rb_span){R.in[set][k].data, tensor_bytes(&R.in[set][k])};
	for (int k = 0; with_outputs && k < R.n_out; k++)
		cold[n++] = (rb_span){R.out[set][k].data, tensor_bytes(&R.out[set][k])};
	return n;
}

/* Timed call i's inputs in its buffer set (i % N_SETS): the parent's (given) or made afresh from
 * the call's seed, which the parent derives from the batch's seed as the runner does here. */
static int timed_inputs(int i, int given, uint64_t seed)
{
	return given ? given_inputs(i % N_SETS)
	             : generate_inputs(i % N_SETS, st_call_seed(seed, (uint64_t)i));
}

static json_t *op_time(json_t *req)
{
	if (!R.ready)
		return reply_fail("harness", "time before a successful setup");
	int n = (int)json_integer_value(json_object_get(req, "n"));
	if (n < 1 || n > 100000)
		return reply_fail("harness", "time: n out of range");
	/* Timing alternates between both buffer sets; one that no call has filled yet gets inputs
	 * of its own, so no sample ever runs on uninitialised memory. "fill": both sets filled
	 * anew from st_fill_seed(fill, set), which the parent knows (a task's host generator's
	 * inputs are kept through timing: the audit re-makes them from these seeds). */
	json_t *jfill = json_object_get(req, "fill");
	for (int s = 0; s < N_SETS; s++)
		if (!R.in_ready[s] || json_is_integer(jfill)) {
			uint64_t fs = json_is_integer(jfill)
			            ? st_fill_seed((uint64_t)json_integer_value(jfill), s)
			            : st_mix64(R.param_seed ^ (0x5eedull + (uint64_t)s));
			if (generate_inputs(s, fs))
				return reply_fail("harness", g_err);
			R.in_ready[s] = 1;
		}
	/* With a seed, every timed call gets fresh inputs and poisoned outputs (before the timed
	 * window): a cache keyed by input contents never hits, and the parent can check a timed
	 * call's result afterwards. Inputs a task's host generator makes are too slow to redo: they
	 * are kept ("reused"), but the outputs are still poisoned and committed, so a call that
	 * skips its work on inputs it has seen leaves the poison in what it committed to. */
	json_t *jseed = json_object_get(req, "seed");
	int fresh = json_is_integer(jseed) && !R.staging;
	int reused = json_is_integer(jseed) && R.staging;
	/* "given": the inputs the parent put into the shared block, for a timed call it checks. */
	int given = json_is_true(json_object_get(req, "given"));
	/* Each call's outputs are digested unless the parent says it audits nothing of this
	 * runner's ("digest": false, a trusted expert's batches). */
	int per_call_inputs = fresh || given, poisoned = fresh || given || reused;
	int digest = poisoned && !json_is_false(json_object_get(req, "digest"));
	uint64_t seed = (uint64_t)json_integer_value(jseed);
	/* Every way out goes through `out`, which frees the poison list and the samples not
	 * handed to the reply. */
	json_t *reply = NULL, *digests = NULL;
	rb_span *poison = calloc((size_t)R.n_out + 1, sizeof *poison);
	/* the call's params, inputs and (where not poisoned) outputs: made cold before it */
	rb_span *cold = calloc((size_t)(R.n_params + R.n_in + R.n_out) + 1, sizeof *cold);
	json_t *samples = json_array();
	if (!poison || !cold || !samples) {
		reply = reply_fail("harness", "out of memory");
		goto out;
	}
	if (digest && rb_digest_begin(n, R.n_out, g_err, sizeof g_err)) {
		reply = fault_reply(1);
		goto out;
	}
	if (per_call_inputs && timed_inputs(0, given, seed)) {
		reply = reply_fail("harness", g_err);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		timed_set = i % N_SETS;
		int n_poison = poisoned ? R.n_out : 0;
		for (int k = 0; k < n_poison; k++)
			poison[k] = (rb_span){R.out[timed_set][k].data, tensor_bytes(&R.out[timed_set][k])};
		int n_cold = cold_spans(timed_set, !n_poison, cold);
		st_sample s;
		int rc = rb_time_sample(run_timed, NULL, poison, n_poison, cold, n_cold, &s, g_err,
		                        sizeof g_err);
		if (rc) {
			/* above 0: st_run's own error code; below: the harness's fault (fatal) */
			if (rc > 0)
				seterr("st_run returned %d during timing", rc);
			reply = fault_reply(rc < 0);
			goto out;
		}
		if (digest && rb_digest_add(i, poison, R.n_out, g_err, sizeof g_err)) {
			reply = fault_reply(1);
			goto out;
		}
		/* The GPU's next work (this call's digest, the next call's inputs) is queued before the
		 * clocks are read and the sample is written down: host work the GPU would otherwise sit
		 * idle through, a few us of every timed call's share of a batch. */
		if (i + 1 < n && per_call_inputs && timed_inputs(i + 1, given, seed)) {
			reply = reply_fail("harness", g_err);
			goto out;
		}
		rb_sample_clocks(&s);
		json_array_append_new(samples, s.cpu_ms >= 0 ? json_pack("[f,f,i,i,f]", s.ms, s.wall_ms,
		                                                               s.sm_mhz, s.throttled,
		                                                               s.cpu_ms)
		                                             : json_pack("[f,f,i,i]", s.ms, s.wall_ms,
		                                                         s.sm_mhz, s.throttled));
	}
	digests = digest ? batch_digests(n) : NULL;
	if (digest && !digests) {
		reply = fault_reply(1);
		goto out;
	}
	reply = reply_ok();
	json_object_set_new(reply, "samples", samples);
	samples = NULL; /* the reply's now */
	if (digests)
		json_object_set_new(reply, "digests", digests);
out:
	free(poison);
	free(cold);
	json_decref(samples);
	return reply;
}

/* One call of st_run recorded by the backend's profiler (CUPTI on the GPU), on the inputs buffer
 * set 0 holds, after a cache flush. */
static json_t *op_profile(json_t *req)
{
	(void)req;
	if (!R.ready)
		return reply_fail("harness", "profile before a successful setup");
	if (!R.in_ready[0]) {
		if (generate_inputs(0, st_mix64(R.param_seed ^ 0x5eedull)))
			return reply_fail("harness", g_err);
		R.in_ready[0] = 1;
	}
	timed_set = 0;
	json_t *prof = json_object();
	int fn_rc = 0, fatal = 0;
	if (rb_profile(run_timed, NULL, prof, &fn_rc, g_err, sizeof g_err)) {
		json_decref(prof);
		if (rb_check("the profiled st_run", &fatal, g_err + strlen(g_err),
		             sizeof g_err - strlen(g_err)) || fatal)
			return fault_reply(fatal);
		return reply_fail("profiler", g_err);
	}
	if (fn_rc) {
		json_decref(prof);
		seterr("st_run returned %d under the profiler", fn_rc);
		return fault_reply(0);
	}
	json_t *r = reply_ok();
	json_object_set_new(r, "profile", prof);
	return r;
}

/* Copy the outputs a buffer set holds now (after timing) into a shared-memory slot. */
static json_t *op_fetch(json_t *req)
{
	if (!R.ready)
		return reply_fail("harness", "fetch before a successful setup");
	int set = (int)json_integer_value(json_object_get(req, "set")) % N_SETS;
	int slot = (int)json_integer_value(json_object_get(req, "slot")) % 2;
	int fatal = 0;
	if (rb_check("fetch", &fatal, g_err, sizeof g_err))
		return fault_reply(fatal);
	if (download_outputs(set, slot))
		return fault_reply(1);
	return reply_ok();
}

/* Probe the GPU until `runs` probes in a row took under below_us each (no other context holds
 * it), or within_ms has passed: before a baseline's batch, so that a kernel the stopped
 * candidate queued before its reply is waited out rather than sharing the GPU with the baseline
 * (the parent's timing.c). Outside any batch's window: the wait is no harness cost. */
static json_t *op_quiet(json_t *req)
{
	double within = json_number_value(json_object_get(req, "within_ms"));
	double below = json_number_value(json_object_get(req, "below_us"));
	json_int_t runs = json_integer_value(json_object_get(req, "runs"));
	if (!(within > 0) || !(below > 0) || runs < 1 || runs > 100)
		return reply_fail("harness", "quiet: within_ms, below_us and runs (1 to 100) expected");
	double t0 = st_now_s(), us;
	int row = 0;
	while (row < runs) {
		if (rb_probe_us(&us, g_err, sizeof g_err))
			return fault_reply(1);
		row = us < below ? row + 1 : 0;
		if (row < runs && (st_now_s() - t0) * 1e3 >= within)
			break;
	}
	json_t *r = reply_ok();
	json_object_set_new(r, "quiet", json_boolean(row >= runs));
	json_object_set_new(r, "waited_ms", json_real((st_now_s() - t0) * 1e3));
	return r;
}

/* ---- main loop ------------------------------------------------------------------------------ */

static json_t *handle(json_t *req, int fd, int *quit)
{
	const char *op = json_string_value(json_object_get(req, "op"));
	if (!op)
		return reply_fail("harness", "message without op");
	if (strcmp(op, "setup") && fd >= 0)
		close(fd);
	if (!strcmp(op, "load"))
		return op_load(req);
	if (!strcmp(op, "setup"))
		return op_setup(req, fd);
	if (!strcmp(op, "run"))
		return op_run(req);
	if (!strcmp(op, "profile"))
		return op_profile(req);
	if (!strcmp(op, "time"))
		return op_time(req);
	if (!strcmp(op, "fetch"))
		return op_fetch(req);
	if (!strcmp(op, "quiet"))
		return op_quiet(req);
	if (!strcmp(op, "teardown")) {
		teardown();
		return reply_ok();
	}
	if (!strcmp(op, "peaks")) {
		json_t *r = reply_ok();
		if (rb_peaks(r, g_err, sizeof g_err)) {
			json_decref(r);
			return reply_fail("harness", g_err);
		}
		return r;
	}
	if (!strcmp(op, "quit")) {
		*quit = 1;
		return reply_ok();
	}
	if (!strcmp(op, "ping")) /* a round trip and nothing else: the parent times it */
		return reply_ok();
	seterr("unknown op '%s'", op);
	return reply_fail("harness", g_err);
}

/* One request, and for set-up and teardown where their time went (g_ms) with the reply. */
static json_t *dispatch(json_t *req, int fd, int *quit)
{
	const char *op = json_string_value(json_object_get(req, "op"));
	if (!op || (strcmp(op, "setup") && strcmp(op, "teardown")))
		return handle(req, fd, quit); /* g_ms NULL: ms_add does nothing */
	double t0 = st_now_s();
	g_ms = json_object();
	json_t *rep = handle(req, fd, quit);
	if (json_is_object(rep) && g_ms) {
		ms_add("total", (st_now_s() - t0) * 1e3);
		json_object_set(rep, "ms", g_ms);
	}
	json_decref(g_ms);
	g_ms = NULL;
	return rep;
}

/* The arena a GPU runner's size sets are placed in (dev_keep.h), reserved while it starts, off
 * any verify's path: STITCH_RUNNER_ARENA_MB from the parent's environment, 1024 MiB unless
 * given (0: none), at most a 32nd of the device's memory, since a service holds a few runners
 * per GPU that are not yet or no longer in use. A host runner goes without: its allocations take
 * no driver lock, and its address space is limited (sandbox.c). A device that refuses the
 * reservation leaves the runner without one, and the info says why. */
static void reserve_arena(json_t *info)
{
	const char *backend = json_string_value(json_object_get(info, "backend"));
	if (!backend || strcmp(backend, "cuda"))
		return;
	const char *mb = getenv("STITCH_RUNNER_ARENA_MB");
	size_t bytes = (size_t)(mb && *mb ? strtoull(mb, NULL, 10) : 1024) << 20;
	size_t cap = (size_t)json_integer_value(json_object_get(info, "mem_bytes")) / 32;
	if (bytes > cap)
		bytes = cap;
	char err[256];
	if (dk_reserve(bytes, err, sizeof err))
		json_object_set_new(info, "arena_error", json_string(err));
	json_object_set_new(info, "arena_bytes", json_integer((json_int_t)dk_arena_bytes()));
}

int main(int argc, char **argv)
{
	int sock = -1, sandbox = 1, profile = 0;
	st_sandbox_opts so = {0};
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-sandbox"))
			sandbox = 0;
		else if (!strcmp(argv[i], "--profile"))
			profile = 1;
		else if (i + 1 < argc && !strcmp(argv[i], "--fd"))
			sock = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--uid"))
			so.uid = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (i + 1 < argc && !strcmp(argv[i], "--workdir"))
			so.workdir = argv[++i];
	}
	if (sock < 0) {
		fprintf(stderr, "stitch-runner: started by the stitch parent only (--fd N)\n");
		return 2;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Device memory kept between size sets for reuse (dev_keep.h): 1024 MiB unless the parent's
	 * environment says otherwise (STITCH_RUNNER_KEEP_MB; 0 frees every block at teardown). With
	 * 512, a task such as t1/layernorm (eval set 512 MiB and its params, hidden sets 61 MiB)
	 * allocated and freed its eval set's block on every verify. */
	const char *keep = getenv("STITCH_RUNNER_KEEP_MB");
	dk_set_limit((size_t)(keep && *keep ? strtoull(keep, NULL, 10) : 1024) << 20);
	if (getppid() == 1)
		return 2;

	/* What starting took, stage by stage, for the parent's record (a service that starts many
	 * runners wants to know which stage grows when several GPUs start them at once). */
	double t0 = st_now_s();
	json_t *info = json_object();
	int ok = rb_open(info, g_err, sizeof g_err) == 0;
	double t1 = st_now_s();
	if (ok)
		reserve_arena(info);
	double ta = st_now_s();
	json_t *hello = ok ? reply_ok() : reply_fail("no_device", g_err);
	/* The profiler's library is loaded before the door is locked, like the driver; a machine
	 * without one still verifies, and the profile reply says why there is none. */
	if (ok && profile && rb_profiler_load(g_err, sizeof g_err))
		json_object_set_new(info, "profiler_error", json_string(g_err));
	double t2 = st_now_s();
	/* The device is open; no solution code has been loaded yet. Now lock the door. */
	if (ok && sandbox) {
		st_sandbox_state st;
		so.host_backend = !strcmp(json_string_value(json_object_get(info, "backend")), "host");
		ok = st_sandbox_apply(&so, &st, g_err, sizeof g_err) == 0;
		json_object_set_new(info, "sandbox", json_pack("{s:b,s:b,s:b}", "enabled", ok,
		                                               "fs_isolated", st.fs_isolated,
		                                               "privileges_dropped", st.privileges_dropped));
		if (!ok) {
			json_decref(hello);
			hello = reply_fail("sandbox", g_err);
		}
	} else if (ok) {
		json_object_set_new(info, "sandbox", json_pack("{s:b}", "enabled", 0));
	}
	double t3 = st_now_s();
	json_t *start_ms = json_pack("{s:f,s:f,s:f,s:f}", "open", (t1 - t0) * 1e3, "arena",
	                             (ta - t1) * 1e3, "profiler", (t2 - ta) * 1e3, "sandbox",
	                             (t3 - t2) * 1e3);
	json_t *stages = json_object_get(info, "open_ms"); /* the backend's own, if it has them */
	if (stages) {
		json_object_set(start_ms, "open_stages", stages);
		json_object_del(info, "open_ms");
	}
	json_object_set_new(hello, "start_ms", start_ms);
	json_object_set_new(hello, "info", info);
	st_err err;
	if (st_proto_send(sock, hello, -1, &err))
		return 3;
	json_decref(hello);
	if (!ok)
		return 3;

	for (int quit = 0; !quit;) {
		json_t *req;
		int fd = -1;
		if (st_proto_recv(sock, &req, &fd, -1, &err))
			break;
		json_t *rep = dispatch(req, fd, &quit);
		/* The request's id goes back with its answer: the parent pairs them. */
		json_t *id = json_object_get(req, "id");
		if (id)
			json_object_set(rep, "id", id);
		json_decref(req);
		int fatal = json_is_true(json_object_get(rep, "fatal"));
		int sent = st_proto_send(sock, rep, -1, &err) == ST_OK;
		json_decref(rep);
		if (!sent || fatal)
			_exit(fatal ? 4 : ST_PROTO_EXIT_CHANNEL); /* a lost context cannot be torn down */
	}
	teardown();
	dk_drop_all();
	dk_unreserve();
	rb_close();
	return 0;
}
