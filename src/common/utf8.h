/* Text from outside the program made valid UTF-8 for jansson and safe to print, and cut only
 * between characters. */
#ifndef ST_UTF8_H
#define ST_UTF8_H

#include <stddef.h>

/* A malloc'd copy of in[0..n), NUL-terminated, of the same length, in which every byte that is
 * not part of a valid UTF-8 sequence, every NUL and, with `controls`, every control character
 * but newline and tab is '?'; NULL when out of memory. */
char *st_utf8_clean(const char *in, size_t n, int controls);

/* The largest i <= n at which s (valid UTF-8, at least n bytes long, or n + 1 with its NUL) can
 * be cut without splitting a character: a string with half a character in it is not valid
 * JSON. */
size_t st_utf8_cut(const char *s, size_t n);

#endif
