/* The vector loop of compare.c's finite_block, included by compare.c once per vector width LW
 * (doubles to a register: 2 in SSE2 registers everywhere, 4 under AVX2 on x86-64 with GCC). It
 * defines lanes_f32_w<LW> and lanes_f64_w<LW>: the LANES lanes of a block's leading
 * multiple of LANES elements, returned in l[] with how many elements they took. Each lane does
 * lane_add's operations in lane_add's order, so the figures are the same bits whichever width
 * ran; no operation is fused (ISO C mode: no contraction). */
#define LW_CAT2(a, b) a##b
#define LW_CAT(a, b) LW_CAT2(a, b)
#define vd LW_CAT(vd, LW)
#define vi LW_CAT(vi, LW)
#define vf LW_CAT(vf, LW)
#define load_v LW_CAT(load_v, LW)
#define lanes_body LW_CAT(lanes_body, LW)

typedef double vd __attribute__((vector_size(8 * LW)));
typedef int64_t vi __attribute__((vector_size(8 * LW)));
typedef float vf __attribute__((vector_size(4 * LW)));

static inline __attribute__((always_inline)) vd load_v(const void *v, int i, int f32)
{
	if (f32) {
		vf f;
		memcpy(&f, (const float *)v + i, sizeof f);
		return __builtin_convertvector(f, vd);
	}
	vd d;
	memcpy(&d, (const double *)v + i, sizeof d);
	return d;
}

static inline __attribute__((always_inline)) int
lanes_body(const void *gv, const void *wv, int f32, int count, double atol, double rtol,
            double max_rel, lane *l)
{
	enum { NV = LANES / LW };
	vd va, vr, vm, zero, low, d2[NV], w2[NV], max_abs[NV], top[NV];
	vi abs_mask, none, mismatches[NV], rel_hit[NV];
	for (int k = 0; k < LW; k++) {
		va[k] = atol;
		vr[k] = rtol;
		vm[k] = max_rel;
		abs_mask[k] = INT64_MAX;
		zero[k] = 0;
		low[k] = -INFINITY;
		none[k] = 0;
	}
	/* whole vectors: lane by lane, GCC at -O3 warns that the arrays may be used uninitialised */
	for (int q = 0; q < NV; q++) {
		d2[q] = w2[q] = max_abs[q] = zero;
		top[q] = low;
		mismatches[q] = rel_hit[q] = none;
	}
	int i = 0;
	for (; i + LANES <= count; i += LANES)
		for (int q = 0; q < NV; q++) {
			vd g = load_v(gv, i + LW * q, f32), w = load_v(wv, i + LW * q, f32);
			vd e = g - w, diff = (vd)((vi)e & abs_mask), aw = (vd)((vi)w & abs_mask);
			vd limit = va + vr * aw, excess = diff - limit;
			vi bigger = diff > max_abs[q], higher = excess > top[q];
			mismatches[q] -= diff > limit; /* a true comparison is -1 */
			max_abs[q] = (vd)(((vi)diff & bigger) | ((vi)max_abs[q] & ~bigger));
			rel_hit[q] |= diff > vm * aw;
			top[q] = (vd)(((vi)excess & higher) | ((vi)top[q] & ~higher));
			d2[q] += e * e;
			w2[q] += w * w;
		}
	for (int k = 0; k < LANES; k++) {
		int q = k / LW, r = k % LW;
		l[k] = (lane){d2[q][r], w2[q][r], max_abs[q][r], top[q][r], mismatches[q][r],
		              rel_hit[q][r]};
	}
	return i;
}

static int LW_CAT(lanes_f32_w, LW)(const void *gv, const void *wv, int count, double atol,
                                   double rtol, double max_rel, lane *l)
{
	return lanes_body(gv, wv, 1, count, atol, rtol, max_rel, l);
}

static int LW_CAT(lanes_f64_w, LW)(const void *gv, const void *wv, int count, double atol,
                                   double rtol, double max_rel, lane *l)
{
	return lanes_body(gv, wv, 0, count, atol, rtol, max_rel, l);
}

#undef vd
#undef vi
#undef vf
#undef load_v
#undef lanes_body
#undef LW_CAT
#undef LW_CAT2
