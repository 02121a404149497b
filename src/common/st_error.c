/* Error buffer helpers: one formatted line per failure, prefixed as it travels up the call stack. */
#include "st_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

st_status st_err_set(st_err *err, st_status code, const char *fmt, ...)
{
	if (!err)
		return code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	return code;
}

st_status st_err_wrap(st_err *err, st_status code, const char *fmt, ...)
{
	if (!err)
		return code;
	char prefix[512], old[sizeof err->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof old);
	/* Truncation of a very long chain is acceptable: the prefix says where it came from. */
	size_t n = strlen(prefix);
	if (n > sizeof err->msg - 3)
		n = sizeof err->msg - 3;
	memcpy(err->msg, prefix, n);
	memcpy(err->msg + n, ": ", 2);
	size_t room = sizeof err->msg - n - 3;
	size_t m = strnlen(old, room);
	memcpy(err->msg + n + 2, old, m);
	err->msg[n + 2 + m] = 0;
	return code;
}
