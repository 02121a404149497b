/* Device memory a runner keeps between size sets (dev_keep.h): a short list, oldest first, of
 * poisoned blocks and their sizes, matched by exact size, and the arena. A task's sets repeat
 * their sizes from verify to verify, so exact matches are the common case and no block is ever
 * split; the arena serves one set-up at a time, whatever its size up to the arena's.
 * When the sets do not all fit, a released block is freed rather than kept in place of one a
 * set-up took lately: the sets come in the same order every verify, and freeing the oldest
 * (least recently used) for it freed each block just before its set came round again, so that
 * every set-up allocated (t1/transpose's eval block alone fills the limit). */
#include "dev_keep.h"
#include "backend.h"

#include <string.h>

#define KEEP_MAX 64

static struct {
	void *p;
	size_t bytes;
	unsigned long since; /* set-ups so far when it was kept */
} kept[KEEP_MAX];
static int n_kept;
static unsigned long setups; /* dk_alloc calls so far */
static size_t kept_bytes, limit;
static struct {
	void *p;
	size_t bytes;
	int busy;
} arena;

static void take_at(int i)
{
	kept_bytes -= kept[i].bytes;
	memmove(kept + i, kept + i + 1, (size_t)(n_kept - i - 1) * sizeof kept[0]);
	n_kept--;
}

/* Free kept blocks, oldest first, until at most `bytes` and at most `count` blocks are kept,
 * passing over those a set-up took within the last `min_age` set-ups (0: none). */
static void free_oldest(size_t bytes, int count, unsigned long min_age)
{
	for (int i = 0; i < n_kept && (kept_bytes > bytes || n_kept > count);) {
		if (setups - kept[i].since < min_age) {
			i++;
			continue;
		}
		rb_free(kept[i].p);
		take_at(i);
	}
}

void dk_set_limit(size_t bytes)
{
	limit = bytes;
	free_oldest(limit, KEEP_MAX, 0);
}

int dk_reserve(size_t bytes, char *err, size_t len)
{
	dk_unreserve();
	if (!bytes || rb_alloc(&arena.p, bytes, err, len))
		return bytes ? -1 : 0;
	arena.bytes = bytes;
	return 0;
}

void dk_unreserve(void)
{
	if (!arena.p || arena.busy)
		return;
	rb_free(arena.p);
	arena.p = NULL;
	arena.bytes = 0;
}

int dk_alloc(void **p, size_t bytes, dk_from *from, char *err, size_t len)
{
	setups++;
	if (arena.p && !arena.busy && bytes <= arena.bytes) {
		*p = arena.p;
		arena.busy = 1;
		*from = DK_ARENA;
		return 0;
	}
	*from = DK_KEPT;
	for (int i = n_kept - 1; i >= 0; i--) /* the newest first: the set torn down last */
		if (kept[i].bytes == bytes) {
			*p = kept[i].p;
			take_at(i);
			return 0;
		}
	*from = DK_NEW;
	if (rb_alloc(p, bytes, err, len) == 0)
		return 0;
	if (!n_kept && !(arena.p && !arena.busy))
		return -1;
	/* What is kept may be what the device lacks. */
	dk_drop_all();
	dk_unreserve();
	return rb_alloc(p, bytes, err, len);
}

void dk_release(void *p, size_t bytes, int keep)
{
	if (!p)
		return;
	char ignore[64];
	rb_poison(p, bytes, ignore, sizeof ignore);
	if (p == arena.p) {
		arena.busy = 0;
		return;
	}
	if (keep && bytes <= limit)
		free_oldest(limit - bytes, KEEP_MAX - 1, DK_STALE_SETUPS); /* stale ones only */
	if (!keep || bytes > limit - kept_bytes || n_kept == KEEP_MAX) {
		rb_free(p);
		return;
	}
	kept[n_kept].p = p;
	kept[n_kept].bytes = bytes;
	kept[n_kept].since = setups;
	n_kept++;
	kept_bytes += bytes;
}

void dk_drop_all(void)
{
	free_oldest(0, KEEP_MAX, 0);
}

size_t dk_kept_bytes(void)
{
	return kept_bytes;
}

size_t dk_arena_bytes(void)
{
	return arena.p ? arena.bytes : 0;
}
