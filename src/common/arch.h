/* GPU architecture names as nvcc spells them (sm_90a): the one rule for a valid name, used by
 * task.json's "archs", `--arch` and the compile step alike, and the name for a compute
 * capability (the runner's report of its GPU). */
#ifndef ST_ARCH_H
#define ST_ARCH_H

#include <stddef.h>

/* "sm_90a" for compute capability 9.0, "sm_100a" for 10.0, "sm_<M><m>" otherwise. */
void st_arch_from_cc(int major, int minor, char *out, size_t len);
/* Accepts sm_<NN>[a|f] (two or three digits); 0 when valid. */
int st_arch_valid(const char *arch);

#endif
