/* The runner sandbox. A kernel benchmark needs the GPU driver (ioctl, mmap, threads), its own
 * private folder and the descriptors the parent handed it; it has no use for processes, programs,
 * networks, debuggers or the kernel's administrative calls. Those are denied here, in one table,
 * with SCMP_ACT_KILL_PROCESS, so that an attempt ends the runner with SIGSYS, which the parent
 * reports as a `hacking` verdict rather than an error the solution could work around. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Calls no solution may make; each kills the runner. */
static const char *const denied[] = {
	/* other programs and processes (threads are clone with CLONE_THREAD, handled below) */
	"execve", "execveat", "fork", "vfork",
	/* looking into or steering other processes */
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_getfd",
	"kcmp",
	/* the kernel's administration */
	"mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "init_module",
	"finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
	"swapoff", "acct", "quotactl", "syslog", "settimeofday", "clock_settime", "adjtimex",
	"clock_adjtime", "sethostname", "setdomainname", "iopl", "ioperm",
	/* ways around this filter or around the harness's view of time and memory */
	"bpf", "seccomp", "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
	"perf_event_open", "add_key", "request_key", "keyctl", "personality",
	"fanotify_init", "name_to_handle_at", "open_by_handle_at", "lookup_dcookie",
	/* identity: after the drop there is nothing to gain, so any attempt is telling */
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
	"setfsuid", "setfsgid", "capset",
	/* network: only Unix-domain sockets are left (see below); these would reach further */
	"socketcall",
};

/* Address families a solution may not open: everything that leaves the machine or talks to the
 * kernel's network configuration. AF_UNIX stays, for drivers that use it locally. */
static const int denied_families[] = {AF_INET, AF_INET6, AF_PACKET, AF_NETLINK, AF_BLUETOOTH,
                                      AF_VSOCK, AF_ALG, AF_XDP};

static int drop_privileges(unsigned uid, char *err, size_t len)
{
	if (geteuid() != 0)
		return 0; /* already unprivileged */
	if (uid == 0) {
		snprintf(err, len, "sandbox: started as root without a user to drop to");
		return -1;
	}
	if (setgroups(0, NULL) || setgid((gid_t)uid) || setuid((uid_t)uid)) {
		snprintf(err, len, "sandbox: cannot become uid %u: %s", uid, strerror(errno));
		return -1;
	}
	if (setuid(0) == 0) {
		snprintf(err, len, "sandbox: still able to regain root after dropping to uid %u", uid);
		return -1;
	}
	/* Changing uid made the process non-dumpable, which hands its /proc files to root; the
	 * driver reads some of them. ptrace stays impossible: the filter below denies it. */
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	return 1;
}

/* Paths a runner may read (the system, where libraries, the driver and its devices live) and
 * whether it may also open files there for writing (devices). Everything else, the task folder,
 * the caches, the results, other runners' folders, is out of reach. */
static const struct {
	const char *path;
	int write;
} fs_allowed[] = {
	{"/usr", 0}, {"/lib", 0}, {"/lib64", 0}, {"/lib32", 0}, {"/etc", 0}, {"/opt", 0},
	{"/bin", 0}, {"/sbin", 0}, {"/run", 0}, {"/proc", 1}, {"/sys", 0}, {"/dev", 1},
};

static int landlock(const char *workdir)
{
	const __u64 rights = (LANDLOCK_ACCESS_FS_REFER << 1) - 1; /* every right of ABI 1 and 2 */
	struct landlock_ruleset_attr attr = {.handled_access_fs = rights};
	int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1)
		return 0;
	if (abi < 2)
		attr.handled_access_fs &= ~LANDLOCK_ACCESS_FS_REFER;
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (rs < 0)
		return 0;
	const __u64 read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
	                   LANDLOCK_ACCESS_FS_EXECUTE;
	int ok = 1;
	for (size_t i = 0; i < sizeof fs_allowed / sizeof fs_allowed[0] + 1 && ok; i++) {
		const char *path = i < sizeof fs_allowed / sizeof fs_allowed[0] ? fs_allowed[i].path
		                                                                : workdir;
		if (!path)
			continue;
		int fd = open(path, O_PATH | O_CLOEXEC);
		if (fd < 0)
			continue; /* not on this machine */
		struct landlock_path_beneath_attr pb = {.parent_fd = fd};
		if (i == sizeof fs_allowed / sizeof fs_allowed[0])
			pb.allowed_access = attr.handled_access_fs;
		else
			pb.allowed_access = read | (fs_allowed[i].write ? LANDLOCK_ACCESS_FS_WRITE_FILE : 0);
		/* A file rule may only carry file rights; directories take the whole set. */
		ok = syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == 0;
		close(fd);
	}
	ok = ok && syscall(SYS_landlock_restrict_self, rs, 0) == 0;
	close(rs);
	return ok;
}

static int limit(int resource, rlim_t value, const char *name, char *err, size_t len)
{
	struct rlimit r;
	if (getrlimit(resource, &r) == 0 && r.rlim_max != RLIM_INFINITY && r.rlim_max < value)
		value = r.rlim_max;
	r.rlim_cur = r.rlim_max = value;
	if (setrlimit(resource, &r)) {
		snprintf(err, len, "sandbox: setrlimit %s: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

static int limits(const st_sandbox_opts *o, char *err, size_t len)
{
	rlim_t cpu = (rlim_t)(o->cpu_seconds > 0 ? o->cpu_seconds : 3600);
	/* The CUDA driver keeps dozens of descriptors and threads; these bounds leave it room
	 * while stopping descriptor or process floods. */
	if (limit(RLIMIT_CPU, cpu, "CPU", err, len) || limit(RLIMIT_NOFILE, 512, "NOFILE", err, len) ||
	    limit(RLIMIT_FSIZE, 64u << 20, "FSIZE", err, len) || limit(RLIMIT_CORE, 0, "CORE", err, len) ||
	    limit(RLIMIT_NPROC, 4096, "NPROC", err, len))
		return -1;
	if (o->host_backend && limit(RLIMIT_AS, (rlim_t)32 << 30, "AS", err, len))
		return -1;
	return 0;
}

static int filter(char *err, size_t len)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		snprintf(err, len, "sandbox: seccomp_init failed");
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < sizeof denied / sizeof denied[0] && !rc; i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not a call on this architecture */
		rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 0);
	}
	/* clone is how threads are made (the driver makes several); a new process is not. */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
	/* clone3 passes its flags in memory a filter cannot read: refuse it, and the C library
	 * falls back to clone. */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	for (size_t i = 0; i < sizeof denied_families / sizeof denied_families[0] && !rc; i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(socket), 1,
		                      SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)denied_families[i]));
	}
	if (!rc)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc) {
		snprintf(err, len, "sandbox: cannot install the seccomp filter: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

int st_sandbox_apply(const st_sandbox_opts *o, st_sandbox_state *state, char *err, size_t len)
{
	memset(state, 0, sizeof *state);
	if (limits(o, err, len))
		return -1;
	int dropped = drop_privileges(o->uid, err, len);
	if (dropped < 0)
		return -1;
	state->privileges_dropped = dropped;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		snprintf(err, len, "sandbox: PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	state->fs_isolated = landlock(o->workdir);
	return filter(err, len);
}
