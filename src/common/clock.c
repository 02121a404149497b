/* The monotonic and wall clocks of clock.h. */
#include "common/clock.h"

#include <time.h>

static double read_clock(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double st_now_s(void)
{
	return read_clock(CLOCK_MONOTONIC);
}

double st_wall_s(void)
{
	return read_clock(CLOCK_REALTIME);
}
