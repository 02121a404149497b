/* Members of JSON objects with a default (json_get.h). */
#include "common/json_get.h"

double st_json_num(const json_t *o, const char *key)
{
	const json_t *x = json_object_get(o, key);
	return json_is_number(x) ? json_number_value(x) : 0;
}

const char *st_json_str_or(const json_t *o, const char *key, const char *fallback)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : fallback;
}
