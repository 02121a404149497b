/* Starting a runner process: where the runner binaries live, the CPUs runners of a device are
 * pinned to, the environment a runner may see (made before the fork: a threaded parent's child
 * may only call async-signal-safe functions), the uid it drops to, and the fork and exec. Talking
 * to a started runner and stopping it is runner_client.c. */
#include "runner_client.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cpus.h"
#include "common/fs.h"
#include "profile/ncu.h"

/* Worked out once: a worker's threads start runners at the same moment, and a folder being
 * written by one thread while another reads it once gave "/stitch-runner-host". */
static char g_runner_dir[PATH_MAX];
static pthread_once_t g_runner_dir_once = PTHREAD_ONCE_INIT;

static void runner_dir_find(void)
{
	const char *env = getenv("STITCH_RUNNER_DIR");
	if (env && *env) { /* a runner starts in its own folder: a relative path would not hold */
		if (env[0] == '/' || !realpath(env, g_runner_dir))
			snprintf(g_runner_dir, sizeof g_runner_dir, "%s", env);
		return;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0) {
		snprintf(g_runner_dir, sizeof g_runner_dir, ".");
		return;
	}
	exe[n] = 0;
	snprintf(g_runner_dir, sizeof g_runner_dir, "%s", dirname(exe));
}

const char *st_runner_dir(void)
{
	pthread_once(&g_runner_dir_once, runner_dir_find);
	return g_runner_dir;
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

static void child_exec(int fd, int log, const char *path, const char *workdir, int flags,
                       const char *ncu, char *const envp[], const cpu_set_t *cpus)
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
	/* stdout and stderr first: the log's descriptor may be 3 */
	if (dup2(log, 1) < 0 || dup2(log, 2) < 0 || setpgid(0, 0) || chdir(workdir) ||
	    dup2(fd, 3) < 0)
		_exit(126);
	int devnull = open("/dev/null", O_RDONLY);
	if (devnull >= 0)
		dup2(devnull, 0);
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

/* What a runner writes that the parent reads back (output.log: what the solution printed;
 * ncu.log: ncu's report) is a file the parent creates in the runner's folder before the start and
 * reads only through the descriptor it keeps, never by its name there, which the solution could
 * point elsewhere (a link to another file, a FIFO nobody writes). ncu opens ncu.log by name
 * before the runner starts, so it writes the same file. */
static st_status open_kept(st_runner *r, const char *name, int *fd, st_err *err)
{
	char path[300];
	snprintf(path, sizeof path, "%s/%s", r->workdir, name);
	*fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (*fd < 0)
		return st_err_set(err, ST_E_SYSTEM, "create %s: %s", path, strerror(errno));
	return ST_OK;
}

static void close_kept(st_runner *r)
{
	if (r->log_fd >= 0)
		close(r->log_fd);
	if (r->ncu_fd >= 0)
		close(r->ncu_fd);
	r->log_fd = r->ncu_fd = -1;
}

st_status st_runner_start(st_runner *r, const char *backend, const char *label, int flags,
                          const char *devices, st_err *err)
{
	memset(r, 0, sizeof *r);
	r->sock = -1;
	r->pid = -1;
	r->log_fd = r->ncu_fd = -1;
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
	st_status kept = open_kept(r, "output.log", &r->log_fd, err);
	if (!kept && (flags & ST_RUNNER_NCU))
		kept = open_kept(r, "ncu.log", &r->ncu_fd, err);
	if (kept) {
		close_kept(r);
		st_rm_tree(r->workdir);
		return kept;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		int e = errno;
		close_kept(r);
		st_rm_tree(r->workdir);
		return st_err_set(err, ST_E_SYSTEM, "socketpair: %s", strerror(e));
	}
	char envbuf[ST_RUNNER_ENV_MAX][ST_RUNNER_ENV_LEN], *envp[ST_RUNNER_ENV_MAX];
	st_runner_env(envbuf, envp, r->workdir, devices);
	cpu_set_t cpus;
	int pin = pinned_cpus(devices, &cpus);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		close_kept(r);
		st_rm_tree(r->workdir);
		return st_err_set(err, ST_E_SYSTEM, "fork: %s", strerror(e));
	}
	if (pid == 0)
		child_exec(sv[1], r->log_fd, path, r->workdir, flags, (flags & ST_RUNNER_NCU) ? r->ncu : NULL,
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
