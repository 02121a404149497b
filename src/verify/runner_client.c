/* Starting and supervising runner processes. A runner is untrusted once it has loaded a solution:
 * everything it says is checked, its silence is bounded by timeouts, and its whole process group
 * is killed when it overstays.
 *
 * This file is the parent's side of a started runner: the framed exchange of requests and
 * replies (each reply paired with its request's id, a frame nobody asked for a protocol fault),
 * the hello, copying files in, and stopping and reaping; starting one is runner_start.c. */
#include "runner_client.h"
#include "neighbours.h"
#include "reply.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cpus.h"
#include "common/fs.h"
#include "common/proto.h"
#include "common/utf8.h"

static void describe_exit(st_runner *r, int status)
{
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		r->term_signal = sig;
		snprintf(r->death, sizeof r->death, "the %s process was killed by signal %d (%s)",
		         r->label, sig, strsignal(sig));
	} else if (WIFEXITED(status)) {
		r->exit_code = WEXITSTATUS(status);
		snprintf(r->death, sizeof r->death, "the %s process exited with status %d", r->label,
		         WEXITSTATUS(status));
	}
}

/* Out of the neighbours' list before its process group id can be reused (neighbours.h). */
static void leave(st_runner *r)
{
	if (r->neighbours && r->pid > 0)
		st_neighbours_leave(r->neighbours, r->pid);
	r->neighbours = NULL;
}

/* Reap the child, waiting at most a moment before killing its group. 1 when it was still alive
 * after that moment (or kill_first) and so was killed here, 0 when it had ended by itself. */
static int reap(st_runner *r, int kill_first)
{
	leave(r);
	if (r->pid <= 0)
		return 0;
	if (kill_first)
		kill(-r->pid, SIGKILL);
	int status = 0, killed = kill_first;
	for (int i = 0; i < 200; i++) {
		pid_t w = waitpid(r->pid, &status, WNOHANG);
		if (w == r->pid) {
			if (!killed)
				describe_exit(r, status);
			kill(-r->pid, SIGKILL); /* anything it left behind in its group */
			r->pid = -1;
			return killed;
		}
		if (w < 0 && errno != EINTR)
			break;
		if (i == 100) {
			kill(-r->pid, SIGKILL);
			killed = 1;
		}
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(-r->pid, SIGKILL);
	waitpid(r->pid, &status, 0);
	r->pid = -1;
	return 1;
}

/* Are bytes of a frame waiting on the socket now? An end of file is not: a runner that answers
 * and then exits (a lost device context, a goodbye) has said nothing more. */
static int pending(int sock)
{
	char c;
	ssize_t n;
	while ((n = recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	return n > 0;
}

/* The runner broke the protocol: it is killed at once, and the verdict names what it did. */
static st_status protocol_fault(st_runner *r, st_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static st_status protocol_fault(st_runner *r, st_err *err, const char *fmt, ...)
{
	char what[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	r->alive = 0;
	r->protocol_fault = 1;
	reap(r, 1); /* a no-op when it was reaped already */
	snprintf(r->death, sizeof r->death, "the %s process broke the runner protocol: %s", r->label,
	         what);
	return st_err_set(err, ST_E_IO, "%s", r->death);
}

/* Is every thread of process pid stopped ('T', or 't' under a tracer), or unable to run code of
 * its own until it stops: inside a system call that cannot be interrupted ('D': it stops on its
 * way out, and what it is finishing was asked for before), or gone ('Z', 'X')? */
static int all_stopped(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int all = 1, seen = 0;
	for (struct dirent *e; all && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char stat[128], line[512];
		snprintf(stat, sizeof stat, "/proc/%d/task/%.20s/stat", (int)pid, e->d_name);
		FILE *f = fopen(stat, "r");
		if (!f)
			continue; /* a thread that ended meanwhile */
		const char *close_paren = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
		fclose(f);
		all = close_paren && close_paren[1] == ' ' && close_paren[2] &&
		      strchr("TtDZX", close_paren[2]);
		seen++;
	}
	closedir(d);
	return all && seen > 0;
}

int st_runner_freeze(st_runner *r)
{
	if (!r->alive || r->pid <= 0 || r->ncu[0])
		return -1;
	if (!r->frozen && kill(-r->pid, SIGSTOP))
		return -1;
	r->frozen = 1;
	/* SIGSTOP is delivered when each thread next enters the kernel or is interrupted: on a CPU
	 * of its own, within microseconds */
	for (int k = 0; k < 400; k++) {
		if (all_stopped(r->pid))
			return 1;
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	return 0;
}

int st_runner_join(st_runner *r, struct st_neighbours *nb)
{
	if (!r->alive || r->pid <= 0 || r->neighbours || st_neighbours_join(nb, r->pid))
		return -1;
	r->neighbours = nb;
	return 0;
}

void st_runner_thaw(st_runner *r)
{
	if (r->frozen && r->pid > 0)
		kill(-r->pid, SIGCONT);
	r->frozen = 0;
}

st_status st_runner_send(st_runner *r, const json_t *req, int pass_fd, st_err *err)
{
	if (!r->alive)
		return st_err_set(err, ST_E_IO, "%s", r->death);
	st_runner_thaw(r);
	/* Between a reply and the next request an honest runner says nothing. */
	if (pending(r->sock))
		return protocol_fault(r, err, "it sent a frame nobody asked for");
	json_t *msg = json_copy((json_t *)req);
	if (!msg || json_object_set_new(msg, "id", json_integer((json_int_t)r->next_id))) {
		json_decref(msg);
		return st_err_set(err, ST_E_NOMEM, "out of memory for a request");
	}
	st_status s = st_proto_send(r->sock, msg, pass_fd, err);
	json_decref(msg);
	if (s) {
		r->alive = 0;
		reap(r, 0);
		if (!r->death[0])
			snprintf(r->death, sizeof r->death, "the %s process went away", r->label);
		return st_err_set(err, ST_E_IO, "%s", r->death);
	}
	r->want_id = r->next_id++;
	return ST_OK;
}

st_status st_runner_recv(st_runner *r, json_t **reply, double timeout_s, st_err *err)
{
	*reply = NULL;
	if (!r->alive)
		return st_err_set(err, ST_E_IO, "%s", r->death);
	st_err e;
	/* The limit may come from figures a runner reported: clamp it, never let it overflow into
	 * the negative "wait forever". */
	double ms = timeout_s * 1000;
	int limit_ms = !(ms > 0) ? 0 : ms > 86400e3 ? 86400000 : (int)ms;
	st_status s = st_proto_recv(r->sock, reply, NULL, limit_ms, &e);
	if (s == ST_OK) {
		uint64_t want = r->want_id;
		r->want_id = 0;
		int id_ok = st_reply_id_matches(*reply, want);
		if (id_ok && !pending(r->sock)) {
			json_object_del(*reply, "id");
			return ST_OK;
		}
		json_decref(*reply);
		*reply = NULL;
		return protocol_fault(r, err, id_ok ? "a second frame followed its reply"
		                              : want ? "its reply does not carry the request's id"
		                                     : "it spoke before it was asked");
	}
	r->alive = 0;
	if (s == ST_E_TIMEOUT) {
		reap(r, 1);
		snprintf(r->death, sizeof r->death, "the %s did not answer within %.0f s and was killed",
		         r->label, timeout_s);
		return st_err_set(err, ST_E_TIMEOUT, "%s", r->death);
	}
	/* A process that ended by itself (a crash, an exit) says so in r->death; one that closed
	 * or broke its end of the channel and lived on until killed broke the protocol. */
	int closed = strstr(e.msg, "connection closed") != NULL;
	if (!closed)
		return protocol_fault(r, err, "%s", e.msg);
	if (reap(r, 0))
		return protocol_fault(r, err, "it closed its end of the channel and lived on");
	if (r->exit_code == ST_PROTO_EXIT_CHANNEL)
		return protocol_fault(r, err, "its channel to the parent broke inside it (closed or "
		                      "replaced), and it exited");
	if (!r->death[0])
		snprintf(r->death, sizeof r->death, "the %s process went away", r->label);
	return st_err_set(err, ST_E_IO, "%s", r->death);
}

st_status st_runner_call(st_runner *r, const json_t *req, int pass_fd, json_t **reply,
                         double timeout_s, st_err *err)
{
	st_status s = st_runner_send(r, req, pass_fd, err);
	if (s)
		return s;
	return st_runner_recv(r, reply, timeout_s, err);
}

st_status st_runner_hello(st_runner *r, double timeout_s, st_err *err)
{
	json_t *hello;
	st_status s = st_runner_recv(r, &hello, timeout_s, err);
	if (s)
		return s;
	r->info = json_incref(json_object_get(hello, "info"));
	r->start_ms = json_incref(json_object_get(hello, "start_ms"));
	if (!st_reply_ok(hello)) {
		const char *why = st_reply_string(hello, "reason");
		const char *status = st_reply_string(hello, "status");
		if (status && !strcmp(status, "sandbox"))
			s = st_err_set(err, ST_E_SYSTEM, "cannot install the runner sandbox (%s); "
			               "--no-sandbox runs without it and marks every verdict unsandboxed",
			               why ? why : "unknown reason");
		else
			s = st_err_set(err, ST_E_NODEVICE, "%s",
			                why ? why : "runner could not open the device");
	}
	json_decref(hello);
	return s;
}

st_status st_runner_copy_in(st_runner *r, const char *src, const char *name, char *out,
                            size_t outlen, st_err *err)
{
	char *data;
	size_t len;
	st_status s = st_read_file(src, &data, &len, err);
	if (s)
		return s;
	snprintf(out, outlen, "%s/%s", r->workdir, name);
	s = st_write_file_atomic(out, data, len, err);
	free(data);
	return s;
}

char *st_runner_output(const st_runner *r, size_t max)
{
	struct stat st;
	if (!r->workdir[0] || r->log_fd < 0 || fstat(r->log_fd, &st) || st.st_size <= 0)
		return NULL; /* never started, stopped, or silent */
	char *buf = malloc(max), *clean = NULL;
	off_t from = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
	ssize_t n = buf ? pread(r->log_fd, buf, max, from) : -1;
	if (n > 0) {
		/* a tail begins at a line's start where one is near */
		size_t skip = 0;
		if (from > 0) {
			char *nl = memchr(buf, '\n', n < 256 ? (size_t)n : 256);
			if (nl)
				skip = (size_t)(nl + 1 - buf);
		}
		if ((size_t)n > skip)
			clean = st_utf8_clean(buf + skip, (size_t)n - skip, 1);
	}
	free(buf);
	return clean;
}

void st_runner_quit(st_runner *r)
{
	/* a quitting runner is no neighbour's to stop (its bye would wait), and every path that
	 * ends one (st_runner_stop, the ncu report) quits it before a reaping may take its pid */
	leave(r);
	if (r->alive) {
		json_t *q = json_pack("{s:s}", "op", "quit"), *rep = NULL;
		st_err e;
		int said_bye = st_runner_call(r, q, -1, &rep, 10, &e) == ST_OK;
		if (said_bye)
			json_decref(rep);
		json_decref(q);
		r->alive = 0;
		/* Every solution's st_free has run by now; what is left is tearing down a device
		 * context, which the kernel does as well for a killed process, and faster. Under ncu
		 * the report is still to be written: st_runner_ncu_report waits for it. */
		if (said_bye && r->pid > 0 && !r->ncu[0]) {
			kill(-r->pid, SIGKILL);
			r->killed = 1;
		}
	}
}

st_status st_runner_ncu_report(st_runner *r, double timeout_s, char **text, size_t *len,
                               st_err *err)
{
	*text = NULL;
	*len = 0;
	if (!r->ncu[0])
		return st_err_set(err, ST_E_INVALID, "the %s runner does not run under ncu", r->label);
	st_runner_quit(r);
	int status = 0, done = 0;
	for (double waited = 0; r->pid > 0 && waited < timeout_s; waited += 0.05) {
		pid_t w = waitpid(r->pid, &status, WNOHANG);
		if (w == r->pid || (w < 0 && errno != EINTR)) {
			done = 1;
			break;
		}
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (!done) {
		kill(-r->pid, SIGKILL);
		waitpid(r->pid, &status, 0);
		r->pid = -1;
		return st_err_set(err, ST_E_TIMEOUT, "ncu did not finish its report within %.0f s",
		                  timeout_s);
	}
	r->pid = -1;
	st_status s = st_read_fd(r->ncu_fd, ST_RUNNER_NCU_REPORT_MAX, text, len, err);
	if (!s && *len == 0) {
		free(*text);
		*text = NULL;
		s = st_err_set(err, ST_E_IO, "the report is empty");
	}
	if (s)
		return st_err_wrap(err, s, "ncu wrote no report (exit status %d)",
		                   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return ST_OK;
}

double st_runner_cpu_on_ms(const st_runner *r, double *waited)
{
	*waited = -1;
	return r->pid > 0 && !r->ncu[0] ? st_cpu_on_ms((int)r->pid, waited) : -1;
}

/* A killed runner whose device context the driver is still tearing down is reaped by a detached
 * thread: nobody waits ~0.1 s for it, and no zombie is left in a long-running parent. */
static void *reap_thread(void *arg)
{
	pid_t pid = (pid_t)(intptr_t)arg;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return NULL;
}

void st_runner_kill(st_runner *r)
{
	r->alive = 0;
	reap(r, 1); /* leaves the neighbours' list first; a no-op when reaped already */
}

void st_runner_stop(st_runner *r)
{
	st_runner_quit(r);
	pthread_t t;
	pthread_attr_t attr;
	if (r->killed && r->pid > 0 && pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, reap_thread, (void *)(intptr_t)r->pid) == 0)
			r->pid = -1;
		pthread_attr_destroy(&attr);
	}
	reap(r, 0);
	if (r->sock >= 0)
		close(r->sock);
	r->sock = -1;
	if (r->log_fd >= 0)
		close(r->log_fd);
	if (r->ncu_fd >= 0)
		close(r->ncu_fd);
	r->log_fd = r->ncu_fd = -1;
	if (r->workdir[0])
		st_rm_tree(r->workdir);
	r->workdir[0] = 0;
	json_decref(r->info);
	r->info = NULL;
	json_decref(r->start_ms);
	r->start_ms = NULL;
}
