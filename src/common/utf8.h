/* Text from outside the program made valid UTF-8 for jansson and safe to print. */
#ifndef ST_UTF8_H
#define ST_UTF8_H

#include <stddef.h>

/* A malloc'd copy of in[0..n), NUL-terminated, of the same length, in which every byte that is
 * not part of a valid UTF-8 sequence, every NUL and, with `controls`, every control character
 * but newline and tab is '?'; NULL when out of memory. */
char *st_utf8_clean(const char *in, size_t n, int controls);

#endif
