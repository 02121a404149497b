/* The runner protocol's framing: messages arrive whole and in order, a descriptor passed beside a
 * message arrives usable, silence is a timeout, a closed peer is an error, and oversized or
 * malformed frames are refused rather than trusted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/proto.h"

static void test_roundtrip_and_fd(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	int mfd = memfd_create("t", 0);
	assert_true(mfd >= 0);
	assert_int_equal(ftruncate(mfd, 4096), 0);
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	assert_true(p != MAP_FAILED);
	strcpy(p, "shared");

	st_err err;
	json_t *m1 = json_pack("{s:s,s:i}", "op", "setup", "n", 42);
	json_t *m2 = json_pack("{s:s}", "op", "run");
	assert_int_equal(st_proto_send(sv[0], m1, mfd, &err), ST_OK);
	assert_int_equal(st_proto_send(sv[0], m2, -1, &err), ST_OK);

	json_t *r;
	int fd = -2;
	assert_int_equal(st_proto_recv(sv[1], &r, &fd, 1000, &err), ST_OK);
	assert_string_equal(json_string_value(json_object_get(r, "op")), "setup");
	assert_int_equal(json_integer_value(json_object_get(r, "n")), 42);
	assert_true(fd >= 0 && fd != mfd);
	char *q = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(q != MAP_FAILED);
	assert_string_equal(q, "shared");
	json_decref(r);
	assert_int_equal(st_proto_recv(sv[1], &r, &fd, 1000, &err), ST_OK);
	assert_string_equal(json_string_value(json_object_get(r, "op")), "run");
	assert_int_equal(fd, -1);
	json_decref(r);

	munmap(p, 4096);
	munmap(q, 4096);
	json_decref(m1);
	json_decref(m2);
	close(mfd);
	close(sv[0]);
	close(sv[1]);
}

static void test_timeout_and_close(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	st_err err;
	json_t *r;
	assert_int_equal(st_proto_recv(sv[1], &r, NULL, 50, &err), ST_E_TIMEOUT);
	assert_null(r);
	close(sv[0]);
	assert_int_equal(st_proto_recv(sv[1], &r, NULL, 1000, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "closed"));
	close(sv[1]);
}

static void test_bad_frames(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	st_err err;
	json_t *r;
	unsigned char huge[4] = {0xff, 0xff, 0xff, 0x7f};
	assert_int_equal(write(sv[0], huge, 4), 4);
	assert_int_equal(st_proto_recv(sv[1], &r, NULL, 1000, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "too large"));
	unsigned char junk[9] = {5, 0, 0, 0, '{', 'x', 'y', '!', '}'};
	assert_int_equal(write(sv[0], junk, 9), 9);
	assert_int_equal(st_proto_recv(sv[1], &r, NULL, 1000, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "malformed"));
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_and_fd),
		cmocka_unit_test(test_timeout_and_close),
		cmocka_unit_test(test_bad_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
