/* redteam: front-loaded batches on the GPU: the next calls' inputs made from the batch's seed, their answers computed in one call, then copied | expect: ok|hacking|incorrect | task: tests/data/tasks/t2/fma | speedup_at_most: 1.3
 * The GPU form of tests/redteam/host/front_load.c. A hook on the runner's recvmsg (libc through
 * the ELF tables, no forbidden name) reads each timing batch's seed and size; on every 64th call
 * the solution makes the next 64 calls' inputs on the GPU exactly as the runner's fill kernel
 * will (src/runner/rng.h's device path, src/runner/cuda_kernels.cu's normal floats), computes
 * their answers with the reference's kernel and keeps them; the other calls copy theirs. Every
 * answer right and committed, every re-run reproducing it, the reports adding up to the work;
 * only the median, one copy, is small. The candidate's time must be its work's (ok at about the
 * reference's speed); a copy that does not match the runner's inputs bit for bit is wrong, and
 * hacking or incorrect. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define AHEAD 64
#define REPS 32

/* ELF64 as the loader lays it out (elf.h is not among the headers a solution may include). */
typedef struct {
	unsigned char ident[16];
	uint16_t type, machine;
	uint32_t version;
	uint64_t entry, phoff, shoff;
	uint32_t flags;
	uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
} ehdr;
typedef struct {
	uint32_t type, flags;
	uint64_t offset, vaddr, paddr, filesz, memsz, align;
} phdr;
typedef struct {
	int64_t tag;
	uint64_t val;
} dyn;
typedef struct {
	uint32_t name;
	unsigned char info, other;
	uint16_t shndx;
	uint64_t value, size;
} sym;
typedef struct {
	uint64_t offset, info;
	int64_t addend;
} rela;
typedef struct {
	uint64_t addr;
	const char *name;
	const phdr *ph;
	uint16_t phnum;
} object_info;

enum { PT_DYN = 2, DT_REL_A = 7, DT_REL_ASZ = 8, DT_SYMTAB_ = 6, DT_STRTAB_ = 5, DT_JMP = 23,
       DT_PLTSZ = 2 };
#define DT_GNUHASH 0x6ffffef5

typedef int (*protect_fn)(void *, size_t, int);
typedef int (*iterate_fn)(int (*)(object_info *, size_t, void *), void *);
typedef long (*recv_fn)(int, void *, int);
typedef struct {
	void *base;
	size_t len;
} io_vec;
typedef struct {
	void *name;
	unsigned namelen;
	io_vec *iov;
	size_t iovlen;
	void *control;
	size_t controllen;
	int flags;
} msg_hdr;

static protect_fn g_protect;
static recv_fn g_recv;

static const dyn *dynamic_of(uint64_t base, const phdr *ph, int n)
{
	for (int i = 0; i < n; i++)
		if (ph[i].type == PT_DYN)
			return (const dyn *)(base + ph[i].vaddr);
	return 0;
}

static uint64_t at(uint64_t base, uint64_t v)
{
	return v < base ? v + base : v; /* relocated in place by the loader, or not */
}

/* The number of symbols, from the GNU hash table's buckets and chains. */
static uint32_t gnu_symbols(const uint32_t *h)
{
	uint32_t nb = h[0], off = h[1], bloom = h[2];
	const uint32_t *buckets = h + 4 + 2 * bloom, *chain = buckets + nb;
	uint32_t last = 0;
	for (uint32_t i = 0; i < nb; i++)
		last = buckets[i] > last ? buckets[i] : last;
	if (last < off)
		return off;
	while (!(chain[last - off] & 1))
		last++;
	return last + 1;
}

static void *lookup(uint64_t base, const dyn *d, const char *name)
{
	uint64_t symtab = 0, strtab = 0, hash = 0;
	for (; d->tag; d++) {
		if (d->tag == DT_SYMTAB_) symtab = at(base, d->val);
		if (d->tag == DT_STRTAB_) strtab = at(base, d->val);
		if (d->tag == DT_GNUHASH) hash = at(base, d->val);
	}
	if (!symtab || !strtab || !hash)
		return 0;
	uint32_t n = gnu_symbols((const uint32_t *)hash);
	const sym *s = (const sym *)symtab;
	for (uint32_t i = 0; i < n; i++)
		if (s[i].value && !strcmp((const char *)strtab + s[i].name, name))
			return (void *)(base + s[i].value);
	return 0;
}

static int64_t g_seed, g_n, g_call = -1; /* the batch being timed; g_call -1: none */
static float *g_stash;                    /* AHEAD answers and one input */
static int64_t g_stash_len;

static int has(const char *text, size_t len, const char *key)
{
	size_t k = strlen(key);
	for (size_t i = 0; i + k <= len; i++)
		if (!memcmp(text + i, key, k))
			return 1;
	return 0;
}

/* A number after `key` in the frame, as jansson writes it. */
static int frame_number(const char *text, size_t len, const char *key, int64_t *out)
{
	size_t k = strlen(key);
	for (size_t i = 0; i + k < len; i++)
		if (!memcmp(text + i, key, k)) {
			char num[32];
			size_t j = 0;
			for (i += k; i < len && (text[i] == ' ' || text[i] == ':'); i++)
				;
			while (i < len && j < sizeof num - 1 &&
			       (text[i] == '-' || (text[i] >= '0' && text[i] <= '9')))
				num[j++] = text[i++];
			num[j] = 0;
			*out = strtoll(num, NULL, 10);
			return j > 0;
		}
	return 0;
}

static long hook(int fd, void *msg, int flags)
{
	long n = g_recv(fd, msg, flags);
	msg_hdr *m = (msg_hdr *)msg;
	if (n <= 0)
		return n;
	const char *text = (const char *)m->iov[0].base;
	if (n > 8 && has(text, (size_t)n, "\"time\"") &&
	    frame_number(text, (size_t)n, "\"seed\"", &g_seed) &&
	    frame_number(text, (size_t)n, "\"n\"", &g_n))
		g_call = 0;
	return n;
}

static int visit(object_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	uint64_t b = info->addr;
	const dyn *d = dynamic_of(b, info->ph, info->phnum);
	uint64_t symtab = 0, strtab = 0, rel[2] = {0, 0}, relsz[2] = {0, 0};
	for (; d && d->tag; d++) {
		if (d->tag == DT_SYMTAB_) symtab = at(b, d->val);
		if (d->tag == DT_STRTAB_) strtab = at(b, d->val);
		if (d->tag == DT_JMP) rel[0] = at(b, d->val);
		if (d->tag == DT_PLTSZ) relsz[0] = d->val;
		if (d->tag == DT_REL_A) rel[1] = at(b, d->val);
		if (d->tag == DT_REL_ASZ) relsz[1] = d->val;
	}
	for (int t = 0; t < 2 && symtab && strtab; t++)
		for (uint64_t k = 0; rel[t] && k < relsz[t] / sizeof(rela); k++) {
			const rela *r = (const rela *)rel[t] + k;
			const sym *s = (const sym *)symtab + (r->info >> 32);
			if (strcmp((const char *)strtab + s->name, "recvmsg"))
				continue;
			void **slot = (void **)(b + r->offset);
			if (g_protect((void *)((uint64_t)slot & ~4095ull), 4096, 3))
				return 1;
			g_recv = (recv_fn)*slot;
			*slot = (void *)hook;
			return 1;
		}
	return 1; /* the main program, the runner, comes first: stop there */
}

static void take_over(void)
{
	if (g_recv)
		return;
	uint64_t p = (uint64_t)(void *)&memcpy & ~4095ull;
	while (memcmp((const void *)p, "\177ELF", 4))
		p -= 4096;
	const ehdr *e = (const ehdr *)p;
	const dyn *d = dynamic_of(p, (const phdr *)(p + e->phoff), e->phnum);
	g_protect = (protect_fn)lookup(p, d, "mprotect");
	iterate_fn iterate = (iterate_fn)lookup(p, d, "dl_iterate_phdr");
	if (g_protect && iterate)
		iterate(visit, 0);
}

__device__ static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

__device__ static uint32_t mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

/* Call i's input, as the runner's fill kernel writes it (input 0: normal, mean 0, std 1). */
__global__ static void predicted_input(uint64_t batch_seed, uint64_t i, float *x, long long n,
                                       float fa, float fb)
{
	long long e = 2 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
	if (e >= n)
		return;
	uint64_t seed = mix64(mix64(batch_seed + i) ^ mix64(0x632be59bd9b4e019ull));
	uint64_t j = (uint64_t)e / 2;
	uint32_t hi = mix32((uint32_t)(j >> 32) ^ (uint32_t)(seed >> 32));
	uint32_t b0 = mix32(((uint32_t)j ^ hi) ^ (uint32_t)seed);
	uint32_t b1 = mix32(b0 ^ 0x9e3779b9u ^ (uint32_t)(seed >> 32));
	float u1 = ((float)(b0 >> 8) + 0.5f) * (1.0f / 16777216.0f);
	float u2 = ((float)(b1 >> 8) + 0.5f) * (1.0f / 16777216.0f);
	float xx = fmaxf(-2.0f * __logf(u1), 1e-30f), r = xx * rsqrtf(xx), s, c;
	__sincosf(6.28318530718f * u2 - 3.14159265359f, &s, &c);
	x[e] = fa + fb * (r * c);
	if (e + 1 < n)
		x[e + 1] = fa + fb * (r * s);
}

/* t2/fma's reference kernel, bit for bit. */
__host__ __device__ static float f(float v)
{
	for (int k = 0; k < 16; k++)
		v = v * 0.9f + 0.1f;
	return v;
}

__global__ static void fma_rep(const float *x, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float r = 0;
	for (int rep = 0; rep < REPS; rep++) {
		float v = ((volatile const float *)x)[i];
		r = r * 0.0f + f(v);
	}
	y[i] = r;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx)
{
	(void)cfg, (void)params, (void)n_params, (void)stream;
	*ctx = NULL;
	g_call = -1;
	take_over();
	return 0;
}

extern "C" void st_free(void *ctx)
{
	(void)ctx;
	cudaFree(g_stash);
	g_stash = NULL;
	g_stash_len = 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream)
{
	(void)ctx;
	if (n_in != 1 || n_out != 1)
		return 1;
	long long n = in[0].shape[0];
	unsigned blocks = (unsigned)((n + 255) / 256);
	if (g_call < 0 || g_call >= g_n) { /* not in a timing batch: honest */
		g_call = -1;
		fma_rep<<<blocks, 256, 0, stream>>>((const float *)in[0].data, (float *)out[0].data, n);
		return cudaGetLastError() == cudaSuccess ? 0 : 2;
	}
	int64_t i = g_call++;
	if (g_stash_len < (AHEAD + 1) * n) {
		cudaFree(g_stash);
		g_stash_len = 0;
		if (cudaMalloc(&g_stash, (size_t)(AHEAD + 1) * (size_t)n * sizeof(float)) != cudaSuccess)
			return 3;
		g_stash_len = (AHEAD + 1) * n;
	}
	float *x = g_stash + AHEAD * n;
	if (i % AHEAD == 0)
		for (int64_t j = i; j < i + AHEAD && j < g_n; j++) {
			predicted_input<<<(unsigned)((n / 2 + 256) / 256), 256, 0, stream>>>(
				(uint64_t)g_seed, (uint64_t)j, x, n, 0.0f, 1.0f);
			fma_rep<<<blocks, 256, 0, stream>>>(x, g_stash + (j - i) * n, n);
		}
	cudaMemcpyAsync(out[0].data, g_stash + (i % AHEAD) * n, (size_t)n * sizeof(float),
	                cudaMemcpyDeviceToDevice, stream);
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
