/* The trivial answers of the tolerance audit (`stitch tasks --audit`, src/verify/audit.c) as one
 * solution body. audit.c pastes this text into a generated solution after
 * `#define ST_AUDIT_ANSWER <n>` and, for the answers built on the reference (mean, other seed),
 * after the task's reference renamed to st_audit_ref_init/_run/_free. Each answer must be
 * rejected by a sound task: all zeros (0), all NaN (1), every output a constant equal to the
 * reference output's mean (2), the first input passed through to the first output (3), the
 * reference's output for another call's inputs (4). The same text builds as host C and as CUDA,
 * so the audit runs the real verifier, with the task's own checks, on either backend. */
#ifndef ST_AUDIT_ANSWER_H
#define ST_AUDIT_ANSWER_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#ifdef __CUDACC__
#include <cuda_runtime.h>
#define ST_AUDIT_EXPORT extern "C"
#else
#define ST_AUDIT_EXPORT
#endif

#define ST_AUDIT_MAX_OUT 16

static size_t st_audit_elsize(st_dtype d)
{
	switch (d) {
	case ST_F64: case ST_I64: return 8;
	case ST_F32: case ST_I32: return 4;
	case ST_F16: case ST_BF16: return 2;
	default: return 1;
	}
}

static size_t st_audit_bytes(const st_tensor *t)
{
	size_t n = st_audit_elsize(t->dtype);
	for (int32_t d = 0; d < t->ndim; d++)
		n *= (size_t)t->shape[d];
	return n;
}

static int st_audit_is_float(st_dtype d)
{
	return d != ST_I32 && d != ST_I64 && d != ST_I8 && d != ST_U8;
}

/* Device memory on the cuda backend, host memory on the host backend. */
static void st_audit_set(void *dst, int byte, size_t n, cudaStream_t s)
{
#ifdef __CUDACC__
	cudaMemsetAsync(dst, byte, n, s);
#else
	(void)s;
	memset(dst, byte, n);
#endif
}

static void st_audit_copy(void *dst, const void *src, size_t n, cudaStream_t s)
{
#ifdef __CUDACC__
	cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s);
#else
	(void)s;
	memcpy(dst, src, n);
#endif
}

#if ST_AUDIT_ANSWER == 2
/* Element i of a buffer of dtype d as a double; 8- and 16-bit floats decoded by their fields. */
static double st_audit_minifloat(unsigned bits, int ebits, int mbits, int bias, int fn)
{
	unsigned e = (bits >> mbits) & ((1u << ebits) - 1), m = bits & ((1u << mbits) - 1);
	double sign = (bits >> (ebits + mbits)) & 1 ? -1.0 : 1.0;
	if (fn && e == (1u << ebits) - 1 && m == (1u << mbits) - 1)
		return NAN; /* e4m3fn: no infinities, one NaN pattern */
	if (!fn && e == (1u << ebits) - 1)
		return m ? NAN : sign * INFINITY;
	if (e == 0)
		return sign * ldexp((double)m, 1 - bias - mbits);
	return sign * ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
}

static double st_audit_get(const void *p, st_dtype d, size_t i)
{
	switch (d) {
	case ST_F32: return ((const float *)p)[i];
	case ST_F64: return ((const double *)p)[i];
	case ST_I32: return ((const int32_t *)p)[i];
	case ST_I64: return (double)((const int64_t *)p)[i];
	case ST_I8: return ((const int8_t *)p)[i];
	case ST_U8: return ((const uint8_t *)p)[i];
	case ST_F16: return st_audit_minifloat(((const uint16_t *)p)[i], 5, 10, 15, 0);
	case ST_BF16: return st_audit_minifloat(((const uint16_t *)p)[i], 8, 7, 127, 0);
	case ST_F8E4M3: return st_audit_minifloat(((const uint8_t *)p)[i], 4, 3, 7, 1);
	default: return st_audit_minifloat(((const uint8_t *)p)[i], 5, 2, 15, 0);
	}
}

/* The bit pattern of dtype d nearest to x (written to pat, elsize bytes). The narrow floats are
 * found by trying every code: simpler than rounding by hand, and done once per call. */
static void st_audit_encode(st_dtype d, double x, unsigned char *pat)
{
	float f = (float)x;
	int32_t i32 = (int32_t)llround(x);
	int64_t i64 = llround(x);
	int8_t i8 = (int8_t)llround(x);
	uint8_t u8 = (uint8_t)llround(x);
	switch (d) {
	case ST_F32: memcpy(pat, &f, 4); return;
	case ST_F64: memcpy(pat, &x, 8); return;
	case ST_I32: memcpy(pat, &i32, 4); return;
	case ST_I64: memcpy(pat, &i64, 8); return;
	case ST_I8: memcpy(pat, &i8, 1); return;
	case ST_U8: memcpy(pat, &u8, 1); return;
	default: break;
	}
	unsigned codes = st_audit_elsize(d) == 2 ? 65536u : 256u, best = 0;
	double best_err = INFINITY;
	for (unsigned c = 0; c < codes; c++) {
		uint16_t c16 = (uint16_t)c;
		uint8_t c8 = (uint8_t)c;
		double v = codes == 256u ? st_audit_get(&c8, d, 0) : st_audit_get(&c16, d, 0);
		if (v == v && fabs(v - x) < best_err) {
			best_err = fabs(v - x);
			best = c;
		}
	}
	memcpy(pat, &best, st_audit_elsize(d)); /* little-endian: the low bytes */
}

/* Replace out (n bytes, device or host) by its mean in every element. */
static int st_audit_fill_mean(st_tensor *out, cudaStream_t s)
{
	size_t n = st_audit_bytes(out), es = st_audit_elsize(out->dtype), k = n / es;
	unsigned char *h = (unsigned char *)malloc(n ? n : 1), pat[8];
	if (!h)
		return 1;
#ifdef __CUDACC__
	cudaStreamSynchronize(s);
	cudaMemcpy(h, out->data, n, cudaMemcpyDeviceToHost);
#else
	(void)s;
	memcpy(h, out->data, n);
#endif
	double sum = 0;
	for (size_t i = 0; i < k; i++)
		sum += st_audit_get(h, out->dtype, i);
	st_audit_encode(out->dtype, k ? sum / (double)k : 0.0, pat);
	for (size_t i = 0; i < k; i++)
		memcpy(h + i * es, pat, es);
#ifdef __CUDACC__
	cudaMemcpy(out->data, h, n, cudaMemcpyHostToDevice);
#else
	memcpy(out->data, h, n);
#endif
	free(h);
	return 0;
}
#endif

#if ST_AUDIT_ANSWER == 2 || ST_AUDIT_ANSWER == 4
/* The reference's context, and (other seed) a copy of its outputs of the previous call. */
typedef struct st_audit_ctx {
	void *ref;
	int have;
	int32_t n;
	void *prev[ST_AUDIT_MAX_OUT];
	size_t bytes[ST_AUDIT_MAX_OUT];
} st_audit_ctx;

static void *st_audit_alloc(size_t n)
{
#ifdef __CUDACC__
	void *p = NULL;
	return cudaMalloc(&p, n ? n : 1) == cudaSuccess ? p : NULL;
#else
	return malloc(n ? n : 1);
#endif
}

static void st_audit_release(void *p)
{
#ifdef __CUDACC__
	cudaFree(p);
#else
	free(p);
#endif
}

static void st_audit_drop(st_audit_ctx *c)
{
	for (int32_t j = 0; j < c->n; j++)
		st_audit_release(c->prev[j]);
	c->n = 0;
	c->have = 0;
}

/* Hand out the previous call's outputs and keep this call's: every call but the first (which
 * answers correctly) gets the reference's answer to other inputs. */
static int st_audit_swap_previous(st_audit_ctx *c, st_tensor *out, int32_t n_out, cudaStream_t s)
{
	int same = c->have && c->n == n_out;
	for (int32_t j = 0; same && j < n_out; j++)
		same = c->bytes[j] == st_audit_bytes(&out[j]);
	if (!same) {
		st_audit_drop(c);
		for (int32_t j = 0; j < n_out && j < ST_AUDIT_MAX_OUT; j++, c->n++) {
			c->bytes[j] = st_audit_bytes(&out[j]);
			if (!(c->prev[j] = st_audit_alloc(c->bytes[j])))
				return 1;
			st_audit_copy(c->prev[j], out[j].data, c->bytes[j], s);
		}
		c->have = 1;
		return 0;
	}
	for (int32_t j = 0; j < n_out; j++) {
		void *tmp = st_audit_alloc(c->bytes[j]);
		if (!tmp)
			return 1;
		st_audit_copy(tmp, out[j].data, c->bytes[j], s);
		st_audit_copy(out[j].data, c->prev[j], c->bytes[j], s);
		st_audit_copy(c->prev[j], tmp, c->bytes[j], s);
#ifdef __CUDACC__
		cudaStreamSynchronize(s);
#endif
		st_audit_release(tmp);
	}
	return 0;
}

ST_AUDIT_EXPORT int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                            cudaStream_t stream, void **ctx)
{
	st_audit_ctx *c = (st_audit_ctx *)calloc(1, sizeof *c);
	if (!c)
		return 1;
	int rc = st_audit_ref_init(cfg, params, n_params, stream, &c->ref);
	if (rc) {
		free(c);
		return rc;
	}
	*ctx = c;
	return 0;
}

ST_AUDIT_EXPORT int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                           int32_t n_out, cudaStream_t stream)
{
	st_audit_ctx *c = (st_audit_ctx *)ctx;
	int rc = st_audit_ref_run(c->ref, in, n_in, out, n_out, stream);
	if (rc || n_out > ST_AUDIT_MAX_OUT)
		return rc ? rc : 1;
#if ST_AUDIT_ANSWER == 2
	for (int32_t j = 0; j < n_out; j++)
		if (st_audit_fill_mean(&out[j], stream))
			return 1;
	return 0;
#else
	return st_audit_swap_previous(c, out, n_out, stream);
#endif
}

ST_AUDIT_EXPORT void st_free(void *ctx)
{
	st_audit_ctx *c = (st_audit_ctx *)ctx;
	if (!c)
		return;
	st_audit_ref_free(c->ref);
	st_audit_drop(c);
	free(c);
}

#else /* zeros, NaN, passthrough: no reference needed */

static int st_audit_token;

ST_AUDIT_EXPORT int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                            cudaStream_t stream, void **ctx)
{
	(void)cfg, (void)params, (void)n_params, (void)stream;
	*ctx = &st_audit_token;
	return 0;
}

/* 0xFF bytes are a NaN in every float dtype (f32, f64, f16, bf16, both fp8s); integer outputs
 * of the NaN answer get zeros, as they have no NaN. */
ST_AUDIT_EXPORT int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                           int32_t n_out, cudaStream_t stream)
{
	(void)ctx;
	for (int32_t j = 0; j < n_out; j++) {
		int nan = ST_AUDIT_ANSWER == 1 && st_audit_is_float(out[j].dtype);
		st_audit_set(out[j].data, nan ? 0xFF : 0, st_audit_bytes(&out[j]), stream);
	}
	if (ST_AUDIT_ANSWER == 3) {
		/* The audit skips this answer unless in[0] and out[0] agree in dtype and shape. */
		if (n_in < 1 || n_out < 1 || in[0].dtype != out[0].dtype ||
		    st_audit_bytes(&in[0]) != st_audit_bytes(&out[0]))
			return 1;
		st_audit_copy(out[0].data, in[0].data, st_audit_bytes(&out[0]), stream);
	}
	return 0;
}

ST_AUDIT_EXPORT void st_free(void *ctx)
{
	(void)ctx;
}
#endif

#endif /* ST_AUDIT_ANSWER_H */
