/* st_buf: doubling growth from 1 KiB. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(st_buf *b, size_t more)
{
	if (b->oom)
		return -1;
	if (b->n + more + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 1024;
	while (cap < b->n + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void st_buf_add(st_buf *b, const void *data, size_t n)
{
	if (reserve(b, n))
		return;
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = '\0';
}

void st_buf_puts(st_buf *b, const char *s)
{
	st_buf_add(b, s, strlen(s));
}

void st_buf_putc(st_buf *b, char c)
{
	st_buf_add(b, &c, 1);
}

void st_buf_vprintf(st_buf *b, const char *fmt, va_list ap)
{
	/* Measured first on a copy: the list is walked twice, once to size and once to write. */
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if (reserve(b, (size_t)n))
		return;
	vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
	b->n += (size_t)n;
}

void st_buf_printf(st_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	st_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

const char *st_buf_str(const st_buf *b)
{
	return b->p ? b->p : "";
}

void st_buf_free(st_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->n = b->cap = 0;
	b->oom = 0;
}
