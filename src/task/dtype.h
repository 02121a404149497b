/* Element types of the ABI: names as written in task.json, sizes, and conversion of one element
 * to and from double (fp16, bf16 and fp8 decoded in software, so the parent needs no CUDA). */
#ifndef ST_DTYPE_H
#define ST_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "stitch/solution.h"

/* "f32","f16","bf16","f64","i32","i64","i8","u8","f8e4m3","f8e5m2". Return -1 when unknown. */
int st_dtype_parse(const char *name, st_dtype *out);
const char *st_dtype_name(st_dtype t);
size_t st_dtype_size(st_dtype t);
int st_dtype_is_float(st_dtype t);

double st_dtype_get(st_dtype t, const void *base, int64_t i);
/* Round to nearest even for the narrow float types; saturate integers. */
void st_dtype_set(st_dtype t, void *base, int64_t i, double v);

#endif
