/* The in-memory form of a task folder (task.json): sizes, tensors, tolerances, cost model,
 * policy and the solution files it ships. Loaded with jansson by st_task_load. */
#ifndef ST_TASK_H
#define ST_TASK_H

#include <stdint.h>
#include <jansson.h>
#include "stitch/solution.h"
#include "../common/st_error.h"

#define ST_MAX_DIMS 8
/* The most inputs (and outputs) a verify takes: the parent's shared-memory layout refuses more,
 * and both sides keep per-tensor arrays of this length. */
#define ST_MAX_TENSORS 64

/* One named set of size parameters, e.g. eval = {rows: 8192, cols: 8192}. */
typedef struct st_size_set {
	char *label;          /* "eval", "small", "hidden0", "hidden1", ... */
	int n;
	char **names;
	int64_t *values;
} st_size_set;

/* Is `label` a hidden size set's ("hidden0", "hidden1", ...: never shown to agents)? */
int st_set_label_hidden(const char *label);

typedef enum st_dist {
	ST_DIST_NORMAL,   /* a = mean, b = std */
	ST_DIST_UNIFORM,  /* [a, b) */
	ST_DIST_RANDINT,  /* integers in [lo, hi) where lo/hi are expressions of the sizes */
	ST_DIST_CONST,    /* a */
	ST_DIST_TASK,     /* filled by task.c st_task_generate */
} st_dist;

typedef struct st_init_spec {
	st_dist dist;
	double a, b;
	char *lo_expr, *hi_expr; /* RANDINT only */
} st_init_spec;

/* Tolerance of one output. A negative field is unset. An element passes when
 * |got - want| <= atol + rtol * |want|; with nmse set, the whole output passes when
 * sum (got - want)^2 / sum want^2 <= nmse (and the elementwise rule is not applied). */
typedef struct st_tol {
	double atol, rtol, nmse;
} st_tol;

typedef struct st_tensor_spec {
	char *name;
	st_dtype dtype;
	int ndim;
	char *shape[ST_MAX_DIMS]; /* expressions of the size names, e.g. "rows", "4*H" */
	st_init_spec init;        /* params and inputs */
	st_tol tol;               /* outputs */
} st_tensor_spec;

typedef enum st_policy_mode { ST_POLICY_ENGINEERING, ST_POLICY_EXPERT } st_policy_mode;

/* The roof a task's speed of light is taken against (cost.roof, docs/task-format.md): DRAM (the
 * default: flops at the unit's peak, bytes at the DRAM bandwidth) or the L2 (the same, plus
 * cost.l2_bytes at the L2's bandwidth, for work whose gathers bind on the L2 first). */
typedef enum st_roof { ST_ROOF_DRAM, ST_ROOF_L2 } st_roof;

typedef struct st_task {
	char *dir;            /* folder that holds task.json (absolute) */
	char *id;             /* "t1/softmax": tier folder + name */
	char *name;
	int tier;             /* 1 kernel, 2 module, 3 application, 4 challenge */
	char *description;

	st_size_set eval, small;
	st_size_set *hidden;
	int n_hidden;

	st_tensor_spec *params, *inputs, *outputs;
	int n_params, n_inputs, n_outputs;

	char *cost_flops;     /* expression; NULL when the task has none */
	char *cost_bytes;     /* expression; NULL when the task has none */
	char *cost_unit;      /* which peak bounds the flops: "fp32", "tf32", "fp16", "bf16", "fp64", "int" */
	st_roof cost_roof;    /* ST_ROOF_DRAM unless cost.roof says "l2" */
	char *cost_l2_bytes;  /* expression: the bytes through the L2; only (and always) with ST_ROOF_L2 */
	char *cost_sfu;       /* expression: special-function operations (exp, log, sin, cos, sqrt,
	                         reciprocal) the work needs, at the device's special-function rate;
	                         NULL when the task counts none */
	char *cost_syncs;     /* expression: device-wide synchronisations the work cannot do without
	                         (dependent steps that each need every SM's previous results), at
	                         the measured time of one grid barrier; NULL when none counted */

	char *validator;      /* NULL: elementwise tolerances; "task": task.c st_task_validate */
	char *hooks;          /* task.c path (absolute) or NULL */

	st_policy_mode policy;
	char **libraries;     /* libraries a candidate may link, e.g. "cublas", "cublasLt" */
	int n_libraries;

	char **archs;         /* e.g. "sm_90a" */
	int n_archs;

	char *reference;      /* absolute path of reference.cu */
	char *host_reference; /* absolute path of the host (C) reference, or NULL */
	char **experts;       /* absolute paths of expert*.cu */
	int n_experts;
	char *host_expert;    /* absolute path of a host (C) expert, or NULL */

	char **solution_libraries; /* libraries the shipped (trusted) solutions link, e.g. "cublas" */
	int n_solution_libraries;

	/* An imported task (stitch import kernelbench) carries its tensors in safetensors files of
	 * its folder instead of a reference: the params (by name), each correctness seed's inputs
	 * and expected outputs (x0.., y0..), and one more seed kept for checking a timed call.
	 * Such a task has only the `eval` set and needs no solutions. NULL/0 otherwise. */
	char *data_params;
	char **data_seeds;
	int n_data_seeds;
	char *data_check;
	/* The PyTorch program (model.py) an imported task was made from, when task.json names it as
	 * "data.reference". A live task (data_live) stores no tensors: data_params, data_seeds and
	 * data_check are NULL, n_data_seeds is how many seeds each verify draws through the program
	 * (src/verify/live_ref.c). A stored task may name it too (verify --fresh-seeds). */
	char *data_reference;
	int data_live;
	json_t *baselines;    /* what the import measured: {"eager_ms", "compile_ms", "device", ...} */
	json_t *source;       /* where the task came from: {"kind": "kernelbench", "file", ...} */
} st_task;

/* Load TASK_DIR/task.json. Errors name the file, the field and what is wrong, e.g.
 * "tasks/t1/softmax/task.json: outputs[0].tol.atol: expected a number". */
st_status st_task_load(const char *task_dir, st_task *task, st_err *err);
/* The same from task.json text already in memory (len bytes, no NUL needed): task_dir is the
 * folder the text stands for, whose name and files are checked as st_task_load checks them. */
st_status st_task_load_text(const char *text, size_t len, const char *task_dir, st_task *task,
                            st_err *err);
void st_task_free(st_task *task);

/* The reference and the (first) expert a backend runs: the C ones on the host backend, the
 * CUDA ones otherwise; NULL where the task has none. */
const char *st_task_reference(const st_task *t, int host);
const char *st_task_expert(const st_task *t, int host);

/* Resolve a task argument: an existing folder, or an id such as "t1/softmax" under `root`.
 * ST_E_INVALID where neither exists or the folder found holds no task.json. */
st_status st_task_resolve(const char *arg, const char *root, char *out, size_t outlen, st_err *err);

/* List every task folder (a folder with task.json) under root, sorted by id: absolute paths of
 * root/<tier folder>/<task folder>. Free with st_task_list_free. */
st_status st_task_list(const char *root, char ***dirs, int *n, st_err *err);

/* "expert" or "engineering". */
const char *st_task_policy_name(st_policy_mode m);
/* "dram" or "l2", as cost.roof spells it. */
const char *st_roof_name(st_roof r);
/* {id, name, tier, eval, small, n_hidden, policy, libraries, archs, cost}; NULL when out of
 * memory. Hidden sizes are never in it. */
json_t *st_task_json(const st_task *t);
void st_task_list_free(char **dirs, int n);

/* The size sets a verify runs over, in order: small, eval, then every hidden set. Writes at most
 * `max` pointers and returns how many it wrote. */
int st_task_size_sets(const st_task *task, const st_size_set **sets, int max);

/* Evaluate a tensor's shape under a size set: ndim and dims, every dim >= 1. */
st_status st_task_shape(const st_tensor_spec *t, const st_size_set *sizes, int64_t *dims,
                        st_err *err);

/* Product of dims (elements) and bytes of a tensor under a size set. */
st_status st_task_numel(const st_tensor_spec *t, const st_size_set *sizes, int64_t *numel,
                        st_err *err);

#endif
