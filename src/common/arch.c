/* GPU architecture names: the one validity rule (sm_<NN>[a|f]) and the name for a compute
 * capability. */
#include "common/arch.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

void st_arch_from_cc(int major, int minor, char *out, size_t len)
{
	/* 9.0 and 10.0 have architecture-specific features (wgmma, tcgen05, TMA multicast) that
	 * only the "a" targets expose; expert kernels need them. */
	if ((major == 9 || major == 10) && minor == 0)
		snprintf(out, len, "sm_%d%da", major, minor);
	else
		snprintf(out, len, "sm_%d%d", major, minor);
}

int st_arch_valid(const char *arch)
{
	if (!arch || strncmp(arch, "sm_", 3) != 0)
		return -1;
	const char *p = arch + 3;
	int digits = 0;
	while (isdigit((unsigned char)p[digits]))
		digits++;
	if (digits < 2 || digits > 3)
		return -1;
	p += digits;
	if (*p == 'a' || *p == 'f')
		p++;
	return *p == '\0' ? 0 : -1;
}
