/* Verifies that share a GPU (st_verify_opts.gpu_lock): a verify waits while another holds the GPU
 * alone, and it takes the GPU alone to time, so while someone holds it shared the verify gets
 * through its correctness runs but not into its timing, unless it must have the GPU alone
 * throughout (gpu_alone). On the host backend with the test task,
 * the lock's behaviour is the same as on a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stitch/stitch.h"

typedef struct run {
	st_verify_opts o;
	pthread_mutex_t mu;
	int correct_lines, timing_lines, done;
	st_status status;
	char verdict_status[1100];
	double gpu_wait_s; /* the verdict's */
} run;

static void on_progress(void *arg, const char *line)
{
	run *r = arg;
	pthread_mutex_lock(&r->mu);
	if (strstr(line, "seed 1/1 ok"))
		r->correct_lines++;
	if (strstr(line, "timing on set"))
		r->timing_lines++;
	pthread_mutex_unlock(&r->mu);
}

static void *verify_thread(void *arg)
{
	run *r = arg;
	char task[1024], sol[1024];
	snprintf(task, sizeof task, "%s/tasks/t1/scale", getenv("STITCH_TEST_DATA"));
	snprintf(sol, sizeof sol, "%s/../fixtures/host/good.c", getenv("STITCH_TEST_DATA"));
	json_t *v = NULL;
	st_err e;
	r->status = st_verify(task, sol, &r->o, &v, &e);
	const char *s = json_string_value(json_object_get(v, "status"));
	snprintf(r->verdict_status, sizeof r->verdict_status, "%s", s ? s : e.msg);
	r->gpu_wait_s = json_number_value(json_object_get(v, "gpu_wait_s"));
	json_decref(v);
	pthread_mutex_lock(&r->mu);
	r->done = 1;
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

static int get(run *r, int *field)
{
	pthread_mutex_lock(&r->mu);
	int x = *field;
	pthread_mutex_unlock(&r->mu);
	return x;
}

static void start(run *r, pthread_rwlock_t *lock, int alone, pthread_t *t)
{
	memset(r, 0, sizeof *r);
	pthread_mutex_init(&r->mu, NULL);
	st_verify_opts_default(&r->o);
	r->o.backend = "host";
	r->o.seeds = 1;
	r->o.seed = 7;
	r->o.stop.min_time_ms = 5;
	r->o.stop.max_rse = 0.5;
	r->o.stop.max_samples = 200;
	r->o.gpu_lock = lock;
	r->o.gpu_alone = alone;
	r->o.progress = on_progress;
	r->o.progress_arg = r;
	assert_int_equal(pthread_create(t, NULL, verify_thread, r), 0);
}

/* Up to `s` seconds for cond to hold. */
#define WAIT_FOR(cond, s) do { for (int i_ = 0; i_ < (s) * 100 && !(cond); i_++) usleep(10000); } while (0)

static void test_exclusive_blocks_all(void **state)
{
	(void)state;
	pthread_rwlock_t lock;
	pthread_rwlock_init(&lock, NULL);
	pthread_rwlock_wrlock(&lock);
	run r;
	pthread_t t;
	start(&r, &lock, 0, &t);
	sleep(1);
	assert_int_equal(get(&r, &r.correct_lines), 0); /* nothing ran while the GPU was taken */
	assert_int_equal(get(&r, &r.done), 0);
	pthread_rwlock_unlock(&lock);
	pthread_join(t, NULL);
	assert_int_equal(r.status, ST_OK);
	assert_string_equal(r.verdict_status, "ok");
	assert_int_equal(r.correct_lines, 1);
	/* the verdict says how long it waited for the GPU */
	assert_true(r.gpu_wait_s >= 0.9);
	/* and the verify let go of the lock: it can be taken alone again */
	assert_int_equal(pthread_rwlock_trywrlock(&lock), 0);
	pthread_rwlock_unlock(&lock);
	pthread_rwlock_destroy(&lock);
}

static void test_timing_waits_for_sharers(void **state)
{
	(void)state;
	pthread_rwlock_t lock;
	pthread_rwlock_init(&lock, NULL);
	pthread_rwlock_rdlock(&lock); /* another verify's correctness runs */
	run r;
	pthread_t t;
	start(&r, &lock, 0, &t);
	WAIT_FOR(get(&r, &r.correct_lines) > 0, 60);
	assert_int_equal(get(&r, &r.correct_lines), 1); /* correctness runs share the GPU... */
	sleep(1);
	assert_int_equal(get(&r, &r.timing_lines), 0); /* ...timing does not */
	assert_int_equal(get(&r, &r.done), 0);
	pthread_rwlock_unlock(&lock);
	pthread_join(t, NULL);
	assert_int_equal(r.status, ST_OK);
	assert_string_equal(r.verdict_status, "ok");
	assert_int_equal(r.timing_lines, 1);
	pthread_rwlock_destroy(&lock);
}

/* gpu_alone (a service's second try of a fault seen while sharing): the verify takes the GPU
 * alone from its first runner on, so while another holds it shared not even its correctness runs
 * start; and it holds the GPU through to the end. */
static void test_alone_waits_for_sharers(void **state)
{
	(void)state;
	pthread_rwlock_t lock;
	pthread_rwlock_init(&lock, NULL);
	pthread_rwlock_rdlock(&lock); /* another verify's correctness runs */
	run r;
	pthread_t t;
	start(&r, &lock, 1, &t);
	sleep(1);
	assert_int_equal(get(&r, &r.correct_lines), 0);
	assert_int_equal(get(&r, &r.done), 0);
	pthread_rwlock_unlock(&lock);
	pthread_join(t, NULL);
	assert_int_equal(r.status, ST_OK);
	assert_string_equal(r.verdict_status, "ok");
	assert_int_equal(r.correct_lines, 1);
	assert_true(r.gpu_wait_s >= 0.9);
	assert_int_equal(pthread_rwlock_trywrlock(&lock), 0); /* given back at the end */
	pthread_rwlock_unlock(&lock);
	pthread_rwlock_destroy(&lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exclusive_blocks_all),
		cmocka_unit_test(test_timing_waits_for_sharers),
		cmocka_unit_test(test_alone_waits_for_sharers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
