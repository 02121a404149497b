/* Request bodies and response parsing for the two protocols (llm_wire.c). */
#ifndef ST_LLM_WIRE_H
#define ST_LLM_WIRE_H

#include <jansson.h>
#include <stddef.h>

#include "llm.h"

json_t *st_llm_wire_body(const st_llm_model *m, const st_llm_request *q);
/* Fill text, finish, truncated and token counts from a 2xx body. */
st_status st_llm_wire_parse(const st_llm_model *m, const char *body, size_t len,
                            st_llm_response *r, st_err *err);
/* The server's error message in an error body, or NULL. */
const char *st_llm_wire_error_message(const json_t *body);

#endif
