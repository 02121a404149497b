/* Device peaks (DRAM copy bandwidth, L2 read bandwidth, matrix rates per precision), measured
 * once per device by a runner and cached in the cache folder under the device's UUID. */
#ifndef ST_PEAKS_H
#define ST_PEAKS_H

#include <jansson.h>
#include "runner_client.h"

/* 1 with *peaks set when the runner's device has cached peaks (nothing is measured). */
int st_peaks_cached(const st_runner *r, json_t **peaks);
/* Return the cached peaks for the runner's device or measure them with that runner. */
st_status st_peaks_get(st_runner *r, double timeout_s, json_t **peaks, st_err *err);

/* A runner started on `devices` (NULL: ours) with ST_RUNNER_* `flags` only to look at its
 * device: the arch it reports (e.g. "sm_90a") into arch[len], "" when none; its PCI bus id (e.g.
 * "0000:1B:00.0") into pci_bus[bus_len] when pci_bus is not NULL, "" when none; with want_peaks,
 * the device's peaks as well (measured once and cached). A failure of the peaks goes to
 * *peaks_err, not to the status: a verify can do without them. */
st_status st_device_probe(const char *backend, int flags, const char *devices, int want_peaks,
                          char *arch, size_t len, char *pci_bus, size_t bus_len,
                          st_err *peaks_err, st_err *err);

#endif
