/* Unit tests for the safetensors reader and writer: a round trip of three tensors (a matrix, a
 * vector and a scalar) with metadata, a file made byte by byte as the reference writer lays it
 * out (read back, and matched byte for byte by our writer), and one hand-made malformed file per
 * rule the reader enforces, each checked for an error that names the file and the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "task/safetensors.h"

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int setup(void **state)
{
	char *dir = strdup("/tmp/st_test_safetensors.XXXXXX");
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

static void path_in(char *out, size_t len, const char *dir, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
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

static void write_bytes(const char *path, const void *data, size_t len)
{
	FILE *fp = fopen(path, "wb");
	assert_non_null(fp);
	if (len)
		assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

/* A file with the given header length field, header text and buffer, no padding. */
static void write_raw(const char *path, uint64_t n, const char *header, const void *buf,
                      size_t buf_len)
{
	size_t hlen = strlen(header);
	unsigned char *b = malloc(8 + hlen + buf_len + 1);
	assert_non_null(b);
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(n >> (8 * i));
	memcpy(b + 8, header, hlen);
	if (buf_len)
		memcpy(b + 8 + hlen, buf, buf_len);
	write_bytes(path, b, 8 + hlen + buf_len);
	free(b);
}

static void write_st(const char *path, const char *header, size_t buf_len)
{
	unsigned char buf[64] = {0};
	assert_true(buf_len <= sizeof buf);
	write_raw(path, strlen(header), header, buf, buf_len);
}

/* Opening must fail as invalid, name the file and mention `keyword`, and leave *f zeroed. */
static void expect_invalid(const char *path, const char *keyword)
{
	st_safetensors f;
	st_err err = {{0}};
	assert_int_equal(st_safetensors_open(path, &f, &err), ST_E_INVALID);
	if (!strstr(err.msg, keyword) || !strstr(err.msg, path))
		fail_msg("expected '%s' and the file name in: %s", keyword, err.msg);
	assert_null(f.map);
	assert_null(f.tensors);
	assert_int_equal(f.count, 0);
	st_safetensors_close(&f); /* harmless after a failed open */
}

static void malformed(const char *dir, const char *header, size_t buf_len, const char *keyword)
{
	char path[512];
	path_in(path, sizeof path, dir, "bad.safetensors");
	write_st(path, header, buf_len);
	expect_invalid(path, keyword);
}

static void test_round_trip(void **state)
{
	const char *dir = *state;
	char path[512];
	path_in(path, sizeof path, dir, "model.safetensors");

	float m[6] = {0, 1, 2, 3, 4, 5};
	uint16_t v[4] = {0x3f80, 0x4000, 0xbf80, 0x0000}; /* bf16 1, 2, -1, 0 */
	int64_t s = -42;
	st_safetensor in[3] = {
		{.name = "layer.weight", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .data = m,
		 .bytes = sizeof m},
		{.name = "layer.bias", .dtype = ST_BF16, .ndim = 1, .shape = {4}, .data = v,
		 .bytes = sizeof v},
		{.name = "step", .dtype = ST_I64, .ndim = 0, .data = &s, .bytes = sizeof s},
	};
	json_t *meta = json_pack("{s:s,s:s}", "format", "pt", "note", "h\xc3\xa9llo");
	st_err err = {{0}};
	assert_int_equal(st_safetensors_write(path, in, 3, meta, &err), ST_OK);
	assert_int_equal(count_entries(dir), 1); /* no temp file left behind */

	st_safetensors f;
	if (st_safetensors_open(path, &f, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(f.count, 3);
	for (int i = 0; i < 3; i++) {
		const st_safetensor *t = &f.tensors[i]; /* buffer order = the order written */
		assert_string_equal(t->name, in[i].name);
		assert_int_equal(t->dtype, in[i].dtype);
		assert_int_equal(t->ndim, in[i].ndim);
		for (int d = 0; d < t->ndim; d++)
			assert_int_equal(t->shape[d], in[i].shape[d]);
		assert_int_equal(t->bytes, in[i].bytes);
		assert_memory_equal(t->data, in[i].data, t->bytes);
		assert_int_equal((uintptr_t)t->data % 8, 0); /* padded header, 8-byte multiples */
		assert_ptr_equal(st_safetensors_find(&f, in[i].name), t);
	}
	assert_null(st_safetensors_find(&f, "missing"));
	assert_null(st_safetensors_find(&f, "__metadata__"));
	assert_non_null(f.metadata);
	assert_true(json_equal(f.metadata, meta));

	/* The header length field is a multiple of 8 and the file ends right after the data. */
	const unsigned char *p = f.map;
	uint64_t n = 0;
	for (int i = 0; i < 8; i++)
		n |= (uint64_t)p[i] << (8 * i);
	assert_int_equal(n % 8, 0);
	assert_int_equal(f.map_len, 8 + n + sizeof m + sizeof v + sizeof s);
	st_safetensors_close(&f);
	st_safetensors_close(&f); /* twice is harmless */

	/* Rewriting replaces the file (a new inode, so an old mapping would stay valid). */
	assert_int_equal(st_safetensors_write(path, in + 2, 1, NULL, &err), ST_OK);
	assert_int_equal(count_entries(dir), 1);
	assert_int_equal(st_safetensors_open(path, &f, &err), ST_OK);
	assert_int_equal(f.count, 1);
	assert_string_equal(f.tensors[0].name, "step");
	assert_int_equal(f.tensors[0].ndim, 0);
	assert_int_equal(*(const int64_t *)f.tensors[0].data, -42);
	assert_null(f.metadata);
	st_safetensors_close(&f);
	json_decref(meta);
}

static void test_metadata_and_empty(void **state)
{
	const char *dir = *state;
	char path[512];
	path_in(path, sizeof path, dir, "empty.safetensors");
	json_t *meta = json_pack("{s:s,s:s}", "b", "2", "a", "");
	st_err err = {{0}};
	assert_int_equal(st_safetensors_write(path, NULL, 0, meta, &err), ST_OK);
	st_safetensors f;
	assert_int_equal(st_safetensors_open(path, &f, &err), ST_OK);
	assert_int_equal(f.count, 0);
	assert_null(st_safetensors_find(&f, "a"));
	assert_true(json_equal(f.metadata, meta));
	assert_string_equal(json_string_value(json_object_get(f.metadata, "b")), "2");
	st_safetensors_close(&f);
	json_decref(meta);

	/* No tensors and no metadata: the header "{}" padded, nothing else. */
	assert_int_equal(st_safetensors_write(path, NULL, 0, NULL, &err), ST_OK);
	assert_int_equal(st_safetensors_open(path, &f, &err), ST_OK);
	assert_int_equal(f.count, 0);
	assert_null(f.metadata);
	assert_int_equal(f.map_len, 16);
	st_safetensors_close(&f);

	/* Metadata values must be strings, in both directions. */
	meta = json_pack("{s:i}", "epoch", 3);
	assert_int_equal(st_safetensors_write(path, NULL, 0, meta, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "not a string"));
	json_decref(meta);
	malformed(dir, "{\"__metadata__\":{\"epoch\":3}}", 0, "__metadata__");
	malformed(dir, "{\"__metadata__\":[]}", 0, "__metadata__ is not an object");
}

/* 8-byte length 56, the header exactly as the reference writer emits it, two spaces of padding
 * to a multiple of 8, then float32 1.0 and 2.0 little-endian. */
static const unsigned char known_good[] = {
	0x38, 0, 0, 0, 0, 0, 0, 0,
	'{', '"', 'a', '"', ':', '{', '"', 'd', 't', 'y', 'p', 'e', '"', ':', '"', 'F', '3', '2',
	'"', ',', '"', 's', 'h', 'a', 'p', 'e', '"', ':', '[', '2', ']', ',', '"', 'd', 'a', 't',
	'a', '_', 'o', 'f', 'f', 's', 'e', 't', 's', '"', ':', '[', '0', ',', '8', ']', '}', '}',
	' ', ' ',
	0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40,
};

static void test_known_good_file(void **state)
{
	const char *dir = *state;
	char path[512];
	assert_int_equal(sizeof known_good, 8 + 56 + 8);
	path_in(path, sizeof path, dir, "a.safetensors");
	write_bytes(path, known_good, sizeof known_good);

	st_safetensors f;
	st_err err = {{0}};
	if (st_safetensors_open(path, &f, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(f.count, 1);
	const st_safetensor *a = st_safetensors_find(&f, "a");
	assert_non_null(a);
	assert_int_equal(a->dtype, ST_F32);
	assert_int_equal(a->ndim, 1);
	assert_int_equal(a->shape[0], 2);
	assert_int_equal(a->bytes, 8);
	float x[2];
	memcpy(x, a->data, sizeof x);
	assert_true(x[0] == 1.0f && x[1] == 2.0f);
	assert_null(f.metadata);

	/* Our writer must produce the very same bytes. */
	char path2[512];
	path_in(path2, sizeof path2, dir, "ours.safetensors");
	assert_int_equal(st_safetensors_write(path2, a, 1, NULL, &err), ST_OK);
	st_safetensors g;
	assert_int_equal(st_safetensors_open(path2, &g, &err), ST_OK);
	assert_int_equal(g.map_len, sizeof known_good);
	assert_memory_equal(g.map, known_good, sizeof known_good);
	st_safetensors_close(&g);
	st_safetensors_close(&f);
}

static void test_bad_length(void **state)
{
	const char *dir = *state;
	char path[512];
	path_in(path, sizeof path, dir, "len.safetensors");

	write_bytes(path, "", 0);
	expect_invalid(path, "empty");
	write_bytes(path, "\x02\0\0", 3);
	expect_invalid(path, "too short");
	write_raw(path, 0, "", NULL, 0); /* 8 bytes, N = 0 */
	expect_invalid(path, "header is empty");
	write_raw(path, 1000, "{}", NULL, 0);
	expect_invalid(path, "larger than the file");
	write_raw(path, 200000000, "{}", NULL, 0);
	expect_invalid(path, "limit");
	write_raw(path, (uint64_t)-1, "{}", NULL, 0); /* 8 + N would wrap around */
	expect_invalid(path, "limit");
}

static void test_bad_header(void **state)
{
	const char *dir = *state;
	malformed(dir, "{\"a\":{\"dtype\":\"F32\",", 0, "not valid JSON");
	malformed(dir, "[1, 2]", 0, "does not start with '{'");
	malformed(dir, "{\"a\":[]}", 0, "expected an object");
	malformed(dir,
	          "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
	          "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
	          2, "duplicate");
	malformed(dir, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "missing data_offsets");
	malformed(dir, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1,
	          "unknown field 'x'");
}

static void test_bad_tensor(void **state)
{
	const char *dir = *state;
	malformed(dir, "{\"w\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	          "tensor 'w': unknown dtype 'F33'");
	malformed(dir, "{\"w\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
	          "dtype 'BOOL' is not supported");
	malformed(dir, "{\"w\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
	          "shape[0] is negative");
	malformed(dir, "{\"w\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1,
	          "not an integer");
	malformed(dir,
	          "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
	          1, "9 dimensions");
	malformed(dir, "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 2,
	          "past the end");
	malformed(dir, "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,1]}}", 2,
	          "begin is after end");
	malformed(dir, "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
	          "size mismatch");
	/* 2^32 * 2^32 elements: the product wraps to 0 in 64 bits, which an empty range would
	 * otherwise match. */
	malformed(dir,
	          "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
	          "\"data_offsets\":[0,0]}}",
	          0, "overflows");
}

static void test_bad_layout(void **state)
{
	const char *dir = *state;
	malformed(dir,
	          "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	          "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
	          6, "overlap");
	/* Listed in the other order in the header: still found. */
	malformed(dir,
	          "{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]},"
	          "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
	          6, "overlap");
	malformed(dir,
	          "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
	          "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}",
	          6, "gap");
	malformed(dir, "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 4, "gap");
	malformed(dir, "{}", 1, "gap");
	/* An empty tensor inside another overlaps it; one at a boundary does not. */
	malformed(dir,
	          "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	          "\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,2]}}",
	          4, "overlap");
	char path[512];
	path_in(path, sizeof path, dir, "ok.safetensors");
	write_st(path,
	         "{\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]},"
	         "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	         "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}",
	         4);
	st_safetensors f;
	st_err err = {{0}};
	if (st_safetensors_open(path, &f, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(f.count, 3);
	assert_string_equal(f.tensors[0].name, "z"); /* ordered by position in the buffer */
	assert_string_equal(f.tensors[1].name, "a");
	assert_string_equal(f.tensors[2].name, "e");
	assert_int_equal(st_safetensors_find(&f, "e")->bytes, 0);
	st_safetensors_close(&f);
}

static void test_open_errors(void **state)
{
	const char *dir = *state;
	char path[512];
	st_safetensors f;
	st_err err = {{0}};
	path_in(path, sizeof path, dir, "nope.safetensors");
	assert_int_equal(st_safetensors_open(path, &f, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "No such file"));
	assert_int_equal(st_safetensors_open(dir, &f, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "not a regular file"));
}

static void test_write_errors(void **state)
{
	const char *dir = *state;
	char path[512];
	path_in(path, sizeof path, dir, "w.safetensors");
	float x[2] = {1, 2};
	st_safetensor t[2] = {
		{.name = "x", .dtype = ST_F32, .ndim = 1, .shape = {2}, .data = x, .bytes = 8},
		{.name = "x", .dtype = ST_F32, .ndim = 1, .shape = {2}, .data = x, .bytes = 8},
	};
	st_err err = {{0}};
	assert_int_equal(st_safetensors_write(path, t, 2, NULL, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "duplicate name"));
	t[1].name = "__metadata__";
	assert_int_equal(st_safetensors_write(path, t, 2, NULL, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "reserved"));
	t[1].name = "y";
	t[1].bytes = 4; /* a buffer shorter than its shape */
	assert_int_equal(st_safetensors_write(path, t, 2, NULL, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "size mismatch"));
	assert_non_null(strstr(err.msg, "'y'"));
	t[1].bytes = 8;
	t[1].shape[0] = -2;
	assert_int_equal(st_safetensors_write(path, t, 2, NULL, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "negative"));
	t[1].shape[0] = 2;
	t[1].name = "\xff\xfe";
	assert_int_equal(st_safetensors_write(path, t, 2, NULL, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "UTF-8"));
	assert_int_equal(count_entries(dir), 0); /* nothing written on a rejected input */

	path_in(path, sizeof path, dir, "no/such/folder/w.safetensors");
	assert_int_equal(st_safetensors_write(path, t, 1, NULL, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "No such file"));
	assert_int_equal(count_entries(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metadata_and_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_known_good_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_header, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_tensor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_errors, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
