/* The CPUs this process has: how many it may run on (its affinity mask, so a server started
 * under taskset or in a cgroup-pinned container sizes its threads to what it has, not to the
 * whole host), and how long a thread has waited for one. */
#ifndef ST_CPUS_H
#define ST_CPUS_H

#include <sched.h>
#include <stddef.h>

/* At least 1. */
int st_cpus_usable(void);

/* One share of those CPUs split `ways` ways (threads for one of that many concurrent users):
 * 1 at least, `most` at most. */
int st_cpus_share(int ways, int most);

/* Milliseconds a thread has spent runnable but waiting for a CPU since it started (the kernel's
 * schedstat run_delay): process `pid`'s main thread, or the calling thread for pid 0. -1 where
 * /proc does not tell (a kernel without schedstats, hidepid). */
double st_cpu_wait_ms(int pid);

/* The same thread's time on a CPU (schedstat's first field, user and kernel time in ns), and in
 * *waited its run_delay as st_cpu_wait_ms gives it; both from one read. -1 (and *waited -1)
 * where /proc does not tell. */
double st_cpu_on_ms(int pid, double *waited);

/* The CPUs next to PCI device `bus` (e.g. "0000:1b:00.0", as CUDA names a GPU's bus; any case)
 * that this thread may use: sysfs's local_cpulist intersected with the affinity mask. Writes
 * them as a list ("0-15,32-47") into `list` and returns their count; 0 where sysfs does not say,
 * or where they are all the CPUs this thread has (nothing to narrow). */
int st_cpus_near_pci(const char *bus, char *list, size_t len);

/* A CPU list ("0-3,8") into set: 0, or -1 when it is not one. */
int st_cpus_parse(const char *list, cpu_set_t *set);

/* The other way: set as a list ("0-3,8") in list[len]; "" when it does not fit. */
void st_cpus_format(const cpu_set_t *set, char *list, size_t len);

/* Pin the calling thread (and what it later starts: threads, forked processes) to a CPU list as
 * written by st_cpus_near_pci. 0 on success, -1 with errno set. */
int st_cpus_pin(const char *list);

#endif
