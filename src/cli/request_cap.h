/* --max-request-gb of stitch serve and stitch worker: the host memory one verify may take, so
 * that one request for a huge task cannot take the memory of every other request on the machine.
 * Over it, st_verify refuses the request as bad input (HTTP 422, a job's bad_input answer). */
#ifndef ST_CLI_REQUEST_CAP_H
#define ST_CLI_REQUEST_CAP_H

#include <stdint.h>

#include "common/opt.h"

/* The option's table entry over a double in GiB, which the command fills with
 * st_cli_request_cap_default_gib() first (so --help shows this machine's default) and turns
 * into bytes with st_cli_request_cap_bytes() after parsing. */
#define ST_REQUEST_CAP_OPT(gib)                                                                 \
	{ST_OPT_DOUBLE, .name = "max-request-gb", 0, (gib), "G",                                  \
	 "host memory one request's verify may take, in GiB (0: what is\n"                        \
	 "available); a task whose size sets need more is refused as bad\n"                       \
	 "input (422); the default is half the machine's or its cgroup's memory", 0, 1 << 24,     \
	 .unset = "what is available (this machine's memory is unknown)"}

/* Half of MemTotal (or of the cgroup's limit, if tighter); 0 when unknown. */
uint64_t st_cli_request_cap_default(void);

/* The same in GiB. */
double st_cli_request_cap_default_gib(void);

/* GiB as given to bytes. */
uint64_t st_cli_request_cap_bytes(double gib);

#endif
