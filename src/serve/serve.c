/* st_serve_run: start the service and its HTTP front, wait for SIGTERM or SIGINT, drain, stop.
 * The signals are blocked in every thread and taken here with sigwait, so no handler runs in
 * the middle of a worker's work. */
#include "serve.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "serve_log.h"
#include "service.h"

void st_serve_opts_default(st_serve_opts *o)
{
	memset(o, 0, sizeof *o);
	o->listen = "127.0.0.1:8421";
	o->queue_max = 256;
	o->body_max = (size_t)1 << 20;
	o->deadline_s = 600;
	o->retry_after_s = 2;
	o->admit_wait_s = 1;
	o->judges = 4;
	o->keep_runners = 48;
	o->spares = 2;
	st_verify_opts_default(&o->verify);
	/* A verdict for a trainer: correctness and speed. The profile costs a second run, and a
	 * reward needs the speedup to about 1 %, not the 0.5 % of a benchmark: timing stops at
	 * 100 ms of GPU time per solution once the median is that certain. */
	o->verify.profile = 0;
	o->verify.stop.min_time_ms = 100;
	o->verify.stop.max_rse = 0.01;
	st_reward_opts_default(&o->reward);
}

st_status st_serve_run(const st_serve_opts *o, st_err *err)
{
	sigset_t sigs, old;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	signal(SIGPIPE, SIG_IGN);
	st_service *svc = NULL;
	st_status s = st_service_start(o, &svc, err);
	st_http *h = NULL;
	if (!s)
		s = st_http_start(o, svc, &h, err);
	if (s) {
		st_service_stop(svc);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return s;
	}
	st_serve_log(o, "listening on http://%.*s:%d (%s backend)",
	             (int)(strrchr(o->listen, ':') - o->listen), o->listen, st_http_port(h),
	             o->verify.backend);
	if (o->ready)
		o->ready(st_http_port(h), o->ready_arg);
	int sig = 0;
	sigwait(&sigs, &sig);
	st_serve_log(o, "%s: draining (new requests get 503; admitted ones are finished and answered)",
	         sig == SIGTERM ? "SIGTERM" : "SIGINT");
	st_service_drain(svc);
	st_http_stop(h);
	st_service_stop(svc);
	st_serve_log(o, "stopped");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ST_OK;
}
