/* What a runner's copy of outputs into the parent's shared memory costs, and what would make it
 * cheaper. The runner copies a run's outputs from the device straight into the memfd block the
 * parent maps (not pinned: see runner_main.c); a warm verify of t1/softmax makes about a dozen
 * such copies of 128 MiB (correctness runs, the audit's replays, two runners at once). Timed here,
 * into a populated memfd block like the runner's, medians of REPS:
 *   pageable       cudaMemcpy into the block (the runner's path today)
 *   register+copy  cudaHostRegister of the block, the copy, cudaHostUnregister (per copy)
 *   pinned         the copy into the block registered once (register+copy without the pinning)
 *   staged T       the copy in chunks through two pinned buffers of 8 MiB (CHUNK), the next chunk's
 *                  transfer under way while T threads copy the last one into the block
 * Run two at once (`stitch-bench-d2h & stitch-bench-d2h; wait`) for the audit's two runners.
 * Usage: stitch-bench-d2h [MiB (default 128)] */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_check.h"
#include "bench_time.h"

#define REPS 10
#define CHUNK (8u << 20)
#define MAX_THREADS 8

/* A block as the parent makes it: memfd, shared, every page touched. */
static unsigned char *shared_block(size_t bytes)
{
	int fd = memfd_create("stitch-bench-d2h", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)bytes)) {
		perror("memfd");
		return NULL;
	}
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		perror("mmap");
		return NULL;
	}
	memset(p, 1, bytes);
	return (unsigned char *)p;
}

typedef struct part {
	unsigned char *dst;
	const unsigned char *src;
	size_t bytes;
} part;

static void *copy_part(void *arg)
{
	part *p = (part *)arg;
	memcpy(p->dst, p->src, p->bytes);
	return NULL;
}

/* `bytes` from src to dst on `threads` threads (the calling one among them). */
static void copy_threads(unsigned char *dst, const unsigned char *src, size_t bytes, int threads)
{
	part parts[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	size_t per = (bytes / (size_t)threads + 63) & ~(size_t)63;
	int n = 0;
	for (size_t at = 0; at < bytes && n < threads; at += per, n++)
		parts[n] = (part){dst + at, src + at, at + per < bytes ? per : bytes - at};
	for (int k = 1; k < n; k++)
		if (pthread_create(&tid[k], NULL, copy_part, &parts[k]))
			copy_part(&parts[k]), tid[k] = 0;
	copy_part(&parts[0]);
	for (int k = 1; k < n; k++)
		if (tid[k])
			pthread_join(tid[k], NULL);
}

/* The staged copy: chunk k+1 on its way into one pinned buffer while chunk k leaves the other. */
static int staged(unsigned char *dst, const unsigned char *dev, size_t bytes,
                  unsigned char *pin[2], cudaEvent_t done[2], cudaStream_t s, int threads)
{
	size_t n = (bytes + CHUNK - 1) / CHUNK;
	CK(cudaMemcpyAsync(pin[0], dev, bytes < CHUNK ? bytes : CHUNK, cudaMemcpyDeviceToHost, s));
	CK(cudaEventRecord(done[0], s));
	for (size_t k = 0; k < n; k++) {
		size_t at = k * CHUNK, len = bytes - at < CHUNK ? bytes - at : CHUNK;
		if (k + 1 < n) {
			size_t nat = at + CHUNK, nlen = bytes - nat < CHUNK ? bytes - nat : CHUNK;
			CK(cudaMemcpyAsync(pin[(k + 1) % 2], dev + nat, nlen, cudaMemcpyDeviceToHost, s));
			CK(cudaEventRecord(done[(k + 1) % 2], s));
		}
		CK(cudaEventSynchronize(done[k % 2]));
		copy_threads(dst + at, pin[k % 2], len, threads);
	}
	return 0;
}

static void report(const char *what, double *ms, size_t bytes)
{
	double m = bench_median(ms, REPS);
	printf("%-16s %8.2f ms  %6.1f GB/s\n", what, m, (double)bytes / m / 1e6);
}

int main(int argc, char **argv)
{
	size_t mib = bench_mib_arg(argc, argv, 128, "usage: stitch-bench-d2h [MiB, 1 to 65536 (default 128)]");
	if (!mib)
		return 2;
	size_t bytes = mib << 20;
	unsigned char *dev, *pin[2], *blk = shared_block(bytes);
	if (!blk)
		return 1;
	cudaStream_t s;
	cudaEvent_t done[2];
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&dev, bytes));
	CK(cudaMemset(dev, 7, bytes));
	for (int k = 0; k < 2; k++) {
		CK(cudaMallocHost(&pin[k], CHUNK));
		CK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
	}
	CK(cudaDeviceSynchronize());
	printf("device to a %zu MiB memfd block (pid %d)\n", mib, (int)getpid());
	double ms[REPS];

	for (int r = 0; r < REPS; r++) {
		double t0 = bench_now_ms();
		CK(cudaMemcpy(blk, dev, bytes, cudaMemcpyDeviceToHost));
		ms[r] = bench_now_ms() - t0;
	}
	report("pageable", ms, bytes);

	for (int r = 0; r < REPS; r++) {
		double t0 = bench_now_ms();
		CK(cudaHostRegister(blk, bytes, cudaHostRegisterDefault));
		CK(cudaMemcpy(blk, dev, bytes, cudaMemcpyDeviceToHost));
		CK(cudaHostUnregister(blk));
		ms[r] = bench_now_ms() - t0;
	}
	report("register+copy", ms, bytes);

	CK(cudaHostRegister(blk, bytes, cudaHostRegisterDefault));
	for (int r = 0; r < REPS; r++) {
		double t0 = bench_now_ms();
		CK(cudaMemcpy(blk, dev, bytes, cudaMemcpyDeviceToHost));
		ms[r] = bench_now_ms() - t0;
	}
	CK(cudaHostUnregister(blk));
	report("pinned", ms, bytes);

	for (int threads = 1; threads <= 4; threads *= 2) {
		for (int r = 0; r < REPS; r++) {
			double t0 = bench_now_ms();
			if (staged(blk, dev, bytes, pin, done, s, threads))
				return 1;
			ms[r] = bench_now_ms() - t0;
		}
		char what[32];
		snprintf(what, sizeof what, "staged %d", threads);
		report(what, ms, bytes);
	}
	for (size_t i = 0; i < bytes; i += 4096)
		if (blk[i] != 7) {
			fprintf(stderr, "byte %zu is %d, not 7: a copy went wrong\n", i, blk[i]);
			return 1;
		}
	return 0;
}
