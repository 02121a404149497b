/* stitch serve --warm: the baselines of some tasks compiled, and loaded on every GPU, before the
 * first request. */
#ifndef ST_SERVE_WARM_H
#define ST_SERVE_WARM_H

#include "serve.h"

/* Compile the hooks, reference and expert of every task o->warm names ("all" or a comma list of
 * task ids) for `arch`, on `threads` threads, into the compile cache. Nothing to do without
 * o->warm. ST_E_INVALID for an unknown task id; a baseline that does not compile is logged, not
 * an error (its requests' verdicts say so). */
st_status st_serve_warm(const st_serve_opts *o, const char *arch, int threads, st_err *err);

/* Then, before listening: the baselines of the same tasks loaded into the runner pool of one GPU
 * by one small verify of each task's expert there, with `worker`'s options in its slot (its
 * devices, GPU lock and runner pool; nothing without a pool). Called on a thread that outlives
 * the runners (a worker's): a runner dies with the thread that started it. A verify that fails
 * is logged (requests load what the warm-up could not). */
void st_serve_warm_runners(const st_serve_opts *o, const st_verify_opts *worker,
                           const st_verify_slot *slot);

/* o->warm names tasks that exist, and the service has workers of its own to warm for
 * (ST_E_INVALID otherwise, naming the first unknown id): checked at start, before the devices
 * are probed, so that a typo is a usage error on any machine. */
st_status st_serve_warm_check(const st_serve_opts *o, st_err *err);

#endif
