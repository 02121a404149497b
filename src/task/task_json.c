/* A task's summary as JSON, the one `stitch tasks --json` prints and `stitch serve` answers on
 * GET /v1/tasks: id, tier, sizes, policy, libraries, archs and cost model (with its roof). */
#include "task.h"

const char *st_task_policy_name(st_policy_mode m)
{
	return m == ST_POLICY_EXPERT ? "expert" : "engineering";
}

const char *st_roof_name(st_roof r)
{
	return r == ST_ROOF_L2 ? "l2" : "dram";
}

static json_t *sizes_json(const st_size_set *s)
{
	json_t *o = json_object();
	for (int i = 0; o && i < s->n; i++)
		json_object_set_new(o, s->names[i], json_integer(s->values[i]));
	return o;
}

static json_t *strings_json(char **v, int n)
{
	json_t *a = json_array();
	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *nullable_string(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *st_task_json(const st_task *t)
{
	return json_pack("{s:s, s:s, s:i, s:o, s:o, s:i, s:s, s:o, s:o, "
	                 "s:{s:o, s:o, s:o, s:s, s:o, s:o, s:o}}",
	                 "id", t->id, "name", t->name, "tier", t->tier,
	                 "eval", sizes_json(&t->eval), "small", sizes_json(&t->small),
	                 "n_hidden", t->n_hidden, "policy", st_task_policy_name(t->policy),
	                 "libraries", strings_json(t->libraries, t->n_libraries),
	                 "archs", strings_json(t->archs, t->n_archs),
	                 "cost", "flops", nullable_string(t->cost_flops),
	                 "bytes", nullable_string(t->cost_bytes),
	                 "unit", nullable_string(t->cost_unit), "roof", st_roof_name(t->cost_roof),
	                 "l2_bytes", nullable_string(t->cost_l2_bytes),
	                 "sfu", nullable_string(t->cost_sfu),
	                 "syncs", nullable_string(t->cost_syncs));
}

