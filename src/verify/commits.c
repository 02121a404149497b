/* The list of committed timed calls (commits.h): appended per batch, picked from after timing. */
#include "commits.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/random.h>

#include "common/digest.h"
#include "common/grow.h"

/* Room for n more calls: 0, or -1 when n is absurd or memory runs out. */
static int make_room(st_commits *c, int n)
{
	if (n < 0 || c->n > INT_MAX - n)
		return -1;
	return ST_GROW(c->v, c->cap, c->n + n, 256) ? -1 : 0;
}

int st_commits_add_batch(st_commits *c, uint64_t batch_seed, int n, const uint64_t *digests)
{
	if (make_room(c, n))
		return -1;
	for (int i = 0; i < n; i++)
		c->v[c->n++] = (st_commit){st_call_seed(batch_seed, (uint64_t)i), digests[i], i % 2};
	return 0;
}

int st_commits_add_kept(st_commits *c, const uint64_t set_seed[2], int n,
                        const uint64_t *digests)
{
	if (make_room(c, n))
		return -1;
	for (int i = 0; i < n; i++)
		c->v[c->n++] = (st_commit){set_seed[i % 2], digests[i], i % 2};
	return 0;
}

void st_commits_free(st_commits *c)
{
	free(c->v);
	c->v = NULL;
	c->n = c->cap = 0;
}

static uint64_t random_u64(void)
{
	uint64_t r = 0;
	while (getrandom(&r, sizeof r, 0) != sizeof r)
		;
	return r;
}

int st_commits_pick(const st_commits *c, int k, int *idx)
{
	int m = 0;
	if (k > c->n)
		k = c->n;
	while (m < k) {
		int i = (int)(random_u64() % (uint64_t)c->n), dup = 0;
		for (int j = 0; j < m; j++)
			dup |= idx[j] == i;
		if (!dup)
			idx[m++] = i;
	}
	return m;
}

typedef struct keyed {
	uint64_t digest;
	int i;
} keyed;

static int by_digest(const void *a, const void *b)
{
	const keyed *x = a, *y = b;
	return x->digest < y->digest ? -1 : x->digest > y->digest;
}

int st_commits_repeated(const st_commits *c, int k, const int *skip, int n_skip, int *idx)
{
	if (c->n < 2 || k < 1)
		return 0;
	keyed *v = malloc((size_t)c->n * sizeof *v);
	if (!v)
		return -1;
	for (int i = 0; i < c->n; i++)
		v[i] = (keyed){c->v[i].digest, i};
	qsort(v, (size_t)c->n, sizeof *v, by_digest);
	int seen = 0, m = 0;
	for (int j = 0; j < c->n; j++) {
		int repeated = (j > 0 && v[j - 1].digest == v[j].digest) ||
		               (j + 1 < c->n && v[j + 1].digest == v[j].digest);
		int skipped = 0;
		for (int q = 0; q < n_skip; q++)
			skipped |= skip[q] == v[j].i;
		if (!repeated || skipped)
			continue;
		/* reservoir sampling: each repeated call ends up among the k with the same chance */
		if (m < k)
			idx[m++] = v[j].i;
		else {
			uint64_t r = random_u64() % (uint64_t)(seen + 1);
			if (r < (uint64_t)k)
				idx[r] = v[j].i;
		}
		seen++;
	}
	free(v);
	return m;
}
