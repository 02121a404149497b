/* Training datasets from the suite and from solve trajectories (dataset.c; `stitch export`). */
#ifndef ST_DATASET_H
#define ST_DATASET_H

#include <jansson.h>

#include "common/st_error.h"

typedef struct st_export_opts {
	const char *skill;        /* "gen" or "opt" */
	const char *glob;         /* task ids to keep (fnmatch); NULL: all */
	const char *backend;      /* "cuda" or "host"; NULL: cuda for gen, any for opt */
	const char *prompts_dir;  /* the prompt templates */
	const char *tasks_root;   /* the suite, for gen without task_dirs and for opt's task ids */
	const char *const *traj_dirs; /* opt: solve output folders, or folders of them */
	int n_traj_dirs;
	const char *const *task_dirs; /* task folders searched first (gen: the only ones) */
	int n_task_dirs;
} st_export_opts;

/* The records in output order, one JSON object each (see docs/datasets.md). ST_E_INVALID for
 * bad input (a trajectory line that is not JSON, an unknown task, ...) with file and line. */
st_status st_export_records(const st_export_opts *o, json_t **records, st_err *err);

#endif
