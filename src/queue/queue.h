/* The verification queue on Redis Streams (hiredis): producers add jobs, workers on any number of
 * hosts take them through a consumer group, verify, store the result and only then acknowledge.
 *
 * Keys (all under "stitch:"):
 *   jobs:<arch>      a stream per arch ("sm_90a", "host"): entries {id, job}; a worker reads only
 *                    the streams of archs it has, so a job never lands where it cannot run
 *   queued:<id>      set while a job with that id is in a stream (producers do not add it twice)
 *   result:<id>      the result, written once (SET NX): a job id is a content hash of what is
 *                    verified, so a second delivery or a second producer finds it and no job is
 *                    answered twice
 *   done:<id>        a list a producer blocks on (BLPOP) until the result is there
 *   lease:<id>       the consumer working on a job, refreshed while it works: a second delivery
 *                    of a job in progress waits instead of verifying it in parallel
 *   worker:<name>    a consumer's heartbeat (expires unless refreshed): pending jobs of a consumer
 *                    without one are claimed by the living
 *   stats:done       jobs finished, for throughput
 * Delivery is at least once (a worker that dies between verify and acknowledge has its job
 * claimed again); results are exactly once (SET NX on a content-addressed id). */
#ifndef ST_QUEUE_H
#define ST_QUEUE_H

#include <jansson.h>

#include "common/st_error.h"

#define ST_QUEUE_GROUP "stitch-workers"

typedef struct st_queue {
	void *ctx;            /* redisContext, or st_redis_tls with tls */
	int tls;              /* rediss:// (tls.c) */
	char host[256];
	int port;
	int db;
	char password[256];
	double retry_s;       /* how long a command keeps reconnecting after a lost connection */
} st_queue;

/* redis[s]://[:PASSWORD@]HOST[:PORT][/DB] (port 6379, db 0 by default). rediss:// is TLS
 * (tls.c: $STITCH_REDIS_CA, $STITCH_REDIS_CERT, $STITCH_REDIS_KEY). */
st_status st_queue_parse_url(const char *url, st_queue *q, st_err *err);
/* Parse, connect, AUTH, SELECT, PING. */
st_status st_queue_open(const char *url, st_queue *q, st_err *err);
void st_queue_close(st_queue *q);

/* The content hash that names a job: kind, task, arch, code, options and trusted (canonical
 * JSON). */
void st_queue_job_id(const json_t *job, char id[65]);

/* Add job {"kind", "task", "arch", "code", "options"?} unless its result exists (*state 2) or it
 * is already queued (*state 1); else added (*state 0). ST_E_BUSY when the stream of its arch
 * holds max_pending jobs or more (0: no limit): the caller waits and tries again. */
st_status st_queue_submit(st_queue *q, const json_t *job, long max_pending, char id[65],
                          int *state, st_err *err);
/* The same, held back while the queue is full (backpressure never drops a job). */
st_status st_queue_put(st_queue *q, const json_t *job, long max_pending, char id[65], int *state,
                       st_err *err);
/* A verify job: `len` bytes of code for `task` on `arch`, with `options` (copied; NULL: none) and
 * "trusted" only when set, so that the same job is always the same id. NULL when out of memory. */
json_t *st_queue_verify_job(const char *task, const char *arch, const char *code, size_t len,
                            const json_t *options, int trusted);

/* The result of job `id`, waiting up to timeout_s; ST_E_TIMEOUT when it is not there by then. */
st_status st_queue_wait(st_queue *q, const char *id, double timeout_s, json_t **result,
                        st_err *err);
/* One verify through the queue, for a producer that waits (serve, eval): the job put (held back
 * while max_pending jobs wait; 0: no limit), its result awaited up to timeout_s, and its verdict
 * into *verdict; a result without one is the worker's error: ST_E_INVALID where the worker found
 * the input bad, else ST_E_SYSTEM. A queue that fails is ST_E_SYSTEM ("the queue: ..."). */
st_status st_queue_verify(st_queue *q, const char *task, const char *arch, const char *code,
                          size_t len, const json_t *options, long max_pending, double timeout_s,
                          json_t **verdict, st_err *err);

/* ---- workers ---- */

typedef struct st_queue_entry {
	char stream_id[64];   /* the entry's id in the stream */
	char id[65];          /* the job id */
	json_t *job;
} st_queue_entry;

/* Make the consumer group of arch's stream (from its first entry: jobs added before any worker
 * existed are delivered too). */
st_status st_queue_group(st_queue *q, const char *arch, st_err *err);
/* Entries for `consumer`: up to max of its own pending ones (delivered before and not
 * acknowledged: after a restart, or claimed from a dead consumer), else one new one, blocking up
 * to block_s (one at a time, so a busy consumer holds back no job another could take). *n = how
 * many; free each entry's job. */
st_status st_queue_take(st_queue *q, const char *arch, const char *consumer, double block_s,
                        st_queue_entry *out, int max, int *n, st_err *err);
/* Before working on an entry: 2 when its result exists (acknowledge it, nothing to do), 1 when
 * another living consumer holds its lease (leave it; it comes back), 0 when this consumer now
 * holds the lease and works on it. */
st_status st_queue_begin(st_queue *q, const char *arch, const st_queue_entry *e,
                         const char *consumer, double lease_s, int *state, st_err *err);
/* Store the result (first one wins), wake the producers, then acknowledge the entry. */
st_status st_queue_finish(st_queue *q, const char *arch, const st_queue_entry *e,
                          const json_t *result, st_err *err);
/* Acknowledge an entry whose result exists already (a duplicate delivery). */
st_status st_queue_ack(st_queue *q, const char *arch, const st_queue_entry *e, st_err *err);
/* The consumer's heartbeat (info: what it is, what it does) and the leases of the jobs it works
 * on, both living ttl_s. */
st_status st_queue_heartbeat(st_queue *q, const char *consumer, const json_t *info,
                             const char *const *leases, int n_leases, double ttl_s, st_err *err);
/* Give `consumer` the pending entries of consumers without a heartbeat that were delivered at
 * least idle_s ago, and every entry pending longer than stale_s whoever has it; *n claimed. */
st_status st_queue_reclaim(st_queue *q, const char *arch, const char *consumer, double idle_s,
                           double stale_s, int *n, st_err *err);
/* Remove a consumer with nothing pending from the group (a worker that stops cleanly). */
st_status st_queue_forget(st_queue *q, const char *arch, const char *consumer, st_err *err);

/* {"streams": [{"arch", "length", "pending", "consumers": [{"name", "pending", "idle_ms",
 * "alive"}]}], "workers": [heartbeat infos], "done": N} */
st_status st_queue_status(st_queue *q, json_t **status, st_err *err);

void st_queue_entry_free(st_queue_entry *e);

#endif
