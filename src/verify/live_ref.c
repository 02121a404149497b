/* The live reference of an imported KernelBench task (live_ref.h): starting the PyTorch helper,
 * its requests and their validated replies, the files it writes, and its end. */
#include "verify/live_ref.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/digest.h"
#include "common/fs.h"
#include "common/host_mem.h"
#include "common/paths.h"
#include "common/proto.h"
#include "task/task_bytes.h"
#include "verify/ref_server.h"

extern char **environ;

/* What a request in flight asks for, beside a seed k >= 0. */
enum { K_START = -1, K_ATTACH = -3, K_NONE = -2 };

/* Where the seed files go: TMPDIR when set, else a tmpfs when the machine has one (the files
 * are read once, at memory speed, and never outlive the verify), else /tmp. */
static st_status make_dir(vx_live *L, st_err *err)
{
	const char *tmp = getenv("TMPDIR");
	const char *base = tmp && *tmp                              ? tmp
	                   : access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm"
	                                                          : "/tmp";
	snprintf(L->dir, sizeof L->dir, "%s/stitch-ref-XXXXXX", base);
	if (!mkdtemp(L->dir)) {
		int e = errno;
		L->dir[0] = '\0';
		return st_err_set(err, ST_E_SYSTEM, "mkdtemp in %s: %s", base, strerror(e));
	}
	char abs[PATH_MAX]; /* a server's child works in the server's folder, not ours */
	if (realpath(L->dir, abs))
		snprintf(L->dir, sizeof L->dir, "%s", abs);
	snprintf(L->log, sizeof L->log, "%s/reference.log", L->dir);
	return ST_OK;
}

/* The child: its own process group, the socket as descriptor 3, its output to the log. Only
 * async-signal-safe calls: a verify of stitch serve forks from a threaded process. */
static void child_exec(vx_live *L, int fd, char *const argv[], char *const envp[])
{
	if (setpgid(0, 0) || dup2(fd, 3) < 0)
		_exit(126);
	int devnull = open("/dev/null", O_RDONLY);
	if (devnull >= 0)
		dup2(devnull, 0);
	int log = open(L->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (log >= 0) {
		dup2(log, 1);
		dup2(log, 2);
	}
	for (int i = 4; i < 1024; i++)
		close(i);
	execve(argv[0], argv, envp);
	_exit(127);
}

/* Send one request; `k` is the seed it asks for (K_START: the start, K_ATTACH: the attach to a
 * server's child). */
static st_status request(vx_live *L, json_t *req, int k, st_err *err)
{
	if (L->q_len > L->n_seeds + 2) {
		json_decref(req);
		return st_err_set(err, ST_E_SYSTEM, "live reference: too many requests in flight");
	}
	uint64_t id = L->next_id++;
	json_object_set_new(req, "id", json_integer((json_int_t)id));
	st_status s = st_proto_send(L->sock, req, -1, err);
	json_decref(req);
	if (s)
		return st_err_wrap(err, s, "live reference: sending a request");
	L->q_id[L->q_len] = id;
	L->q_k[L->q_len++] = k;
	return ST_OK;
}

/* The last lines of the helper's log, for an error that says why. */
static void log_tail(const vx_live *L, char *out, size_t len)
{
	out[0] = '\0';
	char *text = NULL;
	size_t n = 0;
	st_err e;
	if (st_read_file(L->log, &text, &n, &e) || !n) {
		free(text);
		return;
	}
	size_t from = n > 600 ? n - 600 : 0;
	while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
		text[--n] = '\0';
	snprintf(out, len, "; its last output: %s%s", from ? "..." : "", text + from);
	free(text);
}

/* The one reader of the helper's replies: the oldest request's answer, with a file of ours
 * when it succeeded. A refusal says why in the helper's words: exit 2 is the program's (bad
 * input), 3 the machine's. */
static st_status read_reply(vx_live *L, double deadline, json_t **out, st_err *err)
{
	*out = NULL;
	double left = deadline - st_now_s();
	json_t *rep = NULL;
	st_status s = left <= 0 ? st_err_set(err, ST_E_TIMEOUT, "the verify's deadline passed")
	                        : st_proto_recv(L->sock, &rep, NULL, (int)(left * 1e3) + 1, err);
	if (s) {
		char tail[700];
		log_tail(L, tail, sizeof tail);
		return st_err_wrap(err, s == ST_E_TIMEOUT ? s : ST_E_SYSTEM,
		                   "live reference (the PyTorch program)%s", tail);
	}
	json_t *id = json_object_get(rep, "id");
	int mine = L->q_len && json_is_integer(id) && (uint64_t)json_integer_value(id) == L->q_id[0];
	json_t *file = json_object_get(rep, "file");
	const char *f = json_string_value(file);
	size_t dl = strlen(L->dir);
	json_t *pid = json_object_get(rep, "pid");
	if (!json_is_object(rep) || !mine) {
		s = st_err_set(err, ST_E_SYSTEM, "live reference: a reply to no request");
	} else if (!json_is_true(json_object_get(rep, "ok"))) {
		const char *why = json_string_value(json_object_get(rep, "reason"));
		json_int_t code = json_integer_value(json_object_get(rep, "exit"));
		s = st_err_set(err, code == 2 ? ST_E_INVALID : ST_E_SYSTEM, "the PyTorch reference: %s",
		               why ? why : "failed without a reason");
	} else if (L->q_k[0] == K_ATTACH) {
		if (!json_is_integer(pid) || json_integer_value(pid) <= 1 ||
		    json_integer_value(pid) > INT32_MAX)
			s = st_err_set(err, ST_E_SYSTEM, "live reference: an attach reply without a pid");
	} else if (!f || strncmp(f, L->dir, dl) || f[dl] != '/' || strstr(f, "/..") ||
	           !st_file_exists(f)) {
		s = st_err_set(err, ST_E_SYSTEM, "live reference: a reply without a file of its folder");
	}
	if (s) {
		json_decref(rep);
		return s;
	}
	L->q_len--;
	memmove(L->q_id, L->q_id + 1, (size_t)L->q_len * sizeof *L->q_id);
	memmove(L->q_k, L->q_k + 1, (size_t)L->q_len * sizeof *L->q_k);
	*out = rep;
	return ST_OK;
}

static st_status draw(vx_live *L, int k, st_err *err)
{
	/* The check seed is one more k: the seed base is secret, any k is as good as another. */
	return request(L, json_pack("{s:s,s:i}", "op", "draw", "k", k + 1), k, err);
}

/* Take the oldest reply: the attach's (the child's pid), the start's (params) or a seed's
 * file. */
static st_status take_reply(vx_live *L, double deadline, st_err *err)
{
	int k = L->q_len ? L->q_k[0] : K_NONE;
	json_t *rep;
	st_status s = read_reply(L, deadline, &rep, err);
	if (s)
		return s;
	const char *f = json_string_value(json_object_get(rep, "file"));
	if (k == K_ATTACH) {
		L->pid = (pid_t)json_integer_value(json_object_get(rep, "pid"));
	} else if (k == K_START) {
		snprintf(L->params_file, sizeof L->params_file, "%s", f);
		json_object_set(L->info, "torch", json_object_get(rep, "torch"));
		json_object_set(L->info, "device", json_object_get(rep, "device"));
		json_t *visible = json_object_get(rep, "visible_devices");
		if (json_is_string(visible))
			json_object_set(L->info, "visible_devices", visible);
		json_object_set(L->info, "params_checked", json_object_get(rep, "checked"));
		static const char *const times[] = {"import_s", "init_s", "build_s"};
		for (size_t i = 0; i < sizeof times / sizeof *times; i++)
			if (json_is_number(json_object_get(rep, times[i])))
				json_object_set(L->info, times[i], json_object_get(rep, times[i]));
		json_object_set_new(L->info, "ready_s", json_real(st_now_s() - L->t_start));
	} else {
		free(L->files[k]);
		L->files[k] = strdup(f);
		json_t *d = json_object_get(rep, "draw_s"), *all = json_object_get(L->info, "draw_s");
		if (json_is_number(d))
			json_array_append(all, d);
		if (!L->files[k])
			s = st_err_set(err, ST_E_NOMEM, "out of memory");
	}
	json_decref(rep);
	return s;
}

/* The environment a helper runs with: ours, with the slot's CUDA_VISIBLE_DEVICES where it has one
 * (built before any fork: a multi-threaded parent's child may only exec). `own` holds that entry.
 * NULL: out of memory; anything but environ is freed by the caller. */
static char **helper_env(const vx_live *L, char *own, size_t len)
{
	if (!L->devices[0])
		return environ;
	size_t n = 0;
	while (environ && environ[n])
		n++;
	char **envp = calloc(n + 2, sizeof *envp);
	if (!envp)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21))
			envp[k++] = environ[i];
	snprintf(own, len, "CUDA_VISIBLE_DEVICES=%s", L->devices);
	envp[k] = own;
	return envp;
}

/* A helper's environment (helper_env) as a JSON object: a server's child takes it over (the GPUs
 * it may see, above all), having been forked from a process another verify started. */
static json_t *env_object(char *const *envp)
{
	json_t *env = json_object();
	for (char *const *e = envp; env && e && *e; e++) {
		const char *eq = strchr(*e, '=');
		char name[256];
		if (!eq || (size_t)(eq - *e) >= sizeof name)
			continue;
		memcpy(name, *e, (size_t)(eq - *e));
		name[eq - *e] = '\0';
		json_object_set_new(env, name, json_string(eq + 1));
	}
	return env;
}

/* A child of this user's warm server (ref_server.h): attached, or -1 (nothing held) when the
 * server does not answer at once. Its child answers the attach right after the fork, so a server
 * that is gone wrong (a listener that never accepts, or one dying as we connected) costs this
 * verify a few seconds, never its reference: the verify then starts its own helper, and the
 * caller a new server for the next verify. */
static int attach(vx_live *L, const st_task *t, int fd)
{
	char task_dir[PATH_MAX], visible[sizeof L->devices + 32];
	char **envp = helper_env(L, visible, sizeof visible);
	json_t *env = envp && realpath(t->dir, task_dir) ? env_object(envp) : NULL;
	if (envp != environ)
		free(envp);
	if (!env) {
		close(fd);
		return -1;
	}
	st_err e;
	L->sock = fd;
	st_status s = request(L, json_pack("{s:s,s:s,s:s,s:s,s:o}", "op", "attach", "task_dir",
	                                   task_dir, "dir", L->dir, "log", L->log, "env", env),
	                      K_ATTACH, &e);
	if (!s)
		s = take_reply(L, st_now_s() + 10, &e);
	if (s) {
		close(fd);
		L->sock = -1;
		L->q_len = 0;
		L->pid = 0;
		return -1;
	}
	L->server = 1;
	json_object_set_new(L->info, "server", json_true());
	return 0;
}

static st_status spawn(vx_live *L, const st_task *t, st_err *err)
{
	char py[PATH_MAX], helper[PATH_MAX], why[PATH_MAX + 128], fd_arg[] = "3";
	if (st_python_helper("kb_reference.py", py, sizeof py, helper, sizeof helper, why, sizeof why))
		return st_err_set(err, ST_E_SYSTEM, "%s is judged against its PyTorch program, and %s "
		                  "(or import it with --store-seeds and verify without --fresh-seeds)",
		                  t->id, why);
	st_status s = make_dir(L, err);
	if (s)
		return s;
	json_object_set_new(L->info, "python", json_string(py));
	unsigned long long ino;
	int fd = vx_ref_server_connect(py, helper, &ino);
	if (fd >= 0 && attach(L, t, fd) == 0)
		return ST_OK;
	if (fd >= 0)
		vx_ref_server_drop(py, helper, ino);
	json_object_set_new(L->info, "server", json_false());
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return st_err_set(err, ST_E_SYSTEM, "socketpair: %s", strerror(errno));
	char *argv[] = {py, helper, (char *)t->dir, "--fd", fd_arg, "--dir", L->dir, NULL};
	char visible[sizeof L->devices + 32];
	char **envp = helper_env(L, visible, sizeof visible);
	fflush(NULL);
	pid_t pid = envp ? fork() : -1;
	int fork_errno = envp ? errno : ENOMEM;
	if (pid == 0)
		child_exec(L, sv[1], argv, envp);
	if (envp != environ)
		free(envp);
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return st_err_set(err, ST_E_SYSTEM, "fork: %s", strerror(fork_errno));
	}
	setpgid(pid, pid); /* also here, so the group exists before any kill */
	close(sv[1]);
	L->sock = sv[0];
	L->pid = pid;
	return ST_OK;
}

/* How many seed files may exist at once: every seed where they take at most an eighth of the
 * memory a new process may have (the parent copies each one into its shared blocks too), so the
 * helper draws them all while the first are judged; else two, a KernelBench program at its own
 * sizes taking gigabytes a seed. */
static int window(const st_task *t)
{
	const st_size_set *sets[64];
	int n = st_task_size_sets(t, sets, 64);
	st_set_bytes b;
	st_host_mem m;
	st_err e;
	uint64_t per_seed = 0;
	for (int i = 0; i < n; i++)
		if (!st_task_set_bytes(t, sets[i], &b, &e) && !b.overflow &&
		    b.inputs + b.outputs > per_seed)
			per_seed = b.inputs + b.outputs;
	uint64_t room = st_host_mem_read(&m, &e) ? 0 : st_host_mem_usable(&m, NULL);
	uint64_t all = per_seed * (uint64_t)(t->n_data_seeds + 1);
	return per_seed && all <= room / 8 ? t->n_data_seeds + 1 : 2;
}

static st_status draw_ahead(vx_live *L, int k, st_err *err);

st_status vx_live_start(vx_live *L, const st_task *t, uint64_t seed, const char *devices,
                        st_err *err)
{
	memset(L, 0, sizeof *L);
	snprintf(L->devices, sizeof L->devices, "%s", devices ? devices : "");
	L->sock = -1;
	L->n_seeds = t->n_data_seeds;
	L->t_start = st_now_s();
	L->next_id = 1;
	L->info = json_pack("{s:i,s:[]}", "seeds", t->n_data_seeds, "draw_s");
	L->files = calloc((size_t)t->n_data_seeds + 1, sizeof *L->files);
	L->q_id = calloc((size_t)t->n_data_seeds + 3, sizeof *L->q_id);
	L->q_k = calloc((size_t)t->n_data_seeds + 3, sizeof *L->q_k);
	if (!L->info || !L->files || !L->q_id || !L->q_k)
		return st_err_set(err, ST_E_NOMEM, "out of memory");
	L->window = window(t);
	if (!t->data_reference)
		return st_err_set(err, ST_E_INVALID, "%s names no reference program (data.reference)",
		                  t->id);
	st_status s = spawn(L, t, err);
	/* --seed makes a verify reproducible, seeds drawn by the program included. */
	uint64_t base = seed ? st_call_seed(seed, 0x5eed) : 0;
	while (!s && !seed && getrandom(&base, sizeof base, 0) != (ssize_t)sizeof base)
		;
	if (!s)
		s = request(L, json_pack("{s:s,s:I}", "op", "start", "seed_base",
		                         (json_int_t)(base >> 1)), K_START, err);
	if (!s)
		s = draw(L, 0, err);
	return s ? s : draw_ahead(L, 0, err);
}

st_status vx_live_params(vx_live *L, double deadline, st_err *err)
{
	st_status s = ST_OK;
	while (!s && !L->params_file[0])
		s = take_reply(L, deadline, err);
	if (!s && !L->params_open) {
		s = st_safetensors_open(L->params_file, &L->params, err);
		L->params_open = !s;
	}
	return s;
}

static int in_flight(const vx_live *L, int k)
{
	for (int i = 0; i < L->q_len; i++)
		if (L->q_k[i] == k)
			return 1;
	return 0;
}

/* Seed files drawn or being drawn: what the window counts. */
static int held(const vx_live *L)
{
	int n = 0;
	for (int i = 0; i < L->q_len; i++)
		n += L->q_k[i] >= 0;
	for (int k = 0; k <= L->n_seeds; k++)
		n += L->files[k] != NULL;
	return n;
}

/* Ask for the seeds after k that the window has room for, in order. */
static st_status draw_ahead(vx_live *L, int k, st_err *err)
{
	st_status s = ST_OK;
	for (int j = k + 1; !s && j <= L->n_seeds && held(L) < L->window; j++)
		if (!L->files[j] && !in_flight(L, j))
			s = draw(L, j, err);
	return s;
}

st_status vx_live_seed(vx_live *L, int k, double deadline, char *path, size_t len, st_err *err)
{
	if (k < 0 || k > L->n_seeds)
		return st_err_set(err, ST_E_SYSTEM, "live reference: no seed %d", k);
	st_status s = ST_OK;
	if (!L->files[k] && !in_flight(L, k)) {
		if (L->settled)
			return st_err_set(err, ST_E_SYSTEM, "live reference: seed %d asked for after timing "
			                  "began", k);
		s = draw(L, k, err); /* asked again (a second size set): the window may go one over */
	}
	/* The next seeds are drawn while this one runs. */
	if (!s && !L->settled)
		s = draw_ahead(L, k, err);
	while (!s && !L->files[k])
		s = take_reply(L, deadline, err);
	if (!s)
		snprintf(path, len, "%s", L->files[k]);
	return s;
}

void vx_live_taken(vx_live *L, int k)
{
	if (k < 0 || k > L->n_seeds || !L->files[k])
		return;
	unlink(L->files[k]);
	free(L->files[k]);
	L->files[k] = NULL;
}

st_status vx_live_settle(vx_live *L, double deadline, st_err *err)
{
	if (L->settled)
		return ST_OK;
	char path[PATH_MAX];
	st_status s = vx_live_seed(L, L->n_seeds, deadline, path, sizeof path, err);
	while (!s && L->q_len)
		s = take_reply(L, deadline, err);
	/* Idle from here on: it holds a context and memory but runs nothing, and making it exit
	 * now (a CUDA context's teardown takes a good part of a second) would put that on the
	 * verify's critical path. vx_live_free ends it. */
	L->settled = !s;
	return s;
}

/* A server's child is the server's to reap: wait (a bounded while) until it is gone, so that no
 * file of it appears in the folder after the folder is removed. */
static void end_server_child(pid_t pid)
{
	kill(-pid, SIGKILL);
	for (int i = 0; i < 400 && (kill(pid, 0) == 0 || errno != ESRCH); i++)
		usleep(5000);
}

void vx_live_free(vx_live *L)
{
	if (L->pid > 0 && L->server) {
		end_server_child(L->pid);
		L->pid = 0;
	} else if (L->pid > 0) {
		kill(-L->pid, SIGKILL);
		while (waitpid(L->pid, NULL, 0) < 0 && errno == EINTR)
			;
		L->pid = 0;
	}
	if (L->sock >= 0)
		close(L->sock); /* a child not yet attached ends on this */
	L->sock = -1;
	if (L->params_open)
		st_safetensors_close(&L->params);
	L->params_open = 0;
	for (int k = 0; L->files && k <= L->n_seeds; k++)
		free(L->files[k]);
	free(L->files);
	L->files = NULL;
	free(L->q_id);
	free(L->q_k);
	L->q_id = NULL;
	L->q_k = NULL;
	if (L->dir[0])
		st_rm_tree(L->dir);
	L->dir[0] = '\0';
	json_decref(L->info);
	L->info = NULL;
}
