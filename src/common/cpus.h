/* The CPUs this process has: how many it may run on (its affinity mask, so a server started
 * under taskset or in a cgroup-pinned container sizes its threads to what it has, not to the
 * whole host), and how long a thread has waited for one. */
#ifndef ST_CPUS_H
#define ST_CPUS_H

/* At least 1. */
int st_cpus_usable(void);

/* One share of those CPUs split `ways` ways (threads for one of that many concurrent users):
 * 1 at least, `most` at most. */
int st_cpus_share(int ways, int most);

/* Milliseconds a thread has spent runnable but waiting for a CPU since it started (the kernel's
 * schedstat run_delay): process `pid`'s main thread, or the calling thread for pid 0. -1 where
 * /proc does not tell (a kernel without schedstats, hidepid). */
double st_cpu_wait_ms(int pid);

#endif
