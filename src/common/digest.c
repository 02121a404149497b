/* The CPU side of the output digest (digest.h): the parent recomputes audited calls' digests
 * from the bytes the runner put into shared memory, and the host runner commits with it. */
#include "digest.h"
#include "threads.h"

#include <stdio.h>
#include <string.h>

/* The word sum of `bytes` bytes at p whose first word is word number `first` of its tensor. */
static uint64_t sum_from(const unsigned char *b, size_t bytes, uint64_t first)
{
	uint64_t sum = 0;
	size_t words = bytes / 8;
	for (size_t j = 0; j < words; j++) {
		uint64_t w;
		memcpy(&w, b + 8 * j, 8); /* unaligned-safe; the compiler makes it one load */
		sum += st_digest_word(first + j, w);
	}
	if (bytes % 8) {
		uint64_t w = 0;
		memcpy(&w, b + 8 * words, bytes % 8);
		sum += st_digest_word(first + words, w);
	}
	return sum;
}

uint64_t st_digest_sum(const void *p, size_t bytes)
{
	return sum_from(p, bytes, 0);
}

typedef struct share {
	const unsigned char *p;
	size_t bytes;
	uint64_t first, sum;
} share;

static void *sum_share(void *arg)
{
	share *s = arg;
	s->sum = sum_from(s->p, s->bytes, s->first);
	return NULL;
}

uint64_t st_digest_sum_threads(const void *p, size_t bytes, int threads)
{
	enum { MAX_SHARES = 64 };
	size_t words = (bytes + 7) / 8;
	if (threads > MAX_SHARES)
		threads = MAX_SHARES;
	if (threads < 2 || words < 1u << 20) /* below 8 MiB a thread costs more than it saves */
		return sum_from(p, bytes, 0);
	share s[MAX_SHARES];
	size_t per = (words + (size_t)threads - 1) / (size_t)threads;
	int n = 0;
	for (size_t w = 0; w < words; w += per, n++) {
		size_t end = w + per < words ? w + per : words;
		size_t last = end * 8 < bytes ? end * 8 : bytes;
		s[n] = (share){(const unsigned char *)p + 8 * w, last - 8 * w, w, 0};
	}
	st_threads_run(sum_share, s, sizeof s[0], n);
	uint64_t sum = 0;
	for (int k = 0; k < n; k++)
		sum += s[k].sum;
	return sum;
}

void st_digest_hex(uint64_t d, char out[17])
{
	snprintf(out, 17, "%016llx", (unsigned long long)d);
}

int st_digest_parse(const char *s, uint64_t *d)
{
	if (!s || strlen(s) != 16)
		return -1;
	uint64_t x = 0;
	for (int i = 0; i < 16; i++) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (v < 0)
			return -1;
		x = x << 4 | (uint64_t)v;
	}
	*d = x;
	return 0;
}
