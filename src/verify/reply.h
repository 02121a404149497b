/* Reading a runner's reply in the parent. A reply comes from a process that hosts untrusted
 * solution code, so every field may be missing, of the wrong type or absurd; these readers take
 * any JSON value and never fail on one; tests/fuzz/fuzz_proto.c drives them with arbitrary
 * frames. */
#ifndef ST_REPLY_H
#define ST_REPLY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "verify/stats.h"

/* 1 only for "ok": true. */
int st_reply_ok(const json_t *rep);
/* The string member `key` ("status", "reason"), or NULL when absent or not a string. */
const char *st_reply_string(const json_t *rep, const char *key);

/* Append the rows of a "samples" array, each [ms, wall_ms, sm_mhz, throttled], to *samples (of
 * *n used and *cap allocated), growing it. A row or field of the wrong type reads as 0. Returns
 * 0, or -1 when memory ran out or the count would not fit an int (nothing appended then). */
int st_reply_add_samples(const json_t *arr, st_sample **samples, int *n, int *cap);

/* Does a timing batch's reply fit the request of n calls? Exactly n sample rows, each of four
 * numbers with ms and wall_ms finite, non-negative and at most a day; with `digests`, exactly n
 * digests of 16 hex digits (common/digest.h), read into out[0..n) when out is not NULL. 0 when
 * it fits; otherwise -1 and why[len] says what does not. */
int st_reply_check_time(const json_t *rep, int n, int digests, uint64_t *out, char *why,
                        size_t len);

#endif
