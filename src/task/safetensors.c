/* safetensors reader and writer. The reader maps the file read-only and checks everything the
 * format promises before handing out a pointer: a sane header length, a JSON object (duplicate
 * names rejected by jansson itself), a known dtype and non-negative shape per tensor, offsets
 * inside the buffer whose length matches the shape, and tensors that tile the buffer exactly (no
 * overlap, no gap), as the reference implementation's validation does. A file that passes can be
 * read through the returned pointers without any further bounds check. The writer produces the
 * byte layout of the reference writer (compact JSON, keys dtype/shape/data_offsets in that order,
 * header padded with spaces to a multiple of 8 so the buffer starts 8-byte aligned) and goes
 * through a temp file and a rename, so a reader never sees half a file. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"

/* The format is little-endian and tensor bytes are written and handed out exactly as they lie
 * in memory; a big-endian host would need byte swapping nobody has asked for yet. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

/* Names as the format spells them. Those without a stitch type are listed so that a file using
 * one is told "not supported" rather than "unknown": the file is fine, stitch is the limit. */
static const struct {
	const char *name;
	int supported;
	st_dtype dtype;
} st_names[] = {
	{"F64", 1, ST_F64},     {"F32", 1, ST_F32},         {"F16", 1, ST_F16},
	{"BF16", 1, ST_BF16},   {"I64", 1, ST_I64},         {"I32", 1, ST_I32},
	{"I8", 1, ST_I8},       {"U8", 1, ST_U8},           {"F8_E4M3", 1, ST_F8E4M3},
	{"F8_E5M2", 1, ST_F8E5M2},
	{"BOOL", 0, ST_F32},    {"I16", 0, ST_F32},         {"U16", 0, ST_F32},
	{"U32", 0, ST_F32},     {"U64", 0, ST_F32},         {"C64", 0, ST_F32},
	{"F8_E8M0", 0, ST_F32}, {"F6_E2M3", 0, ST_F32},     {"F6_E3M2", 0, ST_F32},
	{"F4", 0, ST_F32},
};

#define N_NAMES ((int)(sizeof st_names / sizeof st_names[0]))

const char *st_safetensors_dtype_name(st_dtype t)
{
	for (int i = 0; i < N_NAMES; i++)
		if (st_names[i].supported && st_names[i].dtype == t)
			return st_names[i].name;
	return NULL;
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct reader {
	const char *path;
	st_err *err;
	const char *buf;  /* start of the data buffer */
	uint64_t buf_len;
} reader;

static st_status bad(reader *R, const char *tensor, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "<file>: tensor '<name>': <what>", or "<file>: <what>" for the header as a whole. */
static st_status bad(reader *R, const char *tensor, const char *fmt, ...)
{
	char what[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (tensor)
		return st_err_set(R->err, ST_E_INVALID, "%s: tensor '%.200s': %s", R->path, tensor,
		                  what);
	return st_err_set(R->err, ST_E_INVALID, "%s: %s", R->path, what);
}

/* "[2, 3]" for messages. SHAPE_TEXT fits the longest: 8 dimensions of 20 characters each. */
#define SHAPE_TEXT 256

static void format_shape(char *out, const int64_t *shape, int ndim)
{
	int used = snprintf(out, SHAPE_TEXT, "[");
	for (int d = 0; d < ndim; d++)
		used += snprintf(out + used, SHAPE_TEXT - (size_t)used, "%s%lld", d ? ", " : "",
		                 (long long)shape[d]);
	snprintf(out + used, SHAPE_TEXT - (size_t)used, "]");
}

/* Bytes a tensor of this shape and dtype takes; -1 when the count overflows 64 bits, which no
 * real buffer can match. */
static int shape_bytes(const int64_t *shape, int ndim, st_dtype dtype, uint64_t *bytes)
{
	uint64_t n = 1;
	for (int d = 0; d < ndim; d++)
		if (__builtin_mul_overflow(n, (uint64_t)shape[d], &n))
			return -1;
	if (__builtin_mul_overflow(n, (uint64_t)st_dtype_size(dtype), &n))
		return -1;
	*bytes = n;
	return 0;
}

static st_status parse_dtype(reader *R, const char *name, json_t *v, st_dtype *out)
{
	if (!v)
		return bad(R, name, "missing dtype");
	if (!json_is_string(v))
		return bad(R, name, "dtype is not a string");
	const char *s = json_string_value(v);
	for (int i = 0; i < N_NAMES; i++) {
		if (strcmp(s, st_names[i].name))
			continue;
		if (!st_names[i].supported)
			return bad(R, name, "dtype '%s' is not supported (stitch has no such type)", s);
		*out = st_names[i].dtype;
		return ST_OK;
	}
	return bad(R, name, "unknown dtype '%.64s'", s);
}

static st_status parse_shape(reader *R, const char *name, json_t *v, st_safetensor *t)
{
	if (!v)
		return bad(R, name, "missing shape");
	if (!json_is_array(v))
		return bad(R, name, "shape is not an array");
	size_t nd = json_array_size(v);
	if (nd > ST_MAX_DIMS)
		return bad(R, name, "shape has %zu dimensions (at most %d supported)", nd, ST_MAX_DIMS);
	for (size_t d = 0; d < nd; d++) {
		json_t *x = json_array_get(v, d);
		if (!json_is_integer(x))
			return bad(R, name, "shape[%zu] is not an integer", d);
		json_int_t n = json_integer_value(x);
		if (n < 0)
			return bad(R, name, "shape[%zu] is negative (%lld)", d, (long long)n);
		t->shape[d] = n;
	}
	t->ndim = (int)nd;
	return ST_OK;
}

static st_status parse_offsets(reader *R, const char *name, json_t *v, uint64_t *begin,
                               uint64_t *end)
{
	if (!v)
		return bad(R, name, "missing data_offsets");
	if (!json_is_array(v) || json_array_size(v) != 2 ||
	    !json_is_integer(json_array_get(v, 0)) || !json_is_integer(json_array_get(v, 1)))
		return bad(R, name, "data_offsets is not [begin, end] (two integers)");
	json_int_t b = json_integer_value(json_array_get(v, 0));
	json_int_t e = json_integer_value(json_array_get(v, 1));
	if (b < 0 || e < 0)
		return bad(R, name, "data_offsets [%lld, %lld] is negative", (long long)b,
		           (long long)e);
	if (b > e)
		return bad(R, name, "data_offsets [%lld, %lld]: begin is after end", (long long)b,
		           (long long)e);
	if ((uint64_t)e > R->buf_len)
		return bad(R, name,
		           "data_offsets [%lld, %lld] run past the end of the data buffer (%llu bytes)",
		           (long long)b, (long long)e, (unsigned long long)R->buf_len);
	*begin = (uint64_t)b;
	*end = (uint64_t)e;
	return ST_OK;
}

static st_status parse_tensor(reader *R, const char *name, json_t *v, st_safetensor *t)
{
	if (!json_is_object(v))
		return bad(R, name, "expected an object with dtype, shape and data_offsets");
	/* The format defines exactly these three; anything else is a different or broken writer,
	 * and guessing what it meant is worse than saying so. */
	const char *key;
	json_t *x;
	json_object_foreach(v, key, x) {
		if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
			return bad(R, name, "unknown field '%.64s' (known: dtype shape data_offsets)",
			           key);
	}
	memset(t, 0, sizeof *t);
	t->name = name;
	uint64_t begin = 0, end = 0, want = 0;
	st_status s;
	if ((s = parse_dtype(R, name, json_object_get(v, "dtype"), &t->dtype)) ||
	    (s = parse_shape(R, name, json_object_get(v, "shape"), t)) ||
	    (s = parse_offsets(R, name, json_object_get(v, "data_offsets"), &begin, &end)))
		return s;
	char shp[SHAPE_TEXT];
	format_shape(shp, t->shape, t->ndim);
	if (shape_bytes(t->shape, t->ndim, t->dtype, &want))
		return bad(R, name, "shape %s is too large (its byte count overflows 64 bits)", shp);
	if (end - begin != want)
		return bad(R, name,
		           "size mismatch: data_offsets [%llu, %llu] hold %llu bytes but shape %s of %s "
		           "needs %llu",
		           (unsigned long long)begin, (unsigned long long)end,
		           (unsigned long long)(end - begin), shp, st_safetensors_dtype_name(t->dtype),
		           (unsigned long long)want);
	t->data = R->buf + begin;
	t->bytes = (size_t)want; /* fits: it is at most the mapped length */
	return ST_OK;
}

static st_status parse_metadata(reader *R, json_t *v)
{
	if (!json_is_object(v))
		return bad(R, NULL, "__metadata__ is not an object");
	const char *key;
	json_t *x;
	json_object_foreach(v, key, x) {
		if (!json_is_string(x))
			return bad(R, NULL, "__metadata__: value of '%.64s' is not a string", key);
	}
	return ST_OK;
}

/* All data pointers lie in one mapping, so their addresses order them as their offsets do.
 * Ties (zero-byte tensors) go shorter first, so an empty tensor at a boundary is not taken for
 * an overlap. */
static int by_position(const void *a, const void *b)
{
	const st_safetensor *x = a, *y = b;
	uintptr_t px = (uintptr_t)x->data, py = (uintptr_t)y->data;
	if (px != py)
		return px < py ? -1 : 1;
	return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(st_safetensor *const *)a)->name, (*(st_safetensor *const *)b)->name);
}

/* The tensors, in buffer order, must tile [0, buf_len) exactly. */
static st_status check_tiling(reader *R, const st_safetensor *t, int n)
{
	uint64_t at = 0;
	for (int i = 0; i < n; i++) {
		uint64_t b = (uint64_t)((const char *)t[i].data - R->buf), e = b + t[i].bytes;
		if (b < at) {
			uint64_t pb = (uint64_t)((const char *)t[i - 1].data - R->buf);
			return bad(R, t[i].name,
			           "data_offsets [%llu, %llu] overlap tensor '%.200s' [%llu, %llu]",
			           (unsigned long long)b, (unsigned long long)e, t[i - 1].name,
			           (unsigned long long)pb, (unsigned long long)(pb + t[i - 1].bytes));
		}
		if (b > at)
			return bad(R, t[i].name,
			           "gap in the data buffer: bytes [%llu, %llu) before this tensor belong "
			           "to no tensor",
			           (unsigned long long)at, (unsigned long long)b);
		at = e;
	}
	if (at < R->buf_len)
		return bad(R, NULL,
		           "gap in the data buffer: bytes [%llu, %llu) at its end belong to no tensor",
		           (unsigned long long)at, (unsigned long long)R->buf_len);
	return ST_OK;
}

static st_status parse(reader *R, st_safetensors *f)
{
	const unsigned char *p = f->map;
	uint64_t n = 0;
	for (int i = 0; i < 8; i++)
		n |= (uint64_t)p[i] << (8 * i);
	if (n == 0)
		return bad(R, NULL, "header is empty (header length 0)");
	if (n > ST_SAFETENSORS_HEADER_MAX)
		return bad(R, NULL, "header length %llu is over the format's limit of %u bytes",
		           (unsigned long long)n, ST_SAFETENSORS_HEADER_MAX);
	if (n > f->map_len - 8)
		return bad(R, NULL, "header length %llu is larger than the file (%zu bytes after the "
		           "8-byte length)", (unsigned long long)n, f->map_len - 8);
	const char *hdr = (const char *)p + 8;
	R->buf = hdr + n;
	R->buf_len = f->map_len - 8 - n;
	/* The reference reader insists on this too; it also keeps a stray byte order mark or
	 * leading garbage from being blamed on the JSON parser. */
	if (hdr[0] != '{')
		return bad(R, NULL, "header does not start with '{' (not a safetensors file?)");
	json_error_t je;
	f->header = json_loadb(hdr, (size_t)n, JSON_REJECT_DUPLICATES, &je);
	if (!f->header) {
		/* jansson's text names the key; say what the repeat means in this format. */
		if (json_error_code(&je) == json_error_duplicate_key)
			return bad(R, NULL, "header has a duplicate key (tensor names must be unique): "
			           "%s (line %d column %d)", je.text, je.line, je.column);
		return bad(R, NULL, "header is not valid JSON: %s (line %d column %d)", je.text,
		           je.line, je.column);
	}
	if (!json_is_object(f->header))
		return bad(R, NULL, "header is not a JSON object");

	size_t entries = json_object_size(f->header);
	json_t *meta = json_object_get(f->header, "__metadata__");
	size_t count = entries - (meta != NULL);
	if (count > (size_t)INT32_MAX)
		return bad(R, NULL, "too many tensors (%zu)", count);
	f->tensors = calloc(count ? count : 1, sizeof *f->tensors);
	f->by_name = calloc(count ? count : 1, sizeof *f->by_name);
	if (!f->tensors || !f->by_name)
		return st_err_set(R->err, ST_E_NOMEM, "%s: out of memory for %zu tensors", R->path,
		                  count);
	st_status s;
	if (meta && (s = parse_metadata(R, meta)))
		return s;
	f->metadata = meta;
	const char *key;
	json_t *v;
	json_object_foreach(f->header, key, v) {
		if (!strcmp(key, "__metadata__"))
			continue;
		if ((s = parse_tensor(R, key, v, &f->tensors[f->count])))
			return s;
		f->count++;
	}
	qsort(f->tensors, (size_t)f->count, sizeof *f->tensors, by_position);
	if ((s = check_tiling(R, f->tensors, f->count)))
		return s;
	for (int i = 0; i < f->count; i++)
		f->by_name[i] = &f->tensors[i];
	qsort(f->by_name, (size_t)f->count, sizeof *f->by_name, by_name);
	return ST_OK;
}

st_status st_safetensors_open(const char *path, st_safetensors *f, st_err *err)
{
	memset(f, 0, sizeof *f);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return st_err_set(err, ST_E_IO, "cannot open '%s': %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		st_err_set(err, ST_E_IO, "cannot stat '%s': %s", path, strerror(errno));
		close(fd);
		return ST_E_IO;
	}
	st_status s = ST_OK;
	if (!S_ISREG(st.st_mode))
		s = st_err_set(err, ST_E_IO, "cannot read '%s': not a regular file", path);
	else if (st.st_size == 0)
		s = st_err_set(err, ST_E_INVALID,
		               "%s: file is empty (a safetensors file starts with an 8-byte header "
		               "length)", path);
	else if (st.st_size < 8)
		s = st_err_set(err, ST_E_INVALID,
		               "%s: file is too short (%lld bytes) for the 8-byte header length", path,
		               (long long)st.st_size);
	else if ((unsigned long long)st.st_size > SIZE_MAX)
		s = st_err_set(err, ST_E_IO, "cannot map '%s': file too large (%lld bytes)", path,
		               (long long)st.st_size);
	if (s) {
		close(fd);
		return s;
	}
	/* MAP_PRIVATE + PROT_READ: the pages are the file's, shared with the page cache, and
	 * nothing here can write through them. */
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	int map_errno = errno;
	/* The mapping keeps the file alive on its own, and closing a read-only descriptor cannot
	 * lose data, so a failing close (EINTR after the descriptor is gone) changes nothing. */
	(void)close(fd);
	if (map == MAP_FAILED)
		return st_err_set(err, ST_E_IO, "cannot map '%s' (%lld bytes): %s", path,
		                  (long long)st.st_size, strerror(map_errno));
	f->map = map;
	f->map_len = (size_t)st.st_size;
	reader R = {.path = path, .err = err};
	if ((s = parse(&R, f)))
		st_safetensors_close(f);
	return s;
}

void st_safetensors_close(st_safetensors *f)
{
	if (!f)
		return;
	/* munmap fails only for an address range that is not a mapping, which f->map always is. */
	if (f->map)
		(void)munmap(f->map, f->map_len);
	json_decref(f->header);
	free(f->tensors);
	free(f->by_name);
	memset(f, 0, sizeof *f);
}

const st_safetensor *st_safetensors_find(const st_safetensors *f, const char *name)
{
	if (!f || !name || f->count == 0)
		return NULL;
	st_safetensor key = {.name = name}, *kp = &key;
	st_safetensor **hit =
		bsearch(&kp, f->by_name, (size_t)f->count, sizeof *f->by_name, by_name);
	return hit ? *hit : NULL;
}

/* ---- writing ------------------------------------------------------------------------------ */

static st_status bad_input(st_err *err, const char *path, int i, const char *name,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static st_status bad_input(st_err *err, const char *path, int i, const char *name,
                           const char *fmt, ...)
{
	char what[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (i < 0)
		return st_err_set(err, ST_E_INVALID, "cannot write '%s': %s", path, what);
	return st_err_set(err, ST_E_INVALID, "cannot write '%s': tensor %d '%.200s': %s", path, i,
	                  name ? name : "(null)", what);
}

/* The header, padded with spaces to a multiple of 8 (a length the format allows, and one that
 * puts the buffer, and so every tensor whose offset is a multiple of 8, on an 8-byte boundary in
 * a mapping), preceded by its 8-byte little-endian length. */
static st_status build_header(const char *path, const st_safetensor *t, int n,
                              const json_t *metadata, char **out, size_t *out_len, st_err *err)
{
	st_status s = ST_OK;
	json_t *root = json_object();
	if (!root)
		return st_err_set(err, ST_E_NOMEM, "cannot write '%s': out of memory", path);
	if (metadata) {
		if (!json_is_object(metadata)) {
			s = bad_input(err, path, -1, NULL, "metadata is not a JSON object");
			goto done;
		}
		/* A copy, because the caller's object is const and the header owns its members. */
		json_t *copy = json_deep_copy(metadata);
		if (!copy || json_object_set_new(root, "__metadata__", copy)) {
			s = st_err_set(err, ST_E_NOMEM, "cannot write '%s': out of memory", path);
			goto done;
		}
		const char *key;
		json_t *v;
		json_object_foreach(copy, key, v) {
			if (!json_is_string(v)) {
				s = bad_input(err, path, -1, NULL,
				              "metadata value of '%.64s' is not a string", key);
				goto done;
			}
		}
	}
	uint64_t at = 0;
	for (int i = 0; i < n; i++) {
		const st_safetensor *x = &t[i];
		const char *dname = st_safetensors_dtype_name(x->dtype);
		uint64_t want = 0;
		if (!x->name)
			s = bad_input(err, path, i, NULL, "no name");
		else if (!strcmp(x->name, "__metadata__"))
			s = bad_input(err, path, i, x->name, "the name is reserved for metadata");
		else if (json_object_get(root, x->name))
			s = bad_input(err, path, i, x->name, "duplicate name");
		else if (!dname)
			s = bad_input(err, path, i, x->name, "dtype %d has no safetensors name",
			              (int)x->dtype);
		else if (x->ndim < 0 || x->ndim > ST_MAX_DIMS)
			s = bad_input(err, path, i, x->name, "ndim %d is not in 0..%d", x->ndim,
			              ST_MAX_DIMS);
		if (s)
			goto done;
		for (int d = 0; d < x->ndim && !s; d++)
			if (x->shape[d] < 0)
				s = bad_input(err, path, i, x->name, "shape[%d] is negative (%lld)", d,
				              (long long)x->shape[d]);
		if (s)
			goto done;
		char shp[SHAPE_TEXT];
		format_shape(shp, x->shape, x->ndim);
		if (shape_bytes(x->shape, x->ndim, x->dtype, &want) ||
		    __builtin_add_overflow(at, want, &(uint64_t){0}))
			s = bad_input(err, path, i, x->name, "shape %s is too large", shp);
		else if (want != x->bytes)
			s = bad_input(err, path, i, x->name,
			              "size mismatch: bytes is %zu but shape %s of %s needs %llu", x->bytes,
			              shp, dname, (unsigned long long)want);
		else if (want > 0 && !x->data)
			s = bad_input(err, path, i, x->name, "no data for %llu bytes",
			              (unsigned long long)want);
		if (s)
			goto done;
		json_t *shape = json_array();
		for (int d = 0; shape && d < x->ndim; d++)
			if (json_array_append_new(shape, json_integer(x->shape[d]))) {
				json_decref(shape);
				shape = NULL;
			}
		/* json_pack keeps the keys in the order written, the order the reference writer uses. */
		json_t *entry = shape ? json_pack("{s:s,s:o,s:[I,I]}", "dtype", dname, "shape", shape,
		                                  "data_offsets", (json_int_t)at,
		                                  (json_int_t)(at + want))
		                      : NULL;
		if (!entry) {
			s = st_err_set(err, ST_E_NOMEM, "cannot write '%s': out of memory", path);
			goto done;
		}
		/* Fails for a key that is not valid UTF-8 (memory aside): JSON cannot hold it. */
		if (json_object_set_new(root, x->name, entry)) {
			s = bad_input(err, path, i, x->name, "name is not valid UTF-8");
			goto done;
		}
		at += want;
	}
	char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text) {
		s = st_err_set(err, ST_E_NOMEM, "cannot write '%s': out of memory", path);
		goto done;
	}
	size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
	if (padded > ST_SAFETENSORS_HEADER_MAX) {
		free(text);
		s = bad_input(err, path, -1, NULL, "header would be %zu bytes, over the format's limit "
		              "of %u", padded, ST_SAFETENSORS_HEADER_MAX);
		goto done;
	}
	char *buf = malloc(8 + padded);
	if (!buf) {
		free(text);
		s = st_err_set(err, ST_E_NOMEM, "cannot write '%s': out of memory", path);
		goto done;
	}
	for (int b = 0; b < 8; b++)
		buf[b] = (char)(((uint64_t)padded >> (8 * b)) & 0xff);
	memcpy(buf + 8, text, len);
	memset(buf + 8 + len, ' ', padded - len);
	free(text);
	*out = buf;
	*out_len = 8 + padded;
done:
	json_decref(root);
	return s;
}

st_status st_safetensors_write(const char *path, const st_safetensor *t, int n,
                               const json_t *metadata, st_err *err)
{
	if (n < 0 || (n > 0 && !t))
		return bad_input(err, path, -1, NULL, "%d tensors given%s", n,
		                 n > 0 ? " without an array" : "");
	char *head = NULL;
	size_t head_len = 0;
	st_status s = build_header(path, t, n, metadata, &head, &head_len, err);
	if (s)
		return s;
	const void **parts = malloc((size_t)(n + 1) * sizeof *parts);
	size_t *lens = malloc((size_t)(n + 1) * sizeof *lens);
	if (!parts || !lens) {
		s = st_err_set(err, ST_E_NOMEM, "cannot write '%s': out of memory", path);
	} else {
		parts[0] = head;
		lens[0] = head_len;
		for (int i = 0; i < n; i++) {
			parts[i + 1] = t[i].data;
			lens[i + 1] = t[i].bytes;
		}
		s = st_write_parts_atomic(path, parts, lens, n + 1, err);
	}
	free(parts);
	free(lens);
	free(head);
	return s;
}
