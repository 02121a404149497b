/* The environment a runner gets: only the variables the loader and the driver need (a secret of
 * the parent's never reaches it), CUDA_VISIBLE_DEVICES narrowed to one device, HOME in its own
 * folder, and CUDA_DEVICE_MAX_CONNECTIONS at ST_RUNNER_HW_QUEUES unless the parent sets it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/runner.h"

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

static void test_hw_queues_default(void **state)
{
	(void)state;
	unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
	build(NULL);
	char want[16];
	snprintf(want, sizeof want, "%d", ST_RUNNER_HW_QUEUES);
	assert_non_null(env_value("CUDA_DEVICE_MAX_CONNECTIONS"));
	assert_string_equal(env_value("CUDA_DEVICE_MAX_CONNECTIONS"), want);
}

static void test_hw_queues_from_parent(void **state)
{
	(void)state;
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8", 1);
	build(NULL);
	assert_string_equal(env_value("CUDA_DEVICE_MAX_CONNECTIONS"), "8");
	unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
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

/* Every variable the runner may keep set at once: the ones added after them still fit. */
static void test_all_kept_still_fit(void **state)
{
	(void)state;
	const char *kept[] = {"PATH", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES",
	                      "NVIDIA_DRIVER_CAPABILITIES", "CUDA_MODULE_LOADING", "NCCL_NVLS_ENABLE",
	                      "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
	                      "STITCH_RUNNER_KEEP_MB", "STITCH_RUNNER_ARENA_MB", NULL};
	for (int i = 0; kept[i]; i++)
		setenv(kept[i], "1", 1);
	unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
	build("0");
	for (int i = 0; kept[i]; i++)
		assert_non_null(env_value(kept[i]));
	assert_non_null(env_value("CUDA_DEVICE_MAX_CONNECTIONS"));
	assert_string_equal(env_value("CUDA_VISIBLE_DEVICES"), "0");
	assert_string_equal(env_value("HOME"), "/tmp/stitch-run-test");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hw_queues_default),
		cmocka_unit_test(test_hw_queues_from_parent),
		cmocka_unit_test(test_only_what_the_driver_needs),
		cmocka_unit_test(test_all_kept_still_fit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
