/* Running one function on several threads at once, the calling thread among them: the
 * fork-join every parallel loop of the parent (comparisons, shared-memory filling) needs. */
#ifndef ST_THREADS_H
#define ST_THREADS_H

#include <stddef.h>

/* fn(args + t * stride) for every t in [0, n): t = 0 on this thread, the others on new threads;
 * a share whose thread cannot start runs on this thread instead. Returns when all have run.
 * stride 0 gives every thread the same argument. */
void st_threads_run(void *(*fn)(void *), void *args, size_t stride, int n);

#endif
