/* The output digest a runner commits per timed call and the parent recomputes: the same bytes give
 * the same value whatever their alignment, any changed byte or moved word changes it, a short last
 * word counts, and a digest survives its hex form. The CUDA kernel's agreement with this code is
 * checked on the GPU (tests/gpu/test_timing_cuda.sh, where a candidate's committed digests are
 * recomputed by the parent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/digest.h"

static void test_sensitivity(void **state)
{
	(void)state;
	unsigned char a[1003];
	for (size_t i = 0; i < sizeof a; i++)
		a[i] = (unsigned char)(i * 7 + 3);
	uint64_t d = st_digest_sum(a, sizeof a);
	for (size_t i = 0; i < sizeof a; i += 97) { /* every byte, the tail's too, counts */
		a[i] ^= 1;
		assert_true(st_digest_sum(a, sizeof a) != d);
		a[i] ^= 1;
	}
	a[sizeof a - 1] ^= 0x80; /* the last byte of the short last word */
	assert_true(st_digest_sum(a, sizeof a) != d);
	a[sizeof a - 1] ^= 0x80;
	assert_true(st_digest_sum(a, sizeof a) == d);
	/* Two words swapped: a sum of plain word mixes would not see it. */
	unsigned char b[sizeof a];
	memcpy(b, a, sizeof a);
	memcpy(b, a + 8, 8);
	memcpy(b + 8, a, 8);
	assert_true(st_digest_sum(b, sizeof b) != d);
	/* Zeros and poison are not the same digest, and neither is 0. */
	unsigned char z[64] = {0}, p[64];
	memset(p, 0xff, sizeof p);
	assert_true(st_digest_sum(z, sizeof z) != st_digest_sum(p, sizeof p));
	assert_true(st_digest_sum(z, sizeof z) != 0);
}

static void test_alignment(void **state)
{
	(void)state;
	unsigned char buf[1 + 256];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)(i * 31);
	unsigned char aligned[256];
	memcpy(aligned, buf + 1, 256);
	assert_true(st_digest_sum(buf + 1, 256) == st_digest_sum(aligned, 256));
}

static void test_fold_order(void **state)
{
	(void)state;
	/* Tensors are folded in order, with their sizes: two outputs swapped, or bytes moved from one
	 * output to the next, give another digest. */
	uint64_t x = 0x1234, y = 0x5678;
	uint64_t d1 = st_digest_fold(st_digest_fold(0, 0, 8, x), 1, 8, y);
	uint64_t d2 = st_digest_fold(st_digest_fold(0, 0, 8, y), 1, 8, x);
	uint64_t d3 = st_digest_fold(st_digest_fold(0, 0, 16, x), 1, 8, y);
	assert_true(d1 != d2);
	assert_true(d1 != d3);
}

static void test_hex(void **state)
{
	(void)state;
	char hex[17];
	uint64_t v = 0xfedcba9876543210ull, back = 0;
	st_digest_hex(v, hex);
	assert_string_equal(hex, "fedcba9876543210");
	assert_int_equal(st_digest_parse(hex, &back), 0);
	assert_true(back == v);
	assert_int_equal(st_digest_parse("fedcba987654321", &back), -1);   /* 15 digits */
	assert_int_equal(st_digest_parse("fedcba98765432100", &back), -1); /* 17 */
	assert_int_equal(st_digest_parse("FEDCBA9876543210", &back), -1);  /* not as written */
	assert_int_equal(st_digest_parse("fedcba987654321g", &back), -1);
	assert_int_equal(st_digest_parse(NULL, &back), -1);
}

/* The parent names a timed call's inputs by this seed; the runner draws them from the same one.
 * Pinned values: a change on either side would make every audit fail. */
static void test_call_seed(void **state)
{
	(void)state;
	assert_true(st_call_seed(0, 0) == 0xe220a8397b1dcdafull); /* splitmix64's first output */
	assert_true(st_call_seed(41, 1) == st_call_seed(42, 0));
	assert_true(st_call_seed(42, 0) != st_call_seed(42, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sensitivity),
		cmocka_unit_test(test_alignment),
		cmocka_unit_test(test_fold_order),
		cmocka_unit_test(test_hex),
		cmocka_unit_test(test_call_seed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
