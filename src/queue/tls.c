/* Redis over TLS (rediss://) for the queue. Debian 12's hiredis (0.14) has no TLS of its own, so
 * the connection here is OpenSSL's and only the protocol is hiredis's: a command is formatted by
 * redisFormatCommandArgv and written through SSL_write, and what SSL_read returns is fed to a
 * redisReader until it gives a whole reply. The peer's certificate is checked against
 * $STITCH_REDIS_CA (a PEM file), else the system's trust store, and must name the host the URL
 * names; $STITCH_REDIS_CERT and $STITCH_REDIS_KEY give a client certificate where the server
 * asks for one (tls-auth-clients). */
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

struct st_redis_tls {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
	redisReader *reader;
};

/* OpenSSL's first queued error as text (or `fallback`). */
static const char *ssl_why(char *buf, size_t len, const char *fallback)
{
	unsigned long e = ERR_get_error();
	if (!e)
		return fallback;
	ERR_error_string_n(e, buf, len);
	return buf;
}

/* A TCP connection to host:port within timeout_s: -1 with the reason in err. */
static int tcp_connect(const char *host, int port, double timeout_s, st_err *err)
{
	char svc[16];
	snprintf(svc, sizeof svc, "%d", port);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
	int rc = getaddrinfo(host, svc, &hints, &res);
	if (rc) {
		st_err_set(err, ST_E_IO, "redis %s:%d: %s", host, port, gai_strerror(rc));
		return -1;
	}
	int fd = -1, why = ECONNREFUSED;
	for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
		if (fd < 0) {
			why = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) && errno != EINPROGRESS) {
			why = errno;
			close(fd);
			fd = -1;
			continue;
		}
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		if (poll(&p, 1, (int)(timeout_s * 1000)) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) || soerr) {
			why = soerr ? soerr : ETIMEDOUT;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0) {
		st_err_set(err, ST_E_IO, "redis %s:%d: %s", host, port, strerror(why));
		return -1;
	}
	/* blocking from here on: a command waits as long as Redis takes (BLPOP, XREADGROUP BLOCK) */
	int one = 1;
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	struct timeval tv = {(time_t)timeout_s, 0};
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) {
		close(fd);
		st_err_set(err, ST_E_IO, "redis %s:%d: %s", host, port, strerror(errno));
		return -1;
	}
	return fd;
}

st_status st_redis_tls_connect(const char *host, int port, double timeout_s, st_redis_tls **out,
                               st_err *err)
{
	*out = NULL;
	char why[256];
	st_redis_tls *t = calloc(1, sizeof *t);
	if (!t)
		return st_err_set(err, ST_E_NOMEM, "redis: out of memory");
	t->fd = -1;
	const char *ca = getenv("STITCH_REDIS_CA"), *cert = getenv("STITCH_REDIS_CERT"),
	           *key = getenv("STITCH_REDIS_KEY");
	st_status s = ST_OK;
	if (!(t->ctx = SSL_CTX_new(TLS_client_method())) ||
	    !(t->reader = redisReaderCreate())) {
		s = st_err_set(err, ST_E_NOMEM, "redis: out of memory");
		goto fail;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	if (ca && *ca ? SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1
	              : SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
		s = st_err_set(err, ST_E_INVALID, "redis TLS: the CA %s: %s", ca && *ca ? ca : "store",
		               ssl_why(why, sizeof why, "cannot be read"));
		goto fail;
	}
	if ((cert && *cert) != (key && *key)) {
		s = st_err_set(err, ST_E_INVALID, "redis TLS: STITCH_REDIS_CERT and STITCH_REDIS_KEY "
		               "go together");
		goto fail;
	}
	if (cert && *cert &&
	    (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1 ||
	     SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1)) {
		s = st_err_set(err, ST_E_INVALID, "redis TLS: the client certificate %s / key %s: %s",
		               cert, key, ssl_why(why, sizeof why, "cannot be used"));
		goto fail;
	}
	if ((t->fd = tcp_connect(host, port, timeout_s, err)) < 0) {
		s = ST_E_IO;
		goto fail;
	}
	if (!(t->ssl = SSL_new(t->ctx)) || SSL_set_fd(t->ssl, t->fd) != 1 ||
	    SSL_set_tlsext_host_name(t->ssl, host) != 1 || SSL_set1_host(t->ssl, host) != 1) {
		s = st_err_set(err, ST_E_NOMEM, "redis TLS: %s", ssl_why(why, sizeof why, "set-up"));
		goto fail;
	}
	struct timeval tv = {(time_t)timeout_s, 0}; /* the handshake, not later commands */
	(void)setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (SSL_connect(t->ssl) != 1) {
		long v = SSL_get_verify_result(t->ssl);
		s = st_err_set(err, ST_E_IO, "redis %s:%d: TLS handshake: %s", host, port,
		               v != X509_V_OK ? X509_verify_cert_error_string(v)
		                              : ssl_why(why, sizeof why, "failed (is it a TLS port?)"));
		goto fail;
	}
	struct timeval none = {0, 0};
	(void)setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
	*out = t;
	return ST_OK;
fail:
	st_redis_tls_free(t);
	return s;
}

redisReply *st_redis_tls_command(st_redis_tls *t, int argc, const char **argv, char *why,
                                 size_t len)
{
	char *cmd = NULL;
	int n = redisFormatCommandArgv(&cmd, argc, argv, NULL);
	if (n < 0) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	for (int off = 0; off < n;) {
		int w = SSL_write(t->ssl, cmd + off, n - off);
		if (w <= 0) {
			ssl_why(why, len, "the connection was lost");
			free(cmd);
			return NULL;
		}
		off += w;
	}
	free(cmd);
	for (;;) {
		void *reply = NULL;
		if (redisReaderGetReply(t->reader, &reply) != REDIS_OK) {
			snprintf(why, len, "protocol error: %s", t->reader->errstr);
			return NULL;
		}
		if (reply)
			return reply;
		char buf[16384];
		int r = SSL_read(t->ssl, buf, sizeof buf);
		if (r <= 0) {
			ssl_why(why, len, "the connection was lost");
			return NULL;
		}
		if (redisReaderFeed(t->reader, buf, (size_t)r) != REDIS_OK) {
			snprintf(why, len, "protocol error: %s", t->reader->errstr);
			return NULL;
		}
	}
}

void st_redis_tls_free(st_redis_tls *t)
{
	if (!t)
		return;
	if (t->ssl) {
		SSL_shutdown(t->ssl);
		SSL_free(t->ssl);
	}
	if (t->fd >= 0)
		close(t->fd);
	SSL_CTX_free(t->ctx);
	if (t->reader)
		redisReaderFree(t->reader);
	free(t);
}
