/* The neighbours' list on real processes: every joined runner but the caller's own is stopped
 * and resumed; one that left is never signalled again; a runner leaves when it is reaped; a
 * full list refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child_proc.h"
#include "verify/neighbours.h"
#include "verify/runner_client.h"

/* Is pid stopped ('T')? Read once it is as `want` says, or after a second: a signal lands a
 * little after it is sent. */
static int stopped(pid_t pid, int want)
{
	for (int k = 0; k < 200; k++) {
		if ((state_of(pid) == 'T') == want)
			return want;
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
	return !want;
}

static void end(pid_t pid)
{
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_stop_all_but_own(void **state)
{
	(void)state;
	st_neighbours nb;
	assert_int_equal(st_neighbours_init(&nb), 0);
	pid_t a = idle_child(), b = idle_child(), own = idle_child();
	assert_int_equal(st_neighbours_join(&nb, a), 0);
	assert_int_equal(st_neighbours_join(&nb, b), 0);
	assert_int_equal(st_neighbours_join(&nb, own), 0);
	assert_int_equal(st_neighbours_stop(&nb, own), 2);
	assert_true(stopped(a, 1));
	assert_true(stopped(b, 1));
	assert_false(stopped(own, 0));
	st_neighbours_resume(&nb, own);
	assert_false(stopped(a, 0));
	assert_false(stopped(b, 0));
	/* b leaves: a later stop passes it by */
	st_neighbours_leave(&nb, b);
	st_neighbours_leave(&nb, 12345678); /* never joined: ignored */
	assert_int_equal(st_neighbours_stop(&nb, 0), 2); /* a and own: no own given */
	assert_true(stopped(a, 1));
	assert_false(stopped(b, 0));
	st_neighbours_resume(&nb, 0);
	assert_false(stopped(a, 0));
	assert_false(stopped(own, 0));
	end(a);
	end(b);
	end(own);
	st_neighbours_free(&nb);
}

static void test_full_and_bad(void **state)
{
	(void)state;
	st_neighbours nb;
	assert_int_equal(st_neighbours_init(&nb), 0);
	assert_int_equal(st_neighbours_join(&nb, 0), -1);
	assert_int_equal(st_neighbours_join(&nb, -5), -1);
	for (int i = 0; i < ST_NEIGHBOURS_MAX; i++)
		assert_int_equal(st_neighbours_join(&nb, 4000000 + i), 0);
	assert_int_equal(st_neighbours_join(&nb, 4100000), -1);
	st_neighbours_free(&nb);
}

/* A runner that joined leaves when it is stopped and reaped, before its pid can be reused. */
static void test_runner_leaves_when_reaped(void **state)
{
	(void)state;
	st_neighbours nb;
	assert_int_equal(st_neighbours_init(&nb), 0);
	st_runner r;
	memset(&r, 0, sizeof r);
	r.sock = -1;
	r.pid = idle_child();
	r.alive = 1;
	assert_int_equal(st_runner_join(&r, &nb), 0);
	assert_int_equal(st_runner_join(&r, &nb), -1); /* once */
	assert_int_equal(nb.n, 1);
	kill(-r.pid, SIGKILL);
	r.alive = 0; /* gone: st_runner_stop asks nothing of it */
	st_runner_stop(&r);
	assert_int_equal(nb.n, 0);
	assert_null(r.neighbours);
	st_neighbours_free(&nb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stop_all_but_own),
		cmocka_unit_test(test_full_and_bad),
		cmocka_unit_test(test_runner_leaves_when_reaped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
