/* The vendor baselines: what PyTorch's own kernels take for a suite task on one GPU model,
 * timed by scripts/vendor_baselines.py (`stitch bench --vendor`) and kept as one JSON file per
 * device name in a folder (bench/vendor/ beside the suite, or $STITCH_VENDOR_DIR). The verifier
 * sets a task's "best" bar to the faster of its expert and this figure (docs/bench.md). */
#ifndef ST_VENDOR_H
#define ST_VENDOR_H

#include <stddef.h>

#include "common/st_error.h"

/* One task's vendor figure. */
typedef struct st_vendor {
	double ms;           /* median ms; 0 when there is no figure */
	char op[160];        /* e.g. "F.scaled_dot_product_attention(is_causal=True)" */
	char backend[64];    /* the fastest backend, e.g. "cudnn" */
	char set[32];        /* the size set it was timed on ("eval") */
	char file[4096];     /* the file looked in (set whether or not it exists) */
	char note[512];      /* without a figure: why (no file, no entry, another size set) */
} st_vendor;

/* The file name of a device's figures: every run of characters other than ASCII letters and
 * digits made one '_', none at either end ("NVIDIA H200" -> "NVIDIA_H200"); "unknown" when
 * nothing is left. The helper script does the same. */
void st_vendor_slug(const char *device, char *out, size_t len);

/* The folder of the figures: $STITCH_VENDOR_DIR, else <STITCH_HOME>/bench/vendor. */
void st_vendor_dir(char *out, size_t len);

/* The figure of task_id on device for size set `set` from dir (NULL: st_vendor_dir). A missing
 * file or task, or a figure of another size set (an entry's "set", "eval" when absent), is no
 * error: out->ms = 0 and out->note says which. A file that is not the helper's JSON, or one
 * written for another device, is ST_E_INVALID with the reason. */
st_status st_vendor_lookup(const char *dir, const char *device, const char *task_id,
                           const char *set, st_vendor *out, st_err *err);

#endif
