/* stitch serve --warm: the baselines of some tasks compiled before the first request. */
#ifndef ST_SERVE_WARM_H
#define ST_SERVE_WARM_H

#include "serve.h"

/* Compile the hooks, reference and expert of every task o->warm names ("all" or a comma list of
 * task ids) for `arch`, on `threads` threads, into the compile cache. Nothing to do without
 * o->warm. ST_E_INVALID for an unknown task id; a baseline that does not compile is logged, not
 * an error (its requests' verdicts say so). */
st_status st_serve_warm(const st_serve_opts *o, const char *arch, int threads, st_err *err);

#endif
