/* The one way a list in the project grows: an array `v` of `n` elements in use and room for
 * `cap`, reallocated to double its room when it is full. Written once so that the overflow
 * checks (of the int capacity and of the byte count) are written once too. Counts and
 * capacities are int, like the counters of every list that uses it. */
#ifndef ST_GROW_H
#define ST_GROW_H

#include <stddef.h>

#include "st_error.h"

/* Room for `need` elements of `size` bytes in the array whose pointer is at `items` (a T **;
 * the array NULL while empty) and whose capacity is *cap. Nothing when *cap >= need; else the
 * array is reallocated to the capacity doubled from *cap (from `first` when *cap is 0) until it
 * holds need, at most INT_MAX. ST_OK, or ST_E_NOMEM (need over INT_MAX elements, a byte count
 * over SIZE_MAX, no memory) with the array and *cap as they were. */
st_status st_grow(void *items, int *cap, long long need, size_t size, int first);

/* The capacity st_grow picks for `need` from `cap`: cap itself when it holds need, else cap
 * (first when cap is 0) doubled until it does, at most INT_MAX; -1 when need is over INT_MAX. */
int st_grow_cap(int cap, long long need, int first);

/* st_grow for an array lvalue `arr` of any element type and an int lvalue `cap`:
 * `if (ST_GROW(l->v, l->cap, l->n + 1, 16)) return -1;` */
#define ST_GROW(arr, cap, need, first) st_grow(&(arr), &(cap), (need), sizeof *(arr), (first))

#endif
