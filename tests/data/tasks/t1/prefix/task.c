/* Hooks of the prefix test task: the metamorphic check alone (the outputs themselves are judged
 * by tolerance). One input element changes; every output before it must keep its bits, the one
 * at it must change. */
#include <stdio.h>
#include <string.h>
#include "stitch/task_hooks.h"

int st_task_perturb(const st_config *sizes, uint64_t perturb_seed, st_tensor *in, int32_t n,
                    char *msg, size_t msglen)
{
	(void)sizes;
	if (n != 1 || in[0].dtype != ST_F32 || in[0].ndim != 1) {
		snprintf(msg, msglen, "input x is not f32 [n]");
		return 1;
	}
	float *x = in[0].data;
	int64_t i = (int64_t)(perturb_seed % (uint64_t)in[0].shape[0]);
	x[i] += 1.0f;
	return 0;
}

int st_task_validate_perturbed(const st_config *sizes, const st_tensor *in,
                               const st_tensor *in_perturbed, int32_t n_in, const st_tensor *got,
                               const st_tensor *got_perturbed, int32_t n_out, char *msg,
                               size_t msglen)
{
	(void)sizes, (void)n_in, (void)n_out;
	const float *a = in[0].data, *b = in_perturbed[0].data;
	const float *y = got[0].data, *z = got_perturbed[0].data;
	int64_t n = in[0].shape[0], first = 0;
	while (first < n && a[first] == b[first])
		first++;
	for (int64_t i = 0; i < first && i < n; i++)
		if (memcmp(&y[i], &z[i], sizeof y[i])) {
			snprintf(msg, msglen, "y[%lld] changed when x[%lld] did", (long long)i,
			         (long long)first);
			return 1;
		}
	if (first < n && !memcmp(&y[first], &z[first], sizeof y[first])) {
		snprintf(msg, msglen, "y[%lld] did not change when x[%lld] did", (long long)first,
		         (long long)first);
		return 1;
	}
	snprintf(msg, msglen, "x[%lld] changed; y before it kept its bits", (long long)first);
	return 0;
}
