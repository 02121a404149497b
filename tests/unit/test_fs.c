/* Unit tests for the file helpers: atomic writes leave no temp files behind (also on failure),
 * a kept descriptor read whole from its start and within its cap, nested folder creation, the cache folder lookup order and SHA-256 against known vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int setup(void **state)
{
	char *dir = strdup("/tmp/st_test_fs.XXXXXX");
	if (!dir || !mkdtemp(dir))
		return -1;
	*state = dir;
	return 0;
}

static int teardown(void **state)
{
	nftw(*state, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(*state);
	return 0;
}

/* Number of entries in dir, other than . and .. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void test_atomic_write_read_back(void **state)
{
	const char *dir = *state;
	char path[512];
	snprintf(path, sizeof path, "%s/out.txt", dir);
	st_err err = { "" };
	assert_int_equal(st_write_file_atomic(path, "hello\nworld", 11, &err), ST_OK);
	char *data = NULL;
	size_t len = 0;
	assert_int_equal(st_read_file(path, &data, &len, &err), ST_OK);
	assert_int_equal(len, 11);
	assert_string_equal(data, "hello\nworld");
	free(data);

	/* Overwrite with shorter content: the old bytes must not survive. */
	assert_int_equal(st_write_file_atomic(path, "x", 1, &err), ST_OK);
	assert_int_equal(st_read_file(path, &data, &len, &err), ST_OK);
	assert_int_equal(len, 1);
	assert_string_equal(data, "x");
	free(data);

	/* Empty file. */
	assert_int_equal(st_write_file_atomic(path, "", 0, &err), ST_OK);
	assert_int_equal(st_read_file(path, &data, &len, &err), ST_OK);
	assert_int_equal(len, 0);
	assert_string_equal(data, "");
	free(data);

	assert_int_equal(count_entries(dir), 1); /* no path.tmp.* left */
}

static void test_atomic_write_large(void **state)
{
	char path[512];
	snprintf(path, sizeof path, "%s/big.bin", (const char *)*state);
	size_t n = 3u << 20;
	unsigned char *buf = malloc(n);
	assert_non_null(buf);
	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	st_err err;
	assert_int_equal(st_write_file_atomic(path, buf, n, &err), ST_OK);
	char *data;
	size_t len;
	assert_int_equal(st_read_file(path, &data, &len, &err), ST_OK);
	assert_int_equal(len, n);
	assert_memory_equal(data, buf, n);
	free(data);
	free(buf);
}

static void test_atomic_write_failure_cleans_up(void **state)
{
	const char *dir = *state;
	char path[512];
	snprintf(path, sizeof path, "%s/adir", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	/* rename() of a file over a folder fails: the temp file must go. */
	st_err err = { "" };
	assert_int_equal(st_write_file_atomic(path, "abc", 3, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, path));
	assert_int_equal(count_entries(dir), 1);

	/* A folder that does not exist. */
	snprintf(path, sizeof path, "%s/missing/x.txt", dir);
	assert_int_equal(st_write_file_atomic(path, "abc", 3, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "No such file or directory"));
}

static void test_read_missing(void **state)
{
	char path[512];
	snprintf(path, sizeof path, "%s/nope.txt", (const char *)*state);
	st_err err = { "" };
	char *data = (char *)1;
	assert_int_equal(st_read_file(path, &data, NULL, &err), ST_E_IO);
	assert_null(data);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "No such file or directory"));
	/* a folder is not readable as a file */
	assert_int_equal(st_read_file(*state, &data, NULL, &err), ST_E_IO);
	assert_null(data);
}

/* st_read_fd reads from offset 0 whatever the descriptor's offset, leaves that offset alone (the
 * writer goes on appending), follows the file under its original name's inode after a rename,
 * and refuses more than its cap. */
static void test_read_fd(void **state)
{
	char path[512], moved[512];
	snprintf(path, sizeof path, "%s/kept.log", (const char *)*state);
	snprintf(moved, sizeof moved, "%s/moved.log", (const char *)*state);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "first line\n", 11), 11);
	assert_int_equal(rename(path, moved), 0);
	char *data = NULL;
	size_t len = 0;
	st_err err = { "" };
	assert_int_equal(st_read_fd(fd, 1024, &data, &len, &err), ST_OK);
	assert_string_equal(data, "first line\n");
	assert_int_equal(len, 11);
	free(data);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 11);
	assert_int_equal(write(fd, "second\n", 7), 7);
	assert_int_equal(st_read_fd(fd, 1024, &data, &len, &err), ST_OK);
	assert_string_equal(data, "first line\nsecond\n");
	free(data);
	/* over the cap: an error that says so, no text */
	data = (char *)1;
	assert_int_equal(st_read_fd(fd, 10, &data, &len, &err), ST_E_IO);
	assert_null(data);
	assert_non_null(strstr(err.msg, "too large"));
	close(fd);
	assert_int_equal(st_read_fd(-1, 10, &data, &len, &err), ST_E_INVALID);
}

static void test_mkdirs(void **state)
{
	const char *dir = *state;
	char path[512];
	snprintf(path, sizeof path, "%s/a/b/c/d/", dir);
	st_err err = { "" };
	assert_int_equal(st_mkdirs(path, &err), ST_OK);
	assert_true(st_dir_exists(path));
	assert_int_equal(st_mkdirs(path, &err), ST_OK); /* already there */
	snprintf(path, sizeof path, "%s/a/b", dir);
	assert_true(st_dir_exists(path));
	assert_false(st_file_exists(path));

	/* A file in the way. */
	snprintf(path, sizeof path, "%s/a/file", dir);
	assert_int_equal(st_write_file_atomic(path, "x", 1, &err), ST_OK);
	assert_true(st_file_exists(path));
	assert_false(st_dir_exists(path));
	snprintf(path, sizeof path, "%s/a/file/sub", dir);
	assert_int_equal(st_mkdirs(path, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "a/file"));
	assert_int_equal(st_mkdirs("", &err), ST_E_INVALID);
}

static void test_cache_dir(void **state)
{
	const char *dir = *state;
	char want[512], got[512];
	st_err err = { "" };
	char *saved = getenv("STITCH_CACHE_DIR") ? strdup(getenv("STITCH_CACHE_DIR")) : NULL;
	char *saved_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;

	snprintf(want, sizeof want, "%s/cache/x", dir);
	setenv("STITCH_CACHE_DIR", want, 1);
	assert_int_equal(st_cache_dir(got, sizeof got, &err), ST_OK);
	assert_string_equal(got, want);
	assert_true(st_dir_exists(want));

	unsetenv("STITCH_CACHE_DIR");
	snprintf(want, sizeof want, "%s/xdg", dir);
	setenv("XDG_CACHE_HOME", want, 1);
	assert_int_equal(st_cache_dir(got, sizeof got, &err), ST_OK);
	strcat(want, "/stitch");
	assert_string_equal(got, want);
	assert_true(st_dir_exists(want));

	/* Too small a buffer is an error, not a truncated path. */
	char tiny[8];
	assert_int_equal(st_cache_dir(tiny, sizeof tiny, &err), ST_E_INVALID);

	if (saved)
		setenv("STITCH_CACHE_DIR", saved, 1);
	if (saved_xdg)
		setenv("XDG_CACHE_HOME", saved_xdg, 1);
	else
		unsetenv("XDG_CACHE_HOME");
	free(saved);
	free(saved_xdg);
}

static void test_sha256(void **state)
{
	(void)state;
	char hex[65];
	st_sha256_hex("abc", 3, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	st_sha256_hex("", 0, hex);
	assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

	/* Incremental over pieces equals one shot. */
	const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	st_sha256 h;
	assert_int_equal(st_sha256_init(&h), ST_OK);
	for (size_t i = 0; i < strlen(msg); i += 5)
		st_sha256_update(&h, msg + i, strlen(msg) - i < 5 ? strlen(msg) - i : 5);
	st_sha256_final(&h, hex);
	assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	assert_null(h.evp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_atomic_write_read_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_atomic_write_large, setup, teardown),
		cmocka_unit_test_setup_teardown(test_atomic_write_failure_cleans_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_fd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mkdirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_dir, setup, teardown),
		cmocka_unit_test(test_sha256),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
