/* Unit tests of element conversion: names and sizes, round trips, round-to-nearest-even for the
 * narrow floats, subnormals, infinities and NaN, fp8 saturation, and saturating integer stores.
 * Expected bit patterns are those of the IEEE/OCP formats, as CUDA's conversions produce them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "task/dtype.h"

static uint16_t enc16(st_dtype t, double v)
{
	uint16_t h = 0;
	st_dtype_set(t, &h, 0, v);
	return h;
}

static uint8_t enc8(st_dtype t, double v)
{
	uint8_t b = 0;
	st_dtype_set(t, &b, 0, v);
	return b;
}

static double dec16(st_dtype t, uint16_t h)
{
	return st_dtype_get(t, &h, 0);
}

static double dec8(st_dtype t, uint8_t b)
{
	return st_dtype_get(t, &b, 0);
}

static void test_names_and_sizes(void **state)
{
	(void)state;
	const char *names[] = {"f32", "f16", "bf16", "f64", "i32", "i64", "i8", "u8", "f8e4m3",
	                       "f8e5m2"};
	const size_t sizes[] = {4, 2, 2, 8, 4, 8, 1, 1, 1, 1};
	for (int i = 0; i < 10; i++) {
		st_dtype t;
		assert_int_equal(st_dtype_parse(names[i], &t), 0);
		assert_int_equal(t, i);
		assert_string_equal(st_dtype_name(t), names[i]);
		assert_int_equal(st_dtype_size(t), sizes[i]);
	}
	st_dtype t;
	assert_int_equal(st_dtype_parse("f33", &t), -1);
	assert_int_equal(st_dtype_parse("F32", &t), -1);
	assert_true(st_dtype_is_float(ST_BF16));
	assert_true(st_dtype_is_float(ST_F8E5M2));
	assert_false(st_dtype_is_float(ST_I32));
	assert_false(st_dtype_is_float(ST_U8));
}

static void test_round_trips(void **state)
{
	(void)state;
	/* Every finite f16 / bf16 pattern decodes and re-encodes to itself. */
	for (uint32_t h = 0; h < 0x10000; h++) {
		double v = dec16(ST_F16, (uint16_t)h);
		if (!isnan(v))
			assert_int_equal(enc16(ST_F16, v), h);
		v = dec16(ST_BF16, (uint16_t)h);
		if (!isnan(v))
			assert_int_equal(enc16(ST_BF16, v), h);
	}
	for (uint32_t b = 0; b < 0x100; b++) {
		double v = dec8(ST_F8E4M3, (uint8_t)b);
		if (!isnan(v))
			assert_int_equal(enc8(ST_F8E4M3, v), b);
		v = dec8(ST_F8E5M2, (uint8_t)b);
		if (!isnan(v) && !isinf(v))
			assert_int_equal(enc8(ST_F8E5M2, v), b);
	}
	double buf[3];
	st_dtype_set(ST_F64, buf, 1, 0.1);
	assert_true(st_dtype_get(ST_F64, buf, 1) == 0.1);
	float f[2];
	st_dtype_set(ST_F32, f, 1, 0.1);
	assert_true(f[1] == 0.1f);
	assert_true(st_dtype_get(ST_F32, f, 1) == (double)0.1f);
	int64_t q[2];
	st_dtype_set(ST_I64, q, 1, 123456789012.0);
	assert_int_equal(q[1], 123456789012LL);
}

static void test_known_values(void **state)
{
	(void)state;
	assert_int_equal(enc16(ST_F16, 1.0), 0x3c00);
	assert_int_equal(enc16(ST_F16, -2.0), 0xc000);
	assert_int_equal(enc16(ST_F16, 65504.0), 0x7bff);
	assert_int_equal(enc16(ST_BF16, 1.0), 0x3f80);
	assert_int_equal(enc16(ST_BF16, -1.5), 0xbfc0);
	assert_true(dec16(ST_F16, 0x3555) == 0.333251953125);
	assert_true(dec16(ST_BF16, 0x4049) == 3.140625);
	assert_int_equal(enc8(ST_F8E4M3, 1.0), 0x38);
	assert_int_equal(enc8(ST_F8E4M3, 448.0), 0x7e);
	assert_int_equal(enc8(ST_F8E5M2, 1.0), 0x3c);
	assert_int_equal(enc8(ST_F8E5M2, 57344.0), 0x7b);
	assert_true(dec8(ST_F8E4M3, 0x7e) == 448.0);
	assert_true(dec8(ST_F8E4M3, 0xfe) == -448.0);
	assert_true(dec8(ST_F8E5M2, 0x7b) == 57344.0);
	/* e4m3 has no infinity: 0x78 (exponent all ones, mantissa 0) is 256. */
	assert_true(dec8(ST_F8E4M3, 0x78) == 256.0);
}

static void test_round_to_even(void **state)
{
	(void)state;
	/* f16 around 1: ulp 2^-10. Halfway cases go to the even mantissa. */
	assert_int_equal(enc16(ST_F16, 1.0 + ldexp(1, -11)), 0x3c00);          /* tie, to even */
	assert_int_equal(enc16(ST_F16, 1.0 + 3 * ldexp(1, -11)), 0x3c02);      /* tie, to even */
	assert_int_equal(enc16(ST_F16, 1.0 + ldexp(1, -11) + 1e-12), 0x3c01);  /* past the tie */
	/* bf16 around 1: ulp 2^-7. */
	assert_int_equal(enc16(ST_BF16, 1.0 + ldexp(1, -8)), 0x3f80);
	assert_int_equal(enc16(ST_BF16, 1.0 + 3 * ldexp(1, -8)), 0x3f82);
	/* A value that a detour through float would round twice: just above the bf16 tie, but
	 * float rounding would land exactly on the tie and then go to even (down). */
	assert_int_equal(enc16(ST_BF16, 1.0 + ldexp(1, -8) + ldexp(1, -40)), 0x3f81);
	/* Mantissa carry into the exponent. */
	assert_int_equal(enc16(ST_F16, 2.0 - ldexp(1, -12)), 0x4000);
	/* fp8 e4m3 around 1: ulp 2^-3. */
	assert_int_equal(enc8(ST_F8E4M3, 1.0625), 0x38);
	assert_int_equal(enc8(ST_F8E4M3, 1.1875), 0x3a);
	/* e5m2 around 1: ulp 2^-2. */
	assert_int_equal(enc8(ST_F8E5M2, 1.125), 0x3c);
	assert_int_equal(enc8(ST_F8E5M2, 1.375), 0x3e);
}

static void test_subnormals(void **state)
{
	(void)state;
	double min_sub_f16 = ldexp(1, -24);
	assert_int_equal(enc16(ST_F16, min_sub_f16), 0x0001);
	assert_true(dec16(ST_F16, 0x0001) == min_sub_f16);
	assert_true(dec16(ST_F16, 0x03ff) == 1023 * min_sub_f16);
	assert_int_equal(enc16(ST_F16, min_sub_f16 / 2), 0x0000);      /* tie to even (zero) */
	assert_int_equal(enc16(ST_F16, 3 * min_sub_f16 / 2), 0x0002);  /* tie to even (2) */
	assert_int_equal(enc16(ST_F16, -min_sub_f16 * 0.75), 0x8001);
	assert_int_equal(enc16(ST_F16, 1023.5 * min_sub_f16), 0x0400); /* rounds up to normal */
	assert_true(dec16(ST_BF16, 0x0001) == ldexp(1, -133));
	assert_int_equal(enc16(ST_BF16, ldexp(1, -133)), 0x0001);
	assert_true(dec8(ST_F8E4M3, 0x01) == ldexp(1, -9));
	assert_int_equal(enc8(ST_F8E4M3, ldexp(1, -9)), 0x01);
	assert_int_equal(enc8(ST_F8E4M3, ldexp(1, -11)), 0x00);
	assert_true(dec8(ST_F8E5M2, 0x01) == ldexp(1, -16));
	/* Negative zero keeps its sign. */
	assert_int_equal(enc16(ST_F16, -0.0), 0x8000);
	assert_true(signbit(dec16(ST_F16, 0x8000)));
}

static void test_inf_nan(void **state)
{
	(void)state;
	assert_int_equal(enc16(ST_F16, INFINITY), 0x7c00);
	assert_int_equal(enc16(ST_F16, -INFINITY), 0xfc00);
	assert_int_equal(enc16(ST_F16, 65520.0), 0x7c00);  /* the tie above max rounds to inf */
	assert_int_equal(enc16(ST_F16, 65519.0), 0x7bff);
	assert_int_equal(enc16(ST_BF16, 1e39), 0x7f80);
	assert_true(isinf(dec16(ST_F16, 0x7c00)));
	assert_true(isnan(dec16(ST_F16, 0x7e00)));
	assert_true(isnan(dec16(ST_F16, 0x7c01)));
	assert_true(isnan(dec16(ST_BF16, 0x7fc0)));
	assert_true(isinf(dec16(ST_BF16, 0xff80)) && dec16(ST_BF16, 0xff80) < 0);
	uint16_t h = enc16(ST_F16, NAN);
	assert_true((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0);
	h = enc16(ST_BF16, NAN);
	assert_true((h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0);
	assert_true(isinf(dec8(ST_F8E5M2, 0x7c)));
	assert_true(isnan(dec8(ST_F8E5M2, 0x7e)));
}

static void test_fp8_saturation_and_nan(void **state)
{
	(void)state;
	assert_int_equal(enc8(ST_F8E4M3, 1000.0), 0x7e);
	assert_int_equal(enc8(ST_F8E4M3, -1000.0), 0xfe);
	assert_int_equal(enc8(ST_F8E4M3, 470.0), 0x7e);  /* would round to the NaN pattern */
	assert_int_equal(enc8(ST_F8E4M3, 464.0), 0x7e);  /* the tie rounds to even, 448 */
	assert_int_equal(enc8(ST_F8E4M3, INFINITY), 0x7e);
	assert_int_equal(enc8(ST_F8E4M3, -INFINITY), 0xfe);
	assert_int_equal(enc8(ST_F8E4M3, NAN), 0x7f);
	assert_int_equal(enc8(ST_F8E4M3, -NAN), 0xff);
	assert_true(isnan(dec8(ST_F8E4M3, 0x7f)));
	assert_true(isnan(dec8(ST_F8E4M3, 0xff)));
	assert_int_equal(enc8(ST_F8E5M2, 1e6), 0x7b);
	assert_int_equal(enc8(ST_F8E5M2, -INFINITY), 0xfb);
	uint8_t b = enc8(ST_F8E5M2, NAN);
	assert_true(isnan(dec8(ST_F8E5M2, b)));
}

static void test_int_saturation(void **state)
{
	(void)state;
	int8_t i8;
	uint8_t u8;
	int32_t i32;
	int64_t i64;
	st_dtype_set(ST_I8, &i8, 0, 300);
	assert_int_equal(i8, 127);
	st_dtype_set(ST_I8, &i8, 0, -300);
	assert_int_equal(i8, -128);
	st_dtype_set(ST_I8, &i8, 0, -5);
	assert_int_equal(i8, -5);
	assert_true(st_dtype_get(ST_I8, &i8, 0) == -5.0);
	st_dtype_set(ST_U8, &u8, 0, -1);
	assert_int_equal(u8, 0);
	st_dtype_set(ST_U8, &u8, 0, 256);
	assert_int_equal(u8, 255);
	st_dtype_set(ST_U8, &u8, 0, 2.5);
	assert_int_equal(u8, 2); /* nearest, ties to even */
	st_dtype_set(ST_I32, &i32, 0, 1e12);
	assert_int_equal(i32, INT32_MAX);
	st_dtype_set(ST_I32, &i32, 0, -1e12);
	assert_int_equal(i32, INT32_MIN);
	st_dtype_set(ST_I32, &i32, 0, NAN);
	assert_int_equal(i32, 0);
	st_dtype_set(ST_I32, &i32, 0, 3.6);
	assert_int_equal(i32, 4);
	st_dtype_set(ST_I64, &i64, 0, 1e30);
	assert_true(i64 == INT64_MAX);
	st_dtype_set(ST_I64, &i64, 0, -1e30);
	assert_true(i64 == INT64_MIN);
	st_dtype_set(ST_I64, &i64, 0, INFINITY);
	assert_true(i64 == INT64_MAX);
	st_dtype_set(ST_I64, &i64, 0, -9223372036854775808.0);
	assert_true(i64 == INT64_MIN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_and_sizes), cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_known_values),    cmocka_unit_test(test_round_to_even),
		cmocka_unit_test(test_subnormals),      cmocka_unit_test(test_inf_nan),
		cmocka_unit_test(test_fp8_saturation_and_nan), cmocka_unit_test(test_int_saturation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
