/* libFuzzer harness for the task.json loader (st_task_load_text) and, for every task that loads,
 * the shape and cost evaluation the verifier does later. What the loader accepts, the rest of
 * stitch relies on: every shape evaluates to dims >= 1 whose byte size fits in int64, under
 * every size set, and every cost and randint expression evaluates; a broken promise aborts. */
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "task/expr.h"
#include "task/task.h"

static char root[64] = "/tmp/stitch-fuzz-task.XXXXXX";
static char folder[PATH_MAX]; /* root/t<tier>/<name>: where the task folder lies now */

static void remove_root(void)
{
	st_rm_tree(root);
}

static void touch(const char *dir, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		abort();
	}
	fclose(f);
}

/* One task folder with the files the bundled tasks name, plus a folder where a file is
 * expected; tier folders t1..t4, and t9 for tasks whose tier is out of range. */
static void setup(void)
{
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		abort();
	}
	atexit(remove_root);
	char dir[PATH_MAX];
	static const char *const tiers[] = {"t1", "t2", "t3", "t4", "t9"};
	for (int i = 0; i < 5; i++) {
		snprintf(dir, sizeof dir, "%s/%s", root, tiers[i]);
		mkdir(dir, 0700);
	}
	snprintf(folder, sizeof folder, "%s/t1/softmax", root);
	mkdir(folder, 0700);
	static const char *const files[] = {"reference.cu", "expert.cu", "expert2.cu", "reference.c",
	                                    "expert.c", "task.c"};
	for (int i = 0; i < 6; i++)
		touch(folder, files[i]);
	snprintf(dir, sizeof dir, "%s/sub", folder);
	mkdir(dir, 0700);
}

static int plain_name(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 64 || !strcmp(s, ".") || !strcmp(s, ".."))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '_' || *s == '-' || *s == '.'))
			return 0;
	return 1;
}

/* The loader insists that "name" and "tier" match the folder, which random bytes never would:
 * move the one task folder to where the text says it lies (a rename is cheap), so that seeds
 * taken from the bundled tasks get past the identity checks. One input length in sixteen goes
 * to the wrong tier folder, so that the mismatch is reached too. */
static void follow_identity(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	const char *name = json_string_value(json_object_get(j, "name"));
	json_t *tier = json_object_get(j, "tier");
	if (name && plain_name(name)) {
		json_int_t k = json_is_integer(tier) ? json_integer_value(tier) : 0;
		int folder_tier = k >= 1 && k <= 4 ? (int)k : 9;
		if (size % 16 == 0 && folder_tier != 9)
			folder_tier = folder_tier % 4 + 1;
		char want[PATH_MAX];
		snprintf(want, sizeof want, "%s/t%d/%s", root, folder_tier, name);
		if (strcmp(want, folder) && !rename(folder, want))
			memcpy(folder, want, sizeof folder);
	}
	json_decref(j);
}

static void must(int ok, const char *what, const char *detail)
{
	if (!ok) {
		fprintf(stderr, "fuzz_task: loaded task breaks a promise: %s: %s\n", what, detail);
		abort();
	}
}

static void check_tensors(const st_task *t, const st_tensor_spec *v, int n,
                          const st_size_set *const *sets, int n_sets)
{
	for (int i = 0; i < n; i++) {
		const st_tensor_spec *sp = &v[i];
		must(sp->ndim >= 1 && sp->ndim <= ST_MAX_DIMS, "ndim", sp->name);
		for (int k = 0; k < n_sets; k++) {
			int64_t dims[ST_MAX_DIMS], numel;
			st_err e;
			must(st_task_shape(sp, sets[k], dims, &e) == ST_OK, "shape", e.msg);
			must(st_task_numel(sp, sets[k], &numel, &e) == ST_OK, "numel", e.msg);
			must(numel >= 1, "numel >= 1", sp->name);
			if (sp->init.dist == ST_DIST_RANDINT) {
				int64_t lo, hi;
				must(st_expr_eval(sp->init.lo_expr, sets[k], &lo, &e) == ST_OK, "lo", e.msg);
				must(st_expr_eval(sp->init.hi_expr, sets[k], &hi, &e) == ST_OK, "hi", e.msg);
				must(lo < hi, "lo < hi", sp->name);
			}
		}
		for (int d = 0; d < sp->ndim; d++) {
			st_err e;
			must(st_expr_check(sp->shape[d], t->eval.names, t->eval.n, &e) == ST_OK, "check",
			     e.msg);
		}
	}
}

static void check_task(const st_task *t)
{
	const st_size_set *sets[300];
	int n = st_task_size_sets(t, sets, 300);
	must(n == 2 + t->n_hidden, "size sets", t->id);
	must(t->n_outputs >= 1 && t->n_archs >= 1 && t->n_experts >= 1, "counts", t->id);
	check_tensors(t, t->params, t->n_params, sets, n);
	check_tensors(t, t->inputs, t->n_inputs, sets, n);
	check_tensors(t, t->outputs, t->n_outputs, sets, n);
	for (int k = 0; k < n; k++) {
		int64_t flops, bytes;
		st_err e;
		must(st_expr_eval(t->cost_flops, sets[k], &flops, &e) == ST_OK, "flops", e.msg);
		must(st_expr_eval(t->cost_bytes, sets[k], &bytes, &e) == ST_OK, "bytes", e.msg);
		must(flops >= 0 && bytes >= 0, "cost >= 0", t->id);
	}
	/* A smaller cap must truncate, not overrun. */
	const st_size_set *two[2];
	must(st_task_size_sets(t, two, 2) == 2, "size set cap", t->id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* FUZZ_TASK_VERBOSE=1 with seed files as arguments shows how far each one gets. */
	static int verbose = -1;
	if (verbose < 0)
		verbose = getenv("FUZZ_TASK_VERBOSE") != NULL;
	if (!folder[0])
		setup();
	follow_identity(data, size);
	st_task t;
	st_err err;
	memset(err.msg, 'x', sizeof err.msg); /* a message must be terminated, not merely short */
	if (st_task_load_text((const char *)data, size, folder, &t, &err) == ST_OK) {
		if (verbose)
			fprintf(stderr, "fuzz_task: loaded %s\n", t.id);
		check_task(&t);
		st_task_free(&t);
	} else {
		must(memchr(err.msg, 0, sizeof err.msg) != NULL, "error message", "unterminated");
		if (verbose)
			fprintf(stderr, "fuzz_task: %s\n", err.msg);
	}
	return 0;
}
