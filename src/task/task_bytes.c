/* Bytes per size set (see task_bytes.h): every product of shape dims and every sum is checked for
 * overflow, since a size set of 1e12 x 1e12 would otherwise wrap to a small number and be
 * admitted. The figures mirror what verify.c and the runner allocate, page alignment included. */
#include "task_bytes.h"

#include <string.h>

#include "../common/host_mem.h"
#include "dtype.h"

/* A tensor's bytes under set; UINT64_MAX when its element count or bytes overflow. */
static st_status tensor_bytes(const st_tensor_spec *t, const st_size_set *set, uint64_t *bytes,
                              st_err *err)
{
	int64_t dims[ST_MAX_DIMS];
	st_status s = st_task_shape(t, set, dims, err);
	if (s)
		return s;
	uint64_t n = st_dtype_size(t->dtype);
	for (int d = 0; d < t->ndim; d++)
		n = st_sat_mul(n, (uint64_t)dims[d]); /* dims are >= 1 (st_task_shape) */
	/* an int64 is what the ABI and the runner count bytes in */
	*bytes = n > (uint64_t)INT64_MAX ? UINT64_MAX : n;
	return ST_OK;
}

/* As verify.c's align_up: each tensor starts on a page, and an empty one still takes a page. */
static uint64_t page_up(uint64_t x)
{
	if (!x)
		x = 1;
	return x > UINT64_MAX - 4095 ? UINT64_MAX : (x + 4095) & ~(uint64_t)4095;
}

typedef struct group {
	uint64_t sum, paged; /* plain sum, and page-aligned sum as laid out in shared memory */
} group;

static st_status add_group(const st_tensor_spec *specs, int n, const st_size_set *set,
                           st_set_bytes *b, group *g, int *staging, st_err *err)
{
	memset(g, 0, sizeof *g);
	for (int i = 0; i < n; i++) {
		uint64_t x;
		st_status s = tensor_bytes(&specs[i], set, &x, err);
		if (s)
			return st_err_wrap(err, ST_E_INVALID, "size set '%s'", set->label);
		g->sum = st_sat_add(g->sum, x);
		g->paged = st_sat_add(g->paged, page_up(x));
		if (x > b->largest || !b->largest_name) {
			b->largest = x;
			b->largest_name = specs[i].name;
		}
		if (staging && specs[i].init.dist == ST_DIST_TASK)
			*staging = 1;
	}
	return ST_OK;
}

st_status st_task_set_bytes(const st_task *t, const st_size_set *set, st_set_bytes *b,
                            st_err *err)
{
	memset(b, 0, sizeof *b);
	b->set = set->label;
	group par, in, out;
	int staging = 0;
	st_status s = add_group(t->params, t->n_params, set, b, &par, NULL, err);
	if (!s)
		s = add_group(t->inputs, t->n_inputs, set, b, &in, &staging, err);
	if (!s)
		s = add_group(t->outputs, t->n_outputs, set, b, &out, NULL, err);
	if (s)
		return s;
	b->params = par.sum;
	b->inputs = in.sum;
	b->outputs = out.sum;
	b->shm_params = par.paged;
	/* make_layout: the outputs of slot 0, of slot 1, then the inputs; at least a page */
	b->shm = st_sat_add(st_sat_mul(2, out.paged), in.paged);
	b->shm = b->shm ? b->shm : 4096;
	/* op_setup: params once, inputs and outputs per buffer set (N_SETS = 2), and a host copy of
	 * the inputs a task generator makes */
	b->buffers = st_sat_add(par.sum, st_sat_mul(2, st_sat_add(in.sum, out.sum)));
	if (staging)
		b->buffers = st_sat_add(b->buffers, in.sum);
	uint64_t all[] = {b->params, b->inputs, b->outputs, b->shm, b->buffers, b->largest};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		b->overflow |= all[i] == UINT64_MAX;
	return ST_OK;
}
