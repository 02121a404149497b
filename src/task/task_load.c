/* task.json to st_task, validated once and completely at load time: every field's type, every
 * expression against the size names (and evaluated under every size set), every referenced file.
 * A suite author should learn about a typo from `stitch tasks`, not from a verify that fails an
 * hour into a benchmark run, so each message names the file, the field path such as
 * outputs[0].tol.atol, and what is wrong. Unknown fields are errors too: a misspelt optional
 * field would otherwise be silently ignored. */
#include "task.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/arch.h"
#include "dtype.h"
#include "expr.h"

#define FIELD_MAX 256

typedef struct loader {
	char file[PATH_MAX + 16]; /* task.json as named in messages */
	st_task *t;
	st_err *err;
	int stored;               /* the task has "data": tensors from files, no reference */
} loader;

static const char *const known_libraries[] = {"cublas", "cublasLt", "cusparse", "cufft", "curand",
                                              NULL};
static const char *const known_units[] = {"fp32", "tf32", "fp16", "bf16", "fp8", "fp64", "int",
                                             NULL};

static st_status bad(loader *L, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static st_status bad(loader *L, const char *field, const char *fmt, ...)
{
	char what[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (field && *field)
		return st_err_set(L->err, ST_E_INVALID, "%s: %s: %s", L->file, field, what);
	return st_err_set(L->err, ST_E_INVALID, "%s: %s", L->file, what);
}

static st_status no_memory(loader *L)
{
	return st_err_set(L->err, ST_E_NOMEM, "%s: out of memory", L->file);
}

/* Field paths are bounded; a path that does not fit ends in "..." rather than silently. */
static void mark_truncated(char *out, int k)
{
	if (k >= FIELD_MAX)
		memcpy(out + FIELD_MAX - 4, "...", 4);
}

static void field_key(char *out, const char *parent, const char *key)
{
	if (*parent)
		mark_truncated(out, snprintf(out, FIELD_MAX, "%s.%s", parent, key));
	else
		mark_truncated(out, snprintf(out, FIELD_MAX, "%s", key));
}

static void field_index(char *out, const char *parent, size_t i)
{
	mark_truncated(out, snprintf(out, FIELD_MAX, "%s[%zu]", parent, i));
}

static int in_list(const char *s, const char *const *list)
{
	for (int i = 0; list[i]; i++)
		if (!strcmp(s, list[i]))
			return 1;
	return 0;
}

static void join_list(char *out, size_t len, const char *const *list)
{
	size_t used = 0;
	out[0] = '\0';
	for (int i = 0; list[i] && used < len; i++) {
		int k = snprintf(out + used, len - used, "%s%s", i ? " " : "", list[i]);
		if (k > 0)
			used += (size_t)k;
	}
}

static int is_identifier(const char *s)
{
	if (!*s || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
		return 0;
	for (; *s; s++)
		if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9')))
			return 0;
	return 1;
}

/* Tensor names may also have dots: an imported model's params keep their state_dict names
 * ("fc1.weight"). */
static int is_tensor_name(const char *s)
{
	if (*s == '.' || !*s || s[strlen(s) - 1] == '.')
		return 0;
	for (const char *p = s; *p; p++)
		if (*p == '.' && p[1] == '.')
			return 0;
	char buf[256];
	size_t n = strlen(s);
	if (n >= sizeof buf)
		return 0;
	memcpy(buf, s, n + 1);
	for (char *p = buf; *p; p++)
		if (*p == '.')
			*p = '_';
	return is_identifier(buf);
}

static st_status dup(loader *L, const char *s, char **out)
{
	*out = strdup(s);
	return *out ? ST_OK : no_memory(L);
}

/* Every key of obj must be in `allowed` (NULL-terminated). */
static st_status check_keys(loader *L, json_t *obj, const char *field,
                            const char *const *allowed)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		if (!in_list(key, allowed)) {
			char known[256], f[FIELD_MAX];
			join_list(known, sizeof known, allowed);
			field_key(f, field, key);
			return bad(L, f, "unknown field (known: %s)", known);
		}
	}
	return ST_OK;
}

/* Look up obj.key; a missing required key is an error, a missing optional one gives NULL. */
static st_status member(loader *L, json_t *obj, const char *parent, const char *key,
                        int required, json_t **out)
{
	*out = json_object_get(obj, key);
	if (!*out && required) {
		char f[FIELD_MAX];
		field_key(f, parent, key);
		return bad(L, f, "missing");
	}
	return ST_OK;
}

static st_status want_type(loader *L, json_t *v, const char *field, json_type type)
{
	static const char *const names[] = {
		[JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array", [JSON_STRING] = "a string",
		[JSON_INTEGER] = "an integer", [JSON_REAL] = "a number",
	};
	int ok = json_typeof(v) == type || (type == JSON_REAL && json_is_number(v));
	return ok ? ST_OK : bad(L, field, "expected %s", names[type]);
}

/* v as an array: its length, and that many zeroed elements of `size` bytes in *out (NULL when it
 * is empty). The caller stores *out in the task at once, so a later error frees it with the task. */
static st_status array_elems(loader *L, json_t *v, const char *field, size_t size, size_t *n,
                             void **out)
{
	*n = 0;
	*out = NULL;
	st_status s = want_type(L, v, field, JSON_ARRAY);
	if (s)
		return s;
	*n = json_array_size(v);
	if (*n && !(*out = calloc(*n, size)))
		return no_memory(L);
	return ST_OK;
}

/* A required string member, copied. */
static st_status get_string(loader *L, json_t *obj, const char *parent, const char *key,
                            char **out)
{
	json_t *v;
	char f[FIELD_MAX];
	field_key(f, parent, key);
	st_status s = member(L, obj, parent, key, 1, &v);
	if (!s)
		s = want_type(L, v, f, JSON_STRING);
	if (!s && !*json_string_value(v))
		s = bad(L, f, "is empty");
	return s ? s : dup(L, json_string_value(v), out);
}

static st_status get_number(loader *L, json_t *obj, const char *parent, const char *key,
                            double *out)
{
	json_t *v;
	char f[FIELD_MAX];
	field_key(f, parent, key);
	st_status s = member(L, obj, parent, key, 1, &v);
	if (!s)
		s = want_type(L, v, f, JSON_REAL);
	if (!s)
		*out = json_number_value(v);
	return s;
}

static st_status get_nonneg(loader *L, json_t *obj, const char *parent, const char *key,
                            double *out)
{
	st_status s = get_number(L, obj, parent, key, out);
	if (!s && !(*out >= 0)) {
		char f[FIELD_MAX];
		field_key(f, parent, key);
		return bad(L, f, "must be >= 0");
	}
	return s;
}

#define SETS_MAX 256 /* small + eval + hidden sets, for checks that must hold under each */

/* ---- sizes ---------------------------------------------------------------------------- */

int st_set_label_hidden(const char *label)
{
	return !strncmp(label, "hidden", 6); /* the labels load_hidden gives */
}

static st_status load_size_set(loader *L, json_t *v, const char *field, const char *label,
                               st_size_set *set)
{
	st_status s = want_type(L, v, field, JSON_OBJECT);
	if (s)
		return s;
	if ((s = dup(L, label, &set->label)))
		return s;
	size_t n = json_object_size(v);
	set->names = calloc(n ? n : 1, sizeof *set->names);
	set->values = calloc(n ? n : 1, sizeof *set->values);
	if (!set->names || !set->values)
		return no_memory(L);
	const char *key;
	json_t *val;
	json_object_foreach(v, key, val) {
		char f[FIELD_MAX];
		field_key(f, field, key);
		if (!is_identifier(key))
			return bad(L, f, "'%s' is not a valid name (letters, digits and _)", key);
		if (!json_is_integer(val) || json_integer_value(val) < 1)
			return bad(L, f, "expected a positive integer");
		if ((s = dup(L, key, &set->names[set->n])))
			return s;
		set->values[set->n++] = json_integer_value(val);
	}
	return ST_OK;
}

static int set_has(const st_size_set *set, const char *name)
{
	for (int i = 0; i < set->n; i++)
		if (!strcmp(set->names[i], name))
			return 1;
	return 0;
}

static st_status same_names(loader *L, const char *field, const st_size_set *set,
                            const st_size_set *eval)
{
	for (int i = 0; i < eval->n; i++)
		if (!set_has(set, eval->names[i]))
			return bad(L, field, "size set '%s' lacks '%s' which 'eval' has", set->label,
			           eval->names[i]);
	for (int i = 0; i < set->n; i++)
		if (!set_has(eval, set->names[i]))
			return bad(L, field, "size set '%s' has '%s' which 'eval' lacks", set->label,
			           set->names[i]);
	return ST_OK;
}

static st_status load_hidden(loader *L, json_t *sizes)
{
	json_t *h = json_object_get(sizes, "hidden");
	if (!h || json_is_null(h))
		return ST_OK;
	size_t n;
	void *mem = NULL;
	st_status s = array_elems(L, h, "sizes.hidden", sizeof *L->t->hidden, &n, &mem);
	L->t->hidden = mem;
	if (s)
		return s;
	if (n > SETS_MAX - 2)
		return bad(L, "sizes.hidden", "more than %d sets", SETS_MAX - 2);
	for (size_t i = 0; i < n; i++) {
		char f[FIELD_MAX], label[32];
		field_index(f, "sizes.hidden", i);
		snprintf(label, sizeof label, "hidden%zu", i);
		L->t->n_hidden++;
		s = load_size_set(L, json_array_get(h, i), f, label, &L->t->hidden[i]);
		if (!s)
			s = same_names(L, f, &L->t->hidden[i], &L->t->eval);
		if (s)
			return s;
	}
	return ST_OK;
}

static st_status load_sizes(loader *L, json_t *root)
{
	static const char *const keys[] = {"eval", "small", "hidden", NULL};
	json_t *sizes, *v;
	st_status s = member(L, root, "", "sizes", 1, &sizes);
	if (!s)
		s = want_type(L, sizes, "sizes", JSON_OBJECT);
	if (!s)
		s = check_keys(L, sizes, "sizes", keys);
	if (!s)
		s = member(L, sizes, "sizes", "eval", 1, &v);
	if (!s)
		s = load_size_set(L, v, "sizes.eval", "eval", &L->t->eval);
	/* An imported task's shapes are fixed by its files: it has the eval set only. */
	if (!s && L->stored) {
		if (json_object_get(sizes, "small") || json_object_get(sizes, "hidden"))
			return bad(L, "sizes", "a task with \"data\" has only the 'eval' set (its tensors "
			           "are stored for one shape)");
		return ST_OK;
	}
	if (!s)
		s = member(L, sizes, "sizes", "small", 1, &v);
	if (!s)
		s = load_size_set(L, v, "sizes.small", "small", &L->t->small);
	if (!s)
		s = same_names(L, "sizes.small", &L->t->small, &L->t->eval);
	return s ? s : load_hidden(L, sizes);
}

/* ---- expressions ---------------------------------------------------------------------- */

/* An integer or an expression string over the size names, stored as text. */
static st_status load_expr(loader *L, json_t *v, const char *field, int64_t min_literal,
                           char **out)
{
	char buf[32];
	st_err e;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < min_literal)
			return bad(L, field, "must be >= %lld", (long long)min_literal);
		snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
		return dup(L, buf, out);
	}
	if (!json_is_string(v))
		return bad(L, field, "expected an integer or an expression string");
	if (st_expr_check(json_string_value(v), L->t->eval.names, L->t->eval.n, &e))
		return bad(L, field, "%s", e.msg);
	return dup(L, json_string_value(v), out);
}

/* Evaluate an expression under every size set; it must succeed and come out >= min. */
static st_status eval_everywhere(loader *L, const char *expr, const char *field, int64_t min,
                                 int64_t *values)
{
	const st_size_set *sets[SETS_MAX];
	int n = st_task_size_sets(L->t, sets, SETS_MAX);
	for (int i = 0; i < n; i++) {
		st_err e;
		int64_t v;
		if (st_expr_eval(expr, sets[i], &v, &e))
			return bad(L, field, "under size set '%s': %s", sets[i]->label, e.msg);
		if (v < min)
			return bad(L, field, "is %lld under size set '%s' (must be >= %lld)", (long long)v,
			           sets[i]->label, (long long)min);
		if (values)
			values[i] = v;
	}
	return ST_OK;
}

/* ---- tensors -------------------------------------------------------------------------- */

static st_status load_shape(loader *L, json_t *tensor, const char *parent, st_tensor_spec *t)
{
	char f[FIELD_MAX];
	json_t *shape;
	field_key(f, parent, "shape");
	st_status s = member(L, tensor, parent, "shape", 1, &shape);
	if (!s)
		s = want_type(L, shape, f, JSON_ARRAY);
	if (s)
		return s;
	size_t n = json_array_size(shape);
	if (n < 1 || n > ST_MAX_DIMS)
		return bad(L, f, "needs 1 to %d dimensions, has %zu", ST_MAX_DIMS, n);
	for (size_t i = 0; i < n; i++) {
		char fi[FIELD_MAX];
		field_index(fi, f, i);
		if ((s = load_expr(L, json_array_get(shape, i), fi, 1, &t->shape[i])))
			return s;
		t->ndim++;
		if ((s = eval_everywhere(L, t->shape[i], fi, 1, NULL)))
			return s;
	}
	/* Bytes must fit in int64 under every set, or allocation sizes would wrap. */
	const st_size_set *sets[SETS_MAX];
	int nsets = st_task_size_sets(L->t, sets, SETS_MAX);
	for (int i = 0; i < nsets; i++) {
		int64_t numel;
		st_err e;
		if (st_task_numel(t, sets[i], &numel, &e))
			return bad(L, f, "under size set '%s': %s", sets[i]->label, e.msg);
	}
	return ST_OK;
}

static st_status load_dtype(loader *L, json_t *tensor, const char *parent, st_tensor_spec *t)
{
	char *name = NULL;
	st_status s = get_string(L, tensor, parent, "dtype", &name);
	if (s)
		return s;
	if (st_dtype_parse(name, &t->dtype)) {
		char f[FIELD_MAX];
		field_key(f, parent, "dtype");
		s = bad(L, f, "unknown dtype '%s' (known: f32 f16 bf16 f64 i32 i64 i8 u8 f8e4m3 f8e5m2)",
		        name);
	}
	free(name);
	return s;
}

static st_status load_randint(loader *L, json_t *init, const char *field, st_init_spec *in)
{
	static const char *const keys[] = {"dist", "lo", "hi", NULL};
	json_t *lo, *hi;
	char flo[FIELD_MAX], fhi[FIELD_MAX];
	field_key(flo, field, "lo");
	field_key(fhi, field, "hi");
	st_status s = check_keys(L, init, field, keys);
	if (!s)
		s = member(L, init, field, "lo", 1, &lo);
	if (!s)
		s = member(L, init, field, "hi", 1, &hi);
	if (!s)
		s = load_expr(L, lo, flo, INT64_MIN, &in->lo_expr);
	if (!s)
		s = load_expr(L, hi, fhi, INT64_MIN, &in->hi_expr);
	int64_t vlo[SETS_MAX], vhi[SETS_MAX];
	if (!s)
		s = eval_everywhere(L, in->lo_expr, flo, INT64_MIN, vlo);
	if (!s)
		s = eval_everywhere(L, in->hi_expr, fhi, INT64_MIN, vhi);
	const st_size_set *sets[SETS_MAX];
	int n = st_task_size_sets(L->t, sets, SETS_MAX);
	for (int i = 0; !s && i < n; i++)
		if (vlo[i] >= vhi[i])
			s = bad(L, field, "needs lo < hi, has lo %lld and hi %lld under size set '%s'",
			        (long long)vlo[i], (long long)vhi[i], sets[i]->label);
	return s;
}

static st_status load_dist_fields(loader *L, json_t *init, const char *field, const char *dist,
                                  st_init_spec *in)
{
	static const char *const normal[] = {"dist", "mean", "std", NULL};
	static const char *const uniform[] = {"dist", "lo", "hi", NULL};
	static const char *const constant[] = {"dist", "value", NULL};
	static const char *const task[] = {"dist", NULL};
	st_status s;
	if (!strcmp(dist, "normal")) {
		in->dist = ST_DIST_NORMAL;
		if (!(s = check_keys(L, init, field, normal)) &&
		    !(s = get_number(L, init, field, "mean", &in->a)))
			s = get_nonneg(L, init, field, "std", &in->b);
		return s;
	}
	if (!strcmp(dist, "uniform")) {
		in->dist = ST_DIST_UNIFORM;
		if (!(s = check_keys(L, init, field, uniform)) &&
		    !(s = get_number(L, init, field, "lo", &in->a)) &&
		    !(s = get_number(L, init, field, "hi", &in->b)) && !(in->a < in->b))
			s = bad(L, field, "needs lo < hi");
		return s;
	}
	if (!strcmp(dist, "randint")) {
		in->dist = ST_DIST_RANDINT;
		return load_randint(L, init, field, in);
	}
	if (!strcmp(dist, "const")) {
		in->dist = ST_DIST_CONST;
		if (!(s = check_keys(L, init, field, constant)))
			s = get_number(L, init, field, "value", &in->a);
		return s;
	}
	if (!strcmp(dist, "task")) {
		in->dist = ST_DIST_TASK;
		if (!(s = check_keys(L, init, field, task)) && !L->t->hooks)
			s = bad(L, field, "dist 'task' needs \"hooks\": \"task.c\"");
		return s;
	}
	char f[FIELD_MAX];
	field_key(f, field, "dist");
	return bad(L, f, "unknown dist '%s' (known: normal uniform randint const task)", dist);
}

static st_status load_init(loader *L, json_t *tensor, const char *parent, st_init_spec *in)
{
	char f[FIELD_MAX];
	json_t *init;
	char *dist = NULL;
	field_key(f, parent, "init");
	st_status s = member(L, tensor, parent, "init", 1, &init);
	if (!s)
		s = want_type(L, init, f, JSON_OBJECT);
	if (!s)
		s = get_string(L, init, f, "dist", &dist);
	if (!s)
		s = load_dist_fields(L, init, f, dist, in);
	free(dist);
	return s;
}

static st_status load_tol(loader *L, json_t *tensor, const char *parent, st_tol *tol)
{
	static const char *const keys[] = {"atol", "rtol", "nmse", NULL};
	char f[FIELD_MAX];
	json_t *v;
	field_key(f, parent, "tol");
	tol->atol = tol->rtol = tol->nmse = -1;
	st_status s = member(L, tensor, parent, "tol", !L->t->validator, &v);
	if (s || !v)
		return s; /* a semantic validator judges the output instead */
	if ((s = want_type(L, v, f, JSON_OBJECT)) || (s = check_keys(L, v, f, keys)))
		return s;
	int has_a = json_object_get(v, "atol") != NULL, has_r = json_object_get(v, "rtol") != NULL;
	int has_n = json_object_get(v, "nmse") != NULL;
	if (!((has_a && has_r && !has_n) || (has_n && !has_a && !has_r)))
		return bad(L, f, "needs atol and rtol, or nmse");
	if (has_n)
		return get_nonneg(L, v, f, "nmse", &tol->nmse);
	if (!(s = get_nonneg(L, v, f, "atol", &tol->atol)))
		s = get_nonneg(L, v, f, "rtol", &tol->rtol);
	return s;
}

static st_status load_tensor(loader *L, json_t *v, const char *field, int is_output,
                             int is_param, st_tensor_spec *t)
{
	static const char *const in_keys[] = {"name", "dtype", "shape", "init", NULL};
	static const char *const out_keys[] = {"name", "dtype", "shape", "tol", NULL};
	st_status s = want_type(L, v, field, JSON_OBJECT);
	if (!s)
		s = check_keys(L, v, field, is_output ? out_keys : in_keys);
	if (!s)
		s = get_string(L, v, field, "name", &t->name);
	if (!s && !is_tensor_name(t->name)) {
		char f[FIELD_MAX];
		field_key(f, field, "name");
		s = bad(L, f, "'%s' is not a valid name (letters, digits, _ and inner dots)", t->name);
	}
	if (!s)
		s = load_dtype(L, v, field, t);
	if (!s)
		s = load_shape(L, v, field, t);
	/* An imported task's params come from its data file: they need no init. */
	if (!s && !is_output && is_param && L->stored && !json_object_get(v, "init"))
		return ST_OK;
	if (!s)
		s = is_output ? load_tol(L, v, field, &t->tol) : load_init(L, v, field, &t->init);
	return s;
}

static st_status load_tensors(loader *L, json_t *root, const char *key, int is_output,
                              st_tensor_spec **out, int *count)
{
	json_t *arr;
	size_t n;
	void *mem = NULL;
	st_status s = member(L, root, "", key, 1, &arr);
	if (!s)
		s = array_elems(L, arr, key, sizeof **out, &n, &mem);
	*out = mem;
	if (s)
		return s;
	if (is_output && n == 0)
		return bad(L, key, "needs at least one output");
	for (size_t i = 0; i < n; i++) {
		char f[FIELD_MAX];
		field_index(f, key, i);
		(*count)++;
		if ((s = load_tensor(L, json_array_get(arr, i), f, is_output, !strcmp(key, "params"),
		                     &(*out)[i])))
			return s;
	}
	return ST_OK;
}

/* Tensor names must be unique across params, inputs and outputs: messages and the runner's
 * files refer to tensors by name. */
static st_status check_tensor_names(loader *L)
{
	struct { const char *key; st_tensor_spec *v; int n; } groups[] = {
		{"params", L->t->params, L->t->n_params},
		{"inputs", L->t->inputs, L->t->n_inputs},
		{"outputs", L->t->outputs, L->t->n_outputs},
	};
	for (int g = 0; g < 3; g++)
		for (int i = 0; i < groups[g].n; i++)
			for (int h = 0; h <= g; h++)
				for (int j = 0; j < (h == g ? i : groups[h].n); j++)
					if (!strcmp(groups[g].v[i].name, groups[h].v[j].name)) {
						char f[FIELD_MAX];
						snprintf(f, sizeof f, "%s[%d].name", groups[g].key, i);
						return bad(L, f, "'%s' is already used by %s[%d]",
						           groups[g].v[i].name, groups[h].key, j);
					}
	return ST_OK;
}

/* ---- the rest ------------------------------------------------------------------------- */

/* cost.roof, optional ("dram" when absent), and cost.l2_bytes, which the L2 roof needs and no
 * other roof reads: an expression nothing uses would only mislead whoever reads task.json. */
static st_status load_roof(loader *L, json_t *cost)
{
	static const char *const roofs[] = {"dram", "l2", NULL};
	json_t *v, *l2;
	char known[64];
	st_status s = member(L, cost, "cost", "roof", 0, &v);
	if (!s && v) {
		s = want_type(L, v, "cost.roof", JSON_STRING);
		if (!s && !in_list(json_string_value(v), roofs)) {
			join_list(known, sizeof known, roofs);
			return bad(L, "cost.roof", "unknown roof '%s' (known: %s)", json_string_value(v),
			           known);
		}
		if (!s)
			L->t->cost_roof = strcmp(json_string_value(v), "l2") ? ST_ROOF_DRAM : ST_ROOF_L2;
	}
	if (!s)
		s = member(L, cost, "cost", "l2_bytes", 0, &l2);
	if (!s && L->t->cost_roof == ST_ROOF_L2 && !l2)
		return bad(L, "cost.l2_bytes", "missing (roof \"l2\" needs the bytes through the L2)");
	if (!s && l2 && L->t->cost_roof != ST_ROOF_L2)
		return bad(L, "cost.l2_bytes", "only roof \"l2\" reads it (add \"roof\": \"l2\")");
	if (!s && l2)
		s = load_expr(L, l2, "cost.l2_bytes", 0, &L->t->cost_l2_bytes);
	if (!s && l2)
		s = eval_everywhere(L, L->t->cost_l2_bytes, "cost.l2_bytes", 0, NULL);
	return s;
}

/* An optional count of the cost model, cost.<key>: cost.sfu, the special-function operations
 * the work cannot do without (the transcendentals of a Monte-Carlo path, say), or cost.syncs,
 * its device-wide synchronisations (a recurrence's dependent steps). Like the FLOPs, each is a
 * bound under every roof. */
static st_status load_count(loader *L, json_t *cost, const char *key, char **out)
{
	char field[FIELD_MAX];
	json_t *v;
	snprintf(field, sizeof field, "cost.%s", key);
	st_status s = member(L, cost, "cost", key, 0, &v);
	if (!s && v)
		s = load_expr(L, v, field, 0, out);
	if (!s && v)
		s = eval_everywhere(L, *out, field, 0, NULL);
	return s;
}

static st_status load_cost(loader *L, json_t *root)
{
	static const char *const keys[] = {"flops", "bytes", "unit", "roof", "l2_bytes", "sfu",
	                                   "syncs", NULL};
	json_t *cost, *v;
	char known[128];
	st_status s = member(L, root, "", "cost", 1, &cost);
	if (!s)
		s = want_type(L, cost, "cost", JSON_OBJECT);
	if (!s)
		s = check_keys(L, cost, "cost", keys);
	if (!s)
		s = member(L, cost, "cost", "flops", 1, &v);
	if (!s)
		s = load_expr(L, v, "cost.flops", 0, &L->t->cost_flops);
	if (!s)
		s = eval_everywhere(L, L->t->cost_flops, "cost.flops", 0, NULL);
	if (!s)
		s = member(L, cost, "cost", "bytes", 1, &v);
	if (!s)
		s = load_expr(L, v, "cost.bytes", 0, &L->t->cost_bytes);
	if (!s)
		s = eval_everywhere(L, L->t->cost_bytes, "cost.bytes", 0, NULL);
	if (!s)
		s = get_string(L, cost, "cost", "unit", &L->t->cost_unit);
	if (!s && !in_list(L->t->cost_unit, known_units)) {
		join_list(known, sizeof known, known_units);
		s = bad(L, "cost.unit", "unknown unit '%s' (known: %s)", L->t->cost_unit, known);
	}
	if (!s)
		s = load_count(L, cost, "sfu", &L->t->cost_sfu);
	if (!s)
		s = load_count(L, cost, "syncs", &L->t->cost_syncs);
	return s ? s : load_roof(L, cost);
}

/* An array of distinct library names from the known list. */
static st_status load_libraries(loader *L, json_t *arr, const char *field, char ***out, int *n)
{
	size_t count;
	void *mem = NULL;
	st_status s = array_elems(L, arr, field, sizeof **out, &count, &mem);
	*out = mem;
	if (s)
		return s;
	for (size_t i = 0; i < count; i++) {
		char f[FIELD_MAX], known[128];
		json_t *v = json_array_get(arr, i);
		field_index(f, field, i);
		if ((s = want_type(L, v, f, JSON_STRING)))
			return s;
		const char *name = json_string_value(v);
		if (!in_list(name, known_libraries)) {
			join_list(known, sizeof known, known_libraries);
			return bad(L, f, "unknown library '%s' (known: %s)", name, known);
		}
		for (int j = 0; j < *n; j++)
			if (!strcmp((*out)[j], name))
				return bad(L, f, "'%s' is listed twice", name);
		if ((s = dup(L, name, &(*out)[*n])))
			return s;
		(*n)++;
	}
	return ST_OK;
}

static st_status load_policy(loader *L, json_t *root)
{
	static const char *const keys[] = {"mode", "libraries", NULL};
	json_t *policy, *libs;
	char *mode = NULL;
	st_status s = member(L, root, "", "policy", 1, &policy);
	if (!s)
		s = want_type(L, policy, "policy", JSON_OBJECT);
	if (!s)
		s = check_keys(L, policy, "policy", keys);
	if (!s)
		s = get_string(L, policy, "policy", "mode", &mode);
	if (!s) {
		if (!strcmp(mode, "engineering"))
			L->t->policy = ST_POLICY_ENGINEERING;
		else if (!strcmp(mode, "expert"))
			L->t->policy = ST_POLICY_EXPERT;
		else
			s = bad(L, "policy.mode", "unknown mode '%s' (known: engineering expert)", mode);
	}
	free(mode);
	if (!s)
		s = member(L, policy, "policy", "libraries", 1, &libs);
	if (!s)
		s = load_libraries(L, libs, "policy.libraries", &L->t->libraries, &L->t->n_libraries);
	if (!s && L->t->policy == ST_POLICY_EXPERT && L->t->n_libraries > 0)
		s = bad(L, "policy.libraries", "must be empty in expert mode (hand-written CUDA only)");
	return s;
}

static st_status load_archs(loader *L, json_t *root)
{
	json_t *arr;
	size_t n;
	void *mem = NULL;
	st_status s = member(L, root, "", "archs", 1, &arr);
	if (!s)
		s = array_elems(L, arr, "archs", sizeof *L->t->archs, &n, &mem);
	L->t->archs = mem;
	if (s)
		return s;
	if (n == 0)
		return bad(L, "archs", "needs at least one architecture, e.g. \"sm_90a\"");
	for (size_t i = 0; i < n; i++) {
		char f[FIELD_MAX];
		json_t *v = json_array_get(arr, i);
		field_index(f, "archs", i);
		if ((s = want_type(L, v, f, JSON_STRING)))
			return s;
		if (st_arch_valid(json_string_value(v)) != 0)
			return bad(L, f, "'%s' is not an architecture like sm_90a", json_string_value(v));
		if ((s = dup(L, json_string_value(v), &L->t->archs[L->t->n_archs])))
			return s;
		L->t->n_archs++;
	}
	return ST_OK;
}

/* A file of the task folder: relative, no "..", present; stored as an absolute path. */
static st_status folder_file(loader *L, json_t *v, const char *field, char **out)
{
	st_status s = want_type(L, v, field, JSON_STRING);
	if (s)
		return s;
	const char *name = json_string_value(v);
	if (!*name || name[0] == '/' || !strcmp(name, "..") || !strncmp(name, "../", 3) ||
	    strstr(name, "/../") || (strlen(name) >= 3 && !strcmp(name + strlen(name) - 3, "/..")))
		return bad(L, field, "'%s' must be a file of the task folder", name);
	if (asprintf(out, "%s/%s", L->t->dir, name) < 0) {
		*out = NULL;
		return no_memory(L);
	}
	struct stat st;
	if (stat(*out, &st) || !S_ISREG(st.st_mode))
		return bad(L, field, "file '%s' not found in %s", name, L->t->dir);
	return ST_OK;
}

/* An optional member that may also be null. */
static st_status optional_file(loader *L, json_t *obj, const char *parent, const char *key,
                               char **out)
{
	json_t *v = json_object_get(obj, key);
	char f[FIELD_MAX];
	field_key(f, parent, key);
	return (!v || json_is_null(v)) ? ST_OK : folder_file(L, v, f, out);
}

static st_status load_experts(loader *L, json_t *sol)
{
	json_t *arr;
	size_t n;
	void *mem = NULL;
	st_status s = member(L, sol, "solutions", "experts", 1, &arr);
	if (!s)
		s = array_elems(L, arr, "solutions.experts", sizeof *L->t->experts, &n, &mem);
	L->t->experts = mem;
	if (s)
		return s;
	if (n == 0)
		return bad(L, "solutions.experts", "needs at least one expert solution");
	for (size_t i = 0; i < n; i++) {
		char f[FIELD_MAX];
		field_index(f, "solutions.experts", i);
		L->t->n_experts++;
		if ((s = folder_file(L, json_array_get(arr, i), f, &L->t->experts[i])))
			return s;
	}
	return ST_OK;
}

static st_status load_solutions(loader *L, json_t *root)
{
	static const char *const keys[] = {"reference", "experts", "host_reference", "host_expert",
	                                   "libraries", NULL};
	json_t *sol, *v;
	if (L->stored && !json_object_get(root, "solutions"))
		return ST_OK; /* judged against its stored outputs */
	if (L->stored)
		return bad(L, "solutions", "a task with \"data\" is judged against its stored outputs "
		           "and ships no solutions");
	st_status s = member(L, root, "", "solutions", 1, &sol);
	if (!s)
		s = want_type(L, sol, "solutions", JSON_OBJECT);
	if (!s)
		s = check_keys(L, sol, "solutions", keys);
	if (!s)
		s = member(L, sol, "solutions", "reference", 1, &v);
	if (!s)
		s = folder_file(L, v, "solutions.reference", &L->t->reference);
	if (!s)
		s = load_experts(L, sol);
	if (!s)
		s = optional_file(L, sol, "solutions", "host_reference", &L->t->host_reference);
	if (!s)
		s = optional_file(L, sol, "solutions", "host_expert", &L->t->host_expert);
	v = json_object_get(sol, "libraries");
	if (!s && v && !json_is_null(v))
		s = load_libraries(L, v, "solutions.libraries", &L->t->solution_libraries,
		                   &L->t->n_solution_libraries);
	return s;
}

static st_status load_validator(loader *L, json_t *root)
{
	json_t *v = json_object_get(root, "validator");
	if (!v || json_is_null(v))
		return ST_OK;
	if (!json_is_string(v) || strcmp(json_string_value(v), "task"))
		return bad(L, "validator", "expected null or \"task\"");
	if (!L->t->hooks)
		return bad(L, "validator", "\"task\" needs \"hooks\": \"task.c\"");
	return dup(L, "task", &L->t->validator);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* The name of the folder that holds `dir` ("t1" for /x/tasks/t1/softmax). */
static void parent_name(const char *dir, char *out, size_t len)
{
	const char *slash = strrchr(dir, '/');
	size_t end = slash ? (size_t)(slash - dir) : 0;
	size_t start = end;
	while (start > 0 && dir[start - 1] != '/')
		start--;
	snprintf(out, len, "%.*s", (int)(end - start), dir + start);
}

/* "t<digits>" gives the tier the folder stands for, else 0. */
static int tier_of_folder(const char *name)
{
	if (name[0] != 't' || !name[1])
		return 0;
	int tier = 0;
	for (const char *p = name + 1; *p; p++) {
		if (*p < '0' || *p > '9' || tier > 1000)
			return 0;
		tier = tier * 10 + (*p - '0');
	}
	return tier;
}

static st_status load_identity(loader *L, json_t *root)
{
	json_t *v;
	char parent[PATH_MAX];
	st_status s = get_string(L, root, "", "name", &L->t->name);
	if (s)
		return s;
	if (strcmp(L->t->name, base_name(L->t->dir)))
		return bad(L, "name", "'%s' does not match the folder name '%s'", L->t->name,
		           base_name(L->t->dir));
	if ((s = member(L, root, "", "tier", 1, &v)))
		return s;
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4)
		return bad(L, "tier", "expected an integer from 1 to 4");
	L->t->tier = (int)json_integer_value(v);
	parent_name(L->t->dir, parent, sizeof parent);
	int folder_tier = tier_of_folder(parent);
	if (folder_tier && folder_tier != L->t->tier)
		return bad(L, "tier", "is %d but the task lies in tier folder '%s'", L->t->tier, parent);
	if (asprintf(&L->t->id, "%s/%s", parent, L->t->name) < 0) {
		L->t->id = NULL;
		return no_memory(L);
	}
	return get_string(L, root, "", "description", &L->t->description);
}

/* data.params_sha256: 64 hex digits, when given (the live reference checks it). */
static st_status params_digest(loader *L, json_t *d)
{
	json_t *v = json_object_get(d, "params_sha256");
	if (!v)
		return ST_OK;
	st_status s = want_type(L, v, "data.params_sha256", JSON_STRING);
	const char *h = s ? NULL : json_string_value(v);
	if (h && (strlen(h) != 64 || strspn(h, "0123456789abcdef") != 64))
		return bad(L, "data.params_sha256", "'%s' is not 64 lowercase hex digits", h);
	return s;
}

/* The stored form's seed files: "seeds": [FILE, ...]. */
static st_status stored_seeds(loader *L, json_t *v)
{
	size_t n;
	void *mem = NULL;
	st_status s = array_elems(L, v, "data.seeds", sizeof *L->t->data_seeds, &n, &mem);
	L->t->data_seeds = mem;
	if (s)
		return s;
	if (n < 1 || n > 100)
		return bad(L, "data.seeds", "needs 1 to 100 files, has %zu", n);
	for (size_t i = 0; i < n; i++) {
		char f[FIELD_MAX];
		field_index(f, "data.seeds", i);
		L->t->n_data_seeds++;
		if ((s = folder_file(L, json_array_get(v, i), f, &L->t->data_seeds[i])))
			return s;
	}
	return ST_OK;
}

/* "data", an imported task's tensors, in one of two forms:
 *   stored: {"params": FILE, "seeds": [FILE, ...], "check": FILE[, "reference": FILE]}
 *   live:   {"reference": FILE, "seeds": N}, the program itself drawing each verify's seeds
 * (src/verify/live_ref.c); either may carry "params_sha256". */
static st_status load_data(loader *L, json_t *root)
{
	static const char *const keys[] = {"params", "seeds", "check", "reference",
	                                   "params_sha256", NULL};
	json_t *d = json_object_get(root, "data"), *v;
	if (!d || json_is_null(d))
		return ST_OK;
	L->stored = 1;
	st_status s = want_type(L, d, "data", JSON_OBJECT);
	if (!s)
		s = check_keys(L, d, "data", keys);
	if (!s)
		s = params_digest(L, d);
	if (!s && json_object_get(d, "reference"))
		s = folder_file(L, json_object_get(d, "reference"), "data.reference",
		                &L->t->data_reference);
	if (s)
		return s;
	if (!json_object_get(d, "params")) {
		if (!L->t->data_reference)
			return bad(L, "data", "needs either the stored files (params, seeds, check) or "
			           "the reference program (reference, seeds)");
		if ((s = member(L, d, "data", "seeds", 1, &v)))
			return s;
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100)
			return bad(L, "data.seeds", "a live reference's seed count must be 1 to 100");
		L->t->data_live = 1;
		L->t->n_data_seeds = (int)json_integer_value(v);
		return ST_OK;
	}
	s = member(L, d, "data", "params", 1, &v);
	if (!s)
		s = folder_file(L, v, "data.params", &L->t->data_params);
	if (!s)
		s = member(L, d, "data", "check", 1, &v);
	if (!s)
		s = folder_file(L, v, "data.check", &L->t->data_check);
	if (!s)
		s = member(L, d, "data", "seeds", 1, &v);
	return s ? s : stored_seeds(L, v);
}

/* What an import measured and where the task came from: kept as given, with the figures the
 * verifier reads checked. */
static st_status load_provenance(loader *L, json_t *root)
{
	static const char *const figures[] = {"eager_ms", "compile_ms", NULL};
	json_t *b = json_object_get(root, "baselines"), *src = json_object_get(root, "source");
	st_status s = ST_OK;
	if (b && !json_is_null(b)) {
		if ((s = want_type(L, b, "baselines", JSON_OBJECT)))
			return s;
		for (int i = 0; figures[i]; i++) {
			json_t *x = json_object_get(b, figures[i]);
			char f[FIELD_MAX];
			field_key(f, "baselines", figures[i]);
			if (x && !(json_is_number(x) && json_number_value(x) > 0))
				return bad(L, f, "expected a positive number of milliseconds");
		}
		L->t->baselines = json_incref(b);
	}
	if (src && !json_is_null(src)) {
		if ((s = want_type(L, src, "source", JSON_OBJECT)))
			return s;
		L->t->source = json_incref(src);
	}
	return s;
}

static st_status load_root(loader *L, json_t *root)
{
	static const char *const keys[] = {"name", "tier", "description", "sizes", "params",
	                                   "inputs", "outputs", "validator", "cost", "policy",
	                                   "archs", "solutions", "hooks", "data", "baselines",
	                                   "source", NULL};
	st_task *t = L->t;
	st_status s;
	if (!json_is_object(root))
		return bad(L, "", "expected a JSON object at the top");
	if ((s = check_keys(L, root, "", keys)) || (s = load_identity(L, root)) ||
	    (s = load_data(L, root)) || (s = load_provenance(L, root)) ||
	    (s = optional_file(L, root, "", "hooks", &t->hooks)) || (s = load_validator(L, root)) || (s = load_sizes(L, root)) ||
	    (s = load_tensors(L, root, "params", 0, &t->params, &t->n_params)) ||
	    (s = load_tensors(L, root, "inputs", 0, &t->inputs, &t->n_inputs)) ||
	    (s = load_tensors(L, root, "outputs", 1, &t->outputs, &t->n_outputs)) ||
	    (s = check_tensor_names(L)) || (s = load_cost(L, root)) || (s = load_policy(L, root)) ||
	    (s = load_archs(L, root)) || (s = load_solutions(L, root)))
		return s;
	return ST_OK;
}

/* Both entries name the file and resolve the folder the same way: messages quote task_dir as
 * given, while task->dir is absolute because the task's files are resolved against it. */
static st_status open_folder(loader *L, const char *task_dir)
{
	memset(L->t, 0, sizeof *L->t);
	size_t len = strlen(task_dir);
	while (len > 1 && task_dir[len - 1] == '/')
		len--;
	snprintf(L->file, sizeof L->file, "%.*s/task.json", (int)len, task_dir);
	char real[PATH_MAX];
	if (!realpath(task_dir, real))
		return st_err_set(L->err, ST_E_IO, "%s: cannot open the task folder: %s", L->file,
		                  strerror(errno));
	if (!(L->t->dir = strdup(real)))
		return no_memory(L);
	return ST_OK;
}

static st_status syntax_error(loader *L, const json_error_t *je)
{
	return st_err_set(L->err, ST_E_INVALID, "%s: line %d column %d: %s", L->file, je->line,
	                  je->column, je->text);
}

st_status st_task_load(const char *task_dir, st_task *task, st_err *err)
{
	loader L = {.t = task, .err = err};
	st_status s = open_folder(&L, task_dir);
	if (s)
		return s;
	json_error_t je;
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/task.json", task->dir);
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		struct stat st;
		if (stat(path, &st))
			s = st_err_set(err, ST_E_IO, "%s: cannot read: %s", L.file, strerror(errno));
		else
			s = syntax_error(&L, &je);
	} else {
		s = load_root(&L, root);
		json_decref(root);
	}
	if (s)
		st_task_free(task);
	return s;
}

st_status st_task_load_text(const char *text, size_t len, const char *task_dir, st_task *task,
                            st_err *err)
{
	loader L = {.t = task, .err = err};
	st_status s = open_folder(&L, task_dir);
	if (s)
		return s;
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		s = syntax_error(&L, &je);
	} else {
		s = load_root(&L, root);
		json_decref(root);
	}
	if (s)
		st_task_free(task);
	return s;
}

/* ---- shapes, size sets, free ---------------------------------------------------------- */

int st_task_size_sets(const st_task *task, const st_size_set **sets, int max)
{
	int n = 0;
	if (n < max && task->small.label) /* an imported task has no small set */
		sets[n++] = &task->small;
	if (n < max)
		sets[n++] = &task->eval;
	for (int i = 0; i < task->n_hidden && n < max; i++)
		sets[n++] = &task->hidden[i];
	return n;
}

st_status st_task_shape(const st_tensor_spec *t, const st_size_set *sizes, int64_t *dims,
                        st_err *err)
{
	for (int d = 0; d < t->ndim; d++) {
		if (st_expr_eval(t->shape[d], sizes, &dims[d], err))
			return st_err_wrap(err, ST_E_INVALID, "%s.shape[%d] under size set '%s'", t->name,
			                   d, sizes->label ? sizes->label : "?");
		if (dims[d] < 1)
			return st_err_set(err, ST_E_INVALID,
			                  "%s.shape[%d] is %lld under size set '%s' (must be >= 1)",
			                  t->name, d, (long long)dims[d], sizes->label ? sizes->label : "?");
	}
	return ST_OK;
}

st_status st_task_numel(const st_tensor_spec *t, const st_size_set *sizes, int64_t *numel,
                        st_err *err)
{
	int64_t dims[ST_MAX_DIMS], n = 1, bytes;
	st_status s = st_task_shape(t, sizes, dims, err);
	if (s)
		return s;
	for (int d = 0; d < t->ndim; d++)
		if (__builtin_mul_overflow(n, dims[d], &n))
			return st_err_set(err, ST_E_INVALID, "%s: element count overflows", t->name);
	if (__builtin_mul_overflow(n, (int64_t)st_dtype_size(t->dtype), &bytes))
		return st_err_set(err, ST_E_INVALID, "%s: byte size overflows", t->name);
	*numel = n;
	return ST_OK;
}

static void free_strings(char **v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static void free_size_set(st_size_set *s)
{
	free(s->label);
	free_strings(s->names, s->n);
	free(s->values);
}

static void free_tensors(st_tensor_spec *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].name);
		for (int d = 0; d < ST_MAX_DIMS; d++)
			free(v[i].shape[d]);
		free(v[i].init.lo_expr);
		free(v[i].init.hi_expr);
	}
	free(v);
}

const char *st_task_reference(const st_task *t, int host)
{
	return host ? t->host_reference : t->reference;
}

const char *st_task_expert(const st_task *t, int host)
{
	return host ? t->host_expert : (t->n_experts ? t->experts[0] : NULL);
}

void st_task_free(st_task *t)
{
	if (!t)
		return;
	free(t->dir);
	free(t->id);
	free(t->name);
	free(t->description);
	free_size_set(&t->eval);
	free_size_set(&t->small);
	for (int i = 0; t->hidden && i < t->n_hidden; i++)
		free_size_set(&t->hidden[i]);
	free(t->hidden);
	free_tensors(t->params, t->n_params);
	free_tensors(t->inputs, t->n_inputs);
	free_tensors(t->outputs, t->n_outputs);
	free(t->cost_flops);
	free(t->cost_bytes);
	free(t->cost_unit);
	free(t->cost_l2_bytes);
	free(t->cost_sfu);
	free(t->cost_syncs);
	free(t->validator);
	free(t->hooks);
	free_strings(t->libraries, t->n_libraries);
	free_strings(t->archs, t->n_archs);
	free(t->reference);
	free(t->host_reference);
	free_strings(t->experts, t->n_experts);
	free(t->host_expert);
	free_strings(t->solution_libraries, t->n_solution_libraries);
	free(t->data_params);
	free(t->data_reference);
	free_strings(t->data_seeds, t->n_data_seeds);
	free(t->data_check);
	json_decref(t->baselines);
	json_decref(t->source);
	memset(t, 0, sizeof *t);
}
