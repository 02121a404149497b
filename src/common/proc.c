/* Run one program to completion (compilers, `--version` probes, helper tools) with a hard wall
 * clock limit. The child leads its own process group so a timeout can kill whatever it forked
 * (nvcc runs cicc, ptxas, fatbinary...). Output is read while the child runs, so a chatty child
 * never blocks on a full pipe even past max_output. Safe to call from several threads: every fd
 * is created close-on-exec, so no other thread's child inherits our pipe ends, and the child's
 * exit is watched through a pidfd (or a short poll tick) rather than a process-wide SIGCHLD. */
#include "proc.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* After the child itself exits, how long grandchildren may keep the pipe open before we stop
 * waiting for EOF and kill the group. */
#define ST_PROC_EOF_GRACE_S 1.0

/* What the child reports over the exec-status pipe when it cannot get as far as exec. */
enum { ST_STAGE_CHDIR = 1, ST_STAGE_STDIN, ST_STAGE_DUP, ST_STAGE_EXEC };
struct st_child_fail {
	int stage;
	int err;
};

/* Only async-signal-safe calls between fork and exec: the parent may be multi-threaded. */
static void st_child(char *const argv[], const char *cwd, int out_w, int status_w)
{
	struct st_child_fail f = { 0, 0 };
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL); /* a parent ignoring SIGPIPE must not pass that on */
	setpgid(0, 0);
	if (cwd && chdir(cwd) != 0) {
		f.stage = ST_STAGE_CHDIR;
		goto fail;
	}
	int devnull = open("/dev/null", O_RDONLY);
	if (devnull < 0) {
		f.stage = ST_STAGE_STDIN;
		goto fail;
	}
	if (dup2(devnull, 0) < 0 || dup2(out_w, 1) < 0 || dup2(out_w, 2) < 0) {
		f.stage = ST_STAGE_DUP;
		goto fail;
	}
	if (devnull > 2)
		close(devnull);
	/* Fds the caller opened without close-on-exec (other libraries do) must not reach the
	 * program: they could hold pipes of other children open. Best effort; the status pipe stays
	 * (close-on-exec closes it at exec). */
#ifdef SYS_close_range
	if (status_w > 3)
		syscall(SYS_close_range, 3u, (unsigned)status_w - 1, 0u);
	syscall(SYS_close_range, (unsigned)status_w + 1, ~0u, 0u);
#endif
	execvp(argv[0], argv);
	f.stage = ST_STAGE_EXEC;
fail:
	f.err = errno;
	while (write(status_w, &f, sizeof f) < 0 && errno == EINTR)
		;
	_exit(127);
}

static int st_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0); /* pidfds are always close-on-exec */
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

static void st_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Reap the child, retrying on EINTR. */
static int st_reap(pid_t pid, int *status)
{
	for (;;) {
		if (waitpid(pid, status, 0) == pid)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

/* Has the child exited? Leaves it a zombie (WNOWAIT) so its pid, and so its process group id,
 * cannot be reused before we kill the group. */
static int st_exited(pid_t pid)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
		return errno == ECHILD; /* someone else reaped it: treat as gone */
	return si.si_pid == pid;
}

/* Blocks only until exec succeeds (close-on-exec closes the pipe) or the child reports: ST_OK
 * when it runs; otherwise the child is reaped and the error says which step failed. Closes
 * *st_r. */
static st_status child_started(pid_t pid, const char *name, const char *cwd, int *st_r,
                               st_err *err)
{
	struct st_child_fail f;
	ssize_t got;
	do
		got = read(*st_r, &f, sizeof f);
	while (got < 0 && errno == EINTR);
	st_close(st_r);
	if (got != (ssize_t)sizeof f)
		return ST_OK;
	int status;
	st_reap(pid, &status);
	if (f.stage == ST_STAGE_CHDIR)
		return st_err_set(err, ST_E_SYSTEM, "cannot run '%s': cannot enter folder '%s': %s",
		                  name, cwd, strerror(f.err));
	if (f.stage == ST_STAGE_EXEC)
		return st_err_set(err, ST_E_SYSTEM, "cannot run '%s': %s", name, strerror(f.err));
	return st_err_set(err, ST_E_SYSTEM, "cannot run '%s': cannot set up stdin/stdout: %s",
	                  name, strerror(f.err));
}

/* Both ends of the output and status pipes (those still open), when the child did not start. */
static void close_pipes(int out_p[2], int st_p[2])
{
	st_close(&out_p[0]);
	st_close(&out_p[1]);
	st_close(&st_p[0]);
	st_close(&st_p[1]);
}

/* Kill the child's group and the child, and reap it (the error paths). */
static void kill_reap(pid_t pid)
{
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	int status;
	st_reap(pid, &status);
}

/* One read of the child's output: into the kept buffer (*buf, grown up to max_output + 1) while
 * under max_output, then into scratch to drain. Closes *fd at end of file or on an error. */
static void read_output(int *fd, char **buf, size_t *cap, size_t *len, size_t max_output,
                        char *scratch, size_t scratch_len)
{
	char *dst = scratch;
	size_t room = scratch_len;
	if (*len < max_output) {
		if (*cap - *len - 1 == 0) {
			size_t ncap = *cap * 2 > max_output + 1 ? max_output + 1 : *cap * 2;
			char *nb = realloc(*buf, ncap);
			if (nb) {
				*buf = nb;
				*cap = ncap;
			}
		}
		if (*cap - *len - 1 > 0) {
			dst = *buf + *len;
			room = *cap - *len - 1;
		}
	}
	ssize_t r = read(*fd, dst, room);
	if (r > 0) {
		if (dst != scratch)
			*len += (size_t)r;
	} else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
		st_close(fd);
	}
}

/* The result of a run that ended: its output (buf, now owned by res), timing and exit. */
static void fill_result(st_proc_result *res, char *buf, size_t len, int timed_out, double t0,
                        int status)
{
	buf[len] = '\0';
	res->out = buf;
	res->out_len = len;
	res->timed_out = timed_out;
	res->wall_s = st_now_s() - t0;
	if (WIFEXITED(status))
		res->exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		res->signal = WTERMSIG(status);
}

st_status st_proc_run(char *const argv[], const char *cwd, double timeout_s, size_t max_output,
                      st_proc_result *res, st_err *err)
{
	memset(res, 0, sizeof *res);
	if (!argv || !argv[0] || !argv[0][0])
		return st_err_set(err, ST_E_INVALID, "cannot run a program without a name");
	const char *name = argv[0];
	int out_p[2] = { -1, -1 }, st_p[2] = { -1, -1 }, pidfd = -1;
	char *buf = NULL;
	size_t cap = 0, len = 0;

	if (pipe2(out_p, O_CLOEXEC) != 0)
		return st_err_set(err, ST_E_SYSTEM, "cannot run '%s': pipe: %s", name, strerror(errno));
	if (pipe2(st_p, O_CLOEXEC) != 0) {
		st_err_set(err, ST_E_SYSTEM, "cannot run '%s': pipe: %s", name, strerror(errno));
		close_pipes(out_p, st_p);
		return ST_E_SYSTEM;
	}
	double t0 = st_now_s();
	pid_t pid = fork();
	if (pid < 0) {
		st_err_set(err, ST_E_SYSTEM, "cannot run '%s': fork: %s", name, strerror(errno));
		close_pipes(out_p, st_p);
		return ST_E_SYSTEM;
	}
	if (pid == 0)
		st_child(argv, cwd, out_p[1], st_p[1]);

	/* Also from the parent, so the group exists before any kill below. Its failure is harmless:
	 * EACCES means the child already exec'd (having set it itself), ESRCH that it is gone. */
	(void)setpgid(pid, pid);
	st_close(&out_p[1]);
	st_close(&st_p[1]);

	st_status started = child_started(pid, name, cwd, &st_p[0], err);
	if (started) {
		st_close(&out_p[0]);
		return started;
	}

	pidfd = st_pidfd_open(pid);
	if (max_output > ((size_t)1 << 40))
		max_output = (size_t)1 << 40; /* "unlimited" callers: keep the size arithmetic sane */
	cap = max_output < 65535 ? max_output + 1 : 65536;
	buf = malloc(cap);
	if (!buf) {
		kill_reap(pid);
		st_close(&out_p[0]);
		st_close(&pidfd);
		return st_err_set(err, ST_E_NOMEM, "cannot run '%s': out of memory", name);
	}

	double deadline = t0 + (timeout_s > 0 ? timeout_s : 1e9);
	double exit_at = 0;
	int exited = 0, timed_out = 0;
	char scratch[16384];
	for (;;) {
		if (!exited && st_exited(pid)) {
			exited = 1;
			exit_at = st_now_s();
		}
		if (exited && out_p[0] < 0)
			break;
		double now = st_now_s();
		if (now >= deadline) {
			timed_out = !exited;
			break;
		}
		if (exited && now >= exit_at + ST_PROC_EOF_GRACE_S)
			break;
		double wait_s = deadline - now;
		if (exited && exit_at + ST_PROC_EOF_GRACE_S - now < wait_s)
			wait_s = exit_at + ST_PROC_EOF_GRACE_S - now;
		struct pollfd pfd[2];
		int nfd = 0;
		if (out_p[0] >= 0)
			pfd[nfd++] = (struct pollfd){ .fd = out_p[0], .events = POLLIN };
		if (!exited && pidfd >= 0)
			pfd[nfd++] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		else if (!exited && wait_s > 0.02)
			wait_s = 0.02; /* no pidfd: tick to notice the exit */
		if (wait_s > 1.0)
			wait_s = 1.0; /* keeps the int milliseconds below in range; we loop anyway */
		int ms = (int)(wait_s * 1000.0) + 1;
		int pr = poll(pfd, (nfds_t)nfd, ms);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			st_err_set(err, ST_E_SYSTEM, "running '%s': poll: %s", name, strerror(errno));
			kill_reap(pid);
			st_close(&out_p[0]);
			st_close(&pidfd);
			free(buf);
			return ST_E_SYSTEM;
		}
		if (out_p[0] >= 0 && pfd[0].revents)
			read_output(&out_p[0], &buf, &cap, &len, max_output, scratch, sizeof scratch);
	}

	/* Kill the whole group while the leader is still an unreaped zombie (its pgid cannot be
	 * recycled yet): this also ends background grandchildren still holding the pipe. */
	kill(-pid, SIGKILL);
	if (!exited)
		kill(pid, SIGKILL);
	int status = 0;
	if (st_reap(pid, &status) != 0) {
		st_err_set(err, ST_E_SYSTEM, "running '%s': waitpid: %s", name, strerror(errno));
		st_close(&out_p[0]);
		st_close(&pidfd);
		free(buf);
		return ST_E_SYSTEM;
	}
	st_close(&out_p[0]);
	st_close(&pidfd);

	fill_result(res, buf, len, timed_out, t0, status);
	return ST_OK;
}

void st_proc_result_free(st_proc_result *res)
{
	if (!res)
		return;
	free(res->out);
	res->out = NULL;
	res->out_len = 0;
}
