/* The CPU count thread pools are sized by: the affinity mask's, falling back to the online CPUs
 * where the mask cannot be read. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cpus.h"

#include <sched.h>
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
