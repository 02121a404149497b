/* Host-side elementwise input generation, the same distributions as the device generator. */
#ifndef ST_RUNNER_GEN_H
#define ST_RUNNER_GEN_H

#include "backend.h"

void st_gen_host(void *dst, st_dtype dt, int64_t n, const rb_init *init, uint64_t seed);

#endif
