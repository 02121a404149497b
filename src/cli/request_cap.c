/* The per-request memory cap of stitch serve and stitch worker (see request_cap.h): its default
 * from the machine's memory, and the option's parsing. */
#include "request_cap.h"

#include "cli.h"
#include "common/host_mem.h"

uint64_t st_cli_request_cap_default(void)
{
	st_host_mem m;
	st_err e;
	if (st_host_mem_read(&m, &e))
		return 0; /* unknown: the admission's own check against MemAvailable still holds */
	return st_host_mem_ceiling(&m) / 2;
}

int st_cli_request_cap(const char *cmd, const char *v, uint64_t *bytes)
{
	double gib;
	if (!v) {
		st_cli_error("%s: --max-request-gb needs a value", cmd);
		return -1;
	}
	if (st_cli_number("--max-request-gb", v, 0, 1 << 24, &gib))
		return -1;
	*bytes = (uint64_t)(gib * (double)(1u << 30));
	return 0;
}
