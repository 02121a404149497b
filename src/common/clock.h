/* The two clocks stitch reads: monotonic seconds for durations, deadlines and timeouts (never
 * stepped by NTP or the administrator), and wall-clock seconds for times stored beyond the
 * process (a service's request and answer times). */
#ifndef ST_CLOCK_H
#define ST_CLOCK_H

/* Seconds on CLOCK_MONOTONIC; only differences mean anything. */
double st_now_s(void);

/* Seconds since the epoch (CLOCK_REALTIME). */
double st_wall_s(void);

#endif
