/* Unit tests for st_proc_run: exit codes and signals, combined output, truncation without
 * blocking the child, timeouts that kill the whole process group, exec failures reported as
 * errors, no fd leaks, and concurrent use from several threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/proc.h"

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static st_status sh(const char *script, double timeout, size_t max_out, st_proc_result *r,
                    st_err *err)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	return st_proc_run(argv, NULL, timeout, max_out, r, err);
}

static void test_exit_code(void **state)
{
	(void)state;
	st_proc_result r;
	st_err err;
	assert_int_equal(sh("exit 3", 10, 1024, &r, &err), ST_OK);
	assert_int_equal(r.exit_code, 3);
	assert_int_equal(r.signal, 0);
	assert_int_equal(r.timed_out, 0);
	assert_int_equal(r.out_len, 0);
	assert_string_equal(r.out, "");
	st_proc_result_free(&r);
	assert_null(r.out);

	assert_int_equal(sh("true", 10, 1024, &r, &err), ST_OK);
	assert_int_equal(r.exit_code, 0);
	assert_true(r.wall_s >= 0 && r.wall_s < 5);
	st_proc_result_free(&r);
}

static void test_signal(void **state)
{
	(void)state;
	st_proc_result r;
	st_err err;
	assert_int_equal(sh("kill -TERM $$", 10, 1024, &r, &err), ST_OK);
	assert_int_equal(r.signal, SIGTERM);
	assert_int_equal(r.timed_out, 0);
	st_proc_result_free(&r);
}

static void test_output_capture(void **state)
{
	(void)state;
	st_proc_result r;
	st_err err;
	assert_int_equal(sh("echo out; echo err >&2; echo out2", 10, 1024, &r, &err), ST_OK);
	assert_string_equal(r.out, "out\nerr\nout2\n");
	assert_int_equal(r.out_len, 13);
	st_proc_result_free(&r);

	/* stdin is /dev/null: cat must see EOF at once rather than hang. */
	char *argv[] = { "cat", NULL };
	assert_int_equal(st_proc_run(argv, NULL, 5, 1024, &r, &err), ST_OK);
	assert_int_equal(r.timed_out, 0);
	assert_int_equal(r.exit_code, 0);
	assert_int_equal(r.out_len, 0);
	st_proc_result_free(&r);

	/* cwd */
	char *pwd[] = { "pwd", NULL };
	assert_int_equal(st_proc_run(pwd, "/", 5, 1024, &r, &err), ST_OK);
	assert_string_equal(r.out, "/\n");
	st_proc_result_free(&r);
}

static void test_truncation(void **state)
{
	(void)state;
	st_proc_result r;
	st_err err;
	/* 4 MB through a 64 KiB pipe: the child only finishes if we keep draining. */
	assert_int_equal(sh("head -c 4000000 /dev/zero | tr '\\0' x; echo done >&2", 20, 100, &r,
	                    &err),
	                 ST_OK);
	assert_int_equal(r.timed_out, 0);
	assert_int_equal(r.exit_code, 0);
	assert_int_equal(r.out_len, 100);
	assert_int_equal(strlen(r.out), 100);
	for (int i = 0; i < 100; i++)
		assert_int_equal(r.out[i], 'x');
	st_proc_result_free(&r);

	/* max_output 0 keeps nothing but still runs to the end. */
	assert_int_equal(sh("echo hi; exit 4", 10, 0, &r, &err), ST_OK);
	assert_int_equal(r.out_len, 0);
	assert_string_equal(r.out, "");
	assert_int_equal(r.exit_code, 4);
	st_proc_result_free(&r);

	/* Larger than the first buffer chunk: growth keeps every byte. */
	assert_int_equal(sh("head -c 200000 /dev/zero | tr '\\0' y", 20, 1 << 20, &r, &err), ST_OK);
	assert_int_equal(r.out_len, 200000);
	assert_int_equal(r.out[199999], 'y');
	st_proc_result_free(&r);
}

static int proc_alive(long pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *rp = strrchr(buf, ')');
	/* a zombie waiting for a non-reaping init is as good as dead */
	return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

static void test_timeout_kills_group(void **state)
{
	(void)state;
	st_proc_result r;
	st_err err;
	double t0 = st_now_s();
	assert_int_equal(sh("sleep 30 & echo $!; sleep 30", 0.5, 1024, &r, &err), ST_OK);
	double dt = st_now_s() - t0;
	assert_int_equal(r.timed_out, 1);
	assert_true(dt < 1.5);
	assert_true(r.wall_s >= 0.45);
	long bg = strtol(r.out, NULL, 10);
	assert_true(bg > 0);
	st_proc_result_free(&r);
	/* The background sleep was in the group: it must be gone too. */
	int alive = 1;
	for (int i = 0; i < 100 && alive; i++) {
		alive = proc_alive(bg);
		if (alive)
			usleep(10000);
	}
	assert_false(alive);
}

static void test_lingering_grandchild(void **state)
{
	(void)state;
	st_proc_result r;
	st_err err;
	/* The child exits at once but its background job holds the pipe open: we must not wait
	 * for the full timeout, and it is not a timeout. */
	double t0 = st_now_s();
	assert_int_equal(sh("sleep 30 & echo started; exit 0", 20, 1024, &r, &err), ST_OK);
	assert_true(st_now_s() - t0 < 5);
	assert_int_equal(r.timed_out, 0);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out, "started\n");
	st_proc_result_free(&r);
}

static void test_missing_program(void **state)
{
	(void)state;
	st_proc_result r;
	st_err err = { "" };
	char *argv[] = { "no-such-program-st-xyz", "--version", NULL };
	assert_int_equal(st_proc_run(argv, NULL, 5, 1024, &r, &err), ST_E_SYSTEM);
	assert_string_equal(err.msg, "cannot run 'no-such-program-st-xyz': No such file or directory");
	assert_null(r.out);

	char *argv2[] = { "true", NULL };
	assert_int_equal(st_proc_run(argv2, "/no/such/dir", 5, 1024, &r, &err), ST_E_SYSTEM);
	assert_non_null(strstr(err.msg, "/no/such/dir"));
	assert_non_null(strstr(err.msg, "No such file or directory"));

	char *argv3[] = { "/etc/passwd", NULL };
	assert_int_equal(st_proc_run(argv3, NULL, 5, 1024, &r, &err), ST_E_SYSTEM);
	assert_non_null(strstr(err.msg, "Permission denied"));

	char *argv4[] = { NULL };
	assert_int_equal(st_proc_run(argv4, NULL, 5, 1024, &r, &err), ST_E_INVALID);
}

static void test_no_fd_leak(void **state)
{
	(void)state;
	int before = count_fds();
	for (int i = 0; i < 20; i++) {
		st_proc_result r;
		st_err err;
		assert_int_equal(sh("echo x", 5, 16, &r, &err), ST_OK);
		st_proc_result_free(&r);
		char *argv[] = { "no-such-program-st-xyz", NULL };
		assert_int_equal(st_proc_run(argv, NULL, 5, 16, &r, &err), ST_E_SYSTEM);
	}
	st_proc_result r;
	st_err err;
	assert_int_equal(sh("sleep 5", 0.05, 16, &r, &err), ST_OK);
	assert_int_equal(r.timed_out, 1);
	st_proc_result_free(&r);
	assert_int_equal(count_fds(), before);
}

/* The child must see only stdin/stdout/stderr: an fd leaked from the parent would keep pipes of
 * other threads' children open. */
static void test_child_fds(void **state)
{
	(void)state;
	st_proc_result r;
	st_err err;
	assert_int_equal(sh("ls /proc/self/fd | wc -l", 5, 64, &r, &err), ST_OK);
	/* 0, 1, 2 and the fd ls uses to read the folder */
	assert_int_equal(atoi(r.out), 4);
	st_proc_result_free(&r);
}

static void *thread_main(void *arg)
{
	long id = (long)arg;
	char script[64], want[64];
	snprintf(script, sizeof script, "echo thread-%ld", id);
	snprintf(want, sizeof want, "thread-%ld\n", id);
	long bad = 0;
	for (int i = 0; i < 15; i++) {
		st_proc_result r;
		st_err err;
		if (sh(script, 10, 64, &r, &err) != ST_OK) {
			bad++;
			continue;
		}
		if (strcmp(r.out, want) != 0 || r.exit_code != 0 || r.timed_out)
			bad++;
		st_proc_result_free(&r);
	}
	return (void *)bad;
}

static void test_threads(void **state)
{
	(void)state;
	pthread_t t[6];
	for (long i = 0; i < 6; i++)
		assert_int_equal(pthread_create(&t[i], NULL, thread_main, (void *)i), 0);
	for (int i = 0; i < 6; i++) {
		void *bad;
		assert_int_equal(pthread_join(t[i], &bad), 0);
		assert_int_equal((long)bad, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_code),
		cmocka_unit_test(test_signal),
		cmocka_unit_test(test_output_capture),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_timeout_kills_group),
		cmocka_unit_test(test_lingering_grandchild),
		cmocka_unit_test(test_missing_program),
		cmocka_unit_test(test_no_fd_leak),
		cmocka_unit_test(test_child_fds),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
