/* The runner sandbox. A kernel benchmark needs the GPU driver (ioctl, mmap, threads), its own
 * private folder and the descriptors the parent handed it; it has no use for processes, programs,
 * networks, debuggers or the kernel's administrative calls. The seccomp filter is an allow-list,
 * kept here in one table: what runners were seen to call on the H200 (scripts/trace-syscalls)
 * plus the housekeeping any program's C library may do. Calls in the deny table kill the runner
 * with SIGSYS, which the parent reports as `hacking`; anything else fails with ENOSYS, so a
 * library's optional probe degrades instead of ending the run. */
#include "sandbox.h"

#include <errno.h>
#include <signal.h>
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

#include "common/host_mem.h"

/* Calls a sandboxed runner may make. The first group is what the runners of the whole suite and
 * the red team's honest solutions made once sandboxed on the H200 (driver 580, CUDA 13.0; found by
 * scripts/trace-syscalls); the rest is what a C library, a thread or a solution's own bookkeeping
 * may ask for. Calls that could reach another process take an argument check (below). */
static const char *const allowed[] = {
	/* traced on the H200 */
	"brk", "close", "fcntl", "fstat", "futex", "getpid", "ioctl", "mmap", "mprotect", "munmap",
	"newfstatat", "openat", "poll", "read", "recvmsg", "sendmsg", "write",
	/* memory */
	"madvise", "mremap", "mincore", "msync", "get_mempolicy", "membarrier",
	/* threads (clone itself is checked below), signals, exit */
	"set_robust_list", "get_robust_list", "set_tid_address", "rseq", "gettid", "sched_yield",
	"sched_getaffinity", "sched_get_priority_max", "sched_get_priority_min", "rt_sigaction",
	"rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "sigaltstack",
	"restart_syscall", "exit", "exit_group",
	/* time, randomness, identity, limits */
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
	"getrandom", "uname", "sysinfo", "getuid", "geteuid", "getgid", "getegid", "getresuid",
	"getresgid", "getppid", "getpgrp", "getrusage", "times", "getcpu",
	/* files, as far as Landlock lets them reach */
	"open", "stat", "lstat", "statx", "access", "faccessat", "faccessat2", "readlink", "readlinkat",
	"getdents64", "getcwd", "lseek", "pread64", "pwrite64", "readv", "writev", "dup", "dup2",
	"dup3", "pipe2", "eventfd2", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl",
	"epoll_wait", "epoll_pwait", "mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat",
	"renameat2", "ftruncate", "fallocate", "fsync", "fdatasync", "memfd_create", "recvfrom",
	"sendto", "shutdown",
};

/* Calls no solution may make; each kills the runner. */
static const char *const denied[] = {
	/* other programs and processes (threads are clone with CLONE_THREAD, handled below) */
	"execve", "execveat", "fork", "vfork",
	/* looking into or steering other processes */
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_getfd",
	"pidfd_send_signal", "kcmp",
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
	/* networks: no socket may be opened at all (families are told apart below) */
	"socketcall", "connect", "bind", "listen", "accept", "accept4",
};

/* Address families whose socket() kills: everything that leaves the machine or talks to the
 * kernel's network configuration. Other families (AF_UNIX) get ENOSYS like any unlisted call. */
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
	/* Changing credentials also cleared the parent-death signal the runner set: set it again,
	 * or a hung solution outlives a parent that was killed (kill -9 of stitch serve). A parent
	 * already gone in between is caught by the check that follows. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1) {
		snprintf(err, len, "sandbox: the parent is gone");
		return -1;
	}
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
	/* Only the host runner, as before: the CUDA driver reserves virtual ranges far larger than
	 * what it uses (unified addressing over host and device memory), which an AS limit sized to
	 * the host's memory would deny it; a CUDA candidate's host allocations stay unbounded here.
	 * The host runner's limit is below what the machine (or its cgroup) has, so that a candidate
	 * allocating without bound meets ENOMEM (a runtime_error) before the OOM killer. */
	st_host_mem m;
	st_err e;
	uint64_t as = (uint64_t)32 << 30;
	if (o->host_backend && st_host_mem_read(&m, &e) == ST_OK)
		as = st_host_runner_as(&m, as);
	if (o->host_backend && limit(RLIMIT_AS, (rlim_t)as, "AS", err, len))
		return -1;
	return 0;
}

static int add_names(scmp_filter_ctx ctx, uint32_t action, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not a call on this architecture */
		int rc = seccomp_rule_add(ctx, action, nr, 0);
		if (rc)
			return rc;
	}
	return 0;
}

static int filter(int host_backend, char *err, size_t len)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (!ctx) {
		snprintf(err, len, "sandbox: seccomp_init failed");
		return -1;
	}
	const scmp_datum_t self = (scmp_datum_t)getpid();
	/* The driver's threads started when the device was opened, before this filter: without
	 * thread sync they would stay unfiltered. */
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (!rc)
		rc = add_names(ctx, SCMP_ACT_ALLOW, allowed, sizeof allowed / sizeof allowed[0]);
	if (!rc)
		rc = add_names(ctx, SCMP_ACT_KILL_PROCESS, denied, sizeof denied / sizeof denied[0]);
	/* clone makes threads (the driver and solutions make several), never a new process. clone3
	 * passes its flags in memory a filter cannot read: it gets ENOSYS like any unlisted call,
	 * and the C library falls back to clone. The host backend has no driver, and a solution's
	 * thread would run beside the runner's own work between calls (the digest, the reply),
	 * where no clock sees it: deferred work could land before the digest on a busy host. So
	 * there a solution runs on the runner's one thread, and pthread_create fails with EPERM. */
	if (!rc)
		rc = seccomp_rule_add(ctx, host_backend ? SCMP_ACT_ERRNO(EPERM) : SCMP_ACT_ALLOW,
		                      SCMP_SYS(clone), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
	/* Signals and limits reach this process only (abort() raises through tgkill; kill(0, ..)
	 * reaches the runner's own process group). Where the runner shares a user with the parent,
	 * an unchecked kill could end the parent. */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
		                      SCMP_A0(SCMP_CMP_EQ, self));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, self));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1,
		                      SCMP_A0(SCMP_CMP_EQ, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1,
		                      SCMP_A0(SCMP_CMP_EQ, self));
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
	return filter(o->host_backend, err, len);
}
