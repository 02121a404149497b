/* The per-GPU file locks of gpu_flock.h: one lock file and one turnstile file per GPU UUID,
 * taken with flock(2) polled without blocking, so that a long wait can be reported. */
#include "verify/gpu_flock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs.h"

#define REPORT_EVERY_S 5.0

const char *st_gpu_flock_dir(void)
{
	const char *d = getenv("STITCH_GPU_LOCK_DIR");
	return d && *d ? d : "/tmp/stitch-gpu-locks";
}

static int key_ok(const char *key)
{
	if (!key || !*key || strlen(key) > 80)
		return 0;
	for (const char *p = key; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '-'))
			return 0;
	return 1;
}

/* Open (making it if needed) a lock file another user may have made: in a sticky folder the
 * kernel may refuse O_CREAT on a file someone else owns (fs.protected_regular), so the file is
 * opened plainly first and made only when missing. Read-only is enough for flock. */
static int open_lock(const char *path)
{
	for (int k = 0; k < 3; k++) {
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT)
			return fd;
		fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0) {
			/* other users open it read-only whatever this process's umask was */
			if (fchmod(fd, 0644)) {
				int e = errno;
				close(fd);
				errno = e;
				return -1;
			}
			return fd;
		}
		if (errno != EEXIST)
			return -1;
	}
	return -1;
}

/* The folder, sticky and writable by all like /tmp when this process makes it; missing parents
 * (a $STITCH_GPU_LOCK_DIR under a folder not made yet) as any folder of stitch's, 0755: only
 * the lock folder itself is shared. 0, or an errno with *why said. */
static int make_dir(const char *path, char *why, size_t len)
{
	char dir[1024];
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/') /* "locks/" is "locks" */
		n--;
	if (n >= sizeof dir) {
		snprintf(why, len, "%s: %s", path, strerror(ENAMETOOLONG));
		return ENAMETOOLONG;
	}
	memcpy(dir, path, n);
	dir[n] = '\0';
	int rc = mkdir(dir, 01777) ? errno : 0;
	const char *slash = strrchr(dir, '/');
	if (rc == ENOENT && slash && slash > dir) {
		char parent[1024];
		st_err err;
		snprintf(parent, sizeof parent, "%.*s", (int)(slash - dir), dir);
		if (st_mkdirs(parent, &err) != ST_OK) {
			snprintf(why, len, "%s", err.msg);
			return ENOENT;
		}
		rc = mkdir(dir, 01777) ? errno : 0;
	}
	if (rc == 0 && chmod(dir, 01777))
		rc = errno;
	struct stat st;
	if (rc == EEXIST)
		rc = lstat(dir, &st) ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
	if (rc)
		snprintf(why, len, "%s: %s", dir, strerror(rc));
	return rc;
}

int st_gpu_flock_open(st_gpu_flock *f, const char *dir, const char *key, char *why, size_t len)
{
	f->fd = f->turnstile = -1;
	f->held = 0;
	if (!key_ok(key)) {
		snprintf(why, len, "no usable GPU identity for the lock file ('%s')", key ? key : "");
		return EINVAL;
	}
	int rc = make_dir(dir, why, len);
	if (rc)
		return rc;
	char path[1024];
	const char *what[2] = {"lock", "turnstile"};
	int *fds[2] = {&f->fd, &f->turnstile};
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "%s/%s.%s", dir, key, what[i]);
		if ((*fds[i] = open_lock(path)) < 0) {
			rc = errno;
			snprintf(why, len, "%s: %s", path, strerror(rc));
			st_gpu_flock_close(f);
			return rc;
		}
	}
	return 0;
}

void st_gpu_flock_close(st_gpu_flock *f)
{
	st_gpu_flock_give(f);
	if (f->fd >= 0)
		close(f->fd);
	if (f->turnstile >= 0)
		close(f->turnstile);
	f->fd = f->turnstile = -1;
}

/* The wait of one take across its two locks: its start, its next report, when it gives up (0:
 * never), and whom to tell. */
typedef struct take_wait {
	double t0, next, give_up;
	void (*waiting)(void *, double);
	void *arg;
} take_wait;

/* flock `op` on fd, polled from 1 ms up to 20 ms between tries; 0, or -1 on a failure other than
 * contention or when the wait gives up (errno ETIMEDOUT). */
static int poll_lock(int fd, int op, take_wait *w)
{
	long ns = 1000000;
	while (flock(fd, op | LOCK_NB)) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (w->give_up > 0 && st_now_s() >= w->give_up) {
			errno = ETIMEDOUT;
			return -1;
		}
		struct timespec ts = {0, ns};
		nanosleep(&ts, NULL);
		ns = ns < 20000000 ? ns * 2 : 20000000;
		double now = st_now_s();
		if (w->waiting && now >= w->next) {
			w->waiting(w->arg, now - w->t0);
			w->next = now + REPORT_EVERY_S;
		}
	}
	return 0;
}

double st_gpu_flock_take(st_gpu_flock *f, int exclusive, double give_up_s,
                         void (*waiting)(void *arg, double s), void *arg)
{
	if (f->fd < 0 || f->held)
		return -1;
	double t0 = st_now_s();
	take_wait w = {t0, t0 + REPORT_EVERY_S, give_up_s > 0 ? t0 + give_up_s : 0, waiting, arg};
	/* An exclusive taker keeps the turnstile until it has the lock, so shared takers that come
	 * after it wait behind it instead of keeping it out for ever. */
	if (poll_lock(f->turnstile, exclusive ? LOCK_EX : LOCK_SH, &w))
		return -1;
	int bad = poll_lock(f->fd, exclusive ? LOCK_EX : LOCK_SH, &w);
	int e = errno;
	flock(f->turnstile, LOCK_UN);
	if (bad) {
		errno = e;
		return -1;
	}
	f->held = exclusive ? 2 : 1;
	return st_now_s() - t0;
}

void st_gpu_flock_give(st_gpu_flock *f)
{
	if (f->fd >= 0 && f->held)
		flock(f->fd, LOCK_UN);
	f->held = 0;
}
