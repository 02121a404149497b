/* Unit tests for a verify's hold on a shared GPU (src/verify/gpu_hold.c): use takes it shared,
 * idle gives a shared hold up but keeps an exclusive one, exclusive upgrades, release frees, each
 * hold given up is recorded with its mode, no lock makes every call a no-op, and gpu_alone makes
 * use exclusive. What another verify could do meanwhile is checked from a second thread: take
 * the read lock while this one shares the GPU, but not while it has it alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "verify/gpu_hold.h"

/* Can another thread (another verify) take the read lock now? It gives it back at once. */
static void *try_read(void *arg)
{
	pthread_rwlock_t *lock = arg;
	int rc = pthread_rwlock_tryrdlock(lock);
	if (rc == 0)
		pthread_rwlock_unlock(lock);
	return (void *)(intptr_t)(rc == 0);
}

static int other_can_read(pthread_rwlock_t *lock)
{
	pthread_t t;
	void *got = NULL;
	assert_int_equal(pthread_create(&t, NULL, try_read, lock), 0);
	assert_int_equal(pthread_join(t, &got), 0);
	return (int)(intptr_t)got;
}

/* The mode of hold k recorded so far ("s" or "x"), checking its times are in order. */
static const char *hold_mode(const st_gpu_hold *h, size_t k)
{
	json_t *x = json_array_get(h->holds, k);
	assert_non_null(x);
	assert_true(json_real_value(json_array_get(x, 2)) >= json_real_value(json_array_get(x, 1)));
	return json_string_value(json_array_get(x, 0));
}

typedef struct fixture {
	pthread_rwlock_t lock;
	st_gpu_hold h;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	assert_int_equal(pthread_rwlock_init(&f->lock, NULL), 0);
	f->h.lock = &f->lock;
	f->h.holds = json_array();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	json_decref(f->h.holds);
	pthread_rwlock_destroy(&f->lock);
	free(f);
	return 0;
}

static void test_use_shares_and_idle_frees(void **state)
{
	fixture *f = *state;
	st_gpu_hold *h = &f->h;
	assert_int_equal(h->held, ST_GPU_FREE);
	st_gpu_hold_use(h);
	assert_int_equal(h->held, ST_GPU_SHARED);
	assert_true(other_can_read(&f->lock));
	st_gpu_hold_use(h); /* already held: nothing more taken */
	assert_int_equal(h->held, ST_GPU_SHARED);
	assert_int_equal(json_array_size(h->holds), 0);
	st_gpu_hold_idle(h);
	assert_int_equal(h->held, ST_GPU_FREE);
	assert_int_equal(json_array_size(h->holds), 1);
	assert_string_equal(hold_mode(h, 0), "s");
	assert_true(h->wait_s >= 0);
}

static void test_exclusive_upgrades_and_idle_keeps_it(void **state)
{
	fixture *f = *state;
	st_gpu_hold *h = &f->h;
	st_gpu_hold_use(h);
	st_gpu_hold_exclusive(h);
	assert_int_equal(h->held, ST_GPU_EXCLUSIVE);
	assert_false(other_can_read(&f->lock));
	/* the shared hold was given up for it, and recorded */
	assert_int_equal(json_array_size(h->holds), 1);
	assert_string_equal(hold_mode(h, 0), "s");
	st_gpu_hold_idle(h); /* the measurement it protects goes on */
	assert_int_equal(h->held, ST_GPU_EXCLUSIVE);
	st_gpu_hold_use(h);
	assert_int_equal(h->held, ST_GPU_EXCLUSIVE);
	st_gpu_hold_exclusive(h);
	assert_int_equal(h->held, ST_GPU_EXCLUSIVE);
	assert_int_equal(json_array_size(h->holds), 1);
	st_gpu_hold_release(h);
	assert_int_equal(h->held, ST_GPU_FREE);
	assert_true(other_can_read(&f->lock));
	assert_int_equal(json_array_size(h->holds), 2);
	assert_string_equal(hold_mode(h, 1), "x");
}

static void test_exclusive_from_free(void **state)
{
	fixture *f = *state;
	st_gpu_hold *h = &f->h;
	st_gpu_hold_exclusive(h);
	assert_int_equal(h->held, ST_GPU_EXCLUSIVE);
	assert_int_equal(json_array_size(h->holds), 0);
	st_gpu_hold_release(h);
	st_gpu_hold_release(h); /* nothing held: nothing to give up */
	assert_int_equal(h->held, ST_GPU_FREE);
	assert_int_equal(json_array_size(h->holds), 1);
	assert_string_equal(hold_mode(h, 0), "x");
}

static void test_for(void **state)
{
	fixture *f = *state;
	st_gpu_hold *h = &f->h;
	st_gpu_hold_for(h, 1);
	assert_int_equal(h->held, ST_GPU_SHARED);
	st_gpu_hold_for(h, 0);
	assert_int_equal(h->held, ST_GPU_FREE);
	st_gpu_hold_idle(h); /* idle when free: nothing */
	assert_int_equal(h->held, ST_GPU_FREE);
	assert_int_equal(json_array_size(h->holds), 1);
}

static void test_alone_makes_use_exclusive(void **state)
{
	fixture *f = *state;
	st_gpu_hold *h = &f->h;
	h->alone = 1;
	st_gpu_hold_use(h);
	assert_int_equal(h->held, ST_GPU_EXCLUSIVE);
	assert_false(other_can_read(&f->lock));
	st_gpu_hold_idle(h);
	assert_int_equal(h->held, ST_GPU_EXCLUSIVE);
	st_gpu_hold_release(h);
	assert_true(other_can_read(&f->lock));
	assert_string_equal(hold_mode(h, 0), "x");
}

static void test_holds_not_kept(void **state)
{
	fixture *f = *state;
	st_gpu_hold *h = &f->h;
	json_decref(h->holds);
	h->holds = NULL;
	st_gpu_hold_use(h);
	st_gpu_hold_exclusive(h);
	st_gpu_hold_release(h);
	assert_int_equal(h->held, ST_GPU_FREE);
	assert_true(other_can_read(&f->lock));
}

static void test_no_lock_is_a_no_op(void **state)
{
	(void)state;
	st_gpu_hold h;
	memset(&h, 0, sizeof h);
	h.holds = json_array();
	st_gpu_hold_use(&h);
	assert_int_equal(h.held, ST_GPU_FREE);
	st_gpu_hold_exclusive(&h);
	assert_int_equal(h.held, ST_GPU_FREE);
	st_gpu_hold_for(&h, 1);
	st_gpu_hold_idle(&h);
	st_gpu_hold_release(&h);
	h.alone = 1;
	st_gpu_hold_use(&h);
	assert_int_equal(h.held, ST_GPU_FREE);
	assert_int_equal(json_array_size(h.holds), 0);
	assert_true(h.wait_s == 0);
	json_decref(h.holds);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_use_shares_and_idle_frees, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exclusive_upgrades_and_idle_keeps_it, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exclusive_from_free, setup, teardown),
		cmocka_unit_test_setup_teardown(test_for, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alone_makes_use_exclusive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_holds_not_kept, setup, teardown),
		cmocka_unit_test(test_no_lock_is_a_no_op),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
