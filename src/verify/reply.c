/* Readers for runner replies, kept apart from verify.c so that they can be fuzzed without the
 * rest of the pipeline. The sample reader grows its buffer by doubling, with the arithmetic
 * checked: a runner decides how many rows it sends. */
#include "reply.h"
#include "common/digest.h"
#include "common/grow.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int st_reply_ok(const json_t *rep)
{
	return json_is_true(json_object_get(rep, "ok"));
}

const char *st_reply_string(const json_t *rep, const char *key)
{
	return json_string_value(json_object_get(rep, key));
}

int st_reply_id_matches(const json_t *rep, uint64_t want)
{
	const json_t *id = json_object_get(rep, "id");
	return want ? json_is_integer(id) && (uint64_t)json_integer_value(id) == want : id == NULL;
}

int st_reply_add_samples(const json_t *rep, st_sample **samples, int *n, int *cap)
{
	const json_t *arr = json_object_get(rep, "samples");
	size_t rows = json_array_size(arr);
	if (rows > (size_t)(INT_MAX - *n))
		return -1;
	if (ST_GROW(*samples, *cap, *n + (int)rows, 256))
		return -1;
	for (size_t k = 0; k < rows; k++) {
		json_t *row = json_array_get(arr, k);
		st_sample *d = &(*samples)[(*n)++];
		d->ms = json_number_value(json_array_get(row, 0));
		d->wall_ms = json_number_value(json_array_get(row, 1));
		d->sm_mhz = (int)json_integer_value(json_array_get(row, 2));
		d->throttled = (int)json_integer_value(json_array_get(row, 3));
		d->cpu_ms = json_array_size(row) == 5 ? json_number_value(json_array_get(row, 4)) : -1;
	}
	return 0;
}

static int bad(char *why, size_t len, const char *fmt, long long a, long long b)
{
	snprintf(why, len, fmt, a, b);
	return -1;
}

/* What a member is when it is not what was asked for, for an error message. */
static const char *kind_of(const json_t *x)
{
	return !x ? "missing" : json_is_array(x) ? "an array" : json_is_string(x) ? "a string"
	       : json_is_number(x) ? "a number" : json_is_boolean(x) ? "a boolean" : "null";
}

int st_reply_ms(const json_t *rep, void (*add)(void *ctx, const char *phase, double ms),
                void *ctx, char *why, size_t len)
{
	const json_t *ms = json_object_get(rep, "ms");
	if (!ms)
		return 0;
	if (!json_is_object(ms)) {
		snprintf(why, len, "the reply's \"ms\" is %s, not an object", kind_of(ms));
		return -1;
	}
	const char *phase;
	const json_t *x;
	json_object_foreach((json_t *)ms, phase, x)
		add(ctx, phase, json_number_value(x));
	return 0;
}

int st_reply_profile(const json_t *rep, const json_t **out, char *why, size_t len)
{
	const json_t *p = json_object_get(rep, "profile");
	*out = json_is_object(p) ? p : NULL;
	if (!*out)
		snprintf(why, len, "the reply's \"profile\" is %s, not an object", kind_of(p));
	return *out ? 0 : -1;
}

int st_reply_quiet(const json_t *rep, int *quiet, double *waited_ms, char *why, size_t len)
{
	const json_t *q = json_object_get(rep, "quiet"), *w = json_object_get(rep, "waited_ms");
	double ms = json_number_value(w);
	if (!json_is_boolean(q) || !json_is_number(w) || !isfinite(ms) || ms < 0 || ms > 86400e3) {
		snprintf(why, len, "a quiet probe's reply without a boolean quiet and a sane waited_ms");
		return -1;
	}
	*quiet = json_is_true(q);
	*waited_ms = ms;
	return 0;
}

int st_reply_inputs_written(const json_t *rep, int n_in)
{
	const json_t *w = json_object_get(rep, "inputs_written");
	size_t n = json_array_size(w); /* 0 for anything but an array */
	int first = -1;
	for (size_t k = 0; k < n; k++) {
		const json_t *e = json_array_get(w, k);
		json_int_t i = json_is_integer(e) ? json_integer_value(e) : -1;
		if (i >= 0 && i < n_in && (first < 0 || i < first))
			first = (int)i;
	}
	return first;
}

int st_reply_check_time(const json_t *rep, int n, int digests, uint64_t *out, char *why,
                        size_t len)
{
	const json_t *rows = json_object_get(rep, "samples");
	if (!json_is_array(rows) || json_array_size(rows) != (size_t)n)
		return bad(why, len, "a batch of %lld calls answered with %lld samples", n,
		           json_is_array(rows) ? (long long)json_array_size(rows) : -1);
	for (int k = 0; k < n; k++) {
		const json_t *row = json_array_get(rows, (size_t)k);
		size_t fields = json_array_size(row);
		if (fields != 4 && fields != 5) /* the fifth: the call's CPU time (host backend) */
			return bad(why, len, "sample %lld of %lld is not four or five numbers", k + 1, n);
		for (int f = 0; f < (int)fields; f++) {
			const json_t *x = json_array_get(row, (size_t)f);
			double v = json_number_value(x);
			if (!json_is_number(x) || !isfinite(v) || v < 0 || (f != 2 && f != 3 && v > 86400e3))
				return bad(why, len, "sample %lld of %lld has an impossible field", k + 1, n);
		}
	}
	const json_t *ds = json_object_get(rep, "digests");
	if (!digests)
		return ds ? bad(why, len, "a batch of %lld calls that asked for no digests sent %lld",
		                n, (long long)json_array_size(ds))
		          : 0;
	if (!json_is_array(ds) || json_array_size(ds) != (size_t)n)
		return bad(why, len, "a batch of %lld calls committed %lld digests", n,
		           json_is_array(ds) ? (long long)json_array_size(ds) : -1);
	for (int k = 0; k < n; k++) {
		uint64_t d;
		if (st_digest_parse(json_string_value(json_array_get(ds, (size_t)k)), &d))
			return bad(why, len, "digest %lld of %lld is not 16 hex digits", k + 1, n);
		if (out)
			out[k] = d;
	}
	return 0;
}
