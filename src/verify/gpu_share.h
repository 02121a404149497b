/* What the programs that run several verifies on one GPU (stitch serve, stitch worker) share:
 * reading their --gpus list, and the per-GPU lock the verifies take (st_verify_slot.gpu_lock). */
#ifndef ST_GPU_SHARE_H
#define ST_GPU_SHARE_H

#include <pthread.h>

/* The next GPU index of a comma list such as "0,1,3" at *p into *gpu, moving *p past it: 1; 0
 * at the end of the list; -1 when what is there is not an index from 0 to 1023. */
int st_gpu_list_next(const char **p, long *gpu);

/* A GPU's lock, writers first: a verify waiting to time must not starve behind a stream of
 * other verifies' correctness runs. 0, or an errno value. */
int st_gpu_lock_init(pthread_rwlock_t *lock);

#endif
