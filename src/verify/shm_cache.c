/* A few shared-memory blocks kept for the next verify of one worker (see shm_cache.h). */
#include "shm_cache.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* A verify uses one block per runner: reference, expert, candidate and the harness. What a
 * worker keeps is bounded too: the blocks are memory the machine's other work cannot have. */
#define SHM_CACHE_BLOCKS 4
#define SHM_CACHE_BYTES ((size_t)4 << 30)

struct st_shm_cache {
	st_shm_block blocks[SHM_CACHE_BLOCKS];
	int n;
};

/* *b empty again: no memory, no descriptor (its owner has moved them or let them go). */
static void block_forget(st_shm_block *b)
{
	b->map = NULL;
	b->fd = -1;
	b->cap = b->dirty = b->ready = 0;
}

static void block_free(st_shm_block *b)
{
	if (b->map)
		munmap(b->map, b->cap);
	if (b->fd >= 0)
		close(b->fd);
	block_forget(b);
}

st_shm_cache *st_shm_cache_new(void)
{
	return calloc(1, sizeof(st_shm_cache));
}

void st_shm_cache_free(st_shm_cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n; i++)
		block_free(&c->blocks[i]);
	free(c);
}

int st_shm_cache_take(st_shm_cache *c, size_t len, st_shm_block *b)
{
	int best = -1;
	for (int i = 0; c && i < c->n; i++)
		if (c->blocks[i].cap >= len && (best < 0 || c->blocks[i].cap < c->blocks[best].cap))
			best = i;
	if (best < 0)
		return 0;
	*b = c->blocks[best];
	c->blocks[best] = c->blocks[--c->n];
	return 1;
}

void st_shm_cache_give(st_shm_cache *c, st_shm_block *b)
{
	if (!b->map || b->fd < 0 || !c || b->cap > SHM_CACHE_BYTES) {
		block_free(b);
		return;
	}
	size_t total = b->cap;
	for (int i = 0; i < c->n; i++)
		total += c->blocks[i].cap;
	while (c->n == SHM_CACHE_BLOCKS || total > SHM_CACHE_BYTES) {
		int small = 0;
		for (int i = 1; i < c->n; i++)
			if (c->blocks[i].cap < c->blocks[small].cap)
				small = i;
		if (c->blocks[small].cap >= b->cap) {
			block_free(b);
			return;
		}
		total -= c->blocks[small].cap;
		block_free(&c->blocks[small]);
		c->blocks[small] = c->blocks[--c->n];
	}
	c->blocks[c->n++] = *b;
	block_forget(b);
}
