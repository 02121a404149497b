/* An imported task's seeds: the inputs and expected outputs its files hold, or its live
 * reference drew for this verify (live_ref.h), loaded in place of what a reference would
 * compute, and the inputs handed to the runners. */
#include <limits.h>
#include <string.h>

#include "task/dtype.h"
#include "verify/live_ref.h"
#include "verify/verify_int.h"

/* One tensor of a stored seed file into `dst`, checked against what the task says. */
static st_status stored_tensor(const st_safetensors *f, const char *file, const st_tensor_spec *sp,
                               const int64_t *dims, size_t bytes, unsigned char *dst, st_err *err)
{
	const st_safetensor *x = st_safetensors_find(f, sp->name);
	if (!x)
		return st_err_set(err, ST_E_INVALID, "%s: no tensor '%s'", file, sp->name);
	int same = x->dtype == sp->dtype && x->ndim == sp->ndim && x->bytes == bytes;
	for (int d = 0; same && d < x->ndim; d++)
		same = x->shape[d] == dims[d];
	if (!same)
		return st_err_set(err, ST_E_INVALID, "%s: tensor '%s' (%s, %d dims, %zu bytes) is not "
		                  "what task.json says (%s, %d dims, %zu bytes)", file, sp->name,
		                  st_dtype_name(x->dtype), x->ndim, x->bytes, st_dtype_name(sp->dtype),
		                  sp->ndim, bytes);
	memcpy(dst, x->data, bytes);
	return ST_OK;
}

/* Load a stored seed of an imported task: its inputs and expected outputs into the reference's
 * slot 0 (this process's own memory: no runner maps it) and its inputs into every runner's input
 * area, from where the runner uploads them ("given"). */
st_status vx_stored_load(vctx *v, const layout *L, int k, st_err *err)
{
	const st_task *t = v->task;
	sol *ref = &v->sols[v->ref];
	char live[PATH_MAX];
	const char *file = k < t->n_data_seeds ? (t->data_seeds ? t->data_seeds[k] : NULL)
	                                       : t->data_check;
	st_status s = ST_OK;
	if (v->live) {
		s = vx_live_seed(v->live, k, v->deadline, live, sizeof live, err);
		file = live;
	} else if (!file) {
		s = st_err_set(err, ST_E_INVALID, "%s: no stored seed %d", t->id, k + 1);
	}
	if (s)
		return s;
	st_safetensors f;
	s = st_safetensors_open(file, &f, err);
	for (int j = 0; !s && j < t->n_inputs; j++)
		s = stored_tensor(&f, file, &t->inputs[j], L->dims_in[j], L->in_bytes[j],
		                  ref->shm + L->in_off[j], err);
	for (int j = 0; !s && j < t->n_outputs; j++)
		s = stored_tensor(&f, file, &t->outputs[j], L->dims_out[j], L->out_bytes[j],
		                  ref->shm + L->out_off[0][j], err);
	st_safetensors_close(&f);
	if (v->live)
		vx_live_taken(v->live, k); /* in this process's memory now: the file may go */
	if (s)
		return st_err_wrap(err, ST_E_INVALID, "%s: %s seed", t->id, v->live ? "drawn" : "stored");
	for (int i = 0; i < v->n_sols; i++)
		if (vx_usable(v, i))
			for (int j = 0; j < t->n_inputs; j++)
				memcpy(v->sols[i].shm + L->in_off[j], ref->shm + L->in_off[j], L->in_bytes[j]);
	return ST_OK;
}

/* The inputs of the stored seed loaded last, again into solution i's input area: the solution
 * shares that memory and may have changed it. */
void vx_stored_put_inputs(vctx *v, const layout *L, int i)
{
	for (int j = 0; v->stored && j < v->task->n_inputs; j++)
		memcpy(v->sols[i].shm + L->in_off[j], v->sols[v->ref].shm + L->in_off[j],
		       L->in_bytes[j]);
}
