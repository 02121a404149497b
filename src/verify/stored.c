/* An imported task's stored seeds: the inputs and expected outputs its files hold, loaded in
 * place of what a reference would compute, and the inputs handed to the runners. */
#include <string.h>

#include "task/dtype.h"
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
st_status vx_stored_load(vctx *v, const layout *L, const char *file, st_err *err)
{
	const st_task *t = v->task;
	sol *ref = &v->sols[v->ref];
	st_safetensors f;
	st_status s = st_safetensors_open(file, &f, err);
	for (int j = 0; !s && j < t->n_inputs; j++)
		s = stored_tensor(&f, file, &t->inputs[j], L->dims_in[j], L->in_bytes[j],
		                  ref->shm + L->in_off[j], err);
	for (int j = 0; !s && j < t->n_outputs; j++)
		s = stored_tensor(&f, file, &t->outputs[j], L->dims_out[j], L->out_bytes[j],
		                  ref->shm + L->out_off[0][j], err);
	st_safetensors_close(&f);
	if (s)
		return st_err_wrap(err, ST_E_INVALID, "%s: stored seed", t->id);
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
