/* The runner pool with real host-backend runners: spares are started ahead once a kind is asked
 * for, a loaded runner is found by its key only, a runner that died while kept is never handed
 * out, the loaded ones beyond the cap go least recently used first, spares taken in a burst are
 * started again to the count and no further, a take waits for a spare being started (not for a
 * kind whose starts fail), and freeing the pool stops them all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "verify/runner_pool.h"

#define WAIT_FOR(cond, s) do { for (int i_ = 0; i_ < (s) * 100 && !(cond); i_++) usleep(10000); } while (0)

static int spares(st_runner_pool *p)
{
	st_runner_pool_stats st;
	st_runner_pool_stats_get(p, &st);
	return st.spares;
}

static int loaded(st_runner_pool *p)
{
	st_runner_pool_stats st;
	st_runner_pool_stats_get(p, &st);
	return st.loaded;
}

static void test_spares_started_ahead(void **state)
{
	(void)state;
	st_runner_pool *p = st_runner_pool_new(2, 4);
	assert_non_null(p);
	st_runner r;
	/* the first ask finds nothing, and tells the pool which kind to keep */
	assert_int_equal(st_runner_pool_take_spare(p, "host", 0, NULL, "candidate", &r), 0);
	WAIT_FOR(spares(p) == 2, 30);
	assert_int_equal(spares(p), 2);
	assert_int_equal(st_runner_pool_take_spare(p, "host", 0, NULL, "candidate", &r), 1);
	assert_true(r.alive);
	assert_string_equal(r.label, "candidate");
	assert_non_null(r.info); /* its hello was read */
	/* another kind (other flags) is not this one */
	st_runner other;
	assert_int_equal(st_runner_pool_take_spare(p, "host", 2, NULL, "x", &other), 0);
	/* the taken one is replaced */
	WAIT_FOR(spares(p) >= 3, 30);
	st_runner_pool_stats st;
	st_runner_pool_stats_get(p, &st);
	assert_true(st.spare_hits == 1 && st.spare_misses == 2 && st.started >= 3);
	st_runner_stop(&r);
	st_runner_pool_free(p);
}

/* Spares taken in a burst are started again side by side (several starters a kind), and the
 * starters together stop at the count: none started beyond it. */
static void test_burst_refilled_to_the_count(void **state)
{
	(void)state;
	st_runner_pool *p = st_runner_pool_new(3, 0);
	st_runner r[3];
	assert_int_equal(st_runner_pool_take_spare(p, "host", 0, NULL, "candidate", &r[0]), 0);
	WAIT_FOR(spares(p) == 3, 30);
	for (int i = 0; i < 3; i++)
		assert_int_equal(st_runner_pool_take_spare(p, "host", 0, NULL, "candidate", &r[i]), 1);
	WAIT_FOR(spares(p) == 3, 30);
	usleep(300000); /* time for a starter that overshot to show it */
	st_runner_pool_stats st;
	st_runner_pool_stats_get(p, &st);
	assert_int_equal(st.spares, 3);
	assert_int_equal(st.started, 6);
	for (int i = 0; i < 3; i++)
		st_runner_stop(&r[i]);
	st_runner_pool_free(p);
}

/* Once a kind has starters, a take that finds no spare waits for the one being started instead
 * of leaving the caller to start its own; a kind whose starts fail is not waited for. */
static void test_take_waits_for_a_start_under_way(void **state)
{
	(void)state;
	st_runner_pool *p = st_runner_pool_new(1, 0);
	st_runner r[3];
	assert_int_equal(st_runner_pool_take_spare(p, "host", 0, NULL, "candidate", &r[0]), 0);
	WAIT_FOR(spares(p) == 1, 30);
	assert_int_equal(st_runner_pool_take_spare(p, "host", 0, NULL, "candidate", &r[0]), 1);
	/* the pool is empty now and its one starter has just been told to start another */
	assert_int_equal(st_runner_pool_take_spare(p, "host", 0, NULL, "candidate", &r[1]), 1);
	assert_true(r[1].alive);
	st_runner_pool_stats st;
	st_runner_pool_stats_get(p, &st);
	assert_int_equal(st.spare_hits, 2);
	assert_int_equal(st.spare_misses, 1);
	/* a backend that cannot start: the first ask makes its starters, whose start fails; after
	 * that a take returns at once rather than waiting the 15 s */
	assert_int_equal(st_runner_pool_take_spare(p, "nosuch", 0, NULL, "candidate", &r[2]), 0);
	usleep(500000);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(st_runner_pool_take_spare(p, "nosuch", 0, NULL, "candidate", &r[2]), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 5);
	st_runner_stop(&r[0]);
	st_runner_stop(&r[1]);
	st_runner_pool_free(p);
}

static void test_loaded_by_key(void **state)
{
	(void)state;
	st_runner_pool *p = st_runner_pool_new(0, 2); /* no spares: only what is given back */
	st_runner a, b, c, got;
	assert_int_equal(st_runner_start(&a, "host", "reference", 0, NULL, NULL) == ST_OK, 1);
	assert_int_equal(st_runner_hello(&a, 30, NULL), ST_OK);
	pid_t pid_a = a.pid;
	st_runner_pool_give(p, &a, "host", 0, NULL, "ref-key");
	assert_int_equal(a.pid, -1); /* taken over */
	assert_int_equal(loaded(p), 1);
	assert_int_equal(st_runner_pool_take_loaded(p, "other-key", "reference", &got), 0);
	assert_int_equal(st_runner_pool_take_loaded(p, "ref-key", "reference", &got), 1);
	assert_int_equal(got.pid, pid_a);
	/* a kept runner that died is not handed out */
	st_runner_pool_give(p, &got, "host", 0, NULL, "ref-key");
	kill(-pid_a, SIGKILL);
	usleep(100000);
	assert_int_equal(st_runner_pool_take_loaded(p, "ref-key", "reference", &got), 0);
	assert_int_equal(loaded(p), 0);
	/* beyond the cap, the least recently kept goes */
	assert_int_equal(st_runner_start(&a, "host", "r", 0, NULL, NULL) == ST_OK, 1);
	assert_int_equal(st_runner_start(&b, "host", "r", 0, NULL, NULL) == ST_OK, 1);
	assert_int_equal(st_runner_start(&c, "host", "r", 0, NULL, NULL) == ST_OK, 1);
	assert_int_equal(st_runner_hello(&a, 30, NULL) | st_runner_hello(&b, 30, NULL) |
	                 st_runner_hello(&c, 30, NULL), ST_OK);
	pid_t pid_b = b.pid, pid_c = c.pid;
	st_runner_pool_give(p, &a, "host", 0, NULL, "k1");
	usleep(2000);
	st_runner_pool_give(p, &b, "host", 0, NULL, "k2");
	usleep(2000);
	st_runner_pool_give(p, &c, "host", 0, NULL, "k3");
	assert_int_equal(loaded(p), 2);
	assert_int_equal(st_runner_pool_take_loaded(p, "k1", "r", &got), 0);
	assert_int_equal(st_runner_pool_take_loaded(p, "k3", "r", &got), 1);
	assert_int_equal(got.pid, pid_c);
	st_runner_stop(&got);
	/* freeing stops what is kept (k2's runner) */
	assert_int_equal(kill(pid_b, 0), 0);
	st_runner_pool_free(p);
	WAIT_FOR(kill(pid_b, 0) != 0, 5);
	assert_int_not_equal(kill(pid_b, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spares_started_ahead),
		cmocka_unit_test(test_burst_refilled_to_the_count),
		cmocka_unit_test(test_take_waits_for_a_start_under_way),
		cmocka_unit_test(test_loaded_by_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
