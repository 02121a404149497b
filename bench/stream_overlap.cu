/* What the number of hardware queues a context gets (CUDA_DEVICE_MAX_CONNECTIONS; runners get 4,
 * the driver's default is 8) does to a solution that overlaps streams of its own, and what it
 * saves when the context is created. Like a runner, it makes its own stream first; then K streams
 * fork from it, each running M one-block kernels that spin for a fixed time, and join back; the
 * fork/join is timed with events on the first stream, best of 5. A longer spin on the first
 * stream holds the window shut until every launch is queued, so the host's launch rate is not
 * timed. With K streams on at least K queues the time stays that of one stream; streams that
 * share a queue may wait for each other.
 * Usage: CUDA_DEVICE_MAX_CONNECTIONS=N stitch-bench-stream-overlap */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_check.h"
#include "bench_time.h"

#define MAX_STREAMS 16
#define SPINS 4        /* kernels per stream */
#define SPIN_US 50.0   /* each kernel's time */
#define HOLD_US 2000.0 /* the spin in front of the window: longer than queueing the launches */
#define REPS 5

static __global__ void spin_kernel(long long cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles) {
	}
}

int main(void)
{
	const char *env = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	double t0 = bench_now_ms();
	CK(cudaFree(0));
	double ctx_ms = bench_now_ms() - t0;
	int clock_khz = 0;
	CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
	if (clock_khz <= 0) {
		fprintf(stderr, "stream-overlap: the device reports no clock rate (%d kHz)\n", clock_khz);
		return 1;
	}
	const long long cycles = (long long)(SPIN_US * 1e-3 * clock_khz);
	const long long hold = (long long)(HOLD_US * 1e-3 * clock_khz);

	cudaStream_t first, s[MAX_STREAMS];
	cudaEvent_t fork, join[MAX_STREAMS], ev0, ev1;
	CK(cudaStreamCreateWithFlags(&first, cudaStreamNonBlocking));
	for (int i = 0; i < MAX_STREAMS; i++) {
		CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
		CK(cudaEventCreateWithFlags(&join[i], cudaEventDisableTiming));
	}
	CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
	CK(cudaEventCreate(&ev0));
	CK(cudaEventCreate(&ev1));
	printf("hardware queues %s, context created in %.0f ms (cudaFree(0), first call)\n",
	       env && *env ? env : "8 (driver default)", ctx_ms);

	float one = 0;
	for (int k = 1; k <= MAX_STREAMS; k = k < 4 ? k + 1 : k * 2) {
		float best = 1e30f;
		for (int rep = 0; rep < REPS; rep++) {
			spin_kernel<<<1, 32, 0, first>>>(hold);
			CK(cudaGetLastError());
			CK(cudaEventRecord(ev0, first));
			CK(cudaEventRecord(fork, first));
			for (int i = 0; i < k; i++) {
				CK(cudaStreamWaitEvent(s[i], fork, 0));
				for (int m = 0; m < SPINS; m++)
					spin_kernel<<<1, 32, 0, s[i]>>>(cycles);
				CK(cudaGetLastError());
				CK(cudaEventRecord(join[i], s[i]));
				CK(cudaStreamWaitEvent(first, join[i], 0));
			}
			CK(cudaEventRecord(ev1, first));
			CK(cudaEventSynchronize(ev1));
			float ms;
			CK(cudaEventElapsedTime(&ms, ev0, ev1));
			if (ms < best)
				best = ms;
		}
		if (k == 1)
			one = best;
		printf("%2d streams x %d kernels of %.0f us: %.3f ms, %.2fx one stream's time "
		       "(%.0fx if serial)\n", k, SPINS, SPIN_US, best, best / one, (double)k);
	}
	return 0;
}
