/* The CPU side of the output digest (digest.h): the parent recomputes audited calls' digests
 * from the bytes the runner put into shared memory, and the host runner commits with it. */
#include "digest.h"

#include <stdio.h>
#include <string.h>

uint64_t st_digest_sum(const void *p, size_t bytes)
{
	const unsigned char *b = p;
	uint64_t sum = 0;
	size_t words = bytes / 8;
	for (size_t j = 0; j < words; j++) {
		uint64_t w;
		memcpy(&w, b + 8 * j, 8); /* unaligned-safe; the compiler makes it one load */
		sum += st_digest_word(j, w);
	}
	if (bytes % 8) {
		uint64_t w = 0;
		memcpy(&w, b + 8 * words, bytes % 8);
		sum += st_digest_word(words, w);
	}
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
