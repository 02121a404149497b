/* The GPU's hold across processes: two `stitch verify` commands, a `stitch bench` and a
 * `stitch serve` on one GPU know nothing of each other's in-process lock (gpu_share.h), so each
 * verify also takes a file lock named by the GPU's UUID, shared while its runners use the GPU
 * and exclusive while it measures. Without it their quiet probes (timing.c) see one another's
 * contexts and each waits for the others until its deadline. Writers first, as in-process: an
 * exclusive taker holds a turnstile that new shared takers must pass. Locks are flock(2)s, so a
 * process that dies gives its holds up with its descriptors. */
#ifndef ST_GPU_FLOCK_H
#define ST_GPU_FLOCK_H

#include <stddef.h>

typedef struct st_gpu_flock {
	int fd;        /* the lock itself; -1: closed */
	int turnstile; /* exclusive takers hold it while they wait for fd */
	int held;      /* 0 free, 1 shared, 2 exclusive */
} st_gpu_flock;

/* The folder of the lock files: $STITCH_GPU_LOCK_DIR, else /tmp/stitch-gpu-locks (shared by
 * every user of the machine, so that their verifies on one GPU see each other). */
const char *st_gpu_flock_dir(void);

/* Open the locks of the GPU named `key` (a UUID; anything but letters, digits and '-' is
 * refused) in `dir`, made world-writable and sticky like /tmp when it is missing. 0, or an errno
 * value (EINVAL for a bad key); why (a sentence) in why. */
int st_gpu_flock_open(st_gpu_flock *f, const char *dir, const char *key, char *why, size_t len);
/* Give up any hold and close; a closed one is left alone. */
void st_gpu_flock_close(st_gpu_flock *f);

/* Take the GPU shared or exclusive, waiting at most give_up_s seconds (0 or less: as long as it
 * takes); `waiting`, when given, is told every 5 s how long this take has waited so far. Returns
 * the seconds waited, or -1 when flock(2) failed or the wait gave up (errno ETIMEDOUT); nothing
 * is then held. The hold must be free. */
double st_gpu_flock_take(st_gpu_flock *f, int exclusive, double give_up_s,
                         void (*waiting)(void *arg, double s), void *arg);
/* Give the hold up (a free one is left alone). */
void st_gpu_flock_give(st_gpu_flock *f);

#endif
