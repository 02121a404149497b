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

/* A metamorphic check, for properties no single call shows (causality, independence of the
 * batch's sequences). st_task_perturb changes the inputs of one call in place (host memory,
 * already generated from `seed`'s call) using `perturb_seed`; the candidate then runs on both
 * the original and the changed inputs, and st_task_validate_perturbed judges the two outputs
 * against each other. The parent computes the changed inputs itself with the same hook, so a
 * solution cannot alter what it is judged against. Both or neither are exported. */
int st_task_perturb(const st_config *sizes, uint64_t perturb_seed, st_tensor *in, int32_t n,
                    char *msg, size_t msglen);
int st_task_validate_perturbed(const st_config *sizes, const st_tensor *in,
                               const st_tensor *in_perturbed, int32_t n_in, const st_tensor *got,
                               const st_tensor *got_perturbed, int32_t n_out, char *msg,
                               size_t msglen);

#ifdef __cplusplus
}
#endif

#endif /* STITCH_TASK_HOOKS_H */
