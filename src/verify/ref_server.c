/* The warm reference server (ref_server.h): finding this user's server for a python and helper
 * version, starting one in the background where there is none, and connecting with the checks
 * that keep another user's folder or socket out. */
#include "verify/ref_server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return (h ^ 0xff) * 0x100000001b3ull; /* a separator: "ab","c" differs from "a","bc" */
}

/* What a server's torch import depends on: the python, the helper scripts' versions, and the
 * environment python reads at start. A server of anything else is another server. */
static uint64_t server_key(const char *py, const char *helper)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, py);
	h = fnv(h, helper);
	char dir[PATH_MAX], file[PATH_MAX + 32], stamp[64];
	snprintf(dir, sizeof dir, "%s", helper);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	static const char *const scripts[] = {"kb_reference.py", "kb_import.py", "kb_tol.py"};
	for (size_t i = 0; i < sizeof scripts / sizeof *scripts; i++) {
		struct stat st;
		snprintf(file, sizeof file, "%s/%s", dir, scripts[i]);
		if (stat(file, &st) == 0)
			snprintf(stamp, sizeof stamp, "%lld.%ld:%lld", (long long)st.st_mtim.tv_sec,
			         st.st_mtim.tv_nsec, (long long)st.st_size);
		else
			snprintf(stamp, sizeof stamp, "none");
		h = fnv(h, stamp);
	}
	static const char *const env[] = {"PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH",
	                                  "LD_PRELOAD", "VIRTUAL_ENV"};
	for (size_t i = 0; i < sizeof env / sizeof *env; i++) {
		const char *v = getenv(env[i]);
		h = fnv(h, v ? v : "\x01");
	}
	return h;
}

/* The user's folder for servers: made 0700, and used only where it is a directory of this
 * user that nobody else may enter (a folder someone else made in /tmp is refused, and then
 * there is no server). */
static int server_dir(char *out, size_t len)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	int n = snprintf(out, len, "%s/stitch-ref-%u", rt && rt[0] == '/' ? rt : "/tmp",
	                 (unsigned)geteuid());
	/* room for "/ref-<16 hex>.sock.<pid>" in a socket address */
	if (n < 0 || (size_t)n + 40 >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -1;
	if (mkdir(out, 0700) && errno != EEXIST)
		return -1;
	struct stat st;
	return lstat(out, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	               !(st.st_mode & 077)
	           ? 0
	           : -1;
}

/* One of a server's files in dir: "sock", "starting" (a start under way) or "log". 0, or -1
 * where the name would not fit. */
static int server_file(char *out, size_t len, const char *dir, uint64_t key, const char *what)
{
	int n = snprintf(out, len, "%s/ref-%016llx.%s", dir, (unsigned long long)key, what);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int enabled(void)
{
	const char *v = getenv("STITCH_REF_SERVER");
	return !(v && !strcmp(v, "0"));
}

/* Start the server in the background: a grandchild in its own session, its output to a log,
 * nothing of ours inherited. Only async-signal-safe calls after fork: stitch serve forks from a
 * threaded process. A marker made with O_EXCL keeps the verifies that start together from
 * starting one each; one older than a minute is a start that failed. */
static void start_server(const char *py, const char *helper, const char *sock, const char *dir,
                         uint64_t key)
{
	char mark[PATH_MAX], log[PATH_MAX], idle[32];
	if (server_file(mark, sizeof mark, dir, key, "starting") ||
	    server_file(log, sizeof log, dir, key, "log"))
		return;
	const char *iv = getenv("STITCH_REF_SERVER_IDLE");
	double s = 600;
	if (iv && *iv) {
		char *end;
		double v = strtod(iv, &end);
		if (!*end && v > 0 && v <= 86400)
			s = v;
	}
	snprintf(idle, sizeof idle, "%g", s);
	struct stat st;
	if (stat(mark, &st) == 0 && time(NULL) - st.st_mtime > 60)
		unlink(mark);
	int m = open(mark, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (m < 0)
		return;
	close(m);
	char *argv[] = {(char *)py, (char *)helper, "--serve", (char *)sock, "--idle", idle, NULL};
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		unlink(mark);
		return;
	}
	if (pid == 0) {
		if (setsid() < 0 || fork() != 0)
			_exit(0);
		int in = open("/dev/null", O_RDONLY), out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
			_exit(126);
		for (int i = 3; i < 1024; i++)
			close(i);
		execve(argv[0], argv, environ);
		_exit(127);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int vx_ref_server_connect(const char *py, const char *helper, unsigned long long *ino)
{
	char dir[PATH_MAX];
	*ino = 0;
	if (!enabled() || server_dir(dir, sizeof dir))
		return -1;
	uint64_t key = server_key(py, helper);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (server_file(a.sun_path, sizeof a.sun_path, dir, key, "sock"))
		return -1;
	struct stat st;
	if (lstat(a.sun_path, &st) == 0)
		*ino = (unsigned long long)st.st_ino;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
		struct ucred c;
		socklen_t cl = sizeof c;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &cl) == 0 && c.uid == geteuid()) {
			char mark[PATH_MAX];
			if (!server_file(mark, sizeof mark, dir, key, "starting"))
				unlink(mark); /* it started: a server missing later may be started again */
			return fd;
		}
		close(fd);
		return -1;
	}
	int e = errno;
	close(fd);
	if (e == ENOENT || e == ECONNREFUSED)
		start_server(py, helper, a.sun_path, dir, key);
	return -1;
}

void vx_ref_server_drop(const char *py, const char *helper, unsigned long long ino)
{
	char dir[PATH_MAX], sock[PATH_MAX], pid[PATH_MAX];
	if (!enabled() || server_dir(dir, sizeof dir))
		return;
	uint64_t key = server_key(py, helper);
	struct stat st;
	if (server_file(sock, sizeof sock, dir, key, "sock") ||
	    server_file(pid, sizeof pid, dir, key, "sock.pid"))
		return;
	/* Another verify may have put a new server there since: that one stays. */
	if (lstat(sock, &st) == 0 && (unsigned long long)st.st_ino == ino) {
		unlink(sock);
		unlink(pid);
	}
	if (lstat(sock, &st) != 0)
		start_server(py, helper, sock, dir, key);
}
