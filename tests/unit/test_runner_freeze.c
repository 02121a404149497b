/* st_runner_freeze and st_runner_thaw on a real process: a busy child of two threads in its own
 * process group is seen stopped (every thread), burns no CPU while stopped, runs again after the
 * thaw; a runner that is gone or under ncu is not asked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cpus.h"
#include "verify/runner_client.h"

static void *spin(void *arg)
{
	(void)arg;
	for (volatile unsigned long x = 0;; x++)
		;
	return NULL;
}

static pid_t busy_child(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion must not leave it spinning */
		pthread_t t;
		pthread_create(&t, NULL, spin, NULL);
		spin(NULL);
	}
	setpgid(pid, pid);
	return pid;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The child's CPU time (all threads) over ms milliseconds, from /proc/PID/stat. */
static double cpu_ms_over(pid_t pid, int ms)
{
	double before = 0, after = 0;
	for (int k = 0; k < 2; k++) {
		char path[64], line[1024];
		snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
		FILE *f = fopen(path, "r");
		assert_non_null(f);
		assert_non_null(fgets(line, sizeof line, f));
		fclose(f);
		unsigned long ut = 0, st = 0;
		const char *p = strrchr(line, ')');
		assert_non_null(p);
		/* fields 14 and 15 (utime, stime), counting from the state as field 3 */
		assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
		                        &ut, &st), 2);
		double ms_now = (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
		if (k == 0) {
			before = ms_now;
			sleep_ms(ms);
		} else {
			after = ms_now;
		}
	}
	return after - before;
}

static void test_freeze_and_thaw(void **state)
{
	(void)state;
	st_runner r;
	memset(&r, 0, sizeof r);
	r.pid = busy_child();
	r.alive = 1;
	assert_true(r.pid > 0);
	sleep_ms(50); /* both threads running */
	assert_int_equal(st_runner_freeze(&r), 1);
	assert_true(r.frozen);
	assert_true(cpu_ms_over(r.pid, 300) < 20);
	assert_int_equal(st_runner_freeze(&r), 1); /* again: still stopped, no second signal */
	st_runner_thaw(&r);
	assert_false(r.frozen);
	assert_true(cpu_ms_over(r.pid, 300) > 100);
	kill(-r.pid, SIGKILL);
	waitpid(r.pid, NULL, 0);
}

static void test_not_asked(void **state)
{
	(void)state;
	st_runner r;
	memset(&r, 0, sizeof r);
	r.pid = -1;
	assert_int_equal(st_runner_freeze(&r), -1); /* gone */
	r.pid = getpid();
	r.alive = 1;
	snprintf(r.ncu, sizeof r.ncu, "/usr/bin/ncu");
	assert_int_equal(st_runner_freeze(&r), -1); /* under ncu: the pid is ncu's */
	assert_false(r.frozen);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_freeze_and_thaw),
		cmocka_unit_test(test_not_asked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
