/* Preparing large memory ranges on several threads: allocating the pages of a fresh shared-memory
 * block, or zeroing a reused one, before a runner gets it. One thread allocates and zeroes pages
 * at about 1.5 GB/s on the H200 machines, which made a verify's shared memory (0.5-1.2 GB) the
 * longest part of its start. */
#ifndef ST_MEM_FILL_H
#define ST_MEM_FILL_H

#include <stddef.h>

typedef struct st_mem_range {
	void *addr;  /* page-aligned */
	size_t len;
	int wipe;    /* 1: write zeros over what is there; 0: allocate and map the pages (contents
	              * left as they are: zero in a fresh block) */
} st_mem_range;

/* Prepare every range on up to `threads` threads. 0 on success; otherwise -1 with errno from the
 * first range the kernel could not allocate (ENOMEM, or EFAULT where the shared-memory limit is
 * reached). A kernel without MADV_POPULATE_WRITE (before Linux 5.14) is not an error: the pages
 * are then allocated on first use. */
int st_mem_fill(const st_mem_range *ranges, int n, int threads);

#endif
