/* Unit tests of task.json loading: a complete valid task with every field checked, many malformed
 * variants whose messages must name the file and the field path, missing files, resolving task
 * arguments and listing a suite. Task folders are written into a fresh mkdtemp folder. */
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "task/task.h"

static const char *valid_json =
	"{\n"
	"  \"name\": \"softmax\",\n"
	"  \"tier\": 1,\n"
	"  \"description\": \"Row-wise softmax\",\n"
	"  \"sizes\": {\n"
	"    \"eval\": {\"rows\": 8192, \"cols\": 8192},\n"
	"    \"small\": {\"rows\": 37, \"cols\": 1000},\n"
	"    \"hidden\": [{\"rows\": 1000, \"cols\": 3001}, {\"rows\": 3, \"cols\": 65536}]\n"
	"  },\n"
	"  \"params\": [{\"name\": \"w\", \"dtype\": \"bf16\", \"shape\": [\"cols\"],\n"
	"              \"init\": {\"dist\": \"uniform\", \"lo\": -1, \"hi\": 1}}],\n"
	"  \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"rows\", \"cols\"],\n"
	"              \"init\": {\"dist\": \"normal\", \"mean\": 0, \"std\": 3}},\n"
	"             {\"name\": \"idx\", \"dtype\": \"i32\", \"shape\": [4, \"cdiv(rows, 2)\"],\n"
	"              \"init\": {\"dist\": \"randint\", \"lo\": 0, \"hi\": \"rows\"}}],\n"
	"  \"outputs\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"rows\", \"cols\"],\n"
	"               \"tol\": {\"atol\": 1e-6, \"rtol\": 1e-4}},\n"
	"              {\"name\": \"s\", \"dtype\": \"f32\", \"shape\": [\"rows\"],\n"
	"               \"tol\": {\"nmse\": 1e-5}}],\n"
	"  \"validator\": null,\n"
	"  \"cost\": {\"flops\": \"5*rows*cols\", \"bytes\": \"8*rows*cols\", \"unit\": \"fp32\"},\n"
	"  \"policy\": {\"mode\": \"engineering\", \"libraries\": [\"cublas\"]},\n"
	"  \"archs\": [\"sm_90a\", \"sm_100a\"],\n"
	"  \"solutions\": {\"reference\": \"reference.cu\", \"experts\": [\"expert.cu\"],\n"
	"                \"host_reference\": \"reference.c\", \"libraries\": [\"cublas\", \"cublasLt\"]},\n"
	"  \"hooks\": null\n"
	"}\n";

static char tmp[1024];          /* the mkdtemp root, i.e. the suite root */
static char task_dir[PATH_MAX]; /* tmp/t1/softmax */

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	assert_true((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) < sizeof path);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void make_dir(const char *path)
{
	if (mkdir(path, 0755) != 0)
		fail_msg("mkdir %s failed", path);
}

/* tmp/<tier>/<name>/ with the solution files the valid task names. */
static void make_task_folder(const char *tier, const char *name, char *out)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", tmp, tier);
	mkdir(path, 0755);
	snprintf(out, PATH_MAX, "%s/%s/%s", tmp, tier, name);
	make_dir(out);
	write_file(out, "reference.cu", "/* reference */\n");
	write_file(out, "expert.cu", "/* expert */\n");
	write_file(out, "reference.c", "/* host reference */\n");
	write_file(out, "task.c", "/* hooks */\n");
}

/* `text` with the first `from` replaced by `to`; the caller frees. */
static char *replaced(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	if (!at)
		fail_msg("template lacks '%s'", from);
	size_t head = (size_t)(at - text), fl = strlen(from), tl = strlen(to);
	char *out = malloc(strlen(text) - fl + tl + 1);
	assert_non_null(out);
	memcpy(out, text, head);
	memcpy(out + head, to, tl);
	strcpy(out + head + tl, at + fl);
	return out;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	(void)state;
	const char *base = getenv("TMPDIR");
	snprintf(tmp, sizeof tmp, "%s/stitch-task-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmp))
		return -1;
	make_task_folder("t1", "softmax", task_dir);
	write_file(task_dir, "task.json", valid_json);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_valid_task(void **state)
{
	(void)state;
	st_task t;
	st_err err = {{0}};
	write_file(task_dir, "task.json", valid_json);
	st_status s = st_task_load(task_dir, &t, &err);
	if (s)
		fail_msg("load failed: %s", err.msg);

	char real[PATH_MAX], path[PATH_MAX + 32];
	assert_non_null(realpath(task_dir, real));
	assert_string_equal(t.dir, real);
	assert_string_equal(t.id, "t1/softmax");
	assert_string_equal(t.name, "softmax");
	assert_int_equal(t.tier, 1);
	assert_string_equal(t.description, "Row-wise softmax");

	assert_string_equal(t.eval.label, "eval");
	assert_int_equal(t.eval.n, 2);
	assert_string_equal(t.eval.names[0], "rows");
	assert_string_equal(t.eval.names[1], "cols");
	assert_int_equal(t.eval.values[0], 8192);
	assert_string_equal(t.small.label, "small");
	assert_int_equal(t.small.values[0], 37);
	assert_int_equal(t.small.values[1], 1000);
	assert_int_equal(t.n_hidden, 2);
	assert_string_equal(t.hidden[0].label, "hidden0");
	assert_string_equal(t.hidden[1].label, "hidden1");
	assert_int_equal(t.hidden[1].values[1], 65536);

	assert_int_equal(t.n_params, 1);
	assert_string_equal(t.params[0].name, "w");
	assert_int_equal(t.params[0].dtype, ST_BF16);
	assert_int_equal(t.params[0].ndim, 1);
	assert_string_equal(t.params[0].shape[0], "cols");
	assert_int_equal(t.params[0].init.dist, ST_DIST_UNIFORM);
	assert_true(t.params[0].init.a == -1 && t.params[0].init.b == 1);

	assert_int_equal(t.n_inputs, 2);
	assert_string_equal(t.inputs[0].name, "x");
	assert_int_equal(t.inputs[0].dtype, ST_F32);
	assert_int_equal(t.inputs[0].ndim, 2);
	assert_string_equal(t.inputs[0].shape[1], "cols");
	assert_int_equal(t.inputs[0].init.dist, ST_DIST_NORMAL);
	assert_true(t.inputs[0].init.a == 0 && t.inputs[0].init.b == 3);
	assert_int_equal(t.inputs[1].dtype, ST_I32);
	assert_string_equal(t.inputs[1].shape[0], "4");
	assert_string_equal(t.inputs[1].shape[1], "cdiv(rows, 2)");
	assert_int_equal(t.inputs[1].init.dist, ST_DIST_RANDINT);
	assert_string_equal(t.inputs[1].init.lo_expr, "0");
	assert_string_equal(t.inputs[1].init.hi_expr, "rows");

	assert_int_equal(t.n_outputs, 2);
	assert_string_equal(t.outputs[0].name, "y");
	assert_true(t.outputs[0].tol.atol == 1e-6 && t.outputs[0].tol.rtol == 1e-4);
	assert_true(t.outputs[0].tol.nmse < 0);
	assert_true(t.outputs[1].tol.nmse == 1e-5);
	assert_true(t.outputs[1].tol.atol < 0 && t.outputs[1].tol.rtol < 0);

	assert_null(t.validator);
	assert_null(t.hooks);
	assert_string_equal(t.cost_flops, "5*rows*cols");
	assert_string_equal(t.cost_bytes, "8*rows*cols");
	assert_string_equal(t.cost_unit, "fp32");
	assert_int_equal(t.cost_roof, ST_ROOF_DRAM); /* no cost.roof: today's rule */
	assert_null(t.cost_l2_bytes);
	assert_int_equal(t.policy, ST_POLICY_ENGINEERING);
	assert_int_equal(t.n_libraries, 1);
	assert_string_equal(t.libraries[0], "cublas");
	assert_int_equal(t.n_archs, 2);
	assert_string_equal(t.archs[1], "sm_100a");

	snprintf(path, sizeof path, "%s/reference.cu", real);
	assert_string_equal(t.reference, path);
	assert_int_equal(t.n_experts, 1);
	snprintf(path, sizeof path, "%s/expert.cu", real);
	assert_string_equal(t.experts[0], path);
	snprintf(path, sizeof path, "%s/reference.c", real);
	assert_string_equal(t.host_reference, path);
	assert_null(t.host_expert);
	assert_int_equal(t.n_solution_libraries, 2);
	assert_string_equal(t.solution_libraries[1], "cublasLt");

	const st_size_set *sets[8];
	assert_int_equal(st_task_size_sets(&t, sets, 8), 4);
	assert_ptr_equal(sets[0], &t.small);
	assert_ptr_equal(sets[1], &t.eval);
	assert_ptr_equal(sets[2], &t.hidden[0]);
	assert_ptr_equal(sets[3], &t.hidden[1]);
	assert_int_equal(st_task_size_sets(&t, sets, 1), 1);

	int64_t dims[ST_MAX_DIMS], numel;
	assert_int_equal(st_task_shape(&t.inputs[1], &t.small, dims, &err), ST_OK);
	assert_int_equal(dims[0], 4);
	assert_int_equal(dims[1], 19);
	assert_int_equal(st_task_numel(&t.inputs[0], &t.eval, &numel, &err), ST_OK);
	assert_int_equal(numel, 8192LL * 8192);

	st_task_free(&t);
	assert_null(t.id);
	st_task_free(&t); /* safe twice: free leaves a zeroed struct */
}

static void test_valid_with_hooks(void **state)
{
	(void)state;
	char *a = replaced(valid_json, "\"hooks\": null", "\"hooks\": \"task.c\"");
	char *b = replaced(a, "\"validator\": null", "\"validator\": \"task\"");
	char *c = replaced(b, ",\n               \"tol\": {\"nmse\": 1e-5}", "");
	char *d = replaced(c, "{\"dist\": \"normal\", \"mean\": 0, \"std\": 3}", "{\"dist\": \"task\"}");
	write_file(task_dir, "task.json", d);
	st_task t;
	st_err err = {{0}};
	st_status s = st_task_load(task_dir, &t, &err);
	if (s)
		fail_msg("load failed: %s", err.msg);
	assert_string_equal(t.validator, "task");
	assert_non_null(t.hooks);
	assert_true(t.hooks[0] == '/');
	assert_non_null(strstr(t.hooks, "/t1/softmax/task.c"));
	assert_int_equal(t.inputs[0].init.dist, ST_DIST_TASK);
	assert_true(t.outputs[1].tol.nmse < 0 && t.outputs[1].tol.atol < 0);
	st_task_free(&t);
	free(a);
	free(b);
	free(c);
	free(d);
}

struct bad_case {
	const char *from, *to;
	const char *field, *what;
};

static const struct bad_case bad_cases[] = {
	{"\"atol\": 1e-6", "\"atol\": \"x\"", "outputs[0].tol.atol", "expected a number"},
	{"\"name\": \"x\", \"dtype\": \"f32\"", "\"name\": \"x\", \"dtype\": \"f33\"",
	 "inputs[0].dtype", "unknown dtype 'f33' (known: f32 f16 bf16"},
	{"\"small\": {\"rows\": 37, \"cols\": 1000}", "\"small\": {\"rows\": 37}", "sizes.small",
	 "size set 'small' lacks 'cols' which 'eval' has"},
	{"{\"rows\": 1000, \"cols\": 3001}", "{\"rows\": 1000, \"cols\": 3001, \"k\": 2}",
	 "sizes.hidden[0]", "size set 'hidden0' has 'k' which 'eval' lacks"},
	{"[\"rows\", \"cols\"],\n              \"init\"", "[\"rows\", \"colz\"],\n              \"init\"",
	 "inputs[0].shape[1]", "unknown name 'colz' at 0 in \"colz\""},
	{"{\"nmse\": 1e-5}", "{\"nmse\": 1e-5, \"atol\": 0}", "outputs[1].tol",
	 "needs atol and rtol, or nmse"},
	{"\"name\": \"softmax\"", "\"name\": \"softmx\"", "name",
	 "'softmx' does not match the folder name 'softmax'"},
	{"\"tier\": 1", "\"tier\": 2", "tier", "is 2 but the task lies in tier folder 't1'"},
	{"\"tier\": 1", "\"tier\": 7", "tier", "expected an integer from 1 to 4"},
	{"5*rows*cols", "5*rows*colz", "cost.flops", "unknown name 'colz'"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp33\"", "cost.unit", "unknown unit 'fp33'"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"roof\": \"hbm\"", "cost.roof",
	 "unknown roof 'hbm' (known: dram l2)"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"roof\": 2", "cost.roof", "expected a string"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"roof\": \"l2\"", "cost.l2_bytes",
	 "missing (roof \"l2\" needs the bytes through the L2)"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"l2_bytes\": \"rows\"", "cost.l2_bytes",
	 "only roof \"l2\" reads it"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"roof\": \"dram\", \"l2_bytes\": 4",
	 "cost.l2_bytes", "only roof \"l2\" reads it"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"roof\": \"l2\", \"l2_bytes\": \"32*rowz\"",
	 "cost.l2_bytes", "unknown name 'rowz'"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"roof\": \"l2\", \"l2_bytes\": \"rows - 40\"",
	 "cost.l2_bytes", "is -3 under size set 'small' (must be >= 0)"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"sfu\": \"2*rowz\"", "cost.sfu",
	 "unknown name 'rowz'"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"sfu\": \"rows - 40\"", "cost.sfu",
	 "is -3 under size set 'small' (must be >= 0)"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"syncs\": \"steps\"", "cost.syncs",
	 "unknown name 'steps'"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"syncs\": [1]", "cost.syncs", "expected"},
	{"\"unit\": \"fp32\"", "\"unit\": \"fp32\", \"passes\": 2", "cost.passes", "unknown field"},
	{"\"mode\": \"engineering\"", "\"mode\": \"expert\"", "policy.libraries",
	 "must be empty in expert mode"},
	{"\"libraries\": [\"cublas\"]}", "\"libraries\": [\"cudnn\"]}", "policy.libraries[0]",
	 "unknown library 'cudnn'"},
	{"\"experts\": [\"expert.cu\"]", "\"experts\": [\"expert2.cu\"]", "solutions.experts[0]",
	 "file 'expert2.cu' not found"},
	{"\"reference\": \"reference.cu\"", "\"reference\": \"../softmax/reference.cu\"",
	 "solutions.reference", "must be a file of the task folder"},
	{"{\"rows\": 3, \"cols\": 65536}", "{\"rows\": 0, \"cols\": 65536}", "sizes.hidden[1].rows",
	 "expected a positive integer"},
	{"\"hooks\": null", "\"hooks\": null, \"tols\": 1", "tols", "unknown field"},
	{"\"tol\": {\"atol\"", "\"tols\": {\"atol\"", "outputs[0].tols", "unknown field"},
	{"[4, \"cdiv(rows, 2)\"]", "[4, \"rows - 37\"]", "inputs[1].shape[1]",
	 "is 0 under size set 'small' (must be >= 1)"},
	{"[4, \"cdiv(rows, 2)\"]", "[4, 0]", "inputs[1].shape[1]", "must be >= 1"},
	{"[4, \"cdiv(rows, 2)\"]", "[1,1,1,1,1,1,1,1,1]", "inputs[1].shape",
	 "needs 1 to 8 dimensions, has 9"},
	{"[4, \"cdiv(rows, 2)\"]", "[\"rows*rows*rows*rows*rows\"]", "inputs[1].shape[0]",
	 "under size set 'eval': overflow"},
	{"\"lo\": 0, \"hi\": \"rows\"", "\"lo\": \"rows\", \"hi\": \"rows\"", "inputs[1].init",
	 "needs lo < hi"},
	{"\"name\": \"s\"", "\"name\": \"x\"", "outputs[1].name", "'x' is already used by inputs[0]"},
	{"\"description\": \"Row-wise softmax\",\n", "", "description", "missing"},
	{"\"sm_100a\"", "\"hopper\"", "archs[1]", "'hopper' is not an architecture"},
	{"\"archs\": [\"sm_90a\", \"sm_100a\"]", "\"archs\": []", "archs", "needs at least one"},
	{"{\"dist\": \"normal\", \"mean\": 0, \"std\": 3}", "{\"dist\": \"task\"}", "inputs[0].init",
	 "needs \"hooks\""},
	{"{\"dist\": \"normal\", \"mean\": 0, \"std\": 3}", "{\"dist\": \"gauss\"}",
	 "inputs[0].init.dist", "unknown dist 'gauss'"},
	{"\"std\": 3", "\"std\": -3", "inputs[0].init.std", "must be >= 0"},
	{"\"std\": 3", "\"sigma\": 3", "inputs[0].init.sigma", "unknown field"},
	{"\"validator\": null", "\"validator\": \"task\"", "validator", "needs \"hooks\""},
	{"\"hooks\": null", "\"hooks\": \"hooks.c\"", "hooks", "file 'hooks.c' not found"},
	{"[{\"name\": \"w\", \"dtype\": \"bf16\", \"shape\": [\"cols\"],\n"
	 "              \"init\": {\"dist\": \"uniform\", \"lo\": -1, \"hi\": 1}}]",
	 "{}", "params", "expected an array"},
	{"\"uniform\", \"lo\": -1", "\"uniform\", \"lo\": 2", "params[0].init", "needs lo < hi"},
	{"\"name\": \"w\"", "\"name\": \"w-1\"", "params[0].name", "not a valid name"},
	/* every array member: the wrong type, and empty where it must not be */
	{"[{\"rows\": 1000, \"cols\": 3001}, {\"rows\": 3, \"cols\": 65536}]",
	 "{\"rows\": 1000, \"cols\": 3001}", "sizes.hidden", "expected an array"},
	{"\"experts\": [\"expert.cu\"]", "\"experts\": \"expert.cu\"", "solutions.experts",
	 "expected an array"},
	{"\"experts\": [\"expert.cu\"]", "\"experts\": []", "solutions.experts",
	 "needs at least one expert"},
	{"\"libraries\": [\"cublas\"]}", "\"libraries\": \"cublas\"}", "policy.libraries",
	 "expected an array"},
	{"\"libraries\": [\"cublas\", \"cublasLt\"]", "\"libraries\": [\"cublas\", \"cublas\"]",
	 "solutions.libraries[1]", "listed twice"},
	{"\"archs\": [\"sm_90a\", \"sm_100a\"]", "\"archs\": \"sm_90a\"", "archs",
	 "expected an array"},
	{"\"outputs\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"rows\", \"cols\"],\n"
	 "               \"tol\": {\"atol\": 1e-6, \"rtol\": 1e-4}},\n"
	 "              {\"name\": \"s\", \"dtype\": \"f32\", \"shape\": [\"rows\"],\n"
	 "               \"tol\": {\"nmse\": 1e-5}}]", "\"outputs\": []", "outputs",
	 "needs at least one output"},
};

static void test_malformed(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
		const struct bad_case *c = &bad_cases[i];
		char *json = replaced(valid_json, c->from, c->to);
		write_file(task_dir, "task.json", json);
		free(json);
		st_task t;
		st_err err = {{0}};
		if (st_task_load(task_dir, &t, &err) == ST_OK) {
			st_task_free(&t);
			fail_msg("case %zu (%s -> %s) loaded", i, c->from, c->to);
		}
		char want[512];
		snprintf(want, sizeof want, "t1/softmax/task.json: %s: ", c->field);
		if (!strstr(err.msg, want) || !strstr(err.msg, c->what))
			fail_msg("case %zu: '%s' lacks '%s' or '%s'", i, err.msg, want, c->what);
		assert_null(t.id); /* freed and zeroed on failure */
	}
	write_file(task_dir, "task.json", valid_json);
}

static void test_bad_json(void **state)
{
	(void)state;
	char *json = replaced(valid_json, "\"tier\": 1,", "\"tier\": 1,,");
	write_file(task_dir, "task.json", json);
	free(json);
	st_task t;
	st_err err = {{0}};
	assert_int_equal(st_task_load(task_dir, &t, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "t1/softmax/task.json: line 3"));
	write_file(task_dir, "task.json", "[1, 2]");
	assert_int_equal(st_task_load(task_dir, &t, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "expected a JSON object"));
	write_file(task_dir, "task.json", valid_json);
}

static void test_missing_files(void **state)
{
	(void)state;
	char path[PATH_MAX + 32];
	st_task t;
	st_err err = {{0}};
	snprintf(path, sizeof path, "%s/t1/nothing", tmp);
	assert_int_equal(st_task_load(path, &t, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "t1/nothing/task.json"));

	snprintf(path, sizeof path, "%s/t1/empty", tmp);
	make_dir(path);
	assert_int_equal(st_task_load(path, &t, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "t1/empty/task.json: cannot read"));
	assert_int_equal(rmdir(path), 0);

	st_task zero;
	memset(&zero, 0, sizeof zero);
	st_task_free(&zero);
}

static void test_resolve(void **state)
{
	(void)state;
	char out[PATH_MAX], real[PATH_MAX];
	st_err err = {{0}};
	assert_non_null(realpath(task_dir, real));
	assert_int_equal(st_task_resolve("t1/softmax", tmp, out, sizeof out, &err), ST_OK);
	assert_string_equal(out, real);
	assert_int_equal(st_task_resolve(task_dir, "/nonexistent", out, sizeof out, &err), ST_OK);
	assert_string_equal(out, real);
	assert_int_equal(st_task_resolve("t1/foo", tmp, out, sizeof out, &err), ST_E_INVALID);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof want, "no task 't1/foo' (looked in t1/foo and %s/t1/foo)", tmp);
	assert_string_equal(err.msg, want);
	assert_int_equal(st_task_resolve("t1/softmax", tmp, out, 4, &err), ST_E_INVALID);
}

static void test_list(void **state)
{
	(void)state;
	char d[PATH_MAX], real[PATH_MAX];
	make_task_folder("t2", "b", d);
	write_file(d, "task.json", "{}");
	make_task_folder("t1", "zeta", d);
	write_file(d, "task.json", "{}");
	make_task_folder("t1", "alpha", d);
	write_file(d, "task.json", "{}");
	make_task_folder("t1", "nojson", d);
	write_file(tmp, "README", "not a tier folder\n");

	char **dirs = NULL;
	int n = -1;
	st_err err = {{0}};
	assert_int_equal(st_task_list(tmp, &dirs, &n, &err), ST_OK);
	assert_non_null(realpath(tmp, real));
	const char *ids[] = {"t1/alpha", "t1/softmax", "t1/zeta", "t2/b"};
	assert_int_equal(n, 4);
	for (int i = 0; i < 4; i++) {
		char want[PATH_MAX + 32];
		snprintf(want, sizeof want, "%s/%s", real, ids[i]);
		assert_string_equal(dirs[i], want);
	}
	st_task_list_free(dirs, n);

	assert_int_equal(st_task_list("/nonexistent/stitch", &dirs, &n, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "/nonexistent/stitch"));
	assert_int_equal(n, 0);
}

/* An imported task: tensors from data files, eval set only, no solutions, dotted param names. */
static const char *imported_json =
	"{\"name\": \"mlp\", \"tier\": 2, \"description\": \"imported\",\n"
	" \"sizes\": {\"eval\": {}},\n"
	" \"params\": [{\"name\": \"fc1.weight\", \"dtype\": \"f32\", \"shape\": [4, 8]}],\n"
	" \"inputs\": [{\"name\": \"x0\", \"dtype\": \"f32\", \"shape\": [2, 8],\n"
	"             \"init\": {\"dist\": \"normal\", \"mean\": 0, \"std\": 1}}],\n"
	" \"outputs\": [{\"name\": \"y0\", \"dtype\": \"f32\", \"shape\": [2, 4],\n"
	"              \"tol\": {\"atol\": 1e-4, \"rtol\": 1e-4}}],\n"
	" \"validator\": null, \"cost\": {\"flops\": 128, \"bytes\": 224, \"unit\": \"fp32\"},\n"
	" \"policy\": {\"mode\": \"engineering\", \"libraries\": [\"cublas\"]},\n"
	" \"archs\": [\"sm_90a\"],\n"
	" \"data\": {\"params\": \"data/params.safetensors\", \"check\": \"data/check.safetensors\",\n"
	"          \"seeds\": [\"data/seed1.safetensors\", \"data/seed2.safetensors\"]},\n"
	" \"baselines\": {\"eager_ms\": 0.5, \"compile_ms\": 0.25, \"device\": \"NVIDIA H200\"},\n"
	" \"source\": {\"kind\": \"kernelbench\", \"file\": \"model.py\", \"level\": 2}}\n";

static void expect_imported_error(const char *dir, const char *from, const char *to,
                                  const char *what)
{
	char *json = replaced(imported_json, from, to);
	write_file(dir, "task.json", json);
	free(json);
	st_task t;
	st_err err = {{0}};
	if (st_task_load(dir, &t, &err) == ST_OK) {
		st_task_free(&t);
		fail_msg("%s -> %s loaded", from, to);
	}
	if (!strstr(err.msg, what))
		fail_msg("'%s' lacks '%s'", err.msg, what);
}

static void test_imported(void **state)
{
	(void)state;
	char dir[PATH_MAX], data[PATH_MAX + 8];
	snprintf(dir, sizeof dir, "%s/level2", tmp);
	mkdir(dir, 0755);
	snprintf(dir, sizeof dir, "%s/level2/mlp", tmp);
	make_dir(dir);
	snprintf(data, sizeof data, "%s/data", dir);
	make_dir(data);
	const char *files[] = {"params", "check", "seed1", "seed2"};
	for (int i = 0; i < 4; i++) {
		char name[64];
		snprintf(name, sizeof name, "%s.safetensors", files[i]);
		write_file(data, name, "x");
	}
	write_file(dir, "task.json", imported_json);
	st_task t;
	st_err err = {{0}};
	assert_int_equal(st_task_load(dir, &t, &err), ST_OK);
	assert_string_equal(t.id, "level2/mlp");
	assert_string_equal(t.params[0].name, "fc1.weight");
	assert_int_equal(t.n_data_seeds, 2);
	assert_non_null(strstr(t.data_seeds[1], "/level2/mlp/data/seed2.safetensors"));
	assert_non_null(strstr(t.data_check, "data/check.safetensors"));
	assert_null(t.reference);
	assert_null(t.small.label);
	const st_size_set *sets[8];
	assert_int_equal(st_task_size_sets(&t, sets, 8), 1); /* eval only */
	assert_string_equal(sets[0]->label, "eval");
	assert_true(json_number_value(json_object_get(t.baselines, "eager_ms")) == 0.5);
	assert_string_equal(json_string_value(json_object_get(t.source, "kind")), "kernelbench");
	st_task_free(&t);

	expect_imported_error(dir, "\"data/seed2.safetensors\"", "\"data/seed9.safetensors\"",
	                      "data.seeds[1]: file 'data/seed9.safetensors' not found");
	expect_imported_error(dir, "\"eval\": {}", "\"eval\": {}, \"small\": {}",
	                      "only the 'eval' set");
	expect_imported_error(dir, "\"check\": \"data/check.safetensors\",", "",
	                      "data.check: missing");
	expect_imported_error(dir, "\"eager_ms\": 0.5", "\"eager_ms\": -1",
	                      "baselines.eager_ms: expected a positive number");
	expect_imported_error(dir, "fc1.weight", "fc1..weight", "not a valid name");
	expect_imported_error(dir, "\"archs\"", "\"solutions\": {}, \"archs\"",
	                      "ships no solutions");
	/* inputs still need an init: timed calls draw fresh ones */
	expect_imported_error(dir, ",\n             \"init\": {\"dist\": \"normal\", \"mean\": 0, \"std\": 1}", "",
	                      "inputs[0].init: missing");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_task),    cmocka_unit_test(test_valid_with_hooks),
		cmocka_unit_test(test_malformed),     cmocka_unit_test(test_bad_json),
		cmocka_unit_test(test_missing_files), cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_list),          cmocka_unit_test(test_imported),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
