/* The parent's handle on one runner child process: start it (own process group, scrubbed
 * environment, private working folder), talk to it, and turn its death or silence into a reason. */
#ifndef ST_RUNNER_CLIENT_H
#define ST_RUNNER_CLIENT_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/st_error.h"

typedef struct st_runner {
	pid_t pid;
	int sock;
	char label[32];     /* "reference", "expert", "candidate" */
	char workdir[256];  /* private, empty working folder, removed on stop */
	int log_fd;         /* its output.log there, the runner's stdout and stderr, as opened before
	                     * it started (-1: none) */
	int ncu_fd;         /* with ST_RUNNER_NCU: its ncu.log there, ncu's report, opened likewise */
	json_t *info;       /* the hello message's info (device, arch, ...) */
	json_t *start_ms;   /* the hello's timings of the runner's own start (device, profiler,
	                     * sandbox) */
	int alive;
	int killed;         /* st_runner_quit killed it after its goodbye */
	int term_signal;    /* the signal that ended it (SIGSYS: the sandbox killed it), or 0 */
	int exit_code;      /* its exit status when it exited by itself, or 0 */
	char death[512];    /* why it is gone, when !alive */
	char ncu[1024];     /* with ST_RUNNER_NCU: the ncu program it runs under */
	uint64_t next_id;   /* the id the next request carries (random start, then counting) */
	uint64_t want_id;   /* the id the reply being waited for must carry; 0 for the hello */
	int protocol_fault; /* it broke the protocol (a frame nobody asked for, a wrong id, a broken
	                     * or oversized frame, its end of the channel closed while it lived) */
	int frozen;         /* stopped by st_runner_freeze, until the next request or thaw */
	struct st_neighbours *neighbours; /* joined (st_runner_join): it leaves before it is reaped */
} st_runner;

#define ST_RUNNER_SANDBOX 1 /* lock it down (src/runner/sandbox.c) before any solution loads */
#define ST_RUNNER_PROFILE 2 /* load the profiler's library first, for a later "profile" */
/* Run it under Nsight Compute ($STITCH_NCU, else ncu on PATH): every kernel its correctness runs'
 * st_run launch is measured (the NVTX range "stitch_st_run"), the report collected by
 * st_runner_ncu_report. ncu's injection cannot live under the seccomp filter, so this runner is
 * not sandboxed: only for solutions that already passed a sandboxed verify. */
#define ST_RUNNER_NCU 4
/* The most of ncu's report read back: 64 launches' metrics in CSV are a few hundred KiB; more is
 * not a report. */
#define ST_RUNNER_NCU_REPORT_MAX ((size_t)64 << 20)

/* Hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) a runner's context asks for unless the parent's
 * environment gives the variable a value. */
#define ST_RUNNER_HW_QUEUES 4
#define ST_RUNNER_ENV_MAX 16
#define ST_RUNNER_ENV_LEN 4096
/* The whole environment of a runner on `devices` working in `workdir` into envp (NULL-ended,
 * strings in bufs): the few variables the loader and the driver need, nothing else. */
void st_runner_env(char bufs[ST_RUNNER_ENV_MAX][ST_RUNNER_ENV_LEN], char *envp[ST_RUNNER_ENV_MAX],
                   const char *workdir, const char *devices);

/* Fork and exec stitch-runner-<backend> with ST_RUNNER_* flags; `devices` (NULL: ours) is the
 * runner's CUDA_VISIBLE_DEVICES, e.g. "1" for the second GPU. Does not wait for its hello (see
 * st_runner_hello). */
st_status st_runner_start(st_runner *r, const char *backend, const char *label, int flags,
                          const char *devices, st_err *err);

/* From now on, runners started on `devices` (as st_runner_start takes it) run on the CPUs of
 * `cpus` (a list such as "0-15"; NULL or "": anywhere again): a service keeps a GPU's runners on
 * that GPU's own NUMA node (st_cpus_near_pci). */
void st_runner_pin(const char *devices, const char *cpus);
/* The CPU list runners on `devices` are pinned to, into cpus[len]: 1, or 0 (and "") for
 * anywhere. */
int st_runner_pinned(const char *devices, char *cpus, size_t len);
/* Copy a file into the runner's private folder as `name` (readable by the runner only), so it
 * loads solutions from there and never needs the cache; `out` gets the copy's path. */
st_status st_runner_copy_in(st_runner *r, const char *src, const char *name, char *out,
                            size_t outlen, st_err *err);
/* The last `max` bytes at most that the runner's process printed (its output.log, read through
 * log_fd), from a line's start where one is near, made safe to store and print (st_utf8_clean
 * with controls): malloc'd, or NULL when it printed nothing. The text is the solution's, never
 * stitch's. */
char *st_runner_output(const st_runner *r, size_t max);
/* Wait for the hello; ST_E_NODEVICE when the runner found no device. */
st_status st_runner_hello(st_runner *r, double timeout_s, st_err *err);
/* Send a request (not consumed) with a fresh id of its own. A frame already waiting from the
 * runner, which nothing asked for, is a protocol fault (ST_E_IO, r->protocol_fault). */
st_status st_runner_send(st_runner *r, const json_t *req, int pass_fd, st_err *err);
/* Receive one reply: exactly one frame, carrying the id of the request it answers. On a timeout
 * the runner's process group is killed (ST_E_TIMEOUT); on a closed connection the child is reaped
 * and r->death says how it ended (ST_E_IO); a protocol fault (see st_runner) kills it too
 * (ST_E_IO, r->protocol_fault set). */
st_status st_runner_recv(st_runner *r, json_t **reply, double timeout_s, st_err *err);
st_status st_runner_call(st_runner *r, const json_t *req, int pass_fd, json_t **reply,
                         double timeout_s, st_err *err);
/* The runner's main thread's time on a CPU so far, as the kernel counts it, and in *waited the
 * milliseconds it has waited, runnable, for a CPU (schedstat's run_delay), from one read
 * (st_cpu_on_ms); both -1 where /proc does not tell (no schedstats, hidepid, under ncu). */
double st_runner_cpu_on_ms(const st_runner *r, double *waited);
/* Stop every thread of the runner (SIGSTOP to its group) and wait, 20 ms at most, until the
 * kernel shows each one stopped (or inside an uninterruptible call, which it leaves stopped):
 * while another solution is timed, nothing of this one runs on a CPU or hands the GPU new work,
 * whatever it hooked. 1 when seen stopped, 0 when asked to stop but not seen to (no /proc),
 * -1 when not asked (not alive, under ncu). The next request thaws it (st_runner_send), as
 * st_runner_thaw does. */
int st_runner_freeze(st_runner *r);
void st_runner_thaw(st_runner *r);
/* It joins the runners its neighbouring verifies stop while they time (neighbours.h), until it
 * quits or is reaped. 0, or -1 when it cannot (not alive, the list full). */
int st_runner_join(st_runner *r, struct st_neighbours *nb);
/* Ask it to quit and kill its group once it has answered, without waiting for it to be gone: a
 * caller with several runners quits them all first, so their device teardowns overlap. */
void st_runner_quit(st_runner *r);
/* Quit (if not done yet), then make sure it is gone; frees everything. Safe to call twice. */
void st_runner_stop(st_runner *r);
/* Kill its group now, without a word, and reap it: its device context, and whatever it queued
 * on the GPU, go with it. st_runner_stop still cleans up. A no-op on one already gone. */
void st_runner_kill(st_runner *r);

/* For a runner started with ST_RUNNER_NCU: ask it to quit, wait (at most timeout_s) for ncu to
 * write its report and exit, and return the report (ncu's CSV, `--page raw`) in *text (caller
 * frees). The runner is gone afterwards; st_runner_stop still cleans up. */
st_status st_runner_ncu_report(st_runner *r, double timeout_s, char **text, size_t *len,
                               st_err *err);

/* Folder that holds the runner binaries: $STITCH_RUNNER_DIR, else the folder of this program. */
const char *st_runner_dir(void);

#endif
