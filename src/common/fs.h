/* File helpers: read a whole file, write one atomically (temp + rename, so no partial file is
 * ever seen), make folders, the cache folder, and SHA-256 in hex (OpenSSL EVP). */
#ifndef ST_FS_H
#define ST_FS_H

#include <stddef.h>
#include "st_error.h"

st_status st_read_file(const char *path, char **data, size_t *len, st_err *err);
/* The whole of an open file from its start (its offset untouched), NUL-ended, at most max bytes:
 * a file read through a descriptor kept since its creation, never by a name someone else may
 * have pointed elsewhere. */
st_status st_read_fd(int fd, size_t max, char **data, size_t *len, st_err *err);
st_status st_write_file_atomic(const char *path, const void *data, size_t len, st_err *err);
/* The same for a file made of n parts written one after another (a header, then tensors). */
st_status st_write_parts_atomic(const char *path, const void *const *parts, const size_t *lens,
                                int n, st_err *err);
st_status st_mkdirs(const char *path, st_err *err);
/* $STITCH_CACHE_DIR, else $XDG_CACHE_HOME/stitch, else $HOME/.cache/stitch; created if missing. */
st_status st_cache_dir(char *out, size_t len, st_err *err);
/* $XDG_DATA_HOME/stitch/NAME, else $HOME/.local/share/stitch/NAME (the folder is created): where
 * stitch keeps what it must not lose, like the bench and serve databases. */
st_status st_data_path(const char *name, char *out, size_t len, st_err *err);
int st_file_exists(const char *path);
/* Remove a folder and everything under it (links are removed, not followed); best effort. */
void st_rm_tree(const char *path);
int st_dir_exists(const char *path);

typedef struct st_sha256 { void *evp; } st_sha256;
st_status st_sha256_init(st_sha256 *h);
void st_sha256_update(st_sha256 *h, const void *data, size_t len);
void st_sha256_final(st_sha256 *h, char hex[65]);  /* also frees h */
void st_sha256_hex(const void *data, size_t len, char hex[65]);

/* `name` as execvp would find it (a name with a slash as it is), resolved up front so that a
 * missing program is reported before anything runs and every user sees one path: 1 and the path
 * in out, or 0. */
int st_which(const char *name, char *out, size_t len);

#endif
