/* `stitch import kernelbench DIR`: a KernelBench level folder (or a folder of level1..level4
 * folders) imported program by program, several helpers at once (kb_folder.c), and the naming
 * rules the single-file import shares with it. */
#ifndef ST_KB_FOLDER_H
#define ST_KB_FOLDER_H

#include <stddef.h>

/* The task name of a program: its file's base name without .py, reduced to [A-Za-z0-9_]. */
void st_kb_default_name(const char *file, char *out, size_t len);

/* KernelBench keeps its programs in level1/, level2/, ...: the digit after the last "level" in
 * the path that has one (1 to 4), else 1. */
int st_kb_level_from_path(const char *path);

typedef struct st_kb_folder_opts {
	const char *dir;           /* the folder given */
	const char *root;          /* tasks go to root/level<N>/<name> */
	int level;                 /* 0: each level folder's own */
	const char *seeds, *device, *compile_mode;
	const char *store;          /* the helper's --store: "none" (the default) or "seeds" */
	int no_baselines, force;
	int jobs;                  /* helpers at once; 0: 2 on a GPU machine, else half the CPUs */
	double timeout_s;          /* per program; 0: none */
	int json;                  /* the summary as JSON on stdout instead of the table */
} st_kb_folder_opts;

/* Import every program of the folder; progress on stderr (a line per program as it ends), the
 * table (or JSON) on stdout. Returns the exit code: 0 every program imported or skipped, 1 some
 * were refused (the helper's exit 2: a real limit, with its reason), 2 bad input (no programs,
 * two programs with one task name), 3 the environment (no python or torch: the run stops; or a
 * helper that crashed, timed out or wrote a task stitch cannot load). */
int st_kb_import_folder(const st_kb_folder_opts *o);

#endif
