/* Preparing large memory ranges on several threads (see mem_fill.h). The ranges are cut into
 * chunks that the threads take in turn, so one large block and several small ones spread alike. */
#include "mem_fill.h"
#include "threads.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define CHUNK (16u << 20) /* a multiple of every page size; big enough that taking one is free */
#define MAX_THREADS 64 /* past this, more threads only wait for memory */

typedef struct job {
	const st_mem_range *r;
	int n;
	size_t n_chunks;
	size_t *first; /* first chunk of each range; first[n] = n_chunks */
	atomic_size_t next;
	atomic_int err;
} job;

static void fill_chunk(job *j, size_t c)
{
	int k = 0;
	while (j->first[k + 1] <= c)
		k++;
	const st_mem_range *r = &j->r[k];
	size_t off = (c - j->first[k]) * CHUNK;
	size_t len = r->len - off < CHUNK ? r->len - off : CHUNK;
	char *p = (char *)r->addr + off;
	if (r->wipe) {
		memset(p, 0, len);
	} else if (madvise(p, len, MADV_POPULATE_WRITE) && errno != EINVAL) {
		int none = 0;
		atomic_compare_exchange_strong(&j->err, &none, errno);
	}
}

static void *fill_thread(void *arg)
{
	job *j = arg;
	for (size_t c; (c = atomic_fetch_add(&j->next, 1)) < j->n_chunks && !atomic_load(&j->err);)
		fill_chunk(j, c);
	return NULL;
}

int st_mem_fill(const st_mem_range *ranges, int n, int threads)
{
	size_t first_small[17], *first = n < 17 ? first_small : NULL;
	if (!first) {
		/* more ranges than a verify ever has: one at a time */
		for (int k = 0; k < n; k++)
			if (st_mem_fill(&ranges[k], 1, threads))
				return -1;
		return 0;
	}
	job j = {.r = ranges, .n = n, .first = first};
	for (int k = 0; k < n; k++) {
		first[k] = j.n_chunks;
		j.n_chunks += (ranges[k].len + CHUNK - 1) / CHUNK;
	}
	first[n] = j.n_chunks;
	atomic_init(&j.next, 0);
	atomic_init(&j.err, 0);
	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	if ((size_t)threads > j.n_chunks)
		threads = (int)j.n_chunks;
	st_threads_run(fill_thread, &j, 0, threads);
	int e = atomic_load(&j.err);
	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}
