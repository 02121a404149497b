/* st_verify_opts: the defaults, the options a request may set (the "options" of a stitch serve
 * request or a queued job), and those options as a job carries them (st_verify_opts_json). */
#include <string.h>

#include "verify/verify_int.h"

void st_verify_opts_default(st_verify_opts *o)
{
	memset(o, 0, sizeof *o);
	o->backend = "cuda";
	o->seeds = 3;
	o->timing = 1;
	o->profile = 1;
	o->timeout_s = 120;
	o->compile_timeout_s = 300;
	st_stop_rule_default(&o->stop);
}

void st_verify_opts_apply(st_verify_opts *o, const json_t *opt)
{
	const char *sets = json_string_value(json_object_get(opt, "sets"));
	if (sets)
		o->sets = sets;
	if (json_is_integer(json_object_get(opt, "seeds")))
		o->seeds = (int)json_integer_value(json_object_get(opt, "seeds"));
	if (json_is_boolean(json_object_get(opt, "timing")))
		o->timing = json_is_true(json_object_get(opt, "timing"));
	if (json_is_boolean(json_object_get(opt, "profile")))
		o->profile = json_is_true(json_object_get(opt, "profile"));
	if (json_is_number(json_object_get(opt, "min_time_ms")))
		o->stop.min_time_ms = json_number_value(json_object_get(opt, "min_time_ms"));
	if (json_is_number(json_object_get(opt, "max_rse")))
		o->stop.max_rse = json_number_value(json_object_get(opt, "max_rse"));
	if (json_is_integer(json_object_get(opt, "max_samples")))
		o->stop.max_samples = (int)json_integer_value(json_object_get(opt, "max_samples"));
	const char *time_set = json_string_value(json_object_get(opt, "time_set"));
	if (time_set)
		o->time_set = time_set;
}

json_t *st_verify_opts_json(const st_verify_opts *o)
{
	json_t *j = json_pack("{s:i,s:b,s:b,s:f,s:f,s:i}", "seeds", o->seeds, "timing", o->timing,
	                      "profile", o->profile, "min_time_ms", o->stop.min_time_ms, "max_rse",
	                      o->stop.max_rse, "max_samples", o->stop.max_samples);
	if (j && o->sets)
		json_object_set_new(j, "sets", json_string(o->sets));
	if (j && o->time_set)
		json_object_set_new(j, "time_set", json_string(o->time_set));
	return j;
}
