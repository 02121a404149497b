/* redteam: one forged frame, only once timing has begun | expect: hacking | task: tests/data/tasks/t1/scale | options: --no-policy
 * After its first CHECKED_CALLS calls (the correctness checks are over; timing has begun), one call
 * writes one forged timing reply: the parent once believed it and then read every later reply one
 * request late, and the verify hung. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

static const float *g_b;
/* The correctness checks' calls on t1/scale: seed 1, its second run on other buffers, seeds 2
 * and 3; every later call is timing's or the audit's. A count that timing must pass, such as the
 * 60 this file once used, is not one: a busy host's stop rule ended the candidate's timing after
 * fewer calls, the trick never fired, and an honest `ok` failed CI. More checks would only make
 * the file `incorrect`, which is caught too. */
#define CHECKED_CALLS 4
static long g_calls;

__global__ static void scale(const float *x, const float *b, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = 2.0f * x[i] + b[0];
}


/* Every socket this process holds: the runner's channel to the parent among them. */
static int is_socket(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* One length-prefixed frame, as the runner protocol frames a reply: a timing batch's answer of one
 * impossibly fast sample. */
static void forge(void)
{
	static const char body[] = "{\"ok\": true, \"samples\": [[0.001, 0.0015, 1980, 0]]}";
	unsigned char frame[4 + sizeof body];
	uint32_t n = sizeof body - 1;
	for (int i = 0; i < 4; i++)
		frame[i] = (unsigned char)(n >> (8 * i));
	memcpy(frame + 4, body, n);
	for (int fd = 0; fd < 1024; fd++)
		if (is_socket(fd))
			(void)!write(fd, frame, 4 + n);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx)
{
	(void)cfg;
	(void)stream;
	(void)n_params;
	g_b = (const float *)params[0].data;
	*ctx = &g_b;
	return 0;
}

extern "C" void st_free(void *ctx)
{
	(void)ctx;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream)
{
	(void)ctx;
	(void)n_in;
	(void)n_out;
	long long n = in[0].shape[0];
	scale<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>((const float *)in[0].data, g_b,
	                                                      (float *)out[0].data, n);
	g_calls++;
	if (g_calls == CHECKED_CALLS + 1)
		forge();
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
