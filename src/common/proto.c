/* Framing for the runner protocol: u32 little-endian length, then that many bytes of JSON.
 * A descriptor, when passed, rides on the first byte of the frame as SCM_RIGHTS. */
#include "proto.h"
#include "common/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static st_status send_all(int sock, const char *buf, size_t len, int pass_fd, st_err *err)
{
	size_t done = 0;
	while (done < len) {
		struct iovec iov = {.iov_base = (void *)(buf + done), .iov_len = len - done};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		char cbuf[CMSG_SPACE(sizeof(int))];
		if (pass_fd >= 0 && done == 0) {
			memset(cbuf, 0, sizeof cbuf);
			mh.msg_control = cbuf;
			mh.msg_controllen = sizeof cbuf;
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
		}
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return st_err_set(err, ST_E_IO, "send to runner: %s", strerror(errno));
		}
		done += (size_t)n;
	}
	return ST_OK;
}

st_status st_proto_send(int sock, const json_t *msg, int pass_fd, st_err *err)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	if (!text)
		return st_err_set(err, ST_E_NOMEM, "cannot encode protocol message");
	size_t len = strlen(text);
	char *frame = malloc(len + 4);
	if (!frame) {
		free(text);
		return st_err_set(err, ST_E_NOMEM, "out of memory for a %zu-byte message", len);
	}
	uint32_t n = (uint32_t)len;
	for (int i = 0; i < 4; i++)
		frame[i] = (char)((n >> (8 * i)) & 0xff);
	memcpy(frame + 4, text, len);
	st_status s = send_all(sock, frame, len + 4, pass_fd, err);
	free(frame);
	free(text);
	return s;
}

/* Read exactly len bytes before the deadline, collecting a passed descriptor if one arrives. */
static st_status recv_all(int sock, char *buf, size_t len, int *fd_out, double deadline,
                          st_err *err)
{
	size_t done = 0;
	while (done < len) {
		if (deadline >= 0) {
			double left = deadline - st_now_s() * 1e3;
			if (left <= 0)
				return st_err_set(err, ST_E_TIMEOUT, "no answer from runner in time");
			struct pollfd p = {.fd = sock, .events = POLLIN};
			int r = poll(&p, 1, left > 1e9 ? 1000000000 : (int)left + 1);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return st_err_set(err, ST_E_IO, "poll on runner socket: %s", strerror(errno));
			if (r == 0)
				continue;
		}
		struct iovec iov = {.iov_base = buf + done, .iov_len = len - done};
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
		                    .msg_controllen = sizeof cbuf};
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return st_err_set(err, ST_E_IO, "receive from runner: %s", strerror(errno));
		}
		if (n == 0)
			return st_err_set(err, ST_E_IO, "connection closed");
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				int fd;
				memcpy(&fd, CMSG_DATA(c), sizeof fd);
				if (fd_out && *fd_out < 0)
					*fd_out = fd;
				else
					close(fd);
			}
		}
		done += (size_t)n;
	}
	return ST_OK;
}

st_status st_proto_recv(int sock, json_t **msg, int *fd_out, int timeout_ms, st_err *err)
{
	*msg = NULL;
	if (fd_out)
		*fd_out = -1;
	double deadline = timeout_ms < 0 ? -1 : st_now_s() * 1e3 + timeout_ms;
	unsigned char hdr[4];
	st_status s = recv_all(sock, (char *)hdr, 4, fd_out, deadline, err);
	if (s)
		return s;
	uint32_t len = hdr[0] | hdr[1] << 8 | hdr[2] << 16 | (uint32_t)hdr[3] << 24;
	if (len > ST_PROTO_MAX_MSG)
		return st_err_set(err, ST_E_IO, "protocol frame of %u bytes is too large", len);
	char *buf = malloc(len + 1);
	if (!buf)
		return st_err_set(err, ST_E_NOMEM, "out of memory for a %u-byte message", len);
	s = recv_all(sock, buf, len, fd_out, deadline, err);
	if (s) {
		free(buf);
		return s;
	}
	json_error_t je;
	*msg = json_loadb(buf, len, 0, &je);
	free(buf);
	if (!*msg)
		return st_err_set(err, ST_E_IO, "malformed protocol message: %s", je.text);
	return ST_OK;
}
