/* Unit tests of the CPU helpers a service places its workers with: CPU lists parsed and written
 * back, the CPUs next to a PCI device (here the dev machine's own devices, where sysfs has them),
 * and pinning a thread; and the kernel's count of a thread's CPU time the timing checks read. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "common/cpus.h"
#include "verify/runner_client.h"

static void test_parse(void **state)
{
	(void)state;
	cpu_set_t set;
	assert_int_equal(st_cpus_parse("0-3,8,10-11\n", &set), 0);
	assert_int_equal(CPU_COUNT(&set), 7);
	assert_true(CPU_ISSET(3, &set) && CPU_ISSET(8, &set) && CPU_ISSET(11, &set));
	assert_false(CPU_ISSET(4, &set) || CPU_ISSET(9, &set));
	assert_int_equal(st_cpus_parse("", &set), 0);
	assert_int_equal(CPU_COUNT(&set), 0);
	assert_int_equal(st_cpus_parse("3-1", &set), -1);
	assert_int_equal(st_cpus_parse("a", &set), -1);
	assert_int_equal(st_cpus_parse("1;2", &set), -1);
	assert_int_equal(st_cpus_parse("-1", &set), -1);
}

static void test_format(void **state)
{
	(void)state;
	cpu_set_t set;
	char list[64];
	assert_int_equal(st_cpus_parse("0-3,8,10-11,40", &set), 0);
	st_cpus_format(&set, list, sizeof list);
	assert_string_equal(list, "0-3,8,10-11,40");
	char tiny[6];
	st_cpus_format(&set, tiny, sizeof tiny);
	assert_string_equal(tiny, ""); /* no half list */
	CPU_ZERO(&set);
	st_cpus_format(&set, list, sizeof list);
	assert_string_equal(list, "");
}

static void test_near_pci_bad_names(void **state)
{
	(void)state;
	char list[64] = "x";
	assert_int_equal(st_cpus_near_pci("0000:ff:1f.7-not-a-device", list, sizeof list), 0);
	assert_string_equal(list, "");
	assert_int_equal(st_cpus_near_pci("../../../etc", list, sizeof list), 0);
	assert_int_equal(st_cpus_near_pci("", list, sizeof list), 0);
}

/* Pinned to one CPU, the thread's own CPUs are that one; a device whose node holds every CPU
 * the thread has gives nothing to narrow, one that holds more gives exactly the thread's. */
static void test_pin_and_near(void **state)
{
	(void)state;
	cpu_set_t mine;
	assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
	int first = -1;
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, &mine))
			first = c;
	char one[16];
	snprintf(one, sizeof one, "%d", first);
	assert_int_equal(st_cpus_pin(one), 0);
	assert_int_equal(st_cpus_usable(), 1);
	char list[64];
	/* 0000:00:00.0 (the host bridge) exists on every PC; its node has our one CPU or none */
	int n = st_cpus_near_pci("0000:00:00.0", list, sizeof list);
	assert_int_equal(n, 0);
	assert_int_equal(st_cpus_pin("not a list"), -1);
	assert_int_equal(sched_setaffinity(0, sizeof mine, &mine), 0);
}

/* The runners' pin table (runner_client.c), which a service's workers read back for themselves. */
static double thread_cpu_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The kernel's count of this thread's time on a CPU moves with the CPU time it spends, as the
 * thread's own CPU clock does; where /proc has no schedstat, both figures say so with -1. */
static void test_cpu_on(void **state)
{
	(void)state;
	double w0, w1;
	double on0 = st_cpu_on_ms(0, &w0);
	if (on0 < 0) {
		assert_true(w0 == -1 && st_cpu_wait_ms(0) == -1);
		skip();
	}
	assert_true(w0 >= 0);
	double c0 = thread_cpu_ms();
	volatile unsigned long x = 0;
	while (thread_cpu_ms() - c0 < 30)
		x += 1;
	double spent = thread_cpu_ms() - c0, on1 = st_cpu_on_ms(0, &w1);
	assert_true(on1 - on0 > 0.8 * spent && on1 - on0 < spent + 20);
	assert_true(w1 >= w0);
	assert_true(st_cpu_on_ms(99999999, &w1) == -1 && w1 == -1); /* no such process */
}

static void test_runner_pin_table(void **state)
{
	(void)state;
	char cpus[64] = "x";
	assert_int_equal(st_runner_pinned("7", cpus, sizeof cpus), 0);
	assert_string_equal(cpus, "");
	st_runner_pin("7", "0-1,4");
	assert_int_equal(st_runner_pinned("7", cpus, sizeof cpus), 1);
	assert_string_equal(cpus, "0-1,4");
	assert_int_equal(st_runner_pinned("6", cpus, sizeof cpus), 0);
	assert_int_equal(st_runner_pinned(NULL, cpus, sizeof cpus), 0);
	st_runner_pin("7", NULL); /* anywhere again */
	assert_int_equal(st_runner_pinned("7", cpus, sizeof cpus), 0);
	assert_string_equal(cpus, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_near_pci_bad_names),
		cmocka_unit_test(test_pin_and_near),
		cmocka_unit_test(test_runner_pin_table),
		cmocka_unit_test(test_cpu_on),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
