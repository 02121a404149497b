/* File helpers shared by the whole tool. Writes go through a temp file in the same folder and a
 * rename, so a reader (another stitch process sharing the cache, a crash mid-write) only ever sees
 * the old file or the complete new one. SHA-256 goes through OpenSSL's EVP interface because the
 * low-level SHA256_* calls are deprecated in OpenSSL 3. */
#include "fs.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

/* Files larger than this are not something stitch should slurp (sources, task.json, logs). */
#define ST_READ_MAX ((size_t)1 << 31)

/* Everything in fd up to EOF, at most max bytes; `what` names it in errors. at_offsets: from
 * offset 0 by pread, the descriptor's own offset left alone (a regular file kept open); else by
 * read from where the descriptor stands (a file just opened, or a pipe). */
static st_status read_all(int fd, const char *what, size_t max, int at_offsets, char **data,
                          size_t *len, st_err *err)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return st_err_set(err, ST_E_IO, "cannot stat %s: %s", what, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return st_err_set(err, ST_E_IO, "cannot read %s: %s", what, strerror(EISDIR));
	/* st_size is only a hint (pipes, /proc files, a file growing under us): read until EOF. */
	size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, n = 0;
	if (cap > max + 1)
		return st_err_set(err, ST_E_IO, "cannot read %s: file too large (%lld bytes)", what,
		                  (long long)st.st_size);
	char *buf = malloc(cap);
	if (!buf)
		return st_err_set(err, ST_E_NOMEM, "cannot read %s: out of memory", what);
	for (;;) {
		if (n + 1 >= cap) {
			char *nb = cap > max ? NULL : realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return cap > max ? st_err_set(err, ST_E_IO, "cannot read %s: file too large", what)
				                 : st_err_set(err, ST_E_NOMEM, "cannot read %s: out of memory", what);
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = at_offsets ? pread(fd, buf + n, cap - n - 1, (off_t)n)
		                       : read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			st_err_set(err, ST_E_IO, "cannot read %s: %s", what, strerror(errno));
			free(buf);
			return ST_E_IO;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	*data = buf;
	if (len)
		*len = n;
	return ST_OK;
}

st_status st_read_file(const char *path, char **data, size_t *len, st_err *err)
{
	*data = NULL;
	if (len)
		*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return st_err_set(err, ST_E_IO, "cannot open '%s': %s", path, strerror(errno));
	char what[PATH_MAX + 8];
	snprintf(what, sizeof what, "'%s'", path);
	st_status s = read_all(fd, what, ST_READ_MAX, 0, data, len, err);
	if (close(fd) != 0 && !s) {
		st_err_set(err, ST_E_IO, "cannot close '%s': %s", path, strerror(errno));
		free(*data);
		*data = NULL;
		return ST_E_IO;
	}
	return s;
}

st_status st_read_fd(int fd, size_t max, char **data, size_t *len, st_err *err)
{
	*data = NULL;
	if (len)
		*len = 0;
	if (fd < 0)
		return st_err_set(err, ST_E_INVALID, "no file to read (descriptor %d)", fd);
	char what[32];
	snprintf(what, sizeof what, "descriptor %d", fd);
	return read_all(fd, what, max, 1, data, len, err);
}

/* Unique enough across processes (pid) and threads (counter); O_EXCL catches the rest. */
static unsigned long long st_tmp_rand(void)
{
	static _Atomic unsigned long long counter;
	unsigned long long r = 0;
	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (unsigned long long)ts.tv_nsec * 2654435761ULL ^ (unsigned long long)ts.tv_sec;
	}
	return r ^ atomic_fetch_add(&counter, 1);
}

static st_status write_all(int fd, const char *tmp, const void *data, size_t len, st_err *err)
{
	const char *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return st_err_set(err, ST_E_IO, "cannot write '%s': %s", tmp,
			                  w < 0 ? strerror(errno) : "no progress (disk full?)");
		p += w;
		len -= (size_t)w;
	}
	return ST_OK;
}

st_status st_write_parts_atomic(const char *path, const void *const *parts, const size_t *lens,
                                int n, st_err *err)
{
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 64);
	if (!tmp)
		return st_err_set(err, ST_E_NOMEM, "cannot write '%s': out of memory", path);
	/* Next to the target, so the rename stays within one file system and is atomic. */
	int fd = -1;
	for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
		snprintf(tmp, plen + 64, "%s.tmp.%ld.%llx", path, (long)getpid(), st_tmp_rand());
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST) {
			st_err_set(err, ST_E_IO, "cannot create '%s': %s", tmp, strerror(errno));
			free(tmp);
			return ST_E_IO;
		}
	}
	if (fd < 0) {
		st_err_set(err, ST_E_IO, "cannot create a temp file next to '%s': %s", path,
		           strerror(EEXIST));
		free(tmp);
		return ST_E_IO;
	}
	for (int i = 0; i < n; i++)
		if (write_all(fd, tmp, parts[i], lens[i], err))
			goto fail;
	/* Without fsync a crash after rename can leave a zero-length file under the final name. */
	if (fsync(fd) != 0) {
		st_err_set(err, ST_E_IO, "cannot fsync '%s': %s", tmp, strerror(errno));
		goto fail;
	}
	int cfd = fd;
	fd = -1;
	if (close(cfd) != 0) {
		st_err_set(err, ST_E_IO, "cannot close '%s': %s", tmp, strerror(errno));
		goto fail;
	}
	if (rename(tmp, path) != 0) {
		st_err_set(err, ST_E_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
		goto fail;
	}
	free(tmp);
	return ST_OK;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp); /* best effort: the error being reported is the one that matters */
	free(tmp);
	return ST_E_IO;
}

st_status st_write_file_atomic(const char *path, const void *data, size_t len, st_err *err)
{
	return st_write_parts_atomic(path, &data, &len, 1, err);
}

st_status st_mkdirs(const char *path, st_err *err)
{
	if (!path || !*path)
		return st_err_set(err, ST_E_INVALID, "cannot create a folder with an empty name");
	char *buf = strdup(path);
	if (!buf)
		return st_err_set(err, ST_E_NOMEM, "cannot create '%s': out of memory", path);
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	/* Walk the prefixes; EEXIST is fine as long as what exists is a folder. */
	for (char *p = buf + 1;; p++) {
		int last = *p == '\0';
		if (*p != '/' && !last)
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(buf, 0755) != 0) {
			int e = errno;
			struct stat st;
			if (e != EEXIST || stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
				st_err_set(err, ST_E_IO, "cannot create folder '%s': %s", buf,
				           strerror(e == EEXIST ? ENOTDIR : e));
				free(buf);
				return ST_E_IO;
			}
		}
		*p = saved;
		if (last)
			break;
	}
	free(buf);
	return ST_OK;
}

/* stitch's own folder under the user's: $OVERRIDE as given, else $XDG/stitch, else
 * $HOME/HOME_SUB/stitch; created if missing. `what` names it in errors. */
static st_status user_dir(const char *override, const char *xdg, const char *home_sub,
                          const char *what, char *out, size_t len, st_err *err)
{
	const char *env = override ? getenv(override) : NULL;
	int n;
	if (env && *env)
		n = snprintf(out, len, "%s", env);
	else if ((env = getenv(xdg)) && *env)
		n = snprintf(out, len, "%s/stitch", env);
	else if ((env = getenv("HOME")) && *env)
		n = snprintf(out, len, "%s/%s/stitch", env, home_sub);
	else
		return st_err_set(err, ST_E_INVALID, "no %s folder: set %s%s%s or HOME", what,
		                  override ? override : "", override ? ", " : "", xdg);
	if (n < 0 || (size_t)n >= len)
		return st_err_set(err, ST_E_INVALID, "%s folder path too long (%d bytes)", what, n);
	st_status s = st_mkdirs(out, err);
	if (s != ST_OK)
		return st_err_wrap(err, s, "%s folder", what);
	return ST_OK;
}

st_status st_cache_dir(char *out, size_t len, st_err *err)
{
	return user_dir("STITCH_CACHE_DIR", "XDG_CACHE_HOME", ".cache", "cache", out, len, err);
}

st_status st_data_path(const char *name, char *out, size_t len, st_err *err)
{
	st_status s = user_dir(NULL, "XDG_DATA_HOME", ".local/share", "data", out, len, err);
	if (s)
		return s;
	size_t used = strlen(out);
	int n = snprintf(out + used, len - used, "/%s", name);
	if (n < 0 || (size_t)n >= len - used)
		return st_err_set(err, ST_E_INVALID, "data file path too long");
	return ST_OK;
}

int st_file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int st_dir_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

st_status st_sha256_init(st_sha256 *h)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	h->evp = ctx;
	if (!ctx)
		return ST_E_NOMEM;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		h->evp = NULL;
		return ST_E_SYSTEM;
	}
	return ST_OK;
}

void st_sha256_update(st_sha256 *h, const void *data, size_t len)
{
	if (h->evp && len > 0)
		EVP_DigestUpdate(h->evp, data, len);
}

static void st_hex(const unsigned char *md, unsigned n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[2 * n] = '\0';
}

void st_sha256_final(st_sha256 *h, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	hex[0] = '\0';
	if (!h->evp)
		return;
	if (EVP_DigestFinal_ex(h->evp, md, &n) == 1 && n == 32)
		st_hex(md, n, hex);
	EVP_MD_CTX_free(h->evp);
	h->evp = NULL;
}

void st_sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	hex[0] = '\0';
	if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) == 1 && n == 32)
		st_hex(md, n, hex);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void st_rm_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int is_exec(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int st_which(const char *name, char *out, size_t len)
{
	if (strchr(name, '/')) {
		if (!is_exec(name) || (size_t)snprintf(out, len, "%s", name) >= len)
			return 0;
		return 1;
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path;;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		int w = n == 0 ? snprintf(out, len, "./%s", name)
		               : snprintf(out, len, "%.*s/%s", (int)n, p, name);
		if (w > 0 && (size_t)w < len && is_exec(out))
			return 1;
		if (!colon)
			break;
		p = colon + 1;
	}
	return 0;
}
