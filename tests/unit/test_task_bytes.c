/* Unit tests of a size set's byte count (task_bytes.c) and of the admission policy over it
 * (admit.c): the shared-memory layout's page alignment, the runners' two buffer sets, overflow of
 * shape products and of sums treated as too large, and the refusal's message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/host_mem.h"
#include "task/task_bytes.h"
#include "verify/admit.h"

static char *names[] = {"rows", "cols"};

/* A softmax-like task: x [rows, cols] in, y [rows, cols] out, both of dtype dt. */
typedef struct fixture {
	st_task t;
	st_tensor_spec in, out;
	int64_t values[2];
	st_size_set set;
} fixture;

static void make(fixture *f, int64_t rows, int64_t cols, st_dtype dt)
{
	memset(f, 0, sizeof *f);
	f->values[0] = rows;
	f->values[1] = cols;
	f->set = (st_size_set){"small", 2, names, f->values};
	f->in = (st_tensor_spec){.name = "x", .dtype = dt, .ndim = 2, .shape = {"rows", "cols"}};
	f->out = (st_tensor_spec){.name = "y", .dtype = dt, .ndim = 2, .shape = {"rows", "cols"}};
	f->t.id = "t1/softmax";
	f->t.small = f->t.eval = f->set;
	f->t.eval.label = "eval";
	f->t.inputs = &f->in;
	f->t.outputs = &f->out;
	f->t.n_inputs = f->t.n_outputs = 1;
}

static void test_small_set(void **state)
{
	(void)state;
	fixture f;
	make(&f, 37, 1000, ST_F32);
	st_set_bytes b;
	st_err e;
	assert_int_equal(st_task_set_bytes(&f.t, &f.set, &b, &e), ST_OK);
	assert_int_equal(b.inputs, 148000);
	assert_int_equal(b.outputs, 148000);
	assert_int_equal(b.params, 0);
	assert_int_equal(b.shm, 3 * 151552); /* 148000 rounds up to 37 pages; outputs twice */
	assert_int_equal(b.buffers, 2 * (148000 + 148000));
	assert_int_equal(b.largest, 148000);
	assert_string_equal(b.largest_name, "x");
	assert_false(b.overflow);
}

static void test_huge_set(void **state)
{
	(void)state;
	fixture f;
	make(&f, 1000000, 1000000, ST_F32);
	st_set_bytes b;
	st_err e;
	assert_int_equal(st_task_set_bytes(&f.t, &f.set, &b, &e), ST_OK);
	assert_int_equal(b.largest, 4000000000000ull);
	assert_int_equal(b.shm, 12000000000000ull);
	assert_false(b.overflow);
}

static void test_overflow(void **state)
{
	(void)state;
	fixture f;
	st_set_bytes b;
	st_err e;
	/* 2^62 elements fit an int64; their 2^64 bytes do not */
	make(&f, (int64_t)1 << 31, (int64_t)1 << 31, ST_F32);
	assert_int_equal(st_task_set_bytes(&f.t, &f.set, &b, &e), ST_OK);
	assert_true(b.overflow);
	assert_true(b.largest == UINT64_MAX);
	/* each tensor's 2^62 bytes fit; the runner's two buffer sets (2^64) do not */
	make(&f, (int64_t)1 << 31, (int64_t)1 << 29, ST_F32);
	assert_int_equal(st_task_set_bytes(&f.t, &f.set, &b, &e), ST_OK);
	assert_int_equal(b.largest, (uint64_t)1 << 62);
	assert_true(b.buffers == UINT64_MAX);
	assert_true(b.overflow);
}

static void test_bad_shape(void **state)
{
	(void)state;
	fixture f;
	make(&f, 0, 5, ST_F32);
	st_set_bytes b;
	st_err e;
	assert_int_equal(st_task_set_bytes(&f.t, &f.set, &b, &e), ST_E_INVALID);
	assert_non_null(strstr(e.msg, "small"));
}

static void test_need(void **state)
{
	(void)state;
	fixture f;
	make(&f, 37, 1000, ST_F32);
	st_set_bytes b;
	st_err e;
	assert_int_equal(st_task_set_bytes(&f.t, &f.set, &b, &e), ST_OK);
	st_verify_opts o;
	st_verify_opts_default(&o);
	st_admit_need n;
	st_admit_need_of(&f.t, &o, &b, &n); /* cuda: reference and candidate, no expert */
	assert_int_equal(n.n_sols, 2);
	assert_int_equal(n.host, 2 * b.shm);
	assert_int_equal(n.device, 2 * b.buffers);
	o.backend = "host";
	st_admit_need_of(&f.t, &o, &b, &n);
	assert_int_equal(n.host, 2 * b.shm + 2 * b.buffers);
	assert_int_equal(n.runner_as, b.shm + b.buffers);
	assert_int_equal(n.device, 0);
}

static void test_admit(void **state)
{
	(void)state;
	fixture f;
	st_verify_opts o;
	st_verify_opts_default(&o);
	o.backend = "host";
	st_host_mem m = {.total = (uint64_t)16 << 30, .available = (uint64_t)8 << 30};
	st_err e;
	make(&f, 37, 1000, ST_F32);
	assert_int_equal(st_admit_verify(&f.t, &o, &m, &e), ST_OK);
	o.max_request_bytes = 1 << 20; /* 1 MiB: the small set's 2.1 MiB is refused */
	assert_int_equal(st_admit_verify(&f.t, &o, &m, &e), ST_E_INVALID);
	assert_non_null(strstr(e.msg, "--max-request-gb"));
	o.max_request_bytes = 0;
	make(&f, 1000000, 1000000, ST_F32);
	assert_int_equal(st_admit_verify(&f.t, &o, &m, &e), ST_E_INVALID);
	assert_non_null(strstr(e.msg, "size set 'small'"));
	assert_non_null(strstr(e.msg, "4000000000000 bytes"));
	assert_non_null(strstr(e.msg, "this machine has"));
	/* on the host backend only `small` runs by default: a huge eval set alone is admitted */
	f.t.small.values = (int64_t[]){37, 1000};
	assert_int_equal(st_admit_verify(&f.t, &o, &m, &e), ST_OK);
	char msg[1024];
	assert_int_equal(st_admit_task_warning(&f.t, &m, msg, sizeof msg), 1);
	assert_non_null(strstr(msg, "size set 'eval'"));
}

static void test_host_mem(void **state)
{
	(void)state;
	st_host_mem m = {.total = (uint64_t)24 << 30, .available = (uint64_t)20 << 30};
	const char *from;
	assert_true(st_host_mem_usable(&m, &from) == (uint64_t)20 << 30);
	assert_non_null(strstr(from, "MemAvailable"));
	assert_true(st_host_runner_as(&m, (uint64_t)32 << 30) == (uint64_t)21 << 30);
	m.cg_limit = (uint64_t)8 << 30;
	m.cg_room = (uint64_t)6 << 30;
	assert_true(st_host_mem_usable(&m, &from) == (uint64_t)6 << 30);
	assert_non_null(strstr(from, "cgroup"));
	assert_true(st_host_runner_as(&m, (uint64_t)32 << 30) == (uint64_t)7 << 30);
	st_host_mem none = {0};
	assert_true(st_host_runner_as(&none, 123) == 123);
	char buf[32];
	assert_string_equal(st_bytes_str((uint64_t)3 << 30, buf, sizeof buf), "3.0 GiB");
	assert_string_equal(st_bytes_str(UINT64_MAX, buf, sizeof buf), "more than 16 EiB");
	assert_true(st_sat_mul(UINT64_MAX / 2, 3) == UINT64_MAX);
	assert_true(st_sat_add(UINT64_MAX, 1) == UINT64_MAX);
	st_err e;
	assert_int_equal(st_host_mem_read(&m, &e), ST_OK); /* this machine's: some memory */
	assert_true(m.total > 0 && m.available > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_set), cmocka_unit_test(test_huge_set),
		cmocka_unit_test(test_overflow),  cmocka_unit_test(test_bad_shape),
		cmocka_unit_test(test_need),      cmocka_unit_test(test_admit),
		cmocka_unit_test(test_host_mem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
