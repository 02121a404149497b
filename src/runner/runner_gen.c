/* Host-side elementwise generation: used by the host backend for every tensor and by the CUDA
 * backend when a task's hooks need all inputs in host memory. Element i depends on (seed, i) only. */
#include "runner_gen.h"

#include "rng.h"
#include "task/dtype.h"

void st_gen_host(void *dst, st_dtype dt, int64_t n, const rb_init *init, uint64_t seed)
{
	if (init->dist == ST_DIST_TASK)
		return;
	for (int64_t i = 0; i < n; i += 2) {
		double v[2];
		st_gen_pair((int)init->dist, init->a, init->b, init->lo, init->hi, seed,
		            (uint64_t)i / 2, v);
		st_dtype_set(dt, dst, i, v[0]);
		if (i + 1 < n)
			st_dtype_set(dt, dst, i + 1, v[1]);
	}
}
