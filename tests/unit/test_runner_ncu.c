/* The report of a runner started under ncu is read through the descriptor the parent opened
 * before the start, never by its name in the runner's folder: a stand-in ncu (a script given as
 * $STITCH_NCU) opens its --log-file as ncu does, then, as an unsandboxed solution could, replaces
 * the name with a link to a file the verifier must never show, runs the host runner, and writes
 * its report last. The report comes back; the linked file's words do not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verify/runner_client.h"

static char dir[] = "/tmp/stitch-ncu-test-XXXXXX";

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_report_read_through_the_kept_descriptor(void **state)
{
	(void)state;
	assert_non_null(mkdtemp(dir));
	char secret[300], ncu[300], script[2048];
	snprintf(secret, sizeof secret, "%s/secret.txt", dir);
	write_file(secret, "root:x:0:0 the verifier must never show this\n", 0600);
	snprintf(ncu, sizeof ncu, "%s/ncu", dir);
	snprintf(script, sizeof script,
	         "#!/bin/sh\n"
	         "log=\n"
	         "while [ $# -gt 0 ]; do\n"
	         "  case $1 in --log-file) log=$2; shift 2 ;; */stitch-runner-*) break ;; *) shift ;; esac\n"
	         "done\n"
	         "exec 5>\"$log\"\n"
	         "/bin/rm -f \"$log\" && /bin/ln -s %s \"$log\"\n"
	         "\"$@\"\n"
	         "echo '\"ID\",\"Kernel Name\"' >&5\n"
	         "echo '\"0\",\"stand_in_kernel\"' >&5\n",
	         secret);
	write_file(ncu, script, 0700);
	assert_int_equal(setenv("STITCH_NCU", ncu, 1), 0);

	st_runner r;
	st_err e;
	assert_int_equal(st_runner_start(&r, "host", "candidate", ST_RUNNER_NCU, NULL, &e), ST_OK);
	assert_int_equal(st_runner_hello(&r, 30, &e), ST_OK);
	char *text = NULL;
	size_t len = 0;
	st_status s = st_runner_ncu_report(&r, 30, &text, &len, &e);
	assert_int_equal(s, ST_OK);
	assert_non_null(text);
	assert_non_null(strstr(text, "stand_in_kernel"));
	assert_null(strstr(text, "never show"));
	assert_int_equal(len, strlen(text));
	free(text);
	st_runner_stop(&r);
	unlink(ncu);
	unlink(secret);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_read_through_the_kept_descriptor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
