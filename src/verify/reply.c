/* Readers for runner replies, kept apart from verify.c so that they can be fuzzed without the
 * rest of the pipeline. The sample reader grows its buffer by doubling, with the arithmetic
 * checked: a runner decides how many rows it sends. */
#include "reply.h"

#include <limits.h>
#include <stdlib.h>

int st_reply_ok(const json_t *rep)
{
	return json_is_true(json_object_get(rep, "ok"));
}

const char *st_reply_string(const json_t *rep, const char *key)
{
	return json_string_value(json_object_get(rep, key));
}

int st_reply_add_samples(const json_t *arr, st_sample **samples, int *n, int *cap)
{
	size_t rows = json_array_size(arr);
	if (rows > (size_t)(INT_MAX - *n))
		return -1;
	int need = *n + (int)rows;
	if (need > *cap) {
		int grown = *cap ? *cap : 256;
		while (grown < need)
			grown = grown > INT_MAX / 2 ? INT_MAX : grown * 2;
		st_sample *p = realloc(*samples, (size_t)grown * sizeof *p);
		if (!p)
			return -1;
		*samples = p;
		*cap = grown;
	}
	for (size_t k = 0; k < rows; k++) {
		json_t *row = json_array_get(arr, k);
		st_sample *d = &(*samples)[(*n)++];
		d->ms = json_number_value(json_array_get(row, 0));
		d->wall_ms = json_number_value(json_array_get(row, 1));
		d->sm_mhz = (int)json_integer_value(json_array_get(row, 2));
		d->throttled = (int)json_integer_value(json_array_get(row, 3));
	}
	return 0;
}
