/* redteam: sabotage: a busy CPU while the baselines are timed, through the runner's receive | expect: ok | task: tests/data/tasks/t2/fma | speedup_at_most: 1.5
 * Honest answers at the reference's own speed, and a hook on the runner's recvmsg (found as
 * informed_forger.c finds sendmsg: libc through the ELF tables, no forbidden name) that spins on
 * this CPU until the parent's next request arrives: whenever the candidate is not being timed,
 * the reference and the expert share the machine with a busy loop, so their times, and the
 * candidate's speedup over them, grow. The verdict must be ok at the speedup an honest copy of
 * the reference gets, about 1x. */
#include <stdint.h>
#include <string.h>
#include "stitch/solution.h"

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
typedef struct { int fd; short events, revents; } poll_fd;
typedef int (*poll_fn)(poll_fd *, unsigned long, int);

static protect_fn g_protect;
static recv_fn g_recv;
static poll_fn g_poll;
static volatile float g_sink;

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

/* Until the parent's next request is there, burn this CPU: while the runner would sleep, the
 * baselines are being timed on the same machine. */
static long hook(int fd, void *msg, int flags)
{
	poll_fd p = {fd, 1, 0};
	while (g_poll(&p, 1, 0) == 0)
		for (int i = 0; i < 20000; i++)
			g_sink = g_sink * 0.999f + 1.0f;
	return g_recv(fd, msg, flags);
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
	g_poll = (poll_fn)lookup(p, d, "poll");
	iterate_fn iterate = (iterate_fn)lookup(p, d, "dl_iterate_phdr");
	if (g_protect && g_poll && iterate)
		iterate(visit, 0);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg;
	(void)stream;
	(void)params;
	(void)n_params;
	*ctx = NULL;
	take_over();
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
}

/* The reference's own work (tests/data/tasks/t2/fma): every answer right, its time the
 * reference's. */
static float f(float v)
{
	for (int k = 0; k < 16; k++)
		v = v * 0.9f + 0.1f;
	return v;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx;
	(void)n_in;
	(void)n_out;
	(void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	for (int64_t i = 0; i < in[0].shape[0]; i++) {
		float r = 0;
		for (int rep = 0; rep < 32; rep++) {
			float v = ((volatile const float *)x)[i];
			r = r * 0.0f + f(v);
		}
		y[i] = r;
	}
	return 0;
}
