/* Peaks are a property of the device, not of a run: measuring them costs a couple of seconds,
 * so they are cached as <cache>/peaks/<uuid>.json and reused by every later verify. */
#include "peaks.h"
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/proto.h"

/* The cache file of the runner's device (dir: the cache folder). */
static st_status peaks_path(const st_runner *r, char *dir, size_t dlen, char *path, size_t plen,
                            st_err *err)
{
	st_status s = st_cache_dir(dir, dlen, err);
	if (s)
		return s;
	const char *uuid = json_string_value(json_object_get(r->info, "uuid"));
	snprintf(path, plen, "%s/peaks/%s.json", dir, uuid ? uuid : "unknown");
	return ST_OK;
}

int st_peaks_cached(const st_runner *r, json_t **peaks)
{
	char dir[4096], path[4400];
	st_err e;
	*peaks = NULL;
	if (peaks_path(r, dir, sizeof dir, path, sizeof path, &e))
		return 0;
	json_error_t je;
	*peaks = json_load_file(path, 0, &je);
	if (*peaks && json_object_get(*peaks, "bw_gbs") &&
	    json_integer_value(json_object_get(*peaks, "version")) == ST_PEAKS_VERSION)
		return 1;
	json_decref(*peaks);
	*peaks = NULL;
	return 0;
}

st_status st_peaks_get(st_runner *r, double timeout_s, json_t **peaks, st_err *err)
{
	char dir[4096], path[4400];
	if (st_peaks_cached(r, peaks))
		return ST_OK;
	st_status s = peaks_path(r, dir, sizeof dir, path, sizeof path, err);
	if (s)
		return s;
	json_t *req = json_pack("{s:s}", "op", "peaks"), *rep = NULL;
	s = st_runner_call(r, req, -1, &rep, timeout_s, err);
	json_decref(req);
	if (s)
		return st_err_wrap(err, s, "measuring device peaks");
	if (!st_reply_ok(rep)) {
		s = st_err_set(err, ST_E_SYSTEM, "measuring device peaks: %s",
		               st_reply_string(rep, "reason"));
		json_decref(rep);
		return s;
	}
	json_object_del(rep, "ok");
	json_object_set(rep, "device", json_object_get(r->info, "device"));
	char sub[4200];
	snprintf(sub, sizeof sub, "%s/peaks", dir);
	char *text = json_dumps(rep, JSON_INDENT(2));
	st_err ignore;
	/* A cache that cannot be written only costs a re-measurement next time. */
	if (text && st_mkdirs(sub, &ignore) == ST_OK)
		st_write_file_atomic(path, text, strlen(text), &ignore);
	free(text);
	*peaks = rep;
	return ST_OK;
}

st_status st_device_probe(const char *backend, int flags, const char *devices, int want_peaks,
                          char *arch, size_t len, char *pci_bus, size_t bus_len,
                          st_err *peaks_err, st_err *err)
{
	arch[0] = 0;
	if (pci_bus && bus_len)
		pci_bus[0] = 0;
	peaks_err->msg[0] = 0;
	st_runner r;
	st_status st = st_runner_start(&r, backend, "probe", flags, devices, err);
	if (!st)
		st = st_runner_hello(&r, 120, err);
	if (!st) {
		const char *a = json_string_value(json_object_get(r.info, "arch"));
		snprintf(arch, len, "%s", a ? a : "");
		const char *b = json_string_value(json_object_get(r.info, "pci_bus"));
		if (pci_bus && bus_len)
			snprintf(pci_bus, bus_len, "%s", b ? b : "");
		json_t *peaks = NULL;
		if (want_peaks && st_peaks_get(&r, 600, &peaks, peaks_err) && !peaks_err->msg[0])
			snprintf(peaks_err->msg, sizeof peaks_err->msg, "no reason given");
		json_decref(peaks);
	}
	st_runner_stop(&r);
	return st;
}
