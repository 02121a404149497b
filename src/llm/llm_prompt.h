/* What goes to a model and what is read back from its text, shared by the agents and the
 * reward's rubric judge: prompt templates under prompts/ filled from a JSON object of variables
 * (llm_prompt.c), and the JSON object found in a model's answer (llm_answer.c). */
#ifndef ST_LLM_PROMPT_H
#define ST_LLM_PROMPT_H

#include <jansson.h>

#include "common/st_error.h"

/* ---- llm_prompt.c -------------------------------------------------------------------------- */

/* Read prompts/<name>.md under `dir` and replace every {{key}} with the string value of `key`
 * in `vars` (numbers are printed, arrays/objects dumped as JSON). A placeholder without a value
 * is an error naming it; "{{{{" stands for a literal "{{". *out is allocated. */
st_status st_prompt_render(const char *dir, const char *name, const json_t *vars, char **out,
                           st_err *err);
/* The same on a template given as text (name is used in messages only). */
st_status st_prompt_render_text(const char *tmpl, const char *name, const json_t *vars,
                                char **out, st_err *err);

/* ---- llm_answer.c -------------------------------------------------------------------------- */

/* The JSON object in a model's answer (the whole answer, a ```json or bare fenced block, or a
 * top-level {...} span), preferring the first one that has `key` when key is not NULL. NULL
 * with an error that starts with `what` ("plan", "rubric") and says what was wrong: no object,
 * one never closed, or one that is not valid JSON. */
json_t *st_answer_object(const char *answer, const char *key, const char *what, st_err *err);

#endif
