/* Text from outside the program (a compiler's log, what a solution printed) made safe to store
 * in JSON and to print: jansson only stores valid UTF-8, so invalid bytes and NULs become '?'
 * byte for byte (a cached compile log must read back as the fresh one did: its diagnostics are
 * re-parsed from it); and where such text may be cut short without splitting a character. */
#include "common/utf8.h"

#include <stdlib.h>
#include <string.h>

char *st_utf8_clean(const char *in, size_t n, int controls)
{
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t len = 0;
		unsigned cp = 0, min = 0;
		if (c == 0) {
			out[i++] = '?';
			continue;
		}
		if (c < 0x80) {
			/* a terminal's escapes and carriage returns would let the text rewrite what
			 * is printed around it */
			int ctl = c < 0x20 ? c != '\n' && c != '\t' : c == 0x7F;
			out[i] = controls && ctl ? '?' : (char)c;
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			len = 2;
			cp = c & 0x1F;
			min = 0x80;
		} else if ((c & 0xF0) == 0xE0) {
			len = 3;
			cp = c & 0x0F;
			min = 0x800;
		} else if ((c & 0xF8) == 0xF0) {
			len = 4;
			cp = c & 0x07;
			min = 0x10000;
		}
		int ok = len > 0 && i + len <= n;
		for (size_t k = 1; ok && k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				ok = 0;
			else
				cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
			ok = 0;
		if (ok && controls && cp <= 0x9F) /* C1 controls: CSI and the like */
			ok = 0;
		if (!ok) {
			out[i++] = '?';
			continue;
		}
		memcpy(out + i, s + i, len);
		i += len;
	}
	out[n] = '\0';
	return out;
}

size_t st_utf8_cut(const char *s, size_t n)
{
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}
