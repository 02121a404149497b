/* What memory this machine has for a verify: MemTotal and MemAvailable from /proc/meminfo and the
 * tightest memory limit of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes) and
 * its ancestors. stitch verify's admission compares a task's bytes with it before anything is
 * mapped, and a host runner's sandbox derives its address-space limit from it, so that a memory
 * hog meets ENOMEM instead of the OOM killer. */
#ifndef ST_HOST_MEM_H
#define ST_HOST_MEM_H

#include <stdint.h>
#include "st_error.h"

typedef struct st_host_mem {
	uint64_t total;     /* MemTotal; 0: unknown */
	uint64_t available; /* MemAvailable; 0: unknown */
	uint64_t cg_limit;  /* the tightest cgroup memory.max on the way to the root; 0: none */
	uint64_t cg_room;   /* that limit less the cgroup's memory.current; meaningful with cg_limit */
} st_host_mem;

/* Fill m from /proc/meminfo and /sys/fs/cgroup. A missing cgroup file is no error (no limit);
 * a /proc/meminfo that cannot be read or parsed is (ST_E_SYSTEM). */
st_status st_host_mem_read(st_host_mem *m, st_err *err);

/* Bytes a new process may still take: the lesser of MemAvailable and the cgroup's room. *from
 * (when not NULL) names where the figure came from. 0 when nothing is known. */
uint64_t st_host_mem_usable(const st_host_mem *m, const char **from);

/* The most the whole machine (or cgroup) can ever give: the lesser of MemTotal and the limit. */
uint64_t st_host_mem_ceiling(const st_host_mem *m);

/* RLIMIT_AS for a host runner: at most `cap`, and 7/8 of the ceiling (the rest for the parent,
 * the other runners' code and the kernel). 0 when the ceiling is unknown: then `cap`. */
uint64_t st_host_runner_as(const st_host_mem *m, uint64_t cap);

/* "1.5 GiB", "4.0 TiB": bytes for a message, into buf. Returns buf. */
const char *st_bytes_str(uint64_t bytes, char *buf, size_t len);

/* Saturating arithmetic for byte counts: UINT64_MAX stands for "more than can be counted". */
static inline uint64_t st_sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t st_sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

#endif
