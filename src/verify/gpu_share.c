/* The --gpus list and the writer-first GPU lock of gpu_share.h. */
#include "verify/gpu_share.h"

#include <stdlib.h>

int st_gpu_list_next(const char **p, long *gpu)
{
	if (!**p)
		return 0;
	char *end;
	long g = strtol(*p, &end, 10);
	if (end == *p || g < 0 || g > 1023 || (*end && *end != ','))
		return -1;
	*gpu = g;
	*p = *end ? end + 1 : end;
	return 1;
}

int st_gpu_lock_init(pthread_rwlock_t *lock)
{
	pthread_rwlockattr_t a;
	int rc = pthread_rwlockattr_init(&a);
	if (rc)
		return rc;
	rc = pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (!rc)
		rc = pthread_rwlock_init(lock, &a);
	pthread_rwlockattr_destroy(&a);
	return rc;
}
