/* The CPU count thread pools are sized by (the affinity mask's, falling back to the online CPUs
 * where the mask cannot be read), the wait for a CPU the timing's parent-clock check takes off
 * (/proc's schedstat), and the CPUs of a GPU's own NUMA node (sysfs), where a service's worker
 * for that GPU keeps its threads, runners and shared memory. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cpus.h"

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int st_cpus_usable(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof set, &set) == 0) {
		int n = CPU_COUNT(&set);
		if (n > 0)
			return n;
	}
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	return online > 0 ? (int)online : 1;
}

int st_cpus_share(int ways, int most)
{
	int share = st_cpus_usable() / (ways > 1 ? ways : 1);
	return share < 1 ? 1 : share > most ? most : share;
}

double st_cpu_on_ms(int pid, double *waited)
{
	char path[64];
	*waited = -1;
	if (pid > 0)
		snprintf(path, sizeof path, "/proc/%d/schedstat", pid);
	else
		snprintf(path, sizeof path, "/proc/thread-self/schedstat");
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	unsigned long long on_cpu, wait;
	int ok = fscanf(f, "%llu %llu", &on_cpu, &wait) == 2;
	fclose(f);
	if (!ok)
		return -1;
	*waited = (double)wait / 1e6;
	return (double)on_cpu / 1e6;
}

double st_cpu_wait_ms(int pid)
{
	double waited;
	st_cpu_on_ms(pid, &waited);
	return waited;
}

int st_cpus_parse(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s || a < 0)
			return -1;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			if (end == s + 1 || b < a)
				return -1;
			s = end;
		}
		for (long c = a; c <= b && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, set);
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -1;
	}
	return 0;
}

void st_cpus_format(const cpu_set_t *set, char *list, size_t len)
{
	size_t at = 0;
	list[0] = 0;
	for (int c = 0; c < CPU_SETSIZE && at < len; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
			e++;
		int n = e > c ? snprintf(list + at, len - at, "%s%d-%d", at ? "," : "", c, e)
		              : snprintf(list + at, len - at, "%s%d", at ? "," : "", c);
		if (n < 0 || (size_t)n >= len - at) { /* does not fit: no list rather than half one */
			list[0] = 0;
			return;
		}
		at += (size_t)n;
		c = e;
	}
}

int st_cpus_near_pci(const char *bus, char *list, size_t len)
{
	char path[128], lower[64], text[1024];
	size_t i = 0;
	for (; bus[i] && i + 1 < sizeof lower; i++)
		lower[i] = (char)tolower((unsigned char)bus[i]);
	lower[i] = 0;
	if (len)
		list[0] = 0;
	if (!len || !lower[0] || strchr(lower, '/'))
		return 0;
	snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/local_cpulist", lower);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int ok = fgets(text, sizeof text, f) != NULL;
	fclose(f);
	cpu_set_t near, mine, both;
	if (!ok || st_cpus_parse(text, &near) || sched_getaffinity(0, sizeof mine, &mine))
		return 0;
	CPU_AND(&both, &near, &mine);
	int n = CPU_COUNT(&both);
	if (n == 0 || n == CPU_COUNT(&mine))
		return 0;
	st_cpus_format(&both, list, len);
	return list[0] ? n : 0;
}

int st_cpus_pin(const char *list)
{
	cpu_set_t set;
	if (st_cpus_parse(list, &set) || CPU_COUNT(&set) == 0) {
		errno = EINVAL;
		return -1;
	}
	/* this thread's own mask: pthread_setaffinity_np's, through the system call */
	return sched_setaffinity(0, sizeof set, &set);
}
