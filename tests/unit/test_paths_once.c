/* The folders stitch works out once (the runners' folder, the source tree) must read the same
 * from every thread of a worker, even when its threads all ask first at one moment: a folder
 * being filled by one thread while another read it once started "/stitch-runner-host". Each try
 * is a fresh process, since the answer is settled after its first call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/paths.h"
#include "verify/runner_client.h"

#define THREADS 8
#define TRIES 2000

static pthread_barrier_t g_start;
static const char *g_seen[THREADS][2];

static void *ask(void *arg)
{
	int k = (int)(intptr_t)arg;
	pthread_barrier_wait(&g_start);
	g_seen[k][0] = st_runner_dir();
	g_seen[k][1] = st_home();
	/* copies, made while others may still be writing: what a caller formats at once */
	static char copy[THREADS][2][4096];
	snprintf(copy[k][0], sizeof copy[k][0], "%s", g_seen[k][0]);
	snprintf(copy[k][1], sizeof copy[k][1], "%s", g_seen[k][1]);
	g_seen[k][0] = copy[k][0];
	g_seen[k][1] = copy[k][1];
	return NULL;
}

/* One fresh process: THREADS threads ask together; exit 0 when every answer is the settled one. */
static int one_try(void)
{
	pthread_t t[THREADS];
	pthread_barrier_init(&g_start, NULL, THREADS);
	for (int k = 0; k < THREADS; k++)
		if (pthread_create(&t[k], NULL, ask, (void *)(intptr_t)k))
			return 2;
	for (int k = 0; k < THREADS; k++)
		pthread_join(t[k], NULL);
	const char *dir = st_runner_dir(), *home = st_home();
	if (dir[0] != '/' || home[0] != '/')
		return 3;
	for (int k = 0; k < THREADS; k++)
		if (strcmp(g_seen[k][0], dir) || strcmp(g_seen[k][1], home))
			return 1;
	return 0;
}

static void test_every_thread_sees_the_same_folders(void **state)
{
	(void)state;
	/* the path under test works the folder out from /proc/self/exe, not from the environment */
	unsetenv("STITCH_RUNNER_DIR");
	unsetenv("STITCH_HOME");
	int bad = 0;
	for (int i = 0; i < TRIES; i++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(one_try());
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_not_equal(WEXITSTATUS(status), 2);
		bad += WEXITSTATUS(status) != 0;
	}
	if (bad)
		fprintf(stderr, "%d of %d processes saw a folder half written\n", bad, TRIES);
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_thread_sees_the_same_folders),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
