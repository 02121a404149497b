/* Host-side elementwise generation: used by the host backend for every tensor and by the CUDA
 * backend when a task's hooks need all inputs in host memory. Element i depends on (seed, i) only. */
#include "runner_gen.h"

#include <math.h>
#include "rng.h"
#include "task/dtype.h"

static double gen_one(const rb_init *init, uint64_t seed, int64_t i)
{
	switch (init->dist) {
	case ST_DIST_NORMAL: {
		float u1 = st_uniform01(seed, (uint64_t)i, 0), u2 = st_uniform01(seed, (uint64_t)i, 1);
		float z = sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
		return init->a + init->b * z;
	}
	case ST_DIST_UNIFORM:
		return init->a + (init->b - init->a) * st_uniform01(seed, (uint64_t)i, 0);
	case ST_DIST_RANDINT: {
		uint64_t span = (uint64_t)(init->hi - init->lo);
		return (double)(init->lo + (int64_t)(st_rand_u64(seed, (uint64_t)i) % (span ? span : 1)));
	}
	case ST_DIST_CONST:
		return init->a;
	case ST_DIST_TASK:
		break;
	}
	return 0;
}

void st_gen_host(void *dst, st_dtype dt, int64_t n, const rb_init *init, uint64_t seed)
{
	if (init->dist == ST_DIST_TASK)
		return;
	for (int64_t i = 0; i < n; i++)
		st_dtype_set(dt, dst, i, gen_one(init, seed, i));
}
