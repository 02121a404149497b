/* The per-request memory cap of stitch serve and stitch worker (see request_cap.h): its default
 * from the machine's memory, and the conversion of the option's GiB. */
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

double st_cli_request_cap_default_gib(void)
{
	return (double)st_cli_request_cap_default() / (double)(1u << 30);
}

uint64_t st_cli_request_cap_bytes(double gib)
{
	return (uint64_t)(gib * (double)(1u << 30));
}
