/* A small integer expression evaluator for shapes and cost models: + - * / % ( ), unary minus,
 * integer literals (with an optional e-exponent such as 1e6), names bound by a size set, and the
 * functions min(a,b), max(a,b), cdiv(a,b) (ceiling division), log2(a) (floor). Division by zero,
 * overflow, unknown names and trailing garbage are errors that say where in the text. */
#ifndef ST_EXPR_H
#define ST_EXPR_H

#include <stdint.h>
#include "task.h"

st_status st_expr_eval(const char *text, const st_size_set *sizes, int64_t *out, st_err *err);

/* Check an expression's syntax and that every name it uses is one of `names` (no values needed). */
st_status st_expr_check(const char *text, char *const *names, int n_names, st_err *err);

#endif
