/* redteam: reading files outside its folder | expect: forbidden|ok | task: tests/data/tasks/t1/scale
 * Tries to open /tmp, where every runner's private folder and the caches of other tools live,
 * with a raw openat (257). The source check refuses the raw system call (forbidden); with that
 * check off, the sandbox must refuse the open, and the solution then computes honestly, so `ok`
 * proves the folder was out of reach: had the open worked, it would have written a wrong answer. */
#include <stdint.h>
#include "stitch/solution.h"

/* The system call by number, with no library function a source check could spot. */
static long raw_syscall(long n, long a, long b, long c)
{
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return ret;
}

static float g_b;

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg;
	(void)stream;
	(void)n_params;
	g_b = *(const float *)params[0].data;
	*ctx = &g_b;
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx; (void)n_in; (void)n_out; (void)stream;
	long fd = raw_syscall(257, -100 /* AT_FDCWD */, (long)"/tmp", 0200000 /* O_DIRECTORY */);
	if (fd >= 0) {
		float *bad = out[0].data;
		bad[0] = 1e30f;
		return 0;
	}
	const float *x = in[0].data;
	float *y = out[0].data;
	for (int64_t i = 0; i < in[0].shape[0]; i++)
		y[i] = 2.0f * x[i] + g_b;
	return 0;
}
