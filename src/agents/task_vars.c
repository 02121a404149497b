/* The variables every agent prompt is filled from, for one task: its id and description, the
 * reference's source, the visible sizes, the policy in words, the target arch, the solution
 * ABI, the code fence of the backend and the target. `stitch solve` and `stitch export` both
 * use it, so that an exported prompt is the prompt a run sends. */
#include "agents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/json_get.h"
#include "common/paths.h"
#include "task/task.h"

static char *read_or_empty(const char *path)
{
	char *d = NULL;
	size_t n;
	st_err e;
	if (!path || st_read_file(path, &d, &n, &e))
		return strdup("");
	return d;
}

json_t *st_agent_task_vars(const st_task *t, int host, const char *arch, double target_speedup,
                         const char *reference_profile)
{
	char sizes[2048] = "";
	const st_size_set *sets[2] = {&t->small, &t->eval};
	for (int k = 0; k < 2; k++) {
		if (!sets[k]->label) /* an imported task has no small set */
			continue;
		size_t L = strlen(sizes);
		snprintf(sizes + L, sizeof sizes - L, "%s:", sets[k]->label);
		for (int i = 0; i < sets[k]->n; i++) {
			L = strlen(sizes);
			snprintf(sizes + L, sizeof sizes - L, " %s=%lld", sets[k]->names[i],
			         (long long)sets[k]->values[i]);
		}
		L = strlen(sizes);
		snprintf(sizes + L, sizeof sizes - L, "\n");
	}
	if (t->n_hidden) {
		size_t L = strlen(sizes);
		snprintf(sizes + L, sizeof sizes - L, "plus %d hidden size set%s you will not see\n",
		         t->n_hidden, t->n_hidden == 1 ? "" : "s");
	}
	char policy[1024];
	size_t L = (size_t)snprintf(policy, sizeof policy, "%s mode; libraries allowed:",
	                            t->policy == ST_POLICY_EXPERT ? "expert (write the kernels "
	                                                            "yourself)"
	                                                          : "engineering");
	for (int i = 0; i < t->n_libraries && L < sizeof policy; i++)
		L += (size_t)snprintf(policy + L, sizeof policy - L, " %s", t->libraries[i]);
	if (!t->n_libraries && L < sizeof policy)
		snprintf(policy + L, sizeof policy - L, " none beyond the CUDA runtime");
	char abi_path[4200];
	snprintf(abi_path, sizeof abi_path, "%s/include/stitch/solution.h", st_home());
	char *abi = read_or_empty(abi_path);
	/* An imported task has no reference solution: its PyTorch program, in the description, is
	 * what to match, and the agents are told so where the reference would stand. */
	int imported = t->n_data_seeds > 0;
	char *ref = imported ? strdup("There is no reference solution: the task was imported from a "
	                              "PyTorch program, shown in the task description above, and "
	                              "your outputs must match what that program computes. Write "
	                              "standalone code: no PyTorch, no Python, no libtorch.")
	                     : read_or_empty(st_task_reference(t, host));
	json_t *vars = NULL;
	if (abi && ref)
		vars = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:f}", "task_id", t->id,
		                 "task_description", t->description ? t->description : "",
		                 "reference_source", ref, "sizes", sizes, "policy", policy, "arch", arch,
		                 "abi", abi, "reference_profile", reference_profile, "backend",
		                 host ? "host" : "cuda", "code_fence", host ? "c" : "cuda",
		                 "reference_fence", imported ? "text" : host ? "c" : "cuda",
		                 "target_speedup", target_speedup);
	free(abi);
	free(ref);
	return vars;
}


/* Earlier attempts, one line each: "attempt N (stage): status[, speedup X.XXx]". */
char *st_agent_history_text(const json_t *history)
{
	size_t i, cap = 1 + 160 * json_array_size(history);
	json_t *h;
	char *out = calloc(1, cap);
	if (!out)
		return NULL;
	size_t len = 0;
	json_array_foreach(history, i, h) {
		const json_t *sp = json_object_get(h, "speedup");
		char tail[48] = "";
		if (sp)
			snprintf(tail, sizeof tail, ", speedup %.2fx", json_number_value(sp));
		len += (size_t)snprintf(out + len, cap - len, "attempt %d (%.30s): %.30s%s\n",
		                        (int)json_integer_value(json_object_get(h, "attempt")),
		                        st_json_str_or(h, "stage", "?"),
		                        st_json_str_or(h, "status", "?"),
		                        tail);
		if (len >= cap)
			break;
	}
	return out;
}

/* The plan's steps, numbered, one per line. */
char *st_agent_steps_text(const json_t *plan)
{
	size_t i, len = 1;
	json_t *st;
	json_array_foreach(json_object_get(plan, "steps"), i, st)
		len += strlen(st_json_str_or(st, "what", "")) + 24;
	char *out = calloc(1, len);
	if (!out)
		return NULL;
	json_array_foreach(json_object_get(plan, "steps"), i, st) {
		char num[24];
		snprintf(num, sizeof num, "%zu. ", i + 1);
		strcat(out, num);
		strcat(out, st_json_str_or(st, "what", ""));
		strcat(out, "\n");
	}
	return out;
}
