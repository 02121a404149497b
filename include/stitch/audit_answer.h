/* The trivial answers of the tolerance audit (`stitch tasks --audit`, src/verify/tol_audit.c)
 * as one solution body: all zeros (0), all NaN (1), every output a constant equal to the
 * reference output's mean (2), the first input passed through to the first output (3), the
 * reference's output for another call's inputs (4); a sound task rejects each. tol_audit.c pastes
 * this text into a generated solution after `#define ST_AUDIT_ANSWER <n>` and, where the answer
 * uses the reference (mean and other seed always, zeros and passthrough where the task has one),
 * after the task's reference renamed to st_audit_ref_init/_run/_free, with ST_AUDIT_HAS_REF
 * defined. An answer that turns out to be the reference's own (all-zero outputs, a constant
 * output, the input itself as in a one-element sort, an output that does not depend on the
 * inputs) makes st_run return ST_AUDIT_SAME, and one that cannot be given (a later seed drew the
 * same inputs) ST_AUDIT_REPEAT; tol_audit.c defines both and reports such answers as skipped.
 * The same text builds as host C and as CUDA, so the audit runs the real verifier, with the
 * task's own checks, on either backend. */
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
/* Not every answer uses every helper. */
#define ST_AUDIT_HELPER static __attribute__((unused))

ST_AUDIT_HELPER size_t st_audit_elsize(st_dtype d)
{
	switch (d) {
	case ST_F64: case ST_I64: return 8;
	case ST_F32: case ST_I32: return 4;
	case ST_F16: case ST_BF16: return 2;
	default: return 1;
	}
}

ST_AUDIT_HELPER size_t st_audit_bytes(const st_tensor *t)
{
	size_t n = st_audit_elsize(t->dtype);
	for (int32_t d = 0; d < t->ndim; d++)
		n *= (size_t)t->shape[d];
	return n;
}

ST_AUDIT_HELPER int st_audit_is_float(st_dtype d)
{
	return d != ST_I32 && d != ST_I64 && d != ST_I8 && d != ST_U8;
}

/* Device memory on the cuda backend, host memory on the host backend. */
ST_AUDIT_HELPER void st_audit_set(void *dst, int byte, size_t n, cudaStream_t s)
{
#ifdef __CUDACC__
	cudaMemsetAsync(dst, byte, n, s);
#else
	(void)s;
	memset(dst, byte, n);
#endif
}

ST_AUDIT_HELPER void st_audit_copy(void *dst, const void *src, size_t n, cudaStream_t s)
{
#ifdef __CUDACC__
	cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s);
#else
	(void)s;
	memcpy(dst, src, n);
#endif
}

/* Element i of a buffer of dtype d as a double; 8- and 16-bit floats decoded by their fields. */
ST_AUDIT_HELPER double st_audit_minifloat(unsigned bits, int ebits, int mbits, int bias, int fn)
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

ST_AUDIT_HELPER double st_audit_get(const void *p, st_dtype d, size_t i)
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

#if ST_AUDIT_ANSWER == 2
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

/* Replace out (n bytes, device or host) by its mean in every element; *same stays 1 while
 * that changes nothing (the reference's output is constant). */
static int st_audit_fill_mean(st_tensor *out, cudaStream_t s, int *same)
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
	for (size_t i = 0; i < k; i++) {
		*same &= !memcmp(h + i * es, pat, es);
		memcpy(h + i * es, pat, es);
	}
#ifdef __CUDACC__
	cudaMemcpy(out->data, h, n, cudaMemcpyHostToDevice);
#else
	memcpy(out->data, h, n);
#endif
	free(h);
	return 0;
}
#endif

#ifdef ST_AUDIT_HAS_REF
/* The reference's context and, for other_seed, the reference's outputs of the last inputs
 * (their hash) and how many calls came so far. */
typedef struct st_audit_ctx {
	void *ref;
	int have;
	uint64_t hash;
	long calls;
	int32_t n;
	void *prev[ST_AUDIT_MAX_OUT];
	size_t bytes[ST_AUDIT_MAX_OUT];
} st_audit_ctx;

ST_AUDIT_HELPER void *st_audit_alloc(size_t n)
{
#ifdef __CUDACC__
	void *p = NULL;
	return cudaMalloc(&p, n ? n : 1) == cudaSuccess ? p : NULL;
#else
	return malloc(n ? n : 1);
#endif
}

ST_AUDIT_HELPER void st_audit_release(void *p)
{
#ifdef __CUDACC__
	cudaFree(p);
#else
	free(p);
#endif
}

ST_AUDIT_HELPER void st_audit_drop(st_audit_ctx *c)
{
	for (int32_t j = 0; j < c->n; j++)
		st_audit_release(c->prev[j]);
	c->n = 0;
	c->have = 0;
}

/* A copy of n bytes (device or host) in host memory; free it. */
ST_AUDIT_HELPER unsigned char *st_audit_host_copy(const void *p, size_t n, cudaStream_t s)
{
	unsigned char *h = (unsigned char *)malloc(n ? n : 1);
#ifdef __CUDACC__
	cudaStreamSynchronize(s);
	if (h)
		cudaMemcpy(h, p, n, cudaMemcpyDeviceToHost);
#else
	(void)s;
	if (h)
		memcpy(h, p, n);
#endif
	return h;
}

/* FNV-1a of every input's bytes: tells a re-run of the same inputs from other ones. */
ST_AUDIT_HELPER int st_audit_hash_inputs(const st_tensor *in, int32_t n_in, cudaStream_t s,
                                         uint64_t *hash)
{
	uint64_t h = 14695981039346656037ull;
	for (int32_t j = 0; j < n_in; j++) {
		size_t n = st_audit_bytes(&in[j]);
		unsigned char *b = st_audit_host_copy(in[j].data, n, s);
		if (!b)
			return 1;
		for (size_t i = 0; i < n; i++)
			h = (h ^ b[i]) * 1099511628211ull;
		free(b);
	}
	*hash = h;
	return 0;
}

/* 1 when the outputs equal the kept ones bit for bit. */
ST_AUDIT_HELPER int st_audit_same_as_kept(const st_audit_ctx *c, const st_tensor *out,
                                          cudaStream_t s)
{
	int same = 1;
	for (int32_t j = 0; same && j < c->n; j++) {
		unsigned char *a = st_audit_host_copy(out[j].data, c->bytes[j], s);
		unsigned char *b = st_audit_host_copy(c->prev[j], c->bytes[j], s);
		same = a && b && !memcmp(a, b, c->bytes[j]);
		free(a);
		free(b);
	}
	return same;
}

/* other_seed: hand out the reference's outputs for the last other inputs and keep this call's
 * (the first call, with nothing kept, answers correctly). ST_AUDIT_SAME when other inputs got
 * the very same outputs (they do not depend on the inputs); ST_AUDIT_REPEAT when the inputs
 * equal the kept ones on a call other than the verifier's re-run of seed 1 on other buffers
 * (its second call), i.e. a later seed drew the same inputs (a tiny input space): no other
 * inputs' answer can be given, so the answer cannot be judged. */
ST_AUDIT_HELPER int st_audit_other(st_audit_ctx *c, st_tensor *out, int32_t n_out,
                                   uint64_t hash, cudaStream_t s)
{
	int fits = c->have && c->n == n_out;
	for (int32_t j = 0; fits && j < n_out; j++)
		fits = c->bytes[j] == st_audit_bytes(&out[j]);
	if (fits && hash == c->hash)
		return c->calls == 2 ? 0 : ST_AUDIT_REPEAT;
	if (fits && st_audit_same_as_kept(c, out, s))
		return ST_AUDIT_SAME;
	if (!fits) {
		st_audit_drop(c);
		for (int32_t j = 0; j < n_out && j < ST_AUDIT_MAX_OUT; j++, c->n++) {
			c->bytes[j] = st_audit_bytes(&out[j]);
			if (!(c->prev[j] = st_audit_alloc(c->bytes[j])))
				return 1;
			st_audit_copy(c->prev[j], out[j].data, c->bytes[j], s);
		}
		c->have = 1;
		c->hash = hash;
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
	c->hash = hash;
	return 0;
}

/* zeros: every output zero; ST_AUDIT_SAME when the reference's outputs are all zero already
 * (one body at the centre of mass, at rest). */
ST_AUDIT_HELPER int st_audit_zeros(st_tensor *out, int32_t n_out, cudaStream_t s)
{
	int same = 1;
	for (int32_t j = 0; same && j < n_out; j++) {
		size_t n = st_audit_bytes(&out[j]), k = n / st_audit_elsize(out[j].dtype);
		unsigned char *h = st_audit_host_copy(out[j].data, n, s);
		same = h != NULL;
		for (size_t i = 0; same && i < k; i++)
			same = st_audit_get(h, out[j].dtype, i) == 0.0;
		free(h);
	}
	if (same)
		return ST_AUDIT_SAME;
	for (int32_t j = 0; j < n_out; j++)
		st_audit_set(out[j].data, 0, st_audit_bytes(&out[j]), s);
	return 0;
}

/* passthrough: in[0] into out[0], zeros into the other outputs; ST_AUDIT_SAME when that is what
 * the reference answered (a sort or a scan of one element). */
ST_AUDIT_HELPER int st_audit_passthrough(const st_tensor *in, int32_t n_in, st_tensor *out,
                                         int32_t n_out, cudaStream_t s)
{
	if (n_in < 1 || n_out < 1 || in[0].dtype != out[0].dtype ||
	    st_audit_bytes(&in[0]) != st_audit_bytes(&out[0]))
		return 1;
	int same = 1;
	for (int32_t j = 0; same && j < n_out; j++) {
		size_t n = st_audit_bytes(&out[j]);
		unsigned char *a = st_audit_host_copy(out[j].data, n, s);
		unsigned char *b = j ? NULL : st_audit_host_copy(in[0].data, n, s);
		if (!a || (!j && !b))
			same = 0;
		for (size_t i = 0; same && i < n; i++)
			same = a[i] == (j ? 0 : b[i]);
		free(a);
		free(b);
	}
	if (same)
		return ST_AUDIT_SAME;
	for (int32_t j = 1; j < n_out; j++)
		st_audit_set(out[j].data, 0, st_audit_bytes(&out[j]), s);
	st_audit_copy(out[0].data, in[0].data, st_audit_bytes(&out[0]), s);
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
	c->calls++;
#if ST_AUDIT_ANSWER == 0
	return st_audit_zeros(out, n_out, stream);
#elif ST_AUDIT_ANSWER == 2
	int same = 1;
	for (int32_t j = 0; j < n_out; j++)
		if (st_audit_fill_mean(&out[j], stream, &same))
			return 1;
	return same ? ST_AUDIT_SAME : 0;
#elif ST_AUDIT_ANSWER == 3
	return st_audit_passthrough(in, n_in, out, n_out, stream);
#else
	uint64_t h;
	if (st_audit_hash_inputs(in, n_in, stream, &h))
		return 1;
	return st_audit_other(c, out, n_out, h, stream);
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

#else /* NaN, and zeros and passthrough where the task has no reference */

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
