/* --max-request-gb of stitch serve and stitch worker: the host memory one verify may take, so
 * that one request for a huge task cannot take the memory of every other request on the machine.
 * Over it, st_verify refuses the request as bad input (HTTP 422, a job's bad_input answer). */
#ifndef ST_CLI_REQUEST_CAP_H
#define ST_CLI_REQUEST_CAP_H

#include <stdint.h>

#define ST_REQUEST_CAP_HELP \
	"  --max-request-gb G  host memory one request's verify may take, in GiB (default: half\n" \
	"                   the machine's or its cgroup's memory; 0: what is available); a\n" \
	"                   task whose size sets need more is refused as bad input (422)\n"

/* Half of MemTotal (or of the cgroup's limit, if tighter); 0 when unknown. */
uint64_t st_cli_request_cap_default(void);

/* Parse `v` (GiB, 0 or more) for command `cmd` into *bytes; -1 with a message when bad. */
int st_cli_request_cap(const char *cmd, const char *v, uint64_t *bytes);

#endif
