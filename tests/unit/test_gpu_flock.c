/* Unit tests for the GPU's lock across processes (src/verify/gpu_flock.c) and a verify's hold
 * taken on it (gpu_hold.c): a bad GPU identity is refused, the folder and files are made for
 * every user (missing parents too, as stitch's other folders), an exclusive hold keeps other
 * processes out and shared ones share, a waiter gets the lock when the holder dies, a waiting
 * exclusive taker goes before shared takers that come after it, and a take with a limit gives up
 * at it. Other processes are real ones (fork), probing the lock file with flock(2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "verify/gpu_flock.h"
#include "verify/gpu_hold.h"

#define KEY "GPU-0a1b2c3d-test"

static char base[64], dir[256];

static int setup(void **state)
{
	(void)state;
	snprintf(base, sizeof base, "/tmp/st-flock-XXXXXX");
	assert_non_null(mkdtemp(base));
	snprintf(dir, sizeof dir, "%s/locks", base);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* Can another process take the lock now, shared or exclusive? It lets go at once. */
static int other_can_take(int exclusive)
{
	pid_t pid = fork();
	if (pid == 0) {
		char path[400];
		snprintf(path, sizeof path, "%s/%s.lock", dir, KEY);
		int fd = open(path, O_RDONLY);
		_exit(fd >= 0 && flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void test_bad_key_refused(void **state)
{
	(void)state;
	st_gpu_flock f;
	char why[200];
	assert_int_equal(st_gpu_flock_open(&f, dir, "../etc/x", why, sizeof why), EINVAL);
	assert_non_null(strstr(why, "GPU identity"));
	assert_int_equal(st_gpu_flock_open(&f, dir, NULL, why, sizeof why), EINVAL);
	assert_int_equal(st_gpu_flock_open(&f, dir, "", why, sizeof why), EINVAL);
	assert_int_equal(f.fd, -1);
	st_gpu_flock_close(&f); /* closing one that never opened is harmless */
}

static void test_made_for_every_user(void **state)
{
	(void)state;
	st_gpu_flock f;
	char why[200], path[400];
	assert_int_equal(st_gpu_flock_open(&f, dir, KEY, why, sizeof why), 0);
	struct stat st;
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 01777);
	snprintf(path, sizeof path, "%s/%s.lock", dir, KEY);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	/* opened again (the file exists now) */
	st_gpu_flock g;
	assert_int_equal(st_gpu_flock_open(&g, dir, KEY, why, sizeof why), 0);
	st_gpu_flock_close(&g);
	st_gpu_flock_close(&f);
	/* a file where the folder should be */
	snprintf(path, sizeof path, "%s/plain", dir);
	FILE *p = fopen(path, "w");
	assert_non_null(p);
	fclose(p);
	assert_int_equal(st_gpu_flock_open(&f, path, KEY, why, sizeof why), ENOTDIR);
	/* a folder under it cannot be made either, and the message names the file in the way */
	snprintf(path, sizeof path, "%s/plain/locks", dir);
	assert_int_not_equal(st_gpu_flock_open(&f, path, KEY, why, sizeof why), 0);
	assert_non_null(strstr(why, "plain"));
	assert_int_equal(f.fd, -1);
}

/* A lock folder whose parents do not exist yet: the parents are made as stitch makes any
 * folder (0755), the lock folder itself shared (01777), a trailing slash the same folder. */
static void test_parents_made(void **state)
{
	(void)state;
	st_gpu_flock f;
	char why[200], locks[480], parent[400];
	snprintf(parent, sizeof parent, "%s/a/b", dir);
	snprintf(locks, sizeof locks, "%s/locks/", parent);
	assert_int_equal(st_gpu_flock_open(&f, locks, KEY, why, sizeof why), 0);
	struct stat st;
	const mode_t mask = umask(0);
	umask(mask);
	assert_int_equal(stat(parent, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755 & ~mask);
	assert_int_equal(stat(locks, &st), 0);
	assert_int_equal(st.st_mode & 07777, 01777);
	char path[560];
	snprintf(path, sizeof path, "%s%s.lock", locks, KEY);
	assert_int_equal(stat(path, &st), 0);
	assert_true(f.fd >= 0);
	st_gpu_flock_close(&f);
}

static void test_exclusive_and_shared(void **state)
{
	(void)state;
	st_gpu_flock a, b;
	char why[200];
	assert_int_equal(st_gpu_flock_open(&a, dir, KEY, why, sizeof why), 0);
	assert_int_equal(st_gpu_flock_open(&b, dir, KEY, why, sizeof why), 0);
	assert_true(other_can_take(1));
	assert_true(st_gpu_flock_take(&a, 1, 0, NULL, NULL) >= 0);
	assert_false(other_can_take(0));
	assert_false(other_can_take(1));
	assert_true(st_gpu_flock_take(&a, 0, 0, NULL, NULL) < 0); /* already held */
	st_gpu_flock_give(&a);
	assert_true(other_can_take(1));
	/* two shared holds at once, from two verifies of this process */
	assert_true(st_gpu_flock_take(&a, 0, 0, NULL, NULL) < 0.5);
	assert_true(st_gpu_flock_take(&b, 0, 0, NULL, NULL) < 0.5);
	assert_true(other_can_take(0));
	assert_false(other_can_take(1));
	st_gpu_flock_give(&a);
	assert_false(other_can_take(1));
	st_gpu_flock_close(&b); /* closing gives the hold up */
	assert_true(other_can_take(1));
	st_gpu_flock_close(&a);
}

/* A child that takes the lock (exclusive or shared) and writes the time it got it on fd `out`,
 * holds it hold_ms, then dies without giving it up when `die`, else gives it up and exits. */
static pid_t taker(int exclusive, int hold_ms, int die, int out)
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		st_gpu_flock f;
		char why[200];
		if (st_gpu_flock_open(&f, dir, KEY, why, sizeof why) ||
		    st_gpu_flock_take(&f, exclusive, 0, NULL, NULL) < 0)
			_exit(2);
		double got = st_now_s();
		if (out >= 0 && write(out, &got, sizeof got) != sizeof got)
			_exit(3);
		sleep_ms(hold_ms);
		if (die)
			_exit(0);
		st_gpu_flock_close(&f);
		_exit(0);
	}
	return pid;
}

/* f opened on the test's folder and key */
static void opened(st_gpu_flock *f)
{
	char why[200];
	assert_int_equal(st_gpu_flock_open(f, dir, KEY, why, sizeof why), 0);
}

/* A taker that has the lock exclusive by the time this returns; *got: when it got it. */
static pid_t holder(int hold_ms, int die, double *got)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t c = taker(1, hold_ms, die, p[1]);
	assert_int_equal(read(p[0], got, sizeof *got), (ssize_t)sizeof *got);
	close(p[0]);
	close(p[1]);
	return c;
}

static void test_holder_dies(void **state)
{
	(void)state;
	double got;
	pid_t c = holder(300, 1, &got);
	st_gpu_flock f;
	opened(&f);
	double waited = st_gpu_flock_take(&f, 0, 0, NULL, NULL);
	double done = st_now_s();
	assert_true(waited >= 0);
	assert_true(done - got >= 0.29); /* the child held it for 300 ms, then died holding it */
	assert_true(done - got < 5);
	int st;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st_gpu_flock_close(&f);
}

/* Shared hold A; an exclusive taker W waits for it; a shared taker R comes after W: without the
 * turnstile R would get in beside A at once and W would wait for both. */
static void test_exclusive_goes_first(void **state)
{
	(void)state;
	st_gpu_flock a;
	opened(&a);
	assert_true(st_gpu_flock_take(&a, 0, 0, NULL, NULL) >= 0);
	int pw[2], pr[2];
	assert_int_equal(pipe(pw), 0);
	assert_int_equal(pipe(pr), 0);
	pid_t w = taker(1, 200, 0, pw[1]);
	/* W is waiting once it holds the turnstile (a shared probe of it fails) */
	char path[400];
	snprintf(path, sizeof path, "%s/%s.turnstile", dir, KEY);
	int probe = open(path, O_RDONLY);
	assert_true(probe >= 0);
	int k = 0;
	for (; k < 1000 && flock(probe, LOCK_SH | LOCK_NB) == 0; k++) {
		flock(probe, LOCK_UN);
		sleep_ms(5);
	}
	close(probe);
	assert_true(k < 1000);
	pid_t r = taker(0, 0, 0, pr[1]);
	sleep_ms(150);
	double released = st_now_s();
	st_gpu_flock_give(&a);
	double tw, tr;
	assert_int_equal(read(pw[0], &tw, sizeof tw), (ssize_t)sizeof tw);
	assert_int_equal(read(pr[0], &tr, sizeof tr), (ssize_t)sizeof tr);
	assert_true(tw >= released);
	assert_true(tr >= tw + 0.15); /* after W's 200 ms hold */
	int st;
	assert_int_equal(waitpid(w, &st, 0), w);
	assert_int_equal(waitpid(r, &st, 0), r);
	st_gpu_flock_close(&a);
	for (int i = 0; i < 2; i++) {
		close(pw[i]);
		close(pr[i]);
	}
}

/* A holder that keeps the lock (a process stopped while it measured): a take with a limit gives
 * up after it (ETIMEDOUT, nothing held), and a verify's hold goes on without the file, counted. */
static void test_give_up(void **state)
{
	(void)state;
	double got;
	pid_t c = holder(3000, 0, &got);
	st_gpu_flock f;
	opened(&f);
	double t0 = st_now_s();
	errno = 0;
	assert_true(st_gpu_flock_take(&f, 0, 0.3, NULL, NULL) < 0);
	assert_int_equal(errno, ETIMEDOUT);
	double took = st_now_s() - t0;
	assert_true(took >= 0.29 && took < 2.5);
	assert_int_equal(f.held, 0);
	st_gpu_hold h;
	memset(&h, 0, sizeof h);
	h.file = &f;
	h.file_give_up_s = 0.2;
	st_gpu_hold_exclusive(&h);
	assert_int_equal(h.held, ST_GPU_EXCLUSIVE); /* goes on */
	assert_int_equal(h.file_missed, 1);
	st_gpu_hold_release(&h);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	/* the holder gone, the next take gets it at once */
	assert_true(st_gpu_flock_take(&f, 1, 0.3, NULL, NULL) >= 0);
	st_gpu_flock_close(&f);
}

/* A verify's hold with the file lock alone (a lone `stitch verify`): use shares, exclusive
 * keeps other processes out, idle and release give up. */
static void test_hold_on_file(void **state)
{
	(void)state;
	st_gpu_flock f;
	opened(&f);
	st_gpu_hold h;
	memset(&h, 0, sizeof h);
	h.file = &f;
	st_gpu_hold_use(&h);
	assert_int_equal(h.held, ST_GPU_SHARED);
	assert_true(other_can_take(0));
	assert_false(other_can_take(1));
	st_gpu_hold_idle(&h);
	assert_int_equal(h.held, ST_GPU_FREE);
	assert_true(other_can_take(1));
	st_gpu_hold_exclusive(&h);
	assert_int_equal(h.held, ST_GPU_EXCLUSIVE);
	assert_false(other_can_take(0));
	st_gpu_hold_idle(&h); /* a measurement goes on: kept */
	assert_false(other_can_take(0));
	st_gpu_hold_release(&h);
	assert_true(other_can_take(1));
	st_gpu_flock_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bad_key_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_made_for_every_user, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parents_made, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exclusive_and_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_holder_dies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exclusive_goes_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_give_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hold_on_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
