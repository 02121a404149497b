/* Redis over TLS for the queue (tls.c): OpenSSL's connection, hiredis's protocol. */
#ifndef ST_QUEUE_TLS_H
#define ST_QUEUE_TLS_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "common/st_error.h"

typedef struct st_redis_tls st_redis_tls;

/* Connect to host:port and shake hands within timeout_s, checking the server's certificate
 * ($STITCH_REDIS_CA, else the system's store; it must name host) and offering
 * $STITCH_REDIS_CERT/$STITCH_REDIS_KEY where set. ST_E_IO for the network, ST_E_INVALID for
 * unusable certificate files. */
st_status st_redis_tls_connect(const char *host, int port, double timeout_s, st_redis_tls **t,
                               st_err *err);
/* One command and its reply (free with freeReplyObject); NULL when the connection failed, with
 * why. */
redisReply *st_redis_tls_command(st_redis_tls *t, int argc, const char **argv, char *why,
                                 size_t len);
void st_redis_tls_free(st_redis_tls *t);

#endif
