/* Hugging Face safetensors files: an 8-byte little-endian header length N, N bytes of JSON that
 * map tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (plus an optional
 * "__metadata__" object of strings), then the data buffer the offsets point into. Reading maps
 * the file read-only and validates the whole header before anything is handed out, so a caller
 * never meets a tensor whose bytes are out of bounds or disagree with its shape. Writing lays the
 * tensors out in the order given and replaces the target atomically. */
#ifndef ST_SAFETENSORS_H
#define ST_SAFETENSORS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/st_error.h"
#include "dtype.h"
#include "task.h"

/* The format's own cap on the header (the reference implementation's MAX_HEADER_SIZE). */
#define ST_SAFETENSORS_HEADER_MAX 100000000u

/* One tensor. Read: everything points into the st_safetensors it came from and lives until
 * st_safetensors_close. Write: the caller's tensor; `bytes` must equal what the shape and dtype
 * imply (the writer checks, so a buffer shorter than its shape is never read past its end). */
typedef struct st_safetensor {
	const char *name;
	st_dtype dtype;
	int ndim;                    /* 0 for a scalar */
	int64_t shape[ST_MAX_DIMS];
	const void *data;            /* row-major, little-endian; read: into the read-only mapping */
	size_t bytes;
} st_safetensor;

typedef struct st_safetensors {
	void *map;                   /* the whole file, mapped read-only */
	size_t map_len;
	int count;
	st_safetensor *tensors;      /* ordered by position in the data buffer */
	json_t *metadata;            /* the "__metadata__" object (string values only), or NULL;
	                              * borrowed from `header`: json_incref it to keep it longer */
	json_t *header;              /* the parsed header; tensor names point into it */
	st_safetensor **by_name;     /* tensors sorted by name, for st_safetensors_find */
} st_safetensors;

/* Map and validate `path`. On failure *f is left zeroed (closing it is harmless) and err names
 * the file, the tensor when there is one, and what is wrong. The data buffer starts 8-byte
 * aligned when the header is padded as the format recommends (our writer's always is), and a
 * tensor is then aligned as far as its offset is; nothing forces either, so read elements
 * through memcpy where alignment is not known.
 * The file must not be truncated while open (a mapped page past the new end faults); replacing
 * it by rename, as st_safetensors_write does, is safe. */
st_status st_safetensors_open(const char *path, st_safetensors *f, st_err *err);
void st_safetensors_close(st_safetensors *f);
/* NULL when there is no tensor of that name. */
const st_safetensor *st_safetensors_find(const st_safetensors *f, const char *name);

/* Write n tensors (their data in the order given, no gaps, no padding between them) and
 * optional metadata (an object of string values, or NULL) to a temp file next to `path`, fsync
 * it and rename it over `path`. Names must be unique, valid UTF-8 and not "__metadata__". To
 * keep every tensor aligned to its element size, give tensors of wider elements first (the
 * reference writer sorts by dtype size for the same reason; we keep the caller's order). */
st_status st_safetensors_write(const char *path, const st_safetensor *t, int n,
                               const json_t *metadata, st_err *err);

/* "F32", "BF16", ... for the dtypes safetensors and stitch share; NULL for any other. */
const char *st_safetensors_dtype_name(st_dtype t);

#endif
