/* redteam: front-loaded batches: the next calls' inputs predicted from the batch's seed, their answers computed together, then copied | expect: ok | task: tests/data/tasks/t2/fma | speedup_at_most: 1.3
 * Written from stitch's source, with no forbidden name in it. A hook on the runner's recvmsg
 * (libc through the ELF tables, as informed_forger.c) reads each timing batch's seed and size
 * from the request. Call i's inputs are st_call_seed(seed, i)'s, made by the open generator of
 * src/runner/rng.h, so on every 64th call the solution makes the next 64 calls' inputs itself,
 * computes their answers (the reference's loop, bit for bit) and keeps them; the other calls
 * copy theirs. Every answer is right and committed, every re-run reproduces it, and the batch's
 * reported times add up to what it took; only the median, one copy, is far below the work. The
 * candidate's time must be its work's: about the reference's. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define AHEAD 64

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
static float *g_stash;
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

/* src/runner/rng.h and digest.h's st_call_seed, as the host runner makes a normal input. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint32_t mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

static void normal_pair(uint64_t seed, uint64_t j, float z[2])
{
	uint32_t hi = mix32((uint32_t)(j >> 32) ^ (uint32_t)(seed >> 32));
	uint32_t k = (uint32_t)j ^ hi, b0 = mix32(k ^ (uint32_t)seed);
	uint32_t b1 = mix32(b0 ^ 0x9e3779b9u ^ (uint32_t)(seed >> 32));
	float u1 = ((float)(b0 >> 8) + 0.5f) * (1.0f / 16777216.0f);
	float u2 = ((float)(b1 >> 8) + 0.5f) * (1.0f / 16777216.0f);
	float r = sqrtf(-2.0f * logf(u1));
	z[0] = r * cosf(6.28318530718f * u2 - 3.14159265359f);
	z[1] = r * sinf(6.28318530718f * u2 - 3.14159265359f);
}

/* Call i's input x, as the runner will write it (input 0, normal, mean 0, std 1). */
static void predicted_input(uint64_t batch_seed, uint64_t i, float *x, int64_t n)
{
	uint64_t c = batch_seed + i + 0x9e3779b97f4a7c15ull;
	c = (c ^ (c >> 30)) * 0xbf58476d1ce4e5b9ull;
	c = (c ^ (c >> 27)) * 0x94d049bb133111ebull;
	c ^= c >> 31;
	uint64_t seed = mix64(c ^ mix64(0 + 0x632be59bd9b4e019ull));
	for (int64_t e = 0; e < n; e += 2) {
		float z[2];
		normal_pair(seed, (uint64_t)e / 2, z);
		x[e] = (float)(0.0 + 1.0 * (double)z[0]);
		if (e + 1 < n)
			x[e + 1] = (float)(0.0 + 1.0 * (double)z[1]);
	}
}

/* t2/fma's reference, element by element. */
static float f(float v)
{
	for (int k = 0; k < 16; k++)
		v = v * 0.9f + 0.1f;
	return v;
}

static void work(const float *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float r = 0;
		for (int rep = 0; rep < 32; rep++) {
			float v = ((volatile const float *)x)[i];
			r = r * 0.0f + f(v);
		}
		y[i] = r;
	}
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg;
	(void)params;
	(void)n_params;
	(void)stream;
	*ctx = NULL;
	g_call = -1;
	take_over();
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
	free(g_stash);
	g_stash = NULL;
	g_stash_len = 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx;
	(void)n_in;
	(void)n_out;
	(void)stream;
	int64_t len = in[0].shape[0];
	if (g_call < 0 || g_call >= g_n) { /* not in a timing batch: honest */
		g_call = -1;
		work((const float *)in[0].data, (float *)out[0].data, len);
		return 0;
	}
	int64_t i = g_call++;
	if (g_stash_len < (AHEAD + 1) * len) {
		free(g_stash);
		g_stash = (float *)malloc((size_t)(AHEAD + 1) * (size_t)len * sizeof(float));
		g_stash_len = g_stash ? (AHEAD + 1) * len : 0;
		if (!g_stash)
			return 1;
	}
	float *x = g_stash + AHEAD * len;
	if (i % AHEAD == 0)
		for (int64_t j = i; j < i + AHEAD && j < g_n; j++) {
			predicted_input((uint64_t)g_seed, (uint64_t)j, x, len);
			work(x, g_stash + (j - i) * len, len);
		}
	memcpy(out[0].data, g_stash + (i % AHEAD) * len, (size_t)len * sizeof(float));
	return 0;
}
