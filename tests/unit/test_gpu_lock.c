/* Verifies that share a GPU (st_verify_slot.gpu_lock): a verify waits while another holds the GPU
 * alone, and it takes the GPU alone to time, so while someone holds it shared the verify gets
 * through its correctness runs but not into its timing, unless it must have the GPU alone
 * throughout (gpu_alone). On the host backend with the test task, the lock's behaviour is the
 * same as on a GPU; the check of a timed call does not hold it alone; a neighbour's candidate is
 * stopped while any solution is timed and runs again after. Also the helpers of stitch serve
 * and stitch worker: the --gpus list, and the lock's writers-first rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child_proc.h"
#include "stitch/stitch.h"
#include "verify/gpu_share.h"
#include "verify/neighbours.h"

typedef struct run {
	st_verify_opts o;
	st_verify_slot slot; /* the shared GPU lock, gpu_alone, and its progress lines */
	pthread_mutex_t mu;
	int correct_lines, timing_lines, done;
	int compiled_lines; /* "compile candidate ..." seen: the next step needs the GPU */
	st_status status;
	char verdict_status[1100];
	double gpu_wait_s; /* the verdict's */
	/* the verdict's gpu_holds: how many of each mode, the first one's start and the first
	 * exclusive one's, and whether they are well formed (each from <= to, one after another) */
	int shared_holds, exclusive_holds, holds_ordered;
	double first_hold, first_exclusive;
	double start_wait_s; /* the part of its waits in the start phase (starting its runners) */
	double audit_wait_s; /* and in the audit (to check a timed call) */
	int neighbour_stops; /* timing.candidate_stopped.neighbours */
	int stopped_batches; /* timing.candidate_stopped.batches: the baselines' */
} run;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void read_holds(run *r, const json_t *holds)
{
	double last = 0;
	size_t i;
	json_t *h;
	r->holds_ordered = json_is_array(holds) && json_array_size(holds) > 0;
	r->first_hold = r->first_exclusive = -1;
	json_array_foreach(holds, i, h) {
		const char *mode = json_string_value(json_array_get(h, 0));
		double from = json_number_value(json_array_get(h, 1));
		double to = json_number_value(json_array_get(h, 2));
		int x = mode && !strcmp(mode, "x");
		r->shared_holds += mode && !strcmp(mode, "s");
		r->exclusive_holds += x;
		if (!mode || from > to || from < last)
			r->holds_ordered = 0;
		last = to;
		if (r->first_hold < 0)
			r->first_hold = from;
		if (x && r->first_exclusive < 0)
			r->first_exclusive = from;
	}
}

static void on_progress(void *arg, const char *line)
{
	run *r = arg;
	pthread_mutex_lock(&r->mu);
	if (strstr(line, "seed 1/1 ok"))
		r->correct_lines++;
	if (strstr(line, "timing on set"))
		r->timing_lines++;
	if (strstr(line, "compile candidate"))
		r->compiled_lines++;
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
	r->status = st_verify(task, sol, &r->o, &r->slot, &v, &e);
	const char *s = json_string_value(json_object_get(v, "status"));
	snprintf(r->verdict_status, sizeof r->verdict_status, "%s", s ? s : e.msg);
	r->gpu_wait_s = json_number_value(json_object_get(v, "gpu_wait_s"));
	r->start_wait_s = json_number_value(
		json_object_get(json_object_get(v, "gpu_wait_by_phase_s"), "start"));
	r->audit_wait_s = json_number_value(
		json_object_get(json_object_get(v, "gpu_wait_by_phase_s"), "audit"));
	read_holds(r, json_object_get(v, "gpu_holds"));
	json_t *stopped = json_object_get(json_object_get(v, "timing"), "candidate_stopped");
	r->neighbour_stops = (int)json_integer_value(json_object_get(stopped, "neighbours"));
	r->stopped_batches = (int)json_integer_value(json_object_get(stopped, "batches"));
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

static void start(run *r, pthread_rwlock_t *lock, int alone, st_neighbours *nb, pthread_t *t)
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
	r->slot.gpu_lock = lock;
	r->slot.gpu_alone = alone;
	r->slot.neighbours = nb;
	r->slot.progress = on_progress;
	r->slot.progress_arg = r;
	assert_int_equal(pthread_create(t, NULL, verify_thread, r), 0);
}

/* Up to `s` seconds for cond to hold. */
#define WAIT_FOR(cond, s) do { for (int i_ = 0; i_ < (s) * 100 && !(cond); i_++) usleep(10000); } while (0)

/* Someone holds the GPU (alone, or shared with a verify that must have it alone): nothing of the
 * verify runs until they let go; then it passes, says how long it waited, and lets go in turn. */
static void blocked_from_the_start(int held_alone, int verify_alone)
{
	pthread_rwlock_t lock;
	pthread_rwlock_init(&lock, NULL);
	if (held_alone)
		pthread_rwlock_wrlock(&lock);
	else
		pthread_rwlock_rdlock(&lock); /* another verify's correctness runs */
	run r;
	pthread_t t;
	start(&r, &lock, verify_alone, NULL, &t);
	/* Compiling and starting runners take no GPU, and on a busy host can take a second: the
	 * second of waiting counts from when the verify first needs the GPU. */
	WAIT_FOR(get(&r, &r.compiled_lines) >= 1, 60);
	sleep(1);
	assert_int_equal(get(&r, &r.correct_lines), 0); /* nothing ran while the GPU was taken */
	assert_int_equal(get(&r, &r.done), 0);
	double freed = now_s();
	pthread_rwlock_unlock(&lock);
	pthread_join(t, NULL);
	assert_int_equal(r.status, ST_OK);
	assert_string_equal(r.verdict_status, "ok");
	assert_int_equal(r.correct_lines, 1);
	/* the verdict says how long it waited for the GPU, and when it held it: not before it was
	 * free, one hold after another, alone to time (and throughout when it must be alone) */
	assert_true(r.gpu_wait_s >= 0.9);
	/* ...though its runners started meanwhile: a start does not wait for the GPU (a context
	 * creation held back every timing on the GPU while it lasted, runner_pool.c) */
	assert_true(r.start_wait_s == 0);
	assert_true(r.holds_ordered);
	assert_true(r.first_hold >= freed);
	assert_true(r.exclusive_holds >= 1);
	if (verify_alone)
		assert_int_equal(r.shared_holds, 0);
	/* and the verify let go of the lock: it can be taken alone again */
	assert_int_equal(pthread_rwlock_trywrlock(&lock), 0);
	pthread_rwlock_unlock(&lock);
	pthread_rwlock_destroy(&lock);
}

static void test_exclusive_blocks_all(void **state)
{
	(void)state;
	blocked_from_the_start(1, 0);
}

static void test_timing_waits_for_sharers(void **state)
{
	(void)state;
	pthread_rwlock_t lock;
	pthread_rwlock_init(&lock, NULL);
	pthread_rwlock_rdlock(&lock); /* another verify's correctness runs */
	run r;
	pthread_t t;
	start(&r, &lock, 0, NULL, &t);
	WAIT_FOR(get(&r, &r.correct_lines) > 0, 60);
	assert_int_equal(get(&r, &r.correct_lines), 1); /* correctness runs share the GPU... */
	sleep(1);
	assert_int_equal(get(&r, &r.timing_lines), 0); /* ...timing does not */
	assert_int_equal(get(&r, &r.done), 0);
	double freed = now_s();
	pthread_rwlock_unlock(&lock);
	pthread_join(t, NULL);
	assert_int_equal(r.status, ST_OK);
	assert_string_equal(r.verdict_status, "ok");
	assert_int_equal(r.timing_lines, 1);
	/* its holds: shared ones before, the exclusive one only once the other let go */
	assert_true(r.holds_ordered);
	assert_true(r.shared_holds >= 1);
	assert_true(r.first_hold < freed);
	assert_true(r.first_exclusive >= freed);
	pthread_rwlock_destroy(&lock);
}

/* gpu_alone (a service's second try of a fault seen while sharing): the verify takes the GPU
 * alone from loading its solutions on, so while another holds it shared not even its correctness
 * runs start. */
static void test_alone_waits_for_sharers(void **state)
{
	(void)state;
	blocked_from_the_start(0, 1);
}

/* The check of a timed call (a run of the reference, then a comparison on the CPU) measures
 * nothing: the verify lets go of the GPU once its samples are taken, and another verify waiting
 * to time goes first; the check waits for it (in the audit phase, not in the teardown). */
static void test_timed_call_checked_after_letting_go(void **state)
{
	(void)state;
	pthread_rwlock_t lock;
	assert_int_equal(st_gpu_lock_init(&lock), 0);
	run r;
	pthread_t t;
	start(&r, &lock, 0, NULL, &t);
	WAIT_FOR(get(&r, &r.timing_lines) > 0, 60);
	assert_int_equal(get(&r, &r.timing_lines), 1);
	pthread_rwlock_wrlock(&lock); /* once its samples are taken */
	sleep(1);
	assert_int_equal(get(&r, &r.done), 0);
	pthread_rwlock_unlock(&lock);
	pthread_join(t, NULL);
	assert_int_equal(r.status, ST_OK);
	assert_string_equal(r.verdict_status, "ok");
	assert_true(r.holds_ordered);
	assert_true(r.audit_wait_s >= 0.9);
	pthread_rwlock_destroy(&lock);
}

/* A neighbouring verify's candidate (a process on the GPU's list) is stopped while this verify
 * times its baselines and its own candidate, runs again after each batch, and is left running
 * when it is done; the verdict counts the stops. */
static void test_neighbour_stopped_while_timed(void **state)
{
	(void)state;
	pthread_rwlock_t lock;
	assert_int_equal(st_gpu_lock_init(&lock), 0);
	st_neighbours nb;
	assert_int_equal(st_neighbours_init(&nb), 0);
	pid_t other = idle_child();
	assert_int_equal(st_neighbours_join(&nb, other), 0);
	run r;
	pthread_t t;
	start(&r, &lock, 0, &nb, &t);
	int seen_stopped = 0;
	while (!get(&r, &r.done)) {
		seen_stopped += state_of(other) == 'T';
		usleep(200);
	}
	pthread_join(t, NULL);
	assert_string_equal(r.verdict_status, "ok");
	assert_true(r.stopped_batches >= 2); /* the reference's and the expert's batches */
	/* one neighbour: stopped for those and for each of the candidate's own batches */
	assert_true(r.neighbour_stops > r.stopped_batches);
	assert_true(seen_stopped > 0);
	usleep(20000);
	assert_true(state_of(other) != 'T'); /* running again (asleep) */
	kill(-other, SIGKILL);
	waitpid(other, NULL, 0);
	st_neighbours_free(&nb);
	pthread_rwlock_destroy(&lock);
}

/* The --gpus list of stitch serve and stitch worker. */
static void test_gpu_list(void **state)
{
	(void)state;
	const char *p = "0,1,3";
	long g = -1;
	assert_int_equal(st_gpu_list_next(&p, &g), 1);
	assert_int_equal(g, 0);
	assert_int_equal(st_gpu_list_next(&p, &g), 1);
	assert_int_equal(g, 1);
	assert_int_equal(st_gpu_list_next(&p, &g), 1);
	assert_int_equal(g, 3);
	assert_int_equal(st_gpu_list_next(&p, &g), 0);
	static const char *bad[] = {"1,x", "-1", "1024", "0;1", ",0", "a"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		p = bad[i];
		int r;
		while ((r = st_gpu_list_next(&p, &g)) > 0)
			;
		if (r != -1)
			fail_msg("--gpus %s was taken", bad[i]);
	}
	p = "";
	assert_int_equal(st_gpu_list_next(&p, &g), 0);
}

static void *take_alone(void *arg)
{
	pthread_rwlock_wrlock(arg);
	pthread_rwlock_unlock(arg);
	return NULL;
}

/* Writers first: once a verify waits to time, no new correctness run gets the GPU before it. */
static void test_lock_writers_first(void **state)
{
	(void)state;
	pthread_rwlock_t lock;
	assert_int_equal(st_gpu_lock_init(&lock), 0);
	assert_int_equal(pthread_rwlock_rdlock(&lock), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, take_alone, &lock), 0);
	usleep(200 * 1000); /* the writer is waiting now */
	assert_int_not_equal(pthread_rwlock_tryrdlock(&lock), 0);
	pthread_rwlock_unlock(&lock);
	pthread_join(t, NULL);
	assert_int_equal(pthread_rwlock_tryrdlock(&lock), 0);
	pthread_rwlock_unlock(&lock);
	pthread_rwlock_destroy(&lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exclusive_blocks_all),
		cmocka_unit_test(test_timing_waits_for_sharers),
		cmocka_unit_test(test_alone_waits_for_sharers),
		cmocka_unit_test(test_gpu_list),
		cmocka_unit_test(test_lock_writers_first),
		cmocka_unit_test(test_timed_call_checked_after_letting_go),
		cmocka_unit_test(test_neighbour_stopped_while_timed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
