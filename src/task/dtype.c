/* Element types: names, sizes, and one element to and from double. The narrow float formats
 * (f16, bf16, fp8 e4m3 and e5m2) are decoded and encoded in software so the parent, which never
 * links CUDA, reads outputs bit-exactly as the GPU wrote them. Encoding rounds to nearest even
 * straight from double (no detour through float, which would round twice). fp8 stores saturate
 * to the largest finite value, as CUDA's __NV_SATFINITE conversions do, so a generated input is
 * never NaN by accident; f16 and bf16 overflow to infinity as IEEE does. */
#include "dtype.h"

#include <math.h>
#include <string.h>

static const struct {
	const char *name;
	size_t size;
	int is_float;
} dtypes[] = {
	[ST_F32] = {"f32", 4, 1},       [ST_F16] = {"f16", 2, 1},   [ST_BF16] = {"bf16", 2, 1},
	[ST_F64] = {"f64", 8, 1},       [ST_I32] = {"i32", 4, 0},   [ST_I64] = {"i64", 8, 0},
	[ST_I8] = {"i8", 1, 0},         [ST_U8] = {"u8", 1, 0},     [ST_F8E4M3] = {"f8e4m3", 1, 1},
	[ST_F8E5M2] = {"f8e5m2", 1, 1},
};

#define N_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

static int known(st_dtype t)
{
	return (int)t >= 0 && (int)t < N_DTYPES;
}

int st_dtype_parse(const char *name, st_dtype *out)
{
	for (int i = 0; name && i < N_DTYPES; i++)
		if (!strcmp(name, dtypes[i].name)) {
			*out = (st_dtype)i;
			return 0;
		}
	return -1;
}

const char *st_dtype_name(st_dtype t)
{
	return known(t) ? dtypes[t].name : "?";
}

size_t st_dtype_size(st_dtype t)
{
	return known(t) ? dtypes[t].size : 0;
}

int st_dtype_is_float(st_dtype t)
{
	return known(t) && dtypes[t].is_float;
}

/* A binary float format narrower than double. `fn` marks e4m3's "finite, NaN-only" variant:
 * the all-ones exponent holds normal numbers and only mantissa all-ones is NaN. */
typedef struct minifloat {
	int ebits, mbits;
	int fn;
	int saturate;
	uint32_t nan; /* canonical NaN pattern without the sign */
} minifloat;

static const minifloat FMT_F16 = {5, 10, 0, 0, 0x7e00};
static const minifloat FMT_BF16 = {8, 7, 0, 0, 0x7fc0};
static const minifloat FMT_E4M3 = {4, 3, 1, 1, 0x7f};
static const minifloat FMT_E5M2 = {5, 2, 0, 1, 0x7e};

static int bias_of(const minifloat *f)
{
	return (1 << (f->ebits - 1)) - 1;
}

static uint32_t exp_ones(const minifloat *f)
{
	return (1u << f->ebits) - 1;
}

static uint32_t max_finite_bits(const minifloat *f)
{
	uint32_t mant_ones = (1u << f->mbits) - 1;
	if (f->fn)
		return (exp_ones(f) << f->mbits) | (mant_ones - 1);
	return ((exp_ones(f) - 1) << f->mbits) | mant_ones;
}

static double mini_decode(const minifloat *f, uint32_t bits)
{
	uint32_t mant_mask = (1u << f->mbits) - 1;
	int sign = (bits >> (f->ebits + f->mbits)) & 1;
	uint32_t e = (bits >> f->mbits) & exp_ones(f);
	uint32_t m = bits & mant_mask;
	double v;
	if (f->fn && e == exp_ones(f) && m == mant_mask)
		return sign ? -NAN : NAN;
	if (!f->fn && e == exp_ones(f))
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp((double)m, 1 - bias_of(f) - f->mbits);
	else
		v = ldexp((double)(m | (mant_mask + 1)), (int)e - bias_of(f) - f->mbits);
	return sign ? -v : v;
}

static uint32_t mini_overflow(const minifloat *f)
{
	if (f->saturate)
		return max_finite_bits(f);
	return exp_ones(f) << f->mbits; /* infinity; every saturate-free format here has one */
}

static uint32_t mini_encode(const minifloat *f, double v)
{
	uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
	double a = fabs(v);
	if (isnan(v))
		return sign | f->nan;
	if (isinf(a))
		return sign | mini_overflow(f);
	if (a == 0)
		return sign;
	int x;
	frexp(a, &x); /* a = frac * 2^x, frac in [0.5, 1): the leading bit has weight 2^(x-1) */
	int e = x - 1;
	int emin = 1 - bias_of(f);
	int quantum_exp = (e < emin ? emin : e) - f->mbits;
	/* Scaling by a power of two is exact and rint rounds ties to even in the default mode. */
	double q = rint(ldexp(a, -quantum_exp));
	int64_t bits;
	if (e < emin)
		bits = (int64_t)q; /* subnormal; a carry into bit mbits is the smallest normal */
	else
		bits = ((int64_t)(e + bias_of(f)) << f->mbits) + (int64_t)q - (1LL << f->mbits);
	if (bits > (int64_t)max_finite_bits(f))
		return sign | mini_overflow(f);
	return sign | (uint32_t)bits;
}

static double bf16_decode(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float fl;
	memcpy(&fl, &u, sizeof fl);
	return fl;
}

/* Round to nearest with ties to even, NaN to 0, and clamp into [lo, hi]. */
static double int_clamp(double v, double lo, double hi)
{
	if (isnan(v))
		return 0;
	v = rint(v);
	return v < lo ? lo : v > hi ? hi : v;
}

double st_dtype_get(st_dtype t, const void *base, int64_t i)
{
	const unsigned char *p = (const unsigned char *)base + i * (int64_t)st_dtype_size(t);
	union { float f; double d; int32_t i32; int64_t i64; uint16_t u16; } u;
	switch (t) {
	case ST_F32: memcpy(&u.f, p, 4); return u.f;
	case ST_F64: memcpy(&u.d, p, 8); return u.d;
	case ST_F16: memcpy(&u.u16, p, 2); return mini_decode(&FMT_F16, u.u16);
	case ST_BF16: memcpy(&u.u16, p, 2); return bf16_decode(u.u16);
	case ST_I32: memcpy(&u.i32, p, 4); return u.i32;
	case ST_I64: memcpy(&u.i64, p, 8); return (double)u.i64;
	case ST_I8: return (int8_t)p[0];
	case ST_U8: return p[0];
	case ST_F8E4M3: return mini_decode(&FMT_E4M3, p[0]);
	case ST_F8E5M2: return mini_decode(&FMT_E5M2, p[0]);
	}
	return NAN;
}

static void set_i64(unsigned char *p, double v)
{
	int64_t x;
	if (isnan(v))
		x = 0;
	else if (v >= 9223372036854775808.0)
		x = INT64_MAX;
	else if (v < -9223372036854775808.0)
		x = INT64_MIN;
	else
		x = (int64_t)rint(v);
	memcpy(p, &x, 8);
}

void st_dtype_set(st_dtype t, void *base, int64_t i, double v)
{
	unsigned char *p = (unsigned char *)base + i * (int64_t)st_dtype_size(t);
	union { float f; int32_t i32; uint16_t u16; } u;
	switch (t) {
	case ST_F32: u.f = (float)v; memcpy(p, &u.f, 4); return;
	case ST_F64: memcpy(p, &v, 8); return;
	case ST_F16: u.u16 = (uint16_t)mini_encode(&FMT_F16, v); memcpy(p, &u.u16, 2); return;
	case ST_BF16: u.u16 = (uint16_t)mini_encode(&FMT_BF16, v); memcpy(p, &u.u16, 2); return;
	case ST_I32:
		u.i32 = (int32_t)int_clamp(v, INT32_MIN, INT32_MAX);
		memcpy(p, &u.i32, 4);
		return;
	case ST_I64: set_i64(p, v); return;
	case ST_I8: p[0] = (unsigned char)(int8_t)int_clamp(v, INT8_MIN, INT8_MAX); return;
	case ST_U8: p[0] = (unsigned char)int_clamp(v, 0, UINT8_MAX); return;
	case ST_F8E4M3: p[0] = (unsigned char)mini_encode(&FMT_E4M3, v); return;
	case ST_F8E5M2: p[0] = (unsigned char)mini_encode(&FMT_E5M2, v); return;
	}
}
