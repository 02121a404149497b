/* Progress lines for a person watching: the verify (its slot's callback), the tolerance audit
 * and the agents' loop each take a callback that wants whole lines, and each formats its lines
 * printf-style for it. The formatting, the cut of a long line and the check for no callback are
 * here once. */
#ifndef ST_PROGRESS_H
#define ST_PROGRESS_H

#include <stdarg.h>
#include <stddef.h>

/* The longest line st_vprogress passes on, its NUL included. */
#define ST_PROGRESS_MAX 4096

/* fmt and ap formatted into one line of at most max - 1 bytes (a longer one is cut; a max of 0
 * or over ST_PROGRESS_MAX is ST_PROGRESS_MAX) and passed to fn(arg, line); nothing, not even the
 * formatting, when fn is NULL. The caller keeps ownership of ap (va_end is its own). */
void st_vprogress(void (*fn)(void *arg, const char *line), void *arg, size_t max,
                  const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

#endif
