/* st_grow: doubling growth with its overflow checks. The array pointer is read and written
 * through memcpy, not through a void ** cast, so that a T * is never accessed as a void *. */
#include "grow.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int st_grow_cap(int cap, long long need, int first)
{
	if (need <= cap)
		return cap;
	if (need > INT_MAX)
		return -1;
	int c = cap > 0 ? cap : first > 0 ? first : 1;
	while (c < need)
		c = c > INT_MAX / 2 ? INT_MAX : c * 2;
	return c;
}

st_status st_grow(void *items, int *cap, long long need, size_t size, int first)
{
	if (need <= *cap)
		return ST_OK;
	int c = st_grow_cap(*cap, need, first);
	if (c < 0 || size == 0 || (size_t)c > SIZE_MAX / size)
		return ST_E_NOMEM;
	void *old, *p;
	memcpy(&old, items, sizeof old);
	p = realloc(old, (size_t)c * size);
	if (!p)
		return ST_E_NOMEM;
	memcpy(items, &p, sizeof p);
	*cap = c;
	return ST_OK;
}
