/* The HTTP front of stitch serve (libmicrohttpd): routes, limits, the bearer token. */
#ifndef ST_SERVE_HTTP_H
#define ST_SERVE_HTTP_H

#include "service.h"

typedef struct st_http st_http;

/* Listen on o->listen and answer from `svc` until st_http_stop. */
st_status st_http_start(const st_serve_opts *o, st_service *svc, st_http **out, st_err *err);
/* The port it listens on (the one the kernel chose for port 0). */
int st_http_port(const st_http *h);
/* Close the socket and end every connection (the service has answered them all by then). */
void st_http_stop(st_http *h);

#endif
