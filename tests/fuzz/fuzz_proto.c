/* libFuzzer harness for the parent's side of the runner protocol: the bytes are what a runner
 * (which hosts untrusted solution code) wrote on its socket. They go into one end of a Unix
 * socket pair, with a descriptor riding on the first byte as the protocol allows; st_proto_recv
 * decodes messages from the other end until it fails, and each message goes through what the
 * parent reads of a reply (src/verify/reply.c): ok, status, reason, the request id, a hello's
 * info, a runner's "ms" account, a profile's timeline object, the check of a timing batch, and
 * the timing samples, which are accumulated and summarised by st_stats_compute as the timing loop
 * does. */
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/proto.h"
#include "verify/reply.h"
#include "verify/stats.h"

static int passed_fd = -1;

/* The first bytes go out with sendmsg, carrying a descriptor; the rest with plain writes. The
 * writer does not block: a socket buffer that fills up truncates the stream, which the decoder
 * must take as well as any other truncation. */
static void write_stream(int sock, const uint8_t *data, size_t size)
{
	if (size == 0)
		return;
	struct iovec iov = {.iov_base = (void *)data, .iov_len = size};
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
	                    .msg_controllen = sizeof cbuf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &passed_fd, sizeof(int));
	ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n <= 0)
		return;
	for (size_t done = (size_t)n; done < size; done += (size_t)n) {
		n = send(sock, data + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n <= 0)
			return;
	}
}

static void add_ms(void *ctx, const char *phase, double ms)
{
	char key[64];
	snprintf(key, sizeof key, "fetch.%s", phase);
	*(double *)ctx += ms + (double)strlen(key);
}

static void read_reply(const json_t *msg, st_sample **samples, int *n, int *cap)
{
	char reason[2048], device_line[512];
	const char *why = st_reply_string(msg, "reason");
	const char *status = st_reply_string(msg, "status");
	if (!st_reply_ok(msg))
		snprintf(reason, sizeof reason, "%s: %s", status ? status : "runtime_error",
		         why ? why : "failed");
	json_t *info = json_incref(json_object_get(msg, "info"));
	const char *arch = json_string_value(json_object_get(info, "arch"));
	const char *device = json_string_value(json_object_get(info, "device"));
	snprintf(device_line, sizeof device_line, "device: %s (%s)", device ? device : "?",
	         arch ? arch : "?");
	json_decref(info);
	(void)st_reply_id_matches(msg, 77);
	(void)st_reply_id_matches(msg, 0);
	double total = 0;
	char refused[256];
	st_reply_ms(msg, add_ms, &total, refused, sizeof refused);
	const json_t *timeline;
	st_reply_profile(msg, &timeline, refused, sizeof refused);
	uint64_t digests[4];
	st_reply_check_time(msg, 4, 1, digests, refused, sizeof refused);
	st_reply_check_time(msg, 1, 0, NULL, refused, sizeof refused);
	int quiet;
	double waited;
	if (!st_reply_quiet(msg, &quiet, &waited, refused, sizeof refused) &&
	    !(waited >= 0 && waited <= 86400e3 && (quiet == 0 || quiet == 1)))
		abort();
	int w = st_reply_inputs_written(msg, 3);
	if (w < -1 || w > 2)
		abort();
	st_reply_add_samples(msg, samples, n, cap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (passed_fd < 0 && (passed_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		abort();
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	write_stream(sv[1], data, size);
	close(sv[1]);

	st_sample *samples = NULL;
	int n = 0, cap = 0;
	for (;;) {
		json_t *msg;
		st_err err;
		/* The parent never asks for descriptors (it would close them); the runner does. Both
		 * paths of the receiver are taken, chosen by the input's length. */
		int fd = -1;
		st_status s = st_proto_recv(sv[0], &msg, (size & 1) ? &fd : NULL, 1000, &err);
		if (fd >= 0)
			close(fd);
		if (s) {
			if (msg || !memchr(err.msg, 0, sizeof err.msg) || s == ST_E_TIMEOUT)
				abort(); /* the writer is closed: every failure is a broken frame or EOF */
			break;
		}
		read_reply(msg, &samples, &n, &cap);
		json_decref(msg);
	}
	close(sv[0]);

	st_stats st;
	st_stop_rule rule;
	st_stop_rule_default(&rule);
	st_stats_compute(samples, n, &st);
	(void)st_stop_reached(&st, &rule, 0);
	free(samples);
	return 0;
}
