/* Shared-memory blocks kept between verifies, for a long-running caller (stitch serve). Each
 * verify gives every runner a block of shared memory for its tensors; making one allocates and
 * maps in hundreds of MiB at a large size (0.3 s for t1/softmax's eval set), and freeing it takes
 * the process's memory-map lock, which the other workers' verifies wait for. A worker that keeps
 * its blocks pays that once. One cache per worker: a verify takes and gives back from one
 * thread. */
#ifndef ST_SHM_CACHE_H
#define ST_SHM_CACHE_H

#include <stddef.h>

typedef struct st_shm_cache st_shm_cache;

/* A block: a memfd of `cap` bytes mapped read-write at `map`; its first `dirty` bytes may hold
 * what an earlier verify put there, its first `ready` bytes are allocated and mapped in. */
typedef struct st_shm_block {
	int fd;
	unsigned char *map;
	size_t cap, dirty, ready;
} st_shm_block;

st_shm_cache *st_shm_cache_new(void);
/* Unmaps and closes every kept block. */
void st_shm_cache_free(st_shm_cache *c);

/* The smallest kept block of at least `len` bytes into *b: 1, or 0 when none fits. */
int st_shm_cache_take(st_shm_cache *c, size_t len, st_shm_block *b);
/* Keep *b for a later verify, or unmap and close it when c is NULL or full (smaller kept blocks
 * make way for a larger one; 4 blocks and 4 GiB at most). *b is taken over either way and left
 * empty (fd -1, no map). */
void st_shm_cache_give(st_shm_cache *c, st_shm_block *b);

#endif
