/* redteam: hidden work only until the parent's clock asks again: a rewritten clock through the main timing round, the truth when re-timed to confirm | expect: ok|hacking | task: tests/data/tasks/t2/fma | speedup_at_most: 0.06 | options: --no-policy
 * The parent times a candidate again when its batches took longer than its reports, and calls it
 * tampered with only if the second round shows it too. This file rewrites the runner's
 * clock_gettime slot (as patch_clock.c does; informed_forger.c reaches libc without a forbidden
 * name) so that its calls report a hundredth of their length until they have reported the 20 ms
 * of timed calls `stitch redteam`'s stop rule asks for (the main round), and tells the truth
 * from then on, when it is re-timed. Its work is forty times the reference's (about 0.02x), so
 * that the main round holds many more of its samples than the confirmation does. The parent's
 * confirmation may clear a charge an honest candidate got on a busy host; a verdict that let it
 * by taking the median over both rounds' samples with the confirmation's charge would give this
 * file its lying median: about 2.6x, a hundred times its speed. Each round is weighed on its own
 * (st_round_time_combine), the front-loading bound with it: `ok` at its work's speed, or
 * `hacking` where the lie lasts into the confirmation. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "stitch/solution.h"

static int (*real_clock)(clockid_t, struct timespec *);
#define SLOW 100
static int g_hiding = 1, g_in;
static int64_t g_from, g_shown, g_skew;

static int slow_clock(clockid_t id, struct timespec *ts)
{
	int rc = real_clock(id, ts);
	if (rc || id != CLOCK_MONOTONIC)
		return rc;
	/* a hundredth of its speed while hiding, its own speed after, shifted so it never goes back */
	int64_t now = ts->tv_sec * 1000000000ll + ts->tv_nsec;
	if (g_hiding && !g_in) {
		g_in = 1;
		g_from = now;
		g_shown = g_skew + now;
	}
	if (!g_hiding && g_in) {
		g_in = 0;
		g_skew = g_shown + (now - g_from) / SLOW - now;
	}
	int64_t ns = g_in ? g_shown + (now - g_from) / SLOW : now + g_skew;
	ts->tv_sec = ns / 1000000000ll;
	ts->tv_nsec = ns % 1000000000ll;
	return 0;
}

static const char *g_name;
static void *g_fn, **g_old;

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	uintptr_t b = info->dlpi_addr;
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(b + info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return 1;
	uintptr_t rel[2] = {0, 0}, relsz[2] = {0, 0}, symtab = 0, strtab = 0;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t v = dyn->d_un.d_ptr;
		switch (dyn->d_tag) {
		case DT_JMPREL: rel[0] = v; break;
		case DT_PLTRELSZ: relsz[0] = v; break;
		case DT_RELA: rel[1] = v; break;
		case DT_RELASZ: relsz[1] = v; break;
		case DT_SYMTAB: symtab = v; break;
		case DT_STRTAB: strtab = v; break;
		}
	}
	/* the loader may or may not have relocated these in place */
	if (symtab < b) symtab += b;
	if (strtab < b) strtab += b;
	for (int t = 0; t < 2; t++) {
		if (!rel[t])
			continue;
		const ElfW(Rela) *r = (const ElfW(Rela) *)(rel[t] < b ? rel[t] + b : rel[t]);
		for (size_t k = 0; k < relsz[t] / sizeof *r; k++) {
			const ElfW(Sym) *sym = (const ElfW(Sym) *)symtab + ELF64_R_SYM(r[k].r_info);
			if (strcmp((const char *)strtab + sym->st_name, g_name))
				continue;
			void **slot = (void **)(b + r[k].r_offset);
			uintptr_t page = (uintptr_t)slot & ~(uintptr_t)4095;
			if (mprotect((void *)page, 4096, PROT_READ | PROT_WRITE))
				return 1;
			*g_old = *slot;
			*slot = g_fn;
			return 1;
		}
	}
	return 1; /* the main program comes first; stop there */
}

#define REPS 1280 /* forty times the reference's work: ~8 ms a call on the host */
#define TIMED_N 1000 /* the host backend times the small set */

static float f(float v)
{
	for (int k = 0; k < 16; k++)
		v = v * 0.9f + 0.1f;
	return v;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg, (void)params, (void)n_params, (void)stream;
	*ctx = NULL;
	real_clock = clock_gettime;
	g_name = "clock_gettime";
	g_fn = (void *)slow_clock;
	void *old = NULL;
	g_old = &old;
	dl_iterate_phdr(visit, NULL);
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
}

#define SHOWN_MS 20.2 /* the stop rule's 20 ms, and a little for the correctness checks' calls */
static double g_shown_ms; /* what its calls of the timed size have reported so far */

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx, (void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	struct timespec t0, t1;
	real_clock(CLOCK_MONOTONIC, &t0);
	for (int64_t i = 0; i < in[0].shape[0]; i++) {
		float r = 0;
		for (int rep = 0; rep < REPS; rep++) {
			float v = ((volatile const float *)x)[i];
			r = r * 0.0f + f(v);
		}
		y[i] = r;
	}
	real_clock(CLOCK_MONOTONIC, &t1);
	if (in[0].shape[0] == TIMED_N && g_hiding) {
		g_shown_ms += ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / SLOW;
		g_hiding = g_shown_ms < SHOWN_MS;
	}
	return 0;
}
