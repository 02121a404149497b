/* Speed of light by the roof that binds: a task's floor is the largest of the lower bounds its
 * cost model gives (docs/bench.md, "Roofs"). The FLOP and DRAM bounds are every task's; the L2
 * bound only a task with cost.roof "l2" has, since only its author knows how many bytes its
 * gathers must pull through the L2 (a sector per random access, say); the special-function
 * bound only a task that counts cost.sfu, its transcendentals, and the synchronisation bound
 * only one that counts cost.syncs, the dependent steps each every SM must see the end of. */
#include "sol_floor.h"

#include "task/expr.h"

st_status st_cost_eval(const st_task *t, const st_size_set *set, st_cost_at *c, st_err *err)
{
	int64_t flops = 0, bytes = 0, l2 = -1, sfu = -1, syncs = -1;
	if (!t->cost_bytes)
		return st_err_set(err, ST_E_INVALID, "%s: no cost model", t->id);
	st_status s = st_expr_eval(t->cost_bytes, set, &bytes, err);
	if (!s && t->cost_flops)
		s = st_expr_eval(t->cost_flops, set, &flops, err);
	if (!s && t->cost_roof == ST_ROOF_L2 && t->cost_l2_bytes)
		s = st_expr_eval(t->cost_l2_bytes, set, &l2, err);
	if (!s && t->cost_sfu)
		s = st_expr_eval(t->cost_sfu, set, &sfu, err);
	if (!s && t->cost_syncs)
		s = st_expr_eval(t->cost_syncs, set, &syncs, err);
	if (s)
		return s;
	c->flops = (double)flops;
	c->bytes = (double)bytes;
	c->l2_bytes = (double)l2;
	c->sfu = (double)sfu;
	c->syncs = (double)syncs;
	c->unit = t->cost_unit;
	return ST_OK;
}

/* ms to move `amount` at `rate` (units per second, scaled by `scale`), -1 when either is not a
 * positive figure. */
static double bound_ms(double amount, double rate, double scale)
{
	return amount > 0 && rate > 0 ? 1e3 * amount / (rate * scale) : -1;
}

/* Raise f's floor to `ms` when that bound is longer, naming its roof: bounds are offered in
 * the order ties go to (DRAM, L2, FLOPs, special functions, synchronisations). */
static void raise_floor(st_sol_floor *f, double ms, const char *roof)
{
	if (ms > f->floor_ms) {
		f->floor_ms = ms;
		f->roof = roof;
	}
}

void st_sol_floor_compute(const json_t *peaks, const st_cost_at *c, st_sol_floor *f)
{
	double bw = json_number_value(json_object_get(peaks, "bw_gbs"));
	double l2 = json_number_value(json_object_get(peaks, "l2_gbs"));
	double rate = c->unit ? json_number_value(json_object_get(peaks, c->unit)) : 0;
	double sfu = json_number_value(json_object_get(peaks, "sfu"));
	double sync_us = json_number_value(json_object_get(peaks, "sync_us"));
	/* bound_ms leaves out a count that is not positive: -1, a task that counts none */
	f->dram_ms = bw > 0 ? (c->bytes > 0 ? 1e3 * c->bytes / (bw * 1e9) : 0) : -1;
	f->l2_ms = bound_ms(c->l2_bytes, l2, 1e9);
	f->flops_ms = bound_ms(c->flops, rate, 1e12);
	f->sfu_ms = bound_ms(c->sfu, sfu, 1e12);
	/* one synchronisation after another, sync_us each */
	f->sync_ms = c->syncs > 0 && sync_us > 0 ? 1e-3 * c->syncs * sync_us : -1;
	f->floor_ms = -1;
	f->roof = NULL;
	if (!(bw > 0))
		return;
	f->floor_ms = f->dram_ms;
	f->roof = "dram";
	raise_floor(f, f->l2_ms, "l2");
	raise_floor(f, f->flops_ms, c->unit);
	raise_floor(f, f->sfu_ms, "sfu");
	raise_floor(f, f->sync_ms, "sync");
}

json_t *st_sol_floors_json(const st_sol_floor *f)
{
	json_t *o = json_object();
	if (f->dram_ms >= 0)
		json_object_set_new(o, "dram", json_real(f->dram_ms));
	if (f->l2_ms >= 0)
		json_object_set_new(o, "l2", json_real(f->l2_ms));
	if (f->flops_ms >= 0)
		json_object_set_new(o, "flops", json_real(f->flops_ms));
	if (f->sfu_ms >= 0)
		json_object_set_new(o, "sfu", json_real(f->sfu_ms));
	if (f->sync_ms >= 0)
		json_object_set_new(o, "sync", json_real(f->sync_ms));
	return o;
}
