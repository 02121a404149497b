/* The parent-clock bound: an honest solution's batches cost what the baseline's do and are charged
 * nothing, whatever their sizes; work hidden outside the reported calls is charged per call; a
 * quarter of batches held up by a busy host moves nothing; and only a gross gap counts as
 * tampering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "verify/clock_bound.h"

/* A batch of n calls of call_ms each, with harness work h per call, round trip rtt, and `hidden`
 * per call of work the reports leave out. */
static st_batch_rec rec(int n, double call_ms, double h, double rtt, double hidden)
{
	return (st_batch_rec){n, n * (call_ms + h + hidden) + rtt, n * call_ms, 0, 0, -1, n * call_ms};
}

/* A host runner's batch of n calls on a host whose CPUs are oversubscribed `stretch` times: each
 * call takes cpu_ms of CPU time and cpu_ms * stretch of wall time, the harness harness_cpu a call
 * (and that times stretch of wall), and the runner reports report_share of each call's wall time
 * (1: honest; a tenth: a runner whose clock was rewritten). The kernel counts its CPU time and
 * its waits; a trusted runner's calls also report their CPU time. */
static st_batch_rec host_rec(int n, double cpu_ms, double harness_cpu, double stretch,
                             double report_share)
{
	double wall = n * (cpu_ms + harness_cpu) * stretch + 0.05;
	double reported = n * cpu_ms * stretch * report_share;
	/* the waits outside the reported calls, as timing.c's share counts them */
	double waited = (wall - wall / stretch) * (wall - reported) / wall;
	return (st_batch_rec){n, wall, reported, waited, n * (cpu_ms + harness_cpu), n * cpu_ms,
	                       reported};
}

static void test_honest_any_batch_size(void **state)
{
	(void)state;
	st_batch_rec base[10], sol[10];
	for (int i = 0; i < 10; i++) {
		base[i] = rec(200 + 10 * i, 0.01, 0.03, 0.2, 0); /* a fast baseline, big batches */
		sol[i] = rec(1, 3.0, 0.03, 0.2, 0);                /* a slow candidate, single calls */
	}
	st_clock_bound b;
	st_clock_bound_compute(sol, 10, base, 10, 0.2, &b);
	assert_true(b.harness_ms > 0.0299 && b.harness_ms < 0.0301);
	assert_true(b.excess_ms < 1e-9);
	assert_true(st_clock_bound_charge(&b, 3.0, 0) == 0);
	assert_false(st_clock_bound_gross(&b, 3.0, 0));
}

static void test_hidden_work_is_charged(void **state)
{
	(void)state;
	st_batch_rec base[12], sol[12];
	for (int i = 0; i < 12; i++) {
		base[i] = rec(100, 0.05, 0.02, 0.15, 0);
		sol[i] = rec(100, 0.001, 0.02, 0.15, 0.07); /* reports 1 us, does 71 */
	}
	st_clock_bound b;
	st_clock_bound_compute(sol, 12, base, 12, 0.15, &b);
	assert_true(b.excess_ms > 0.0699 && b.excess_ms < 0.0701);
	assert_true(st_clock_bound_charge(&b, 0.001, 0) > 0.0699);
	assert_true(st_clock_bound_gross(&b, 0.001, 0));
	/* A tenth of a call hidden in a 1 ms call: charged, not tampering. */
	for (int i = 0; i < 12; i++)
		sol[i] = rec(20, 1.0, 0.02, 0.15, 0.1);
	st_clock_bound_compute(sol, 12, base, 12, 0.15, &b);
	assert_true(st_clock_bound_charge(&b, 1.0, 0) > 0.0999);
	assert_false(st_clock_bound_gross(&b, 1.0, 0));
}

static void test_busy_host_quarter(void **state)
{
	(void)state;
	st_batch_rec base[16], sol[16];
	for (int i = 0; i < 16; i++) {
		base[i] = rec(50, 0.05, 0.02, 0.15, 0);
		sol[i] = rec(50, 0.05, 0.02, 0.15, 0);
		if (i % 4 == 0)
			sol[i].took_ms += 300; /* held up for 0.3 s */
	}
	st_clock_bound b;
	st_clock_bound_compute(sol, 16, base, 16, 0.15, &b);
	assert_true(st_clock_bound_charge(&b, 0.05, 0) == 0);
	/* Waits the kernel counted are taken off. */
	for (int i = 0; i < 16; i++)
		if (i % 4 == 0)
			sol[i].waited_ms = 300;
	for (int i = 0; i < 16; i++)
		sol[i].took_ms += (i % 4 == 1) ? 300 : 0, sol[i].waited_ms += (i % 4 == 1) ? 300 : 0;
	st_clock_bound_compute(sol, 16, base, 16, 0.15, &b);
	assert_true(b.excess_ms < 1e-9);
}

/* A host backend's harness: 8 ms of flush per call, varying by a millisecond from batch to batch,
 * beside a call of 1 us. Chance alone moves the candidate's median off the baseline's by a good
 * share of a millisecond; that is noise, charged nothing and never called tampering. */
static void test_noisy_harness(void **state)
{
	(void)state;
	st_batch_rec base[12], sol[12];
	for (int i = 0; i < 12; i++) {
		double jb = ((i * 7) % 12 - 5.5) / 5.5, js = ((i * 5 + 3) % 12 - 4.0) / 5.5;
		base[i] = rec(3, 0.001, 8.0 + jb, 0.02, 0);
		sol[i] = rec(3, 0.001, 8.0 + js, 0.02, 0);
	}
	st_clock_bound b;
	st_clock_bound_compute(sol, 12, base, 12, 0.02, &b);
	assert_true(b.excess_ms > 0.05); /* the chance gap itself */
	assert_true(b.noise_ms > b.excess_ms);
	assert_true(st_clock_bound_charge(&b, 0.001, 0) == 0);
	assert_false(st_clock_bound_gross(&b, 0.001, 0));
	/* The same noise with 9 ms a call hidden is still seen. */
	for (int i = 0; i < 12; i++)
		sol[i].took_ms += 3 * 9.0;
	st_clock_bound_compute(sol, 12, base, 12, 0.02, &b);
	assert_true(st_clock_bound_charge(&b, 0.001, 0) > 8.5);
	assert_true(st_clock_bound_gross(&b, 0.001, 0));
}

/* The host backend's harness (4 ms a call of cache flush here) differs between two runners by
 * a share of itself: a gap under harness_share of it is not charged, a larger one still is. */
static void test_harness_share(void **state)
{
	(void)state;
	st_batch_rec base[12], sol[12];
	for (int i = 0; i < 12; i++) {
		base[i] = rec(5, 0.003, 4.0, 0.05, 0);
		sol[i] = rec(5, 0.003, 4.0, 0.05, 0.6); /* the candidate's runner flushes 15 % slower */
	}
	st_clock_bound b;
	st_clock_bound_compute(sol, 12, base, 12, 0.05, &b);
	assert_true(b.excess_ms > 0.599 && b.excess_ms < 0.601);
	assert_true(st_clock_bound_charge(&b, 0.003, 0) > 0.599);
	assert_true(st_clock_bound_charge(&b, 0.003, 0.25) == 0);
	/* The gap stays through the confirmation round too (the same two runners): with the share
	 * it is no tampering, without it it would be. */
	assert_true(st_clock_bound_gross(&b, 0.003, 0));
	assert_false(st_clock_bound_gross(&b, 0.003, 0.25));
	for (int i = 0; i < 12; i++)
		sol[i] = rec(5, 0.003, 4.0, 0.05, 3.0); /* hidden work of most of a harness call */
	st_clock_bound_compute(sol, 12, base, 12, 0.05, &b);
	assert_true(st_clock_bound_charge(&b, 0.003, 0.25) > 2.99);
	assert_true(st_clock_bound_gross(&b, 0.003, 0.25));
}

/* Work hidden on a busy host: its waits for a CPU are taken off the gap, so the excess is its CPU
 * time; it is charged at the batches' stretch (wall over wall less waits), what the same work
 * would have cost inside the timed calls, where an honest solution's waits stay in its times. */
static void test_busy_host_charge_stretched(void **state)
{
	(void)state;
	st_batch_rec base[12], sol[12];
	for (int i = 0; i < 12; i++) {
		base[i] = rec(100, 0.05, 0.02, 0.15, 0);
		/* reports 1 us a call, hides 70 us of CPU work that took 140 us of wall time */
		sol[i] = rec(100, 0.001, 0.02, 0.15, 0.14);
		sol[i].waited_ms = 100 * 0.07;
	}
	st_clock_bound b;
	st_clock_bound_compute(sol, 12, base, 12, 0.15, &b);
	assert_true(b.excess_ms > 0.0699 && b.excess_ms < 0.0701);
	double stretch = sol[0].took_ms / (sol[0].took_ms - sol[0].waited_ms);
	assert_true(b.stretch > stretch - 1e-9 && b.stretch < stretch + 1e-9);
	double charge = st_clock_bound_charge(&b, 0.001, 0);
	assert_true(charge > 0.07 * stretch - 1e-9 && charge < 0.07 * stretch + 1e-9);
	/* The tampering test reads the excess itself (CPU time, waits taken off), not the stretched
	 * charge: the stretch changes what is paid, never what is called hacking. */
	assert_true(st_clock_bound_gross(&b, 0.001, 0));
	/* Waits of most of the wall time (the runner's and the parent's may overlap) cap at 4. */
	for (int i = 0; i < 12; i++)
		sol[i].waited_ms = 0.9 * sol[i].took_ms;
	st_clock_bound_compute(sol, 12, base, 12, 0.15, &b);
	assert_true(b.stretch == 4);
	/* No waits: stretch 1, the excess charged as it is. */
	for (int i = 0; i < 12; i++)
		sol[i] = rec(100, 0.001, 0.02, 0.15, 0.07);
	st_clock_bound_compute(sol, 12, base, 12, 0.15, &b);
	assert_true(b.stretch == 1);
	assert_true(st_clock_bound_charge(&b, 0.001, 0) > 0.0699 &&
	            st_clock_bound_charge(&b, 0.001, 0) < 0.0701);
}

/* The CPU-time bound (host backend) on a host oversubscribed twice over: the wall-clock bound
 * must keep the baseline's harness work whole with its waits, so a runner whose clock reports a
 * tenth keeps much of its time; the kernel's count of its CPU time does not let it. An honest
 * solution, its waits in its reported times and its runner's harness 10 % dearer than the
 * baseline's, is charged nothing by it. */
static void test_cpu_bound(void **state)
{
	(void)state;
	st_batch_rec base[12], sol[12];
	for (int i = 0; i < 12; i++) {
		base[i] = host_rec(20, 1.0, 5.0, 2.0, 1);
		base[i].waited_ms = 0; /* a trusted runner's waits are not counted (timing.c) */
		sol[i] = host_rec(20, 3.0, 5.5, 2.0, 1);
	}
	st_clock_bound b;
	st_clock_bound_compute(sol, 12, base, 12, 0.05, &b);
	assert_true(b.cpu_batches == 12);
	assert_true(b.cpu_harness_ms > 4.999 && b.cpu_harness_ms < 5.001);
	assert_true(b.cpu_excess_ms == 0); /* 8.5 ms of CPU a call, 6 reported, 5 the harness's */
	assert_true(st_clock_bound_charge(&b, 6.0, 0.25) == 0);
	assert_false(st_clock_bound_gross(&b, 6.0, 0.25));
	/* 30 ms of CPU a call (60 of wall, as an honest file's), reported as a tenth */
	for (int i = 0; i < 12; i++)
		sol[i] = host_rec(20, 30.0, 5.0, 2.0, 0.1);
	st_clock_bound_compute(sol, 12, base, 12, 0.05, &b);
	assert_true(b.cpu_excess_ms > 23.99 && b.cpu_excess_ms < 24.01); /* 35 - 6 - 5 */
	assert_true(b.cpu_stretch > 1.999 && b.cpu_stretch < 2.001);
	double charge = st_clock_bound_charge(&b, 6.0, 0.25);
	assert_true(charge > 47.99); /* 6 reported + 48 charged: 0.9 of the honest file's 60 */
	assert_true(charge >= b.excess_ms * b.stretch); /* at least what the wall clock says */
	/* reporting a hundredth, the reports leave out far more than four times what they show */
	for (int i = 0; i < 12; i++)
		sol[i] = host_rec(20, 30.0, 5.0, 2.0, 0.01);
	st_clock_bound_compute(sol, 12, base, 12, 0.05, &b);
	assert_true(st_clock_bound_gross(&b, 0.6, 0.25));
	for (int i = 0; i < 12; i++)
		sol[i] = host_rec(20, 30.0, 5.0, 2.0, 0.1);
	/* The CPU-time bound allows twice the wall clock's share of the harness (two runners' harness
	 * CPU differs as their wall time does): a 30 % dearer harness is not charged by it, 60 % is. */
	for (int i = 0; i < 12; i++)
		sol[i] = host_rec(20, 3.0, 6.5, 1.0, 1);
	st_clock_bound_compute(sol, 12, base, 12, 0.05, &b);
	assert_true(b.cpu_excess_ms > 1.499 && b.cpu_excess_ms < 1.501);
	b.excess_ms = 0; /* the wall clock's bound out of the way */
	assert_true(st_clock_bound_charge(&b, 3.0, 0.25) == 0);
	b.cpu_excess_ms = 3.0;
	assert_true(st_clock_bound_charge(&b, 3.0, 0.25) > 2.99);
	for (int i = 0; i < 12; i++)
		sol[i] = host_rec(20, 30.0, 5.0, 2.0, 0.1);
	/* A baseline batch without its calls' CPU time: no CPU-time bound, the wall clock's alone. */
	base[3].call_cpu_ms = -1;
	st_clock_bound_compute(sol, 12, base, 12, 0.05, &b);
	assert_int_equal(b.cpu_batches, 0);
	assert_true(b.cpu_excess_ms == 0);
	assert_true(st_clock_bound_charge(&b, 6.0, 0.25) < charge);
}

static void test_nothing_to_compare(void **state)
{
	(void)state;
	st_batch_rec one = rec(1, 1, 0, 0, 5);
	st_clock_bound b;
	st_clock_bound_compute(&one, 1, NULL, 0, 0.1, &b);
	assert_int_equal(b.batches, 0);
	assert_true(st_clock_bound_charge(&b, 1, 0) == 0);
	assert_false(st_clock_bound_gross(&b, 0, 0));
}

/* A round's time from its figures: what the verdict weighs (st_round_time_combine). */
static st_round_time round_of(double median, double floor, double charge)
{
	return (st_round_time){.samples = 40, .median_ms = median, .floor_ms = floor,
	                       .charge_ms = charge};
}

static void test_rounds_combined(void **state)
{
	(void)state;
	/* one round: its floor (the front-loading bound) plus its charge */
	st_round_time one = round_of(1.0, 1.2, 0.3);
	assert_true(st_round_time_combine(&one, NULL) == 1.5);
	/* a confirmation that never ran changes nothing */
	st_round_time none = {0};
	assert_true(st_round_time_combine(&one, &none) == 1.5);
	/* hidden work in the main round (reports of 0.1 ms, 0.9 charged), honest when re-timed:
	 * the work's time, whichever round is believed; the main round's small median is never
	 * paired with the confirmation's empty charge */
	st_round_time hid = round_of(0.1, 0.1, 0.9), honest = round_of(1.0, 1.0, 0);
	double t = st_round_time_combine(&hid, &honest);
	assert_true(t > 0.999 && t < 1.001);
	/* and the other way round: honest first (no charge), hiding when re-timed */
	assert_true(st_round_time_combine(&honest, &hid) == 1.0);
	/* an honest candidate charged by a host busy through the main round keeps its own time
	 * when the confirmation sees no gap, and is never given less than its main round's median */
	st_round_time busy = round_of(1.0, 1.0, 4.5), calm = round_of(0.95, 0.95, 0);
	assert_true(st_round_time_combine(&busy, &calm) == 1.0);
	/* a confirmation charged more than the main round takes nothing back */
	st_round_time worse = round_of(1.0, 1.0, 6.0);
	assert_true(st_round_time_combine(&busy, &worse) == 5.5);
	/* a front-loading floor holds through the confirmation */
	st_round_time front = round_of(0.2, 1.1, 0.4);
	assert_true(st_round_time_combine(&front, &calm) == 1.1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_honest_any_batch_size),
		cmocka_unit_test(test_harness_share),
		cmocka_unit_test(test_hidden_work_is_charged),
		cmocka_unit_test(test_busy_host_quarter),
		cmocka_unit_test(test_busy_host_charge_stretched),
		cmocka_unit_test(test_noisy_harness),
		cmocka_unit_test(test_cpu_bound),
		cmocka_unit_test(test_nothing_to_compare),
		cmocka_unit_test(test_rounds_combined),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
