/* A growable byte buffer, always NUL-terminated, for text built piece by piece (prompts, HTTP
 * bodies, Prometheus text, reports and pages, feedback): the project's one way to build a string.
 * A failed allocation sets `oom`; later appends then do nothing, so a caller checks once at the
 * end. */
#ifndef ST_BUF_H
#define ST_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct st_buf {
	char *p;      /* NULL until the first append */
	size_t n, cap;
	int oom;
} st_buf;

void st_buf_add(st_buf *b, const void *data, size_t n);
void st_buf_puts(st_buf *b, const char *s);
void st_buf_putc(st_buf *b, char c);
void st_buf_printf(st_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void st_buf_vprintf(st_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* The text so far, "" before any append: never NULL, so it can go where a string must. */
const char *st_buf_str(const st_buf *b);
void st_buf_free(st_buf *b);

#endif
