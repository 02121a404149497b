/* Reading the machine's memory figures (see host_mem.h): /proc/meminfo for the whole machine and
 * the cgroup files (v2, or v1's memory controller) of this process's cgroup and every ancestor,
 * since a limit set on a parent (a container, a systemd slice) binds as much as its own. */
#include "host_mem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line "key: N kB" of /proc/meminfo, in bytes; 0 when absent. */
static uint64_t meminfo_field(const char *text, const char *key)
{
	size_t klen = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, klen) && p[klen] == ':')
			return st_sat_mul(strtoull(p + klen + 1, NULL, 10), 1024);
	return 0;
}

/* The number in a cgroup file; "max", v1's "no limit" (about 2^63), a missing file: 0. */
static uint64_t cgroup_number(const char *base, const char *dir, const char *file)
{
	char path[4400], buf[64];
	snprintf(path, sizeof path, "%s%s/%s", base, dir, file);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (!n || !strncmp(buf, "max", 3))
		return 0;
	uint64_t x = strtoull(buf, NULL, 10);
	return x >= (uint64_t)1 << 62 ? 0 : x;
}

/* This process's cgroup path ("/user.slice/...") in the hierarchy whose /proc/self/cgroup line
 * starts with `prefix` ("0::" for v2, a line ending ":memory:" for v1's memory controller), or ""
 * where there is none: then only the hierarchy's root is looked at, as inside a container. */
static void own_cgroup(const char *prefix, char *path, size_t len)
{
	char line[4096];
	path[0] = '\0';
	FILE *f = fopen("/proc/self/cgroup", "r");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		char *p = strstr(line, prefix);
		if (!p || (prefix[0] == '0' && p != line))
			continue;
		p += strlen(prefix);
		p[strcspn(p, "\n")] = '\0';
		snprintf(path, len, "%s", strcmp(p, "/") ? p : "");
		break;
	}
	fclose(f);
}

/* The tightest limit from the cgroup up to the hierarchy's root, and that group's room. */
static void read_cgroups(st_host_mem *m, const char *base, const char *prefix, const char *max_file,
                         const char *cur_file)
{
	char dir[4096];
	own_cgroup(prefix, dir, sizeof dir);
	for (;;) {
		uint64_t max = cgroup_number(base, dir, max_file);
		if (max && (!m->cg_limit || max < m->cg_limit)) {
			uint64_t cur = cgroup_number(base, dir, cur_file);
			m->cg_limit = max;
			m->cg_room = cur < max ? max - cur : 0;
		}
		if (!dir[0])
			break;
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		else
			dir[0] = '\0';
	}
}

st_status st_host_mem_read(st_host_mem *m, st_err *err)
{
	memset(m, 0, sizeof *m);
	char text[8192];
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return st_err_set(err, ST_E_SYSTEM, "/proc/meminfo: %s", strerror(errno));
	size_t n = fread(text, 1, sizeof text - 1, f);
	int bad = ferror(f);
	fclose(f);
	text[n] = '\0';
	m->total = meminfo_field(text, "MemTotal");
	m->available = meminfo_field(text, "MemAvailable");
	if (bad || !m->total)
		return st_err_set(err, ST_E_SYSTEM, "/proc/meminfo: %s", bad ? "read error"
		                  : "no MemTotal line");
	read_cgroups(m, "/sys/fs/cgroup", "0::", "memory.max", "memory.current");
	read_cgroups(m, "/sys/fs/cgroup/memory", ":memory:", "memory.limit_in_bytes",
	             "memory.usage_in_bytes");
	return ST_OK;
}

uint64_t st_host_mem_usable(const st_host_mem *m, const char **from)
{
	uint64_t u = m->available;
	const char *src = "MemAvailable in /proc/meminfo";
	if (m->cg_limit && (!u || m->cg_room < u)) {
		u = m->cg_room;
		src = "the cgroup's memory.max less memory.current";
	}
	if (from)
		*from = src;
	return u;
}

uint64_t st_host_mem_ceiling(const st_host_mem *m)
{
	uint64_t c = m->total;
	if (m->cg_limit && (!c || m->cg_limit < c))
		c = m->cg_limit;
	return c;
}

uint64_t st_host_runner_as(const st_host_mem *m, uint64_t cap)
{
	uint64_t c = st_host_mem_ceiling(m);
	if (!c)
		return cap;
	c -= c / 8;
	return c < cap ? c : cap;
}

const char *st_bytes_str(uint64_t bytes, char *buf, size_t len)
{
	static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double x = (double)bytes;
	int u = 0;
	while (x >= 1024 && u < 6) {
		x /= 1024;
		u++;
	}
	if (bytes == UINT64_MAX)
		snprintf(buf, len, "more than 16 EiB");
	else if (u)
		snprintf(buf, len, "%.1f %s", x, units[u]);
	else
		snprintf(buf, len, "%" PRIu64 " B", bytes);
	return buf;
}
