/* The environment a runner gets: only the variables the loader and the driver need (a secret of
 * the parent's never reaches it), CUDA_VISIBLE_DEVICES narrowed to one device, HOME in its own
 * folder, and CUDA_DEVICE_MAX_CONNECTIONS at ST_RUNNER_HW_QUEUES unless the parent gives it a
 * value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/runner_client.h"

static char g_bufs[ST_RUNNER_ENV_MAX][ST_RUNNER_ENV_LEN];
static char *g_envp[ST_RUNNER_ENV_MAX];

/* The value of `name` in the built environment, NULL when it is not there; fails on a repeat. */
static const char *env_value(const char *name)
{
	const char *found = NULL;
	size_t len = strlen(name);
	for (int i = 0; i < ST_RUNNER_ENV_MAX && g_envp[i]; i++)
		if (strncmp(g_envp[i], name, len) == 0 && g_envp[i][len] == '=') {
			assert_null(found);
			found = g_envp[i] + len + 1;
		}
	return found;
}

static void build(const char *devices)
{
	memset(g_envp, 0xff, sizeof g_envp);
	st_runner_env(g_bufs, g_envp, "/tmp/stitch-run-test", devices);
}

/* Every variable a test sets, so that each test starts from the same environment whatever an
 * earlier one did or where it stopped. */
static const char *const g_touched[] = {
	"CUDA_DEVICE_MAX_CONNECTIONS", "STITCH_SERVE_TOKEN", "OPENAI_API_KEY", "CUDA_VISIBLE_DEVICES",
	"LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
	"CUDA_MODULE_LOADING", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
	"NVSHMEM_DISABLE_NVLS", "STITCH_RUNNER_KEEP_MB", "STITCH_RUNNER_ARENA_MB", NULL,
};

static int clean_env(void **state)
{
	(void)state;
	for (int i = 0; g_touched[i]; i++)
		unsetenv(g_touched[i]);
	setenv("PATH", "/usr/bin:/bin", 1);
	return 0;
}

/* The built environment asks for `queues` hardware queues, once. */
static void assert_queues(int queues)
{
	char want[16];
	snprintf(want, sizeof want, "%d", queues);
	assert_non_null(env_value("CUDA_DEVICE_MAX_CONNECTIONS"));
	assert_string_equal(env_value("CUDA_DEVICE_MAX_CONNECTIONS"), want);
}

static void test_hw_queues_default(void **state)
{
	(void)state;
	build(NULL);
	assert_queues(ST_RUNNER_HW_QUEUES);
}

static void test_hw_queues_from_parent(void **state)
{
	(void)state;
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8", 1);
	build(NULL);
	assert_queues(8);
}

/* An empty value is no value: the runner gets the default, not the driver's 8. */
static void test_hw_queues_empty_is_unset(void **state)
{
	(void)state;
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "", 1);
	build(NULL);
	assert_queues(ST_RUNNER_HW_QUEUES);
}

static void test_only_what_the_driver_needs(void **state)
{
	(void)state;
	setenv("STITCH_SERVE_TOKEN", "secret", 1);
	setenv("OPENAI_API_KEY", "secret", 1);
	setenv("CUDA_VISIBLE_DEVICES", "3,2", 1);
	setenv("PATH", "/usr/bin:/bin", 1);
	build("1,0");
	assert_null(env_value("STITCH_SERVE_TOKEN"));
	assert_null(env_value("OPENAI_API_KEY"));
	assert_string_equal(env_value("CUDA_VISIBLE_DEVICES"), "1");
	assert_string_equal(env_value("HOME"), "/tmp/stitch-run-test");
	assert_string_equal(env_value("PATH"), "/usr/bin:/bin");
	build(NULL); /* no devices given: the first of ours */
	assert_string_equal(env_value("CUDA_VISIBLE_DEVICES"), "3");
	int n = 0;
	while (n < ST_RUNNER_ENV_MAX && g_envp[n])
		n++;
	assert_true(n < ST_RUNNER_ENV_MAX); /* NULL-ended within the array */
}

/* Every variable the runner may keep set at once, the hardware queues unset and then set: none
 * is dropped, and the ones added after them still fit. */
static void test_all_kept_still_fit(void **state)
{
	(void)state;
	for (int i = 4; g_touched[i]; i++) /* the kept ones, past the secrets and the devices */
		setenv(g_touched[i], "1", 1);
	for (int parent = 0; parent < 2; parent++) {
		if (parent)
			setenv("CUDA_DEVICE_MAX_CONNECTIONS", "2", 1);
		build("0");
		assert_non_null(env_value("PATH"));
		for (int i = 4; g_touched[i]; i++)
			assert_non_null(env_value(g_touched[i]));
		assert_queues(parent ? 2 : ST_RUNNER_HW_QUEUES);
		assert_string_equal(env_value("CUDA_VISIBLE_DEVICES"), "0");
		assert_string_equal(env_value("HOME"), "/tmp/stitch-run-test");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_hw_queues_default, clean_env),
		cmocka_unit_test_setup(test_hw_queues_from_parent, clean_env),
		cmocka_unit_test_setup(test_hw_queues_empty_is_unset, clean_env),
		cmocka_unit_test_setup(test_only_what_the_driver_needs, clean_env),
		cmocka_unit_test_setup(test_all_kept_still_fit, clean_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
