/* What one timed sample costs besides the solution's own work, piece by piece, on the local GPU:
 * NVML clock and throttle-reason reads, an idle stream sync, the 2 x L2 flush (by memset and by
 * the runner's fill kernel), poisoning and regenerating a 128 MiB tensor and the digest an
 * untrusted candidate's runner commits of it after every timed call (on its own, and by events
 * right behind a kernel that wrote the tensor, as in a timed batch). The timing loop in
 * backend_cuda.c pays these per sample, so this is where a slow verify of a short kernel is
 * explained. Prints medians in microseconds.
 * Usage: stitch-bench-overhead [MiB]   (tensor size, default 128) */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../src/runner/cuda_kernels.h"
#include "bench_check.h"
#include "bench_time.h"

#define REPS 300

static double median(double *v)
{
	return bench_median(v, REPS);
}

/* NVML's clock and throttle-reason reads, where the library and the device answer. */
static void time_nvml(double *t)
{
	void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!nv)
		return;
	int (*init)(void) = (int (*)(void))dlsym(nv, "nvmlInit_v2");
	int (*handle)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(nv, "nvmlDeviceGetHandleByIndex_v2");
	int (*clock)(void *, int, unsigned *) = (int (*)(void *, int, unsigned *))dlsym(nv, "nvmlDeviceGetClockInfo");
	int (*reasons)(void *, unsigned long long *) = (int (*)(void *, unsigned long long *))dlsym(nv, "nvmlDeviceGetCurrentClocksEventReasons");
	void *dev;
	if (!init || !handle || !clock || !reasons || init() != 0 || handle(0, &dev) != 0)
		return;
	unsigned mhz;
	unsigned long long r;
	for (int i = 0; i < REPS; i++) {
		double a = bench_now_us();
		clock(dev, 1, &mhz);
		t[i] = bench_now_us() - a;
	}
	printf("nvml clock read            %8.1f us\n", median(t));
	for (int i = 0; i < REPS; i++) {
		double a = bench_now_us();
		reasons(dev, &r);
		t[i] = bench_now_us() - a;
	}
	printf("nvml throttle-reasons read %8.1f us\n", median(t));
}

/* An idle stream sync, the 2 x L2 flush by memset and by the runner's fill kernel (one that
 * holds every SM, backend_cuda.c), and the tensor's poison, each with its sync. */
static int time_flush(void *buf, size_t bytes, void *flush, size_t flush_len, int fill_blocks,
                      cudaStream_t s, double *t)
{
	for (int i = 0; i < REPS; i++) {
		double a = bench_now_us();
		CK(cudaStreamSynchronize(s));
		t[i] = bench_now_us() - a;
	}
	printf("idle stream sync           %8.1f us\n", median(t));
	for (int i = 0; i < REPS; i++) {
		double a = bench_now_us();
		CK(cudaMemsetAsync(flush, i & 0xff, flush_len, s));
		CK(cudaStreamSynchronize(s));
		t[i] = bench_now_us() - a;
	}
	printf("L2 flush (%zu MiB) + sync  %8.1f us\n", flush_len >> 20, median(t));
	for (int i = 0; i < REPS; i++) {
		st_prep_span span = {flush, flush_len, (unsigned)i};
		double a = bench_now_us();
		CK((cudaError_t)st_cuda_prep(&span, 1, fill_blocks, s));
		CK(cudaStreamSynchronize(s));
		t[i] = bench_now_us() - a;
	}
	printf("same by the runner's fill  %8.1f us\n", median(t));
	for (int i = 0; i < REPS; i++) {
		double a = bench_now_us();
		CK(cudaMemsetAsync(buf, 0xff, bytes, s));
		CK(cudaStreamSynchronize(s));
		t[i] = bench_now_us() - a;
	}
	printf("poison tensor + sync       %8.1f us\n", median(t));
	return 0;
}

/* Regenerating the tensor as the runner draws inputs: f32 normal and uniform, bf16 normal. */
static int time_fills(void *buf, size_t bytes, cudaStream_t s, double *t)
{
	static const struct {
		const char *what;
		st_dtype type;
		int dist, size;
		double a, b;
	} fills[] = {{"fill f32 normal + sync    ", ST_F32, 0, 4, 0, 25},
	             {"fill f32 uniform + sync   ", ST_F32, 1, 4, -1, 1},
	             {"fill bf16 normal + sync   ", ST_BF16, 0, 2, 0, 1}};
	for (size_t f = 0; f < sizeof fills / sizeof fills[0]; f++) {
		for (int i = 0; i < REPS; i++) {
			double a = bench_now_us();
			CK((cudaError_t)st_cuda_fill(buf, fills[f].type, (int64_t)(bytes / fills[f].size),
			                             fills[f].dist, fills[f].a, fills[f].b, 0, 0, 1000 + i, s));
			CK(cudaStreamSynchronize(s));
			t[i] = bench_now_us() - a;
		}
		printf("%s %8.1f us\n", fills[f].what, median(t));
	}
	return 0;
}

/* The digest an untrusted candidate's runner commits of an output: on its own with its sync, and
 * by events right behind the kernel that wrote the tensor, as in a timed batch (the GPU's time
 * for it, with whatever of the tensor the L2 still holds). */
static int time_digest(void *buf, size_t bytes, int fill_blocks, cudaStream_t s, double *t)
{
	unsigned long long *sums;
	CK(cudaMalloc((void **)&sums, sizeof *sums));
	for (int i = 0; i < REPS; i++) {
		st_prep_span span = {buf, bytes, 0};
		double a = bench_now_us();
		CK((cudaError_t)st_cuda_digest(&span, 1, sums, fill_blocks, s));
		CK(cudaStreamSynchronize(s));
		t[i] = bench_now_us() - a;
	}
	printf("digest of the tensor + sync %7.1f us\n", median(t));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int i = 0; i < REPS; i++) {
		st_prep_span span = {buf, bytes, 0};
		CK((cudaError_t)st_cuda_fill(buf, ST_F32, (int64_t)(bytes / 4), 0, 0, 25, 0, 0, 1000 + i, s));
		CK(cudaEventRecord(e0, s));
		CK((cudaError_t)st_cuda_digest(&span, 1, sums, fill_blocks, s));
		CK(cudaEventRecord(e1, s));
		CK(cudaStreamSynchronize(s));
		float ms = 0;
		CK(cudaEventElapsedTime(&ms, e0, e1));
		t[i] = ms * 1e3;
	}
	printf("digest after a write (GPU) %8.1f us\n", median(t));
	return 0;
}

int main(int argc, char **argv)
{
	size_t mib = bench_mib_arg(argc, argv, 128, "usage: stitch-bench-overhead [MiB, 1 to 65536 (default 128)]");
	if (!mib)
		return 2;
	size_t bytes = mib << 20;
	cudaDeviceProp p;
	CK(cudaSetDevice(0));
	CK(cudaGetDeviceProperties(&p, 0));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	void *buf, *flush;
	size_t flush_len = 2 * (size_t)p.l2CacheSize;
	CK(cudaMalloc(&buf, bytes));
	CK(cudaMalloc(&flush, flush_len));
	static double t[REPS];
	printf("%s, L2 %d MiB, tensor %zu MiB\n", p.name, p.l2CacheSize >> 20, mib);
	int fill_blocks = st_cuda_prep_blocks(p.multiProcessorCount, p.maxThreadsPerMultiProcessor);
	time_nvml(t);
	if (time_flush(buf, bytes, flush, flush_len, fill_blocks, s, t) || time_fills(buf, bytes, s, t) ||
	    time_digest(buf, bytes, fill_blocks, s, t))
		return 1;
	for (int i = 0; i < REPS; i++) {
		double a = bench_now_us();
		CK(cudaDeviceSynchronize());
		t[i] = bench_now_us() - a;
	}
	printf("idle device sync           %8.1f us\n", median(t));
	return 0;
}
