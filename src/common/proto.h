/* The parent <-> runner protocol: length-prefixed JSON messages over a Unix stream socket, with
 * an optional file descriptor (the shared-memory block for tensors) passed beside a message.
 * Bulk data never travels in messages: it sits in a memfd both processes map. */
#ifndef ST_PROTO_H
#define ST_PROTO_H

#include <jansson.h>
#include "st_error.h"

#define ST_PROTO_MAX_MSG (64u << 20)

/* The shape of a runner's "peaks" reply; cached peaks of another version are measured again.
 * 2: adds "fp8" (a number, or null where the device or library has no fp8 matmul).
 * 3: adds "l2_gbs", the L2's read bandwidth (null where it could not be measured).
 * 4: adds "sfu", the special-function unit's rate in tera-operations/s (null where it could not
 *    be measured).
 * 5: adds "sync_us", one grid-wide barrier's time in microseconds (null where there is none:
 *    the host backend, a device without cooperative launches). */
#define ST_PEAKS_VERSION 5

/* A runner's exit status when its channel to the parent broke under it (a send or receive
 * failed): the parent reads it as a broken protocol, never as a crash of the solution. */
#define ST_PROTO_EXIT_CHANNEL 3

/* Send msg (not consumed); pass_fd >= 0 sends that descriptor along. */
st_status st_proto_send(int sock, const json_t *msg, int pass_fd, st_err *err);

/* Receive one message; *fd_out (if not NULL) gets a passed descriptor or -1.
 * timeout_ms < 0 waits forever. ST_E_TIMEOUT when nothing came in time; ST_E_IO on a closed
 * connection ("connection closed") or a broken frame. */
st_status st_proto_recv(int sock, json_t **msg, int *fd_out, int timeout_ms, st_err *err);

#endif
