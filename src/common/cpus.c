/* The CPU count thread pools are sized by (the affinity mask's, falling back to the online CPUs
 * where the mask cannot be read), and the wait for a CPU the timing's parent-clock check takes
 * off (/proc's schedstat). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cpus.h"

#include <sched.h>
#include <stdio.h>
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

double st_cpu_wait_ms(int pid)
{
	char path[64];
	if (pid > 0)
		snprintf(path, sizeof path, "/proc/%d/schedstat", pid);
	else
		snprintf(path, sizeof path, "/proc/thread-self/schedstat");
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	unsigned long long on_cpu, waited;
	int ok = fscanf(f, "%llu %llu", &on_cpu, &waited) == 2;
	fclose(f);
	return ok ? (double)waited / 1e6 : -1;
}
