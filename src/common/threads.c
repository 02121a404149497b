/* Running one function on several threads at once (see threads.h). */
#include "threads.h"

#include <pthread.h>
#include <stdlib.h>

#define ON_STACK 64

void st_threads_run(void *(*fn)(void *), void *args, size_t stride, int n)
{
	if (n < 1)
		return;
	pthread_t stack_tids[ON_STACK], *tids = stack_tids;
	int stack_started[ON_STACK], *started = stack_started;
	if (n > ON_STACK) {
		tids = malloc((size_t)n * sizeof *tids);
		started = malloc((size_t)n * sizeof *started);
		if (!tids || !started) { /* no memory for the bookkeeping: one thread does it all */
			free(tids);
			free(started);
			for (int t = 0; t < n; t++)
				fn((char *)args + (size_t)t * stride);
			return;
		}
	}
	for (int t = 1; t < n; t++)
		started[t] = pthread_create(&tids[t], NULL, fn, (char *)args + (size_t)t * stride) == 0;
	fn(args);
	for (int t = 1; t < n; t++)
		if (!started[t])
			fn((char *)args + (size_t)t * stride);
	for (int t = 1; t < n; t++)
		if (started[t])
			pthread_join(tids[t], NULL);
	if (tids != stack_tids) {
		free(tids);
		free(started);
	}
}
