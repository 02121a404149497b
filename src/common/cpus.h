/* How many CPUs this process may run on: its affinity mask, so a server started under taskset or
 * in a cgroup-pinned container sizes its threads to what it has, not to the whole host. */
#ifndef ST_CPUS_H
#define ST_CPUS_H

/* At least 1. */
int st_cpus_usable(void);

#endif
