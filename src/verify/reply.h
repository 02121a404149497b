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

/* Does the reply answer the request of id `want`? 1 when its "id" is an integer equal to want,
 * or, with want 0 (no request outstanding), when it has no "id" at all; 0 otherwise. */
int st_reply_id_matches(const json_t *rep, uint64_t want);

/* Append the rows of the reply's "samples" array, each [ms, wall_ms, sm_mhz, throttled] and
 * perhaps cpu_ms (-1 where a row has no fifth field), to *samples (of *n used and *cap
 * allocated), growing it. No array reads as no rows; a row or
 * field of the wrong type reads as 0 (st_reply_check_time is what refuses such a batch). Returns
 * 0, or -1 when memory ran out or the count would not fit an int (nothing appended then). */
int st_reply_add_samples(const json_t *rep, st_sample **samples, int *n, int *cap);

/* The runner's account of its request's phases, "ms": {phase: milliseconds, ...}: calls
 * add(ctx, phase, ms) for each member in the object's order, a member that is not a number
 * reading as 0. 0 when "ms" is an object or absent (nothing to add then); -1 when it is there but
 * not an object (nothing added), and why[len] says so. */
int st_reply_ms(const json_t *rep, void (*add)(void *ctx, const char *phase, double ms),
                void *ctx, char *why, size_t len);

/* The "profile" object of a profile reply (the CUPTI timeline, whose fields
 * src/profile/timeline_json.c reads one by one, typed), borrowed from rep into *out. 0 when it is
 * an object; otherwise -1, *out NULL and why[len] says what came instead. */
int st_reply_profile(const json_t *rep, const json_t **out, char *why, size_t len);

/* Does a timing batch's reply fit the request of n calls? Exactly n sample rows, each of four or
 * five non-negative finite numbers, with ms, wall_ms and cpu_ms (the fifth) at most a day; with
 * `digests`, exactly n digests of 16 hex digits (common/digest.h), read into out[0..n) when out
 * is not NULL. 0 when it fits; otherwise -1 and why[len] says what does not. */
int st_reply_check_time(const json_t *rep, int n, int digests, uint64_t *out, char *why,
                        size_t len);

/* The lowest index in a run reply's "inputs_written" (the inputs whose bytes st_run changed, where
 * the request said "check_inputs") that names one of n_in inputs; -1 when there is none, the
 * member is absent or not an array. A runner can leave it out: this reports an honest solution's
 * mistake, the audit is what catches a dishonest one. */
int st_reply_inputs_written(const json_t *rep, int n_in);

/* A quiet probe's reply (the runner's op "quiet"): *quiet from "quiet" (a boolean), *waited_ms
 * from "waited_ms" (finite, 0 to a day). 0 when both are there and sane; otherwise -1 and
 * why[len] says what is not. */
int st_reply_quiet(const json_t *rep, int *quiet, double *waited_ms, char *why, size_t len);

#endif
