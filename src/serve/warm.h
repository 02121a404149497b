/* stitch serve --warm: the baselines of some tasks compiled before the first request. */
#ifndef ST_SERVE_WARM_H
#define ST_SERVE_WARM_H

#include "serve.h"

/* Compile the hooks, reference and expert of every task o->warm names ("all" or a comma list of
 * task ids) for `arch`, on `threads` threads, into the compile cache. Nothing to do without
 * o->warm. ST_E_INVALID for an unknown task id; a baseline that does not compile is logged, not
 * an error (its requests' verdicts say so). */
st_status st_serve_warm(const st_serve_opts *o, const char *arch, int threads, st_err *err);

/* o->warm names tasks that exist, and the service has workers of its own to warm for
 * (ST_E_INVALID otherwise, naming the first unknown id): checked at start, before the devices
 * are probed, so that a typo is a usage error on any machine. */
st_status st_serve_warm_check(const st_serve_opts *o, st_err *err);

#endif
