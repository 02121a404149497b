/* A scripted stand-in for an LLM server, so that the client's retry, timeout, parsing, cache and
 * key-handling paths can be tested without a network or a real provider. It listens on
 * 127.0.0.1 only, on a port the kernel picks, and answers each request with the next step of
 * a script (the last step repeats; a step may instead be keyed to text its request holds, so that
 * parallel clients get the answers meant for them), recording what it was sent so that a test can check the
 * exact path, headers and body the client produced. Used by tests/unit/test_llm.c in process
 * and, through fake_llm_main.c, as the `fake-llm` program for shell tests. */
#ifndef FAKE_LLM_H
#define FAKE_LLM_H

#include <stddef.h>
#include <stdio.h>

typedef struct fake_step {
	int status;              /* HTTP status, e.g. 200, 429, 500 */
	const char *body;        /* response body (sent as is; may be invalid JSON or invalid UTF-8); NULL: "" */
	size_t body_len;         /* 0: strlen(body) */
	const char *retry_after; /* value of a Retry-After header, or NULL */
	int delay_ms;            /* wait before answering */
	int hang;                /* never answer (until fake_llm_stop); the client must time out */
	const char *match;       /* answers a request whose body holds this text (the first such
	                          * step), whatever the order; NULL: answers, in order, the requests
	                          * no step matches (the last of these repeating) */
} fake_step;

typedef struct fake_llm fake_llm;

/* The steps (bodies and header values included) are copied. NULL on failure, with the reason on
 * stderr. With n == 0 every request gets a 500 that says the script is empty. */
fake_llm *fake_llm_start(const fake_step *steps, int n);
/* The same on a given port (a resumed client must find its server where it was); 0: any. */
fake_llm *fake_llm_start_on(const fake_step *steps, int n, int port);
int fake_llm_port(const fake_llm *f);
/* Requests received so far; a request counts once its whole body has arrived, before the
 * answer is sent, so after a synchronous call returns every request it made is counted. */
int fake_llm_count(const fake_llm *f);
/* Request i's body (a NUL-terminated copy), URL path, and header `name` (case-insensitive,
 * NULL if absent). NULL for an i out of range. Valid until fake_llm_stop. */
const char *fake_llm_body(const fake_llm *f, int i);
const char *fake_llm_path(const fake_llm *f, int i);
const char *fake_llm_method(const fake_llm *f, int i);
const char *fake_llm_header(const fake_llm *f, int i, const char *name);
/* Also write each request, as it arrives, as one JSON line to `log` (flushed each time):
 * {"i":N,"method":"POST","path":"/v1/...","headers":{...},"body":"..."}; a body that is not
 * UTF-8 is written as "body":null,"body_invalid_utf8":true. NULL turns the log off. */
void fake_llm_set_log(fake_llm *f, FILE *log);
/* Wakes every hanging or delayed handler, then stops the server and frees everything. */
void fake_llm_stop(fake_llm *f);

/* Well-formed success bodies of each protocol, `text` JSON-escaped; caller frees. NULL when out
 * of memory or when text is not UTF-8 (build such bodies by hand). */
char *fake_openai_body(const char *text, const char *finish, int in_tok, int out_tok);
char *fake_anthropic_body(const char *text, const char *stop_reason, int in_tok, int out_tok);

#endif
