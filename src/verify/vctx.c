/* Small helpers every stage of st_verify uses on its context: progress lines for the caller, the
 * secret seeds, and whether this verify profiles. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "verify/verify_int.h"

void vx_progress(vctx *v, const char *fmt, ...)
{
	if (!v->o->progress)
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	v->o->progress(v->o->progress_arg, line);
}

/* Profiles come from CUPTI: the CUDA backend only. */
int vx_profiling(const vctx *v)
{
	return v->o->profile && !strcmp(v->o->backend, "cuda");
}

/* Secret seeds: from the kernel unless the user asked for a reproducible run. */
uint64_t vx_next_seed(vctx *v)
{
	if (v->o->seed) {
		v->seed_state += 0x9e3779b97f4a7c15ull;
		uint64_t z = v->seed_state;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		return z ^ (z >> 31);
	}
	uint64_t s = 0;
	while (getrandom(&s, sizeof s, 0) != sizeof s)
		;
	return s;
}
