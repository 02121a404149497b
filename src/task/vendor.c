/* Reading the vendor (PyTorch) baselines of one GPU model: bench/vendor/<device>.json, written
 * by scripts/vendor_baselines.py. Read per lookup (a verify reads it once): small, and a file
 * the helper rewrote is seen at once. */
#include "vendor.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/fs.h"
#include "common/paths.h"

void st_vendor_slug(const char *device, char *out, size_t len)
{
	size_t n = 0;
	int gap = 0;
	for (const char *p = device ? device : ""; *p && n + 2 < len; p++) {
		if (isalnum((unsigned char)*p) && (unsigned char)*p < 128) {
			if (gap && n)
				out[n++] = '_';
			out[n++] = *p;
			gap = 0;
		} else {
			gap = 1;
		}
	}
	out[n] = '\0';
	if (!n)
		snprintf(out, len, "unknown");
}

void st_vendor_dir(char *out, size_t len)
{
	const char *env = getenv("STITCH_VENDOR_DIR");
	if (env && *env)
		snprintf(out, len, "%s", env);
	else
		snprintf(out, len, "%s/bench/vendor", st_home());
}

static void copy_str(char *dst, size_t len, const json_t *s)
{
	snprintf(dst, len, "%s", json_is_string(s) ? json_string_value(s) : "");
}

st_status st_vendor_lookup(const char *dir, const char *device, const char *task_id,
                           const char *set, st_vendor *out, st_err *err)
{
	memset(out, 0, sizeof *out);
	char d[4096], slug[256];
	if (!dir)
		st_vendor_dir(d, sizeof d);
	else
		snprintf(d, sizeof d, "%s", dir);
	st_vendor_slug(device, slug, sizeof slug);
	if ((size_t)snprintf(out->file, sizeof out->file, "%s/%s.json", d, slug) >= sizeof out->file)
		return st_err_set(err, ST_E_INVALID, "vendor baselines: folder path too long");
	if (!device || !st_file_exists(out->file)) {
		snprintf(out->note, sizeof out->note, "no vendor figures for %s (no %.300s; `stitch bench "
		         "--vendor` times them)", device ? device : "this device", out->file);
		return ST_OK;
	}
	json_error_t je;
	json_t *root = json_load_file(out->file, 0, &je);
	if (!root)
		return st_err_set(err, ST_E_INVALID, "%s: line %d: %s", out->file, je.line, je.text);
	st_status s = ST_OK;
	const char *dev = json_string_value(json_object_get(root, "device"));
	const json_t *tasks = json_object_get(root, "tasks");
	if (!dev || !json_is_object(tasks)) {
		s = st_err_set(err, ST_E_INVALID, "%s: not a vendor baselines file (no \"device\" or "
		               "\"tasks\"; scripts/vendor_baselines.py writes them)", out->file);
	} else if (strcmp(dev, device)) {
		/* two names with one slug: the figures are another GPU's */
		s = st_err_set(err, ST_E_INVALID, "%s: measured on '%s', not on '%s'", out->file, dev,
		               device);
	} else {
		const json_t *t = json_object_get(tasks, task_id);
		double ms = json_number_value(json_object_get(t, "ms"));
		const char *tset = json_string_value(json_object_get(t, "set"));
		tset = tset ? tset : "eval";
		if (!t)
			snprintf(out->note, sizeof out->note, "no vendor figure for %.100s in %.300s", task_id,
			         out->file);
		else if (!(ms > 0 && isfinite(ms)))
			s = st_err_set(err, ST_E_INVALID, "%s: task %s: no positive \"ms\"", out->file,
			               task_id);
		else if (set && strcmp(set, tset))
			snprintf(out->note, sizeof out->note, "the vendor figure of %s is of size set %s, "
			         "not the timed set %s", task_id, tset, set);
		else {
			out->ms = ms;
			snprintf(out->set, sizeof out->set, "%s", tset);
			copy_str(out->op, sizeof out->op, json_object_get(t, "op"));
			copy_str(out->backend, sizeof out->backend, json_object_get(t, "backend"));
		}
	}
	json_decref(root);
	return s;
}
