/* Where a size set's tensors live: their specs for the runners' setup request, their places in
 * each solution's shared-memory block, and the blocks themselves (made, reused from the caller's
 * cache, and allocated ahead while the runners start). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/mem_fill.h"
#include "task/dtype.h"
#include "task/expr.h"
#include "verify/verify_int.h"

static json_t *tensor_specs(const st_tensor_spec *specs, int n, const st_size_set *sizes,
                            int with_init, int64_t dims[][ST_MAX_DIMS], size_t *bytes,
                            st_err *err)
{
	json_t *arr = json_array();
	for (int i = 0; i < n; i++) {
		const st_tensor_spec *t = &specs[i];
		if (st_task_shape(t, sizes, dims[i], err)) {
			json_decref(arr);
			return NULL;
		}
		json_t *shape = json_array();
		size_t count = 1;
		for (int d = 0; d < t->ndim; d++) {
			json_array_append_new(shape, json_integer(dims[i][d]));
			count *= (size_t)dims[i][d];
		}
		bytes[i] = count * st_dtype_size(t->dtype);
		json_t *o = json_pack("{s:s,s:s,s:o}", "name", t->name, "dtype",
		                      st_dtype_name(t->dtype), "shape", shape);
		if (with_init) {
			static const char *dists[] = {"normal", "uniform", "randint", "const", "task"};
			json_t *init = json_pack("{s:s,s:f,s:f}", "dist", dists[t->init.dist], "a",
			                         t->init.a, "b", t->init.b);
			if (t->init.dist == ST_DIST_RANDINT) {
				int64_t lo = 0, hi = 0;
				if (st_expr_eval(t->init.lo_expr, sizes, &lo, err) ||
				    st_expr_eval(t->init.hi_expr, sizes, &hi, err)) {
					json_decref(init);
					json_decref(o);
					json_decref(arr);
					return NULL;
				}
				json_object_set_new(init, "lo", json_integer(lo));
				json_object_set_new(init, "hi", json_integer(hi));
			}
			json_object_set_new(o, "init", init);
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

static size_t align_up(size_t x)
{
	return (x + 4095) & ~(size_t)4095;
}

static void make_layout(layout *L, int n_in, int n_out)
{
	size_t off = 0;
	for (int i = 0; i < L->n_par; i++) {
		L->par_off[i] = off;
		off += align_up(L->par_bytes[i] ? L->par_bytes[i] : 1);
	}
	for (int slot = 0; slot < 2; slot++)
		for (int i = 0; i < n_out; i++) {
			L->out_off[slot][i] = off;
			off += align_up(L->out_bytes[i] ? L->out_bytes[i] : 1);
		}
	for (int i = 0; i < n_in; i++) {
		L->in_off[i] = off;
		off += align_up(L->in_bytes[i] ? L->in_bytes[i] : 1);
	}
	L->total = off ? off : 4096;
}

json_t *vx_offsets_json(const size_t *off, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer((json_int_t)off[i]));
	return a;
}

/* The current size set is done with the shared memory; the memory and its mapping stay for the
 * next set. */
void vx_unmap_shm(sol *so)
{
	so->shm = NULL;
}

/* The block goes back to the caller's cache (stitch serve's worker); without one, or when the
 * cache does not keep it, it is freed. */
void vx_close_shm(sol *so, st_shm_cache *cache)
{
	vx_unmap_shm(so);
	st_shm_cache_give(cache, &so->blk); /* leaves so->blk empty */
}

/* Shared memory of len bytes for solution so, mapped here, its first `alloc` bytes to be allocated
 * and mapped in: a runner that maps them populated (MADV_POPULATE_WRITE) copies its outputs in,
 * and this process reads them, without a page fault per 4 KiB or 64 KiB, which on the H200
 * machines cost more than the copies themselves. What the block needs (those pages, and zeros
 * over a reused block's old tensors) is added to `todo`, for reserve_shm to do on several
 * threads, or done here when todo is NULL. */
static st_status new_shm(vctx *v, sol *so, size_t len, size_t alloc, st_mem_range *todo,
                         int *n_todo, st_err *err)
{
	st_shm_cache *cache = v->slot->shm_cache;
	vx_close_shm(so, cache);
	st_shm_block *b = &so->blk;
	st_mem_range mine[2];
	int n_mine = 0;
	if (!todo) {
		todo = mine;
		n_todo = &n_mine;
	}
	if (st_shm_cache_take(cache, len, b)) {
		v->shm_reused++;
		/* An earlier request's tensors are none of an untrusted runner's business. */
		if (!so->trusted && b->dirty) {
			todo[(*n_todo)++] = (st_mem_range){b->map, b->dirty, 1};
			b->dirty = 0;
		}
	} else {
		v->shm_made++;
		b->fd = memfd_create("stitch-tensors", MFD_CLOEXEC);
		if (b->fd < 0)
			return st_err_set(err, ST_E_SYSTEM, "memfd_create: %s", strerror(errno));
		if (ftruncate(b->fd, (off_t)len))
			return st_err_set(err, ST_E_SYSTEM, "ftruncate shared memory to %zu bytes: %s", len,
			                  strerror(errno));
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
		if (m == MAP_FAILED)
			return st_err_set(err, ST_E_SYSTEM, "mmap %zu shared bytes: %s", len, strerror(errno));
		b->map = m;
		b->cap = len;
	}
	alloc = alloc < b->cap ? alloc : b->cap;
	if (alloc > b->ready) {
		todo[(*n_todo)++] = (st_mem_range){b->map, alloc, 0};
		b->ready = alloc;
	}
	if (todo == mine && n_mine && st_mem_fill(mine, n_mine, v->threads))
		return st_err_set(err, ST_E_SYSTEM, "allocating %zu bytes of shared memory: %s", alloc,
		                  strerror(errno));
	return ST_OK;
}

st_status vx_map_shm(vctx *v, sol *so, size_t len, st_err *err)
{
	vx_unmap_shm(so);
	if (so->blk.fd < 0 || so->blk.cap < len) {
		st_status s = new_shm(v, so, len, 0, NULL, NULL, err);
		if (s)
			return s;
	}
	so->shm = so->blk.map;
	so->shm_len = len;
	so->blk.dirty = len > so->blk.dirty ? len : so->blk.dirty;
	return ST_OK;
}

void vx_views(const st_task *t, const layout *L, unsigned char *base, int slot, int inputs,
              st_tensor *out)
{
	int n = inputs ? t->n_inputs : t->n_outputs;
	for (int i = 0; i < n; i++) {
		const st_tensor_spec *sp = inputs ? &t->inputs[i] : &t->outputs[i];
		out[i].name = sp->name;
		out[i].dtype = sp->dtype;
		out[i].ndim = sp->ndim;
		for (int d = 0; d < sp->ndim; d++)
			out[i].shape[d] = inputs ? L->dims_in[i][d] : L->dims_out[i][d];
		out[i].data = base + (inputs ? L->in_off[i] : L->out_off[slot][i]);
	}
}

/* The bytes from the start of solution i's shared memory that its runner writes: the params
 * (--dump) and the outputs of slot 0, and of slot 1 for the candidate (its second runs); the
 * inputs, last, only where the reference hands them over (validators, metamorphic checks,
 * --dump, as run_seed asks). */
size_t vx_shm_written(const vctx *v, const layout *L, int i)
{
	const st_task *t = v->task;
	if (i == v->ref && (t->validator || t->hooks || v->o->dump_path)) /* hooks: may perturb */
		return L->total;
	if (i != v->cand && t->n_outputs)
		return L->out_off[1][0];
	return t->n_inputs ? L->in_off[0] : L->total;
}

/* Size set `set`'s tensors (the specs of the setup request: params, inputs, outputs) and their
 * places in shared memory. */
st_status vx_plan_set(vctx *v, const st_size_set *set, int timed, layout *L, json_t **params,
                      json_t **inputs, json_t **outputs, st_err *err)
{
	const st_task *t = v->task;
	memset(L, 0, sizeof *L);
	*params = *inputs = *outputs = NULL;
	if (t->n_inputs > MAX_TENSORS || t->n_outputs > MAX_TENSORS)
		return st_err_set(err, ST_E_INVALID, "%s: more than %d inputs or outputs", t->id,
		                  MAX_TENSORS);
	if (t->n_params > MAX_PARAMS)
		return st_err_set(err, ST_E_INVALID, "%s: %d params, more than the %d a verify takes",
		                  t->id, t->n_params, MAX_PARAMS);
	*params = tensor_specs(t->params, t->n_params, set, 1, L->dims_par, L->par_bytes, err);
	*inputs = *params ? tensor_specs(t->inputs, t->n_inputs, set, 1, L->dims_in, L->in_bytes, err) : NULL;
	*outputs = *inputs ? tensor_specs(t->outputs, t->n_outputs, set, 0, L->dims_out, L->out_bytes, err) : NULL;
	if (!*outputs) {
		json_decref(*params);
		json_decref(*inputs);
		*params = *inputs = NULL;
		return st_err_wrap(err, ST_E_INVALID, "%s: size set %s", t->id, set->label);
	}
	L->dump = timed && v->o->dump_path;
	L->n_par = L->dump || v->params ? t->n_params : 0;
	make_layout(L, t->n_inputs, t->n_outputs);
	return ST_OK;
}

/* Shared memory for every solution, as much as the largest size set needs, the part its runner
 * writes (shm_written) allocated: done while the runners start, when the parent would only wait.
 * Only a speed-up: whatever fails here is left to map_shm. */
void vx_reserve_shm(vctx *v)
{
	const st_size_set *sets[64];
	int n_sets = st_task_size_sets(v->task, sets, 64);
	size_t len = 0, alloc[MAX_SOLS] = {0};
	for (int k = 0; k < n_sets; k++) {
		int timed;
		layout L;
		json_t *specs[3];
		st_err e;
		if (!vx_set_runs(v, sets[k], &timed) ||
		    vx_plan_set(v, sets[k], timed, &L, &specs[0], &specs[1], &specs[2], &e))
			continue;
		for (int j = 0; j < 3; j++)
			json_decref(specs[j]);
		len = L.total > len ? L.total : len;
		for (int i = 0; i < v->n_sols; i++) {
			size_t w = vx_shm_written(v, &L, i);
			alloc[i] = w > alloc[i] ? w : alloc[i];
		}
	}
	st_mem_range todo[2 * MAX_SOLS];
	int n_todo = 0, owner[2 * MAX_SOLS];
	for (int i = 0; i < v->n_sols && len; i++) {
		st_err e;
		int before = n_todo;
		if (new_shm(v, &v->sols[i], len, alloc[i], todo, &n_todo, &e))
			vx_close_shm(&v->sols[i], NULL);
		for (int k = before; k < n_todo; k++)
			owner[k] = i;
	}
	/* Blocks the kernel could not fill are dropped, not handed out half-allocated. */
	if (n_todo && st_mem_fill(todo, n_todo, v->threads))
		for (int k = 0; k < n_todo; k++)
			vx_close_shm(&v->sols[owner[k]], NULL);
}
