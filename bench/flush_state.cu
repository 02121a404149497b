/* What the state an L2 flush leaves behind costs the timed kernel. A flush by memset (what the
 * runner, triton's do_bench and nvbench do) leaves the L2 full of dirty lines, which the next
 * kernel pays to write back; Nsight Compute's cache control leaves it clean. This times a plain
 * device copy of several sizes after each kind of preparation, beside the 1 GiB copy the runner's
 * peak probe measures, and what each preparation costs. Prints medians.
 * Usage: stitch-bench-flush */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_check.h"
#include "bench_time.h"

#define REPS 200

static __global__ void copy_kernel(const float4 *in, float4 *out, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = in[i];
}

/* Reads every byte of buf so that it evicts whatever the L2 held (writing dirty lines back) and
 * leaves clean lines behind; the store never happens but keeps the loads alive. */
static __global__ void read_kernel(const uint4 *buf, size_t n, unsigned *sink)
{
	unsigned x = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = buf[i];
		x ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	if (x == 0x9e3779b9u)
		*sink = x;
}

/* Drops buf's lines from the L2 without writing them back: after a memset of buf, the L2 is
 * empty rather than full of dirty lines (buf's contents become undefined, which a flush buffer
 * may). */
static __global__ void discard_kernel(char *buf, size_t lines)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < lines;
	     i += (size_t)gridDim.x * blockDim.x)
		asm volatile("discard.global.L2 [%0], 128;" ::"l"(buf + i * 128) : "memory");
}

enum { PREP_NONE, PREP_MEMSET, PREP_POISON, PREP_MEMSET_DISCARD, PREP_POISON_READ, N_PREP };
static const char *prep_name[N_PREP] = {
	"back to back (previous copy's lines in L2)",
	"memset flush 2 x L2 (dirty L2: runner, do_bench, nvbench)",
	"memset poison of the output (dirty L2: runner when output >= 2 x L2)",
	"memset flush + discard (empty L2)",
	"poison output + read flush 2 x L2 (clean L2)",
};

static struct {
	cudaStream_t s;
	void *flush, *rflush;
	size_t flush_len;
	unsigned *sink;
	int blocks;
} g;

static cudaError_t prep(int kind, void *out, size_t bytes)
{
	switch (kind) {
	case PREP_MEMSET:
		return cudaMemsetAsync(g.flush, 0x5a, g.flush_len, g.s);
	case PREP_POISON:
		return cudaMemsetAsync(out, 0xff, bytes, g.s);
	case PREP_MEMSET_DISCARD:
		cudaMemsetAsync(g.flush, 0x5a, g.flush_len, g.s);
		discard_kernel<<<g.blocks, 256, 0, g.s>>>((char *)g.flush, g.flush_len / 128);
		return cudaGetLastError();
	case PREP_POISON_READ:
		cudaMemsetAsync(out, 0xff, bytes, g.s);
		read_kernel<<<g.blocks, 256, 0, g.s>>>((const uint4 *)g.rflush, g.flush_len / 16, g.sink);
		return cudaGetLastError();
	}
	return cudaSuccess;
}

int main(void)
{
	cudaDeviceProp p;
	CK(cudaSetDevice(0));
	CK(cudaGetDeviceProperties(&p, 0));
	CK(cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking));
	g.flush_len = 2 * (size_t)p.l2CacheSize;
	g.blocks = p.multiProcessorCount * 8;
	CK(cudaMalloc(&g.flush, g.flush_len));
	CK(cudaMalloc(&g.rflush, g.flush_len));
	CK(cudaMemset(g.rflush, 1, g.flush_len));
	CK(cudaMalloc(&g.sink, sizeof *g.sink));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	double t[REPS];

	/* The runner's peak probe: best of 7 back-to-back 1 GiB cudaMemcpy. */
	size_t big = 1u << 30;
	void *a, *b;
	CK(cudaMalloc(&a, big));
	CK(cudaMalloc(&b, big));
	CK(cudaMemset(a, 3, big));
	float best = 1e30f;
	for (int i = 0; i < 8; i++) {
		CK(cudaEventRecord(e0, g.s));
		CK(cudaMemcpyAsync(b, a, big, cudaMemcpyDeviceToDevice, g.s));
		CK(cudaEventRecord(e1, g.s));
		CK(cudaEventSynchronize(e1));
		float ms;
		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (i > 0 && ms < best)
			best = ms;
	}
	double peak = 2.0 * big / (best * 1e-3) / 1e9;
	printf("%s, L2 %d MiB; peak probe (1 GiB cudaMemcpy, best of 7): %.0f GB/s\n", p.name,
	       p.l2CacheSize >> 20, peak);

	printf("preparation cost (wall, with sync): ");
	for (int k = 1; k < N_PREP; k++) {
		for (int i = 0; i < REPS; i++) {
			double s = bench_now_us();
			CK(prep(k, b, 128u << 20));
			CK(cudaStreamSynchronize(g.s));
			t[i] = bench_now_us() - s;
		}
		printf("%s%d: %.1f us", k > 1 ? ", " : "", k, bench_median(t, REPS));
	}
	printf(" (poison: 128 MiB)\n");

	static const size_t mib[] = {32, 128, 512};
	for (size_t m = 0; m < sizeof mib / sizeof *mib; m++) {
		size_t bytes = mib[m] << 20;
		printf("copy %zu MiB -> %zu MiB:\n", mib[m], mib[m]);
		for (int k = 0; k < N_PREP; k++) {
			for (int i = 0; i < REPS; i++) {
				CK(prep(k, b, bytes));
				CK(cudaStreamSynchronize(g.s));
				CK(cudaEventRecord(e0, g.s));
				copy_kernel<<<g.blocks, 256, 0, g.s>>>((const float4 *)a, (float4 *)b, bytes / 16);
				CK(cudaGetLastError());
				CK(cudaEventRecord(e1, g.s));
				CK(cudaEventSynchronize(e1));
				float ms;
				CK(cudaEventElapsedTime(&ms, e0, e1));
				t[i] = ms;
			}
			double ms = bench_median(t, REPS);
			double gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
			printf("  %d %-70s %8.4f ms %6.0f GB/s %5.1f %% of peak\n", k, prep_name[k], ms, gbs,
			       100 * gbs / peak);
		}
	}
	return 0;
}
