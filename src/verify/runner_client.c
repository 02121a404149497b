/* Starting and supervising runner processes. A runner is untrusted once it has loaded a solution:
 * everything it says is checked, its silence is bounded by timeouts, and its whole process group
 * is killed when it overstays. */
#include "runner_client.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cpus.h"
#include "common/fs.h"
#include "common/proto.h"
#include "profile/ncu.h"

const char *st_runner_dir(void)
{
	static char dir[PATH_MAX];
	const char *env = getenv("STITCH_RUNNER_DIR");
	if (env && *env && env[0] == '/')
		return env;
	if (env && *env) { /* a runner starts in its own folder: a relative path would not hold */
		if (!dir[0] && !realpath(env, dir))
			snprintf(dir, sizeof dir, "%s", env);
		return dir;
	}
	if (!dir[0]) {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (n <= 0)
			return ".";
		exe[n] = 0;
		snprintf(dir, sizeof dir, "%s", dirname(exe));
	}
	return dir;
}

/* st_runner_pin's table: devices string -> CPU list. */
#define MAX_PINS 16
static pthread_mutex_t g_pin_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char devices[32];
	char cpus[256];
} g_pins[MAX_PINS];
static int g_n_pins;

void st_runner_pin(const char *devices, const char *cpus)
{
	if (!devices)
		return;
	pthread_mutex_lock(&g_pin_mu);
	int k = 0;
	while (k < g_n_pins && strcmp(g_pins[k].devices, devices))
		k++;
	if (k == g_n_pins && k < MAX_PINS && strlen(devices) < sizeof g_pins[k].devices)
		snprintf(g_pins[g_n_pins++].devices, sizeof g_pins[k].devices, "%s", devices);
	if (k < g_n_pins)
		snprintf(g_pins[k].cpus, sizeof g_pins[k].cpus, "%s", cpus ? cpus : "");
	pthread_mutex_unlock(&g_pin_mu);
}

int st_runner_pinned(const char *devices, char *cpus, size_t len)
{
	int found = 0;
	if (len)
		cpus[0] = 0;
	if (!devices)
		return 0;
	pthread_mutex_lock(&g_pin_mu);
	for (int k = 0; k < g_n_pins && !found; k++)
		if (!strcmp(g_pins[k].devices, devices) && g_pins[k].cpus[0]) {
			snprintf(cpus, len, "%s", g_pins[k].cpus);
			found = 1;
		}
	pthread_mutex_unlock(&g_pin_mu);
	return found;
}

/* The CPUs runners on `devices` are pinned to: 1 with *set filled, 0 for anywhere. */
static int pinned_cpus(const char *devices, cpu_set_t *set)
{
	char cpus[sizeof g_pins[0].cpus];
	return st_runner_pinned(devices, cpus, sizeof cpus) && !st_cpus_parse(cpus, set) &&
	       CPU_COUNT(set) > 0;
}

/* Variables a runner may see: what the dynamic loader and the CUDA driver need, nothing else. */
static const char *const env_keep[] = {
	"PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
	"NVIDIA_DRIVER_CAPABILITIES", "CUDA_MODULE_LOADING", "CUDA_DEVICE_MAX_CONNECTIONS",
	"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
	"STITCH_RUNNER_KEEP_MB", "STITCH_RUNNER_ARENA_MB", NULL,
};
/* All of them (less CUDA_VISIBLE_DEVICES, made apart) fit beside the four entries st_runner_env
 * adds: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_MAX_CONNECTIONS, HOME and the NULL. */
_Static_assert(sizeof env_keep / sizeof *env_keep - 2 <= ST_RUNNER_ENV_MAX - 4,
               "env_keep outgrew ST_RUNNER_ENV_MAX");

/* First uid of the range runners drop to when stitch runs as root; each runner takes its own
 * (by process id), so two runners never share a user and cannot read each other's files. */
#define ST_RUNNER_UID_BASE 61000u
#define ST_RUNNER_UID_SPAN 4000u

/* The runner's whole environment, made before the fork (a threaded parent's child may only call
 * async-signal-safe functions): env_keep from ours, CUDA_VISIBLE_DEVICES narrowed to the one
 * device the runner uses (its device 0: the first of `devices` when given, else of ours, else
 * device 0), CUDA_DEVICE_MAX_CONNECTIONS (ST_RUNNER_HW_QUEUES unless ours has a value) and
 * HOME in its own folder. A runner that sees one GPU starts the driver on that one only: on a
 * machine of two H200s, cuInit took 0.48-0.51 s seeing both, 0.26-0.29 s one. */
void st_runner_env(char bufs[ST_RUNNER_ENV_MAX][ST_RUNNER_ENV_LEN], char *envp[ST_RUNNER_ENV_MAX],
                   const char *workdir, const char *devices)
{
	int n = 0;
	for (int i = 0; env_keep[i] && n < ST_RUNNER_ENV_MAX - 4; i++) {
		const char *v = getenv(env_keep[i]);
		/* an empty value counts as unset (as a shell's ${X:-default} reads it) */
		if (v && *v && strcmp(env_keep[i], "CUDA_VISIBLE_DEVICES")) {
			snprintf(bufs[n], ST_RUNNER_ENV_LEN, "%s=%s", env_keep[i], v);
			envp[n] = bufs[n];
			n++;
		}
	}
	const char *visible = devices ? devices : getenv("CUDA_VISIBLE_DEVICES");
	if (!visible)
		visible = "0";
	snprintf(bufs[n], ST_RUNNER_ENV_LEN, "CUDA_VISIBLE_DEVICES=%.*s", (int)strcspn(visible, ","),
	         visible);
	envp[n] = bufs[n];
	n++;
	/* The driver gives every context this many hardware queues (8 by default) and creates them
	 * while it holds a host-wide lock that any allocation, on any GPU, waits for; each verdict
	 * starts a context, so a service on two GPUs loses timing-path time to the other's starts.
	 * With four, eight processes starting contexts took 638 ms each instead of 855 (the host
	 * managed 6.5 a second instead of 5.3), and a one-GPU service beside paced runner starts
	 * kept 92-100 % of its throughput instead of 73-89 % (bench/RESULTS.md, sessions 15 and
	 * 17); up to four streams of a solution's own still overlap as with eight queues. */
	const char *queues = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	if (!queues || !*queues) {
		snprintf(bufs[n], ST_RUNNER_ENV_LEN, "CUDA_DEVICE_MAX_CONNECTIONS=%d", ST_RUNNER_HW_QUEUES);
		envp[n] = bufs[n];
		n++;
	}
	snprintf(bufs[n], ST_RUNNER_ENV_LEN, "HOME=%s", workdir);
	envp[n] = bufs[n];
	n++;
	envp[n] = NULL;
}

static void child_exec(int fd, const char *path, const char *workdir, int flags, const char *ncu,
                       char *const envp[], const cpu_set_t *cpus)
{
	/* before exec, so every thread the runner (and the driver in it) starts keeps to them;
	 * where that fails (the CPUs went offline), the runner runs anywhere, as without a pin */
	if (cpus)
		(void)sched_setaffinity(0, sizeof *cpus, cpus);
	int sandbox = flags & ST_RUNNER_SANDBOX;
	char uid_arg[16] = "";
	if (sandbox && geteuid() == 0) {
		unsigned uid = ST_RUNNER_UID_BASE + (unsigned)getpid() % ST_RUNNER_UID_SPAN;
		snprintf(uid_arg, sizeof uid_arg, "%u", uid);
		if (chown(workdir, uid, uid))
			_exit(126);
	}
	if (setpgid(0, 0) || chdir(workdir) || dup2(fd, 3) < 0)
		_exit(126);
	int devnull = open("/dev/null", O_RDONLY);
	if (devnull >= 0)
		dup2(devnull, 0);
	/* What a solution prints is kept in its folder, never shown as if stitch had said it. */
	int log = open("output.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (log >= 0) {
		dup2(log, 1);
		dup2(log, 2);
	}
	/* Close everything but stdio and the socket: no parent descriptor leaks into a runner. */
	for (int i = 4; i < 1024; i++)
		close(i);
	char *argv[32] = {(char *)path, "--fd", "3", "--workdir", (char *)workdir};
	int a = 5;
	if (ncu) {
		/* ncu launches the runner itself, which inherits descriptor 3; ncu's own output,
		 * the CSV report included, goes to ncu.log in the working folder. */
		char *pre[] = {(char *)ncu, "--clock-control", "none", "--csv", "--page", "raw",
		               "--metrics", (char *)st_ncu_metrics, "--nvtx", "--nvtx-include",
		               "stitch_st_run/", "--log-file", "ncu.log", "--target-processes",
		               "application-only", "--launch-count", ST_NCU_MAX_LAUNCHES_STR};
		int k = (int)(sizeof pre / sizeof *pre);
		memmove(argv + k, argv, (size_t)a * sizeof *argv);
		memcpy(argv, pre, sizeof pre);
		a += k;
		path = ncu;
	}
	if (!sandbox)
		argv[a++] = "--no-sandbox";
	if (flags & ST_RUNNER_PROFILE)
		argv[a++] = "--profile";
	if (uid_arg[0]) {
		argv[a++] = "--uid";
		argv[a++] = uid_arg;
	}
	argv[a] = NULL;
	execve(path, argv, envp);
	_exit(127);
}

st_status st_runner_start(st_runner *r, const char *backend, const char *label, int flags,
                          const char *devices, st_err *err)
{
	memset(r, 0, sizeof *r);
	r->sock = -1;
	r->pid = -1;
	snprintf(r->label, sizeof r->label, "%s", label);
	char path[PATH_MAX];
	if ((size_t)snprintf(path, sizeof path, "%s/stitch-runner-%s", st_runner_dir(), backend) >=
	    sizeof path)
		return st_err_set(err, ST_E_INVALID, "runner path too long");
	if (access(path, X_OK))
		return st_err_set(err, ST_E_SYSTEM, "runner %s: %s (backend '%s' not built?)", path,
		                  strerror(errno), backend);
	if (flags & ST_RUNNER_NCU) {
		const char *want = getenv("STITCH_NCU");
		if (!st_which(want && *want ? want : "ncu", r->ncu, sizeof r->ncu))
			return st_err_set(err, ST_E_SYSTEM, "Nsight Compute (%s) not found%s",
			                  want && *want ? want : "ncu",
			                  want && *want ? "" : " on PATH; set STITCH_NCU to its path");
		flags &= ~ST_RUNNER_SANDBOX;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(r->workdir, sizeof r->workdir, "%s/stitch-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(r->workdir))
		return st_err_set(err, ST_E_SYSTEM, "mkdtemp %s: %s", r->workdir, strerror(errno));
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		rmdir(r->workdir);
		return st_err_set(err, ST_E_SYSTEM, "socketpair: %s", strerror(errno));
	}
	char envbuf[ST_RUNNER_ENV_MAX][ST_RUNNER_ENV_LEN], *envp[ST_RUNNER_ENV_MAX];
	st_runner_env(envbuf, envp, r->workdir, devices);
	cpu_set_t cpus;
	int pin = pinned_cpus(devices, &cpus);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		rmdir(r->workdir);
		return st_err_set(err, ST_E_SYSTEM, "fork: %s", strerror(errno));
	}
	if (pid == 0)
		child_exec(sv[1], path, r->workdir, flags, (flags & ST_RUNNER_NCU) ? r->ncu : NULL,
		           envp, pin ? &cpus : NULL);
	setpgid(pid, pid); /* also in the parent, so the group exists before any kill */
	close(sv[1]);
	r->sock = sv[0];
	r->pid = pid;
	r->alive = 1;
	/* Ids start at a random point, so that one verify's replies never pass for another's. */
	while (getrandom(&r->next_id, sizeof r->next_id, 0) != sizeof r->next_id)
		;
	r->next_id = (r->next_id >> 1) | 1; /* positive as a JSON integer, never 0 */
	return ST_OK;
}

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

/* Reap the child, waiting at most a moment before killing its group. 1 when it was still alive
 * after that moment (or kill_first) and so was killed here, 0 when it had ended by itself. */
static int reap(st_runner *r, int kill_first)
{
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

st_status st_runner_send(st_runner *r, const json_t *req, int pass_fd, st_err *err)
{
	if (!r->alive)
		return st_err_set(err, ST_E_IO, "%s", r->death);
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
		json_t *id = json_object_get(*reply, "id");
		int id_ok = want ? json_is_integer(id) && (uint64_t)json_integer_value(id) == want
		                 : id == NULL;
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
	if (!json_is_true(json_object_get(hello, "ok"))) {
		const char *why = json_string_value(json_object_get(hello, "reason"));
		const char *status = json_string_value(json_object_get(hello, "status"));
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

void st_runner_output(const st_runner *r, char *buf, size_t max)
{
	buf[0] = 0;
	char path[600];
	snprintf(path, sizeof path, "%s/output.log", r->workdir);
	FILE *f = fopen(path, "rb");
	if (!f || max < 2) {
		if (f)
			fclose(f);
		return;
	}
	if (fseek(f, 0, SEEK_END) == 0) {
		long size = ftell(f);
		long from = size > (long)(max - 1) ? size - (long)(max - 1) : 0;
		fseek(f, from, SEEK_SET);
	}
	size_t n = fread(buf, 1, max - 1, f);
	buf[n] = 0;
	fclose(f);
}

void st_runner_quit(st_runner *r)
{
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
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/ncu.log", r->workdir);
	st_status s = st_read_file(path, text, len, err);
	if (s)
		return st_err_wrap(err, s, "ncu wrote no report (exit status %d)",
		                   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return ST_OK;
}

double st_runner_cpu_wait_ms(const st_runner *r)
{
	return r->pid > 0 && !r->ncu[0] ? st_cpu_wait_ms((int)r->pid) : -1;
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
	if (r->workdir[0])
		st_rm_tree(r->workdir);
	r->workdir[0] = 0;
	json_decref(r->info);
	r->info = NULL;
	json_decref(r->start_ms);
	r->start_ms = NULL;
}
