/* `stitch import kernelbench FILE.py`: turn a KernelBench-format PyTorch program into a stitch
 * task folder. The work that needs PyTorch (building the model, its outputs, the eager and
 * torch.compile baselines) is scripts/kb_import.py, run with the python the user points at; this
 * command picks the folder, guards what is already there, and loads the result as every task is
 * loaded, so an import that `stitch verify` could not use never reports success. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/opt.h"
#include "kb_folder.h"
#include "kb_helper.h"
#include "task/task.h"

typedef struct import_args {
	const char *out, *name, *device, *compile_mode;
	int level, seeds, no_baselines, force, jobs, json, store_seeds;
	double timeout;
} import_args;

#define IMPORT_OPT_N 15

#define IMPORT_DEFAULTS {.device = "auto", .compile_mode = "default", .seeds = 3}

static const char *const devices[] = {"auto", "cpu", "cuda", NULL};

static void own_table(import_args *a, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_STRING, .name = "out", 0, &a->out, "DIR",
		 "FILE.py: the task folder; a folder: the root of the tasks\n"
		 "(ROOT/level<N>/<name>)",
		 .unset = "TASKS/kb/level<N>/<name>, TASKS being\n$STITCH_TASKS or the source tree's tasks/"},
		{ST_OPT_STRING, .name = "name", 0, &a->name, "NAME",
		 "task name, [A-Za-z0-9_] only (FILE.py only)", .unset = "the file's name"},
		{ST_OPT_INT, .name = "level", 0, &a->level, "N",
		 "KernelBench level 1-4; the task's tier is min(N, 3)", 1, 4,
		 .unset = "from a 'levelN' in the path, else 1"},
		{ST_OPT_INT, .name = "seeds", 0, &a->seeds, "N",
		 "correctness seeds a verify judges on, 1 to 20", 1, 20},
		{ST_OPT_FLAG, .name = "store-seeds", 0, &a->store_seeds, NULL,
		 "also store the params and the seeds' inputs and outputs, for\n"
		 "a verify on a machine without torch (KernelBench's sizes take\n"
		 "up to tens of GB a program)"},
		{ST_OPT_ENUM, .name = "device", 0, &a->device, "D",
		 "where the model runs: auto (GPU if torch sees one), cpu, cuda", .values = devices},
		{ST_OPT_STRING, .name = "compile-mode", 0, &a->compile_mode, "MODE",
		 "torch.compile mode of the baseline ('none' skips torch.compile)"},
		{ST_OPT_FLAG, .name = "no-baselines", 0, &a->no_baselines, NULL, "do not time PyTorch"},
		{ST_OPT_FLAG, .name = "force", 0, &a->force, NULL,
		 "replace a task folder that already has a task.json (a folder:\n"
		 "import again the programs it would skip)"},
		{ST_OPT_INT, .name = "jobs", 'j', &a->jobs, "N",
		 "a folder: programs imported at once, 1 to 256", 1, 256,
		 .unset = "2 on a GPU machine (each helper uses the GPU),\nelse half the CPUs"},
		{ST_OPT_DOUBLE, .name = "timeout", 0, &a->timeout, "S",
		 "a folder: a program's import that takes longer fails", 0, 1e6, .unset = "none"},
		{ST_OPT_FLAG, .name = "json", 0, &a->json, NULL,
		 "a folder: the summary as JSON on stdout instead of the table"},
		{ST_OPT_END},
	};
	_Static_assert(sizeof table / sizeof table[0] <= IMPORT_OPT_N, "IMPORT_OPT_N");
	memcpy(t, table, sizeof table);
}

static void usage(FILE *f)
{
	import_args a = IMPORT_DEFAULTS;
	st_opt own[IMPORT_OPT_N];
	own_table(&a, own);
	fprintf(f,
	        "usage: stitch import kernelbench FILE.py [--out DIR] [--name NAME] [--level N]\n"
	        "                                 [--seeds N] [--store-seeds] [--device auto|cpu|cuda]\n"
	        "                                 [--compile-mode MODE] [--no-baselines] [--force]\n"
	        "       stitch import kernelbench DIR [--out ROOT] [--jobs N] [--timeout S] [--json]\n"
	        "                                 [--level N] [--seeds N] [--device D] [--force] ...\n\n"
	        "Turn a KernelBench program (class Model(nn.Module), get_inputs(), get_init_inputs())\n"
	        "into a stitch task: Model(*get_init_inputs()) is built under a fixed seed and run as\n"
	        "constructed (KernelBench does not call .eval()); its state_dict becomes the params\n"
	        "(by name, their digest recorded). No tensor is stored: each verify rebuilds the\n"
	        "params through the program and draws its N seeds and one more kept back for checking\n"
	        "a timed call under a secret seed (python3 with torch where verify runs); with\n"
	        "--store-seeds the params and the inputs and outputs of N seeds and the check seed are\n"
	        "stored as safetensors instead. Tolerances follow KernelBench (1e-4 for fp32,\n"
	        "1e-2 for fp16/bf16), then pass a trivial-answer audit: one that admits all zeros, the\n"
	        "output's mean, the input passed through or another seed's output is tightened (and\n"
	        "says so); an output that does not depend on the input is flagged degenerate_task;\n"
	        "one the float32 reference itself misses against the model run in float64 is\n"
	        "widened (docs/kernelbench.md). A Python number among the inputs becomes a\n"
	        "one-element tensor. On a GPU, PyTorch eager and torch.compile are timed (cold L2,\n"
	        "medians) and stored as the task's baselines; `stitch verify DIR SOLUTION.cu` then\n"
	        "reports speedups against them.\n\n"
	        "DIR is a KernelBench level folder (its *.py programs) or a folder holding level1..\n"
	        "level4 folders (a KernelBench checkout's KernelBench/): every program is imported\n"
	        "into ROOT/level<N>/<name> (ROOT: --out, else TASKS/kb), --jobs at once, a line per\n"
	        "program as it ends, then a table: imported, refused (with the helper's reason),\n"
	        "skipped, failed; seconds and bytes on disk. A program out of memory beside other\n"
	        "imports is deferred and tried again with fewer at once. A program whose task.json\n"
	        "records the same source (sha256) is skipped, so a stopped run resumes; --force\n"
	        "imports it again. `--suite kb1,kb2,kb3` of bench, eval, export and serve then\n"
	        "name the imported levels.\n\n");
	st_opt_usage(f, own);
	fprintf(f, "  -h, --help       this text\n\n"
	           "Needs python3 with torch ($STITCH_PYTHON names another python).\n"
	           "Exit codes: 0 imported, 2 bad usage or a program that cannot be imported (the "
	           "message\nsays why: no Model, a model that fails, unsupported dtypes, randomness in "
	           "forward),\n3 no python or torch.\n"
	           "A folder: 0 every program imported or skipped, 1 some refused, 2 bad input (no\n"
	           "programs, two programs with one task name), 3 no python or torch (the run stops),\n"
	           "or a helper that crashed or timed out.\n");
}

static int valid_name(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '_'))
			return 0;
	return 1;
}

/* A folder of programs: its root of tasks (--out, else TASKS/kb) and the run (kb_folder.c). */
static int import_folder(const import_args *ia, const char *dir, const char *seeds)
{
	if (ia->name) {
		st_cli_error("import: --name names one program; a folder's tasks are named after "
		             "their files");
		return ST_EXIT_USAGE;
	}
	char root[PATH_MAX];
	if (ia->out)
		snprintf(root, sizeof root, "%s", ia->out);
	else
		snprintf(root, sizeof root, "%s/kb", st_cli_tasks_root());
	st_kb_folder_opts o = {.dir = dir, .root = root, .level = ia->level, .seeds = seeds,
	                       .device = ia->device, .compile_mode = ia->compile_mode,
	                       .no_baselines = ia->no_baselines, .force = ia->force,
	                       .store = ia->store_seeds ? "seeds" : "none",
	                       .jobs = ia->jobs, .timeout_s = ia->timeout, .json = ia->json};
	return st_kb_import_folder(&o);
}

static int import_kernelbench(int argc, char **argv)
{
	/* argv[0] is "kernelbench", the parser's command name */
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	import_args ia = IMPORT_DEFAULTS;
	st_opt own[IMPORT_OPT_N];
	own_table(&ia, own);
	const st_opt *const tables[] = {own, NULL};
	const char *file = NULL;
	int n_pos;
	st_err err;
	if (st_opt_parse(tables, NULL, argc, argv, &file, 1, &n_pos, &err)) {
		st_cli_error("import: %s; see 'stitch import --help'", err.msg);
		return ST_EXIT_USAGE;
	}
	const char *out = ia.out, *name = ia.name, *device = ia.device;
	const char *compile_mode = ia.compile_mode;
	int level = ia.level, no_baselines = ia.no_baselines, force = ia.force;
	char seeds[16];
	snprintf(seeds, sizeof seeds, "%d", ia.seeds);
	if (!file) {
		usage(stderr);
		return ST_EXIT_USAGE;
	}
	if (st_dir_exists(file))
		return import_folder(&ia, file, seeds);
	if (ia.jobs || ia.json || ia.timeout > 0) {
		st_cli_error("import: --jobs, --timeout and --json go with a folder of programs");
		return ST_EXIT_USAGE;
	}
	struct stat st;
	if (stat(file, &st)) {
		st_cli_error("import: %s: no such file or folder", file);
		return ST_EXIT_USAGE;
	}
	if (!S_ISREG(st.st_mode)) {
		st_cli_error("import: %s: neither a program (FILE.py) nor a folder of programs", file);
		return ST_EXIT_USAGE;
	}
	size_t flen = strlen(file);
	if (flen < 3 || strcmp(file + flen - 3, ".py")) {
		st_cli_error("import: %s: not a Python program (a KernelBench program is a .py file with "
		             "Model, get_inputs and get_init_inputs)", file);
		return ST_EXIT_USAGE;
	}
	char name_buf[128], out_buf[PATH_MAX], level_buf[8];
	if (!name) {
		st_kb_default_name(file, name_buf, sizeof name_buf);
		name = name_buf;
	}
	if (!valid_name(name)) {
		st_cli_error("import: task name '%s': letters, digits and _ only", name);
		return ST_EXIT_USAGE;
	}
	if (!level)
		level = st_kb_level_from_path(file);
	snprintf(level_buf, sizeof level_buf, "%d", level);
	if (!out) {
		snprintf(out_buf, sizeof out_buf, "%s/kb/level%d/%s", st_cli_tasks_root(), level, name);
		out = out_buf;
	}
	char existing[PATH_MAX + 16];
	snprintf(existing, sizeof existing, "%s/task.json", out);
	if (st_file_exists(existing) && !force) {
		st_cli_error("import: %s already exists; --force replaces it", existing);
		return ST_EXIT_USAGE;
	}
	/* The task's folder name is its name: --out may say otherwise only by ending in it. */
	const char *base = strrchr(out, '/');
	base = base ? base + 1 : out;
	if (strcmp(base, name)) {
		st_cli_error("import: --out %s must end in the task name '%s' (a task folder is named "
		             "after its task)", out, name);
		return ST_EXIT_USAGE;
	}
	int made = !st_dir_exists(out); /* a failed import takes away only what it made */
	if (st_mkdirs(out, &err)) {
		st_cli_error("import: %s", err.msg);
		return ST_EXIT_ENV;
	}
	const char *args[] = {file, "--out", out, "--name", name, "--level", level_buf, "--seeds",
	                      seeds, "--store", ia.store_seeds ? "seeds" : "none", "--device",
	                      device, "--compile-mode", compile_mode,
	                      no_baselines ? "--no-baselines" : NULL, NULL};
	int rc = st_kb_helper_run(args, 0);
	st_task t;
	if (!rc && st_task_load(out, &t, &err)) {
		st_cli_error("import: the helper wrote a task stitch cannot load: %s", err.msg);
		rc = ST_EXIT_ENV;
	}
	if (rc) {
		if (made)
			st_rm_tree(out);
		return rc;
	}
	printf("imported %s into %s: %d params, %d inputs, %d outputs, %d seeds + 1 check seed %s",
	       t.id, out, t.n_params, t.n_inputs, t.n_outputs, t.n_data_seeds,
	       t.data_live ? "drawn by each verify" : "stored");
	double eager = json_number_value(json_object_get(t.baselines, "eager_ms"));
	double comp = json_number_value(json_object_get(t.baselines, "compile_ms"));
	if (eager > 0)
		printf("; eager %.4f ms", eager);
	if (comp > 0)
		printf(", torch.compile %.4f ms", comp);
	printf("\nverify a solution with: stitch verify %s SOLUTION.cu\n"
	       "  (C for the CPU: stitch verify --backend host %s SOLUTION.c)\n", out, out);
	st_task_free(&t);
	return ST_EXIT_OK;
}

int cmd_import(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? ST_EXIT_USAGE : ST_EXIT_OK;
	}
	if (strcmp(argv[1], "kernelbench")) {
		st_cli_error("import: unknown source '%s' (known: kernelbench)", argv[1]);
		return ST_EXIT_USAGE;
	}
	return import_kernelbench(argc - 1, argv + 1);
}
