/* Optional hooks a task folder's task.c exports, for inputs that no elementwise distribution can
 * describe (graphs, sparse matrices) and for semantic validators that judge meaning, not bytes.
 * task.c is trusted code of the suite: it is built with cc into the cache; the runner calls the
 * generator (host memory, before the copy to the device) and the parent calls the validator. */
#ifndef STITCH_TASK_HOOKS_H
#define STITCH_TASK_HOOKS_H

#include <stddef.h>
#include <stdint.h>
#include "stitch/solution.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill every tensor of `t` whose init is {"dist": "task"}; the others are already generated and
 * may be read. `data` points to host memory of the declared shape. Same seed, same contents.
 * Return 0, or non-zero with a message in msg. */
int st_task_generate(const st_config *sizes, uint64_t seed, st_tensor *t, int32_t n,
                     char *msg, size_t msglen);

/* Judge the outputs `got` of one call against the inputs that produced them; `want` holds the
 * reference's outputs for the same inputs. All data in host memory. Return 0 when valid,
 * otherwise non-zero with a one-line reason in msg (which element, what is wrong). */
int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in,
                     const st_tensor *got, const st_tensor *want, int32_t n_out,
                     char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif

#endif /* STITCH_TASK_HOOKS_H */
