/* The two wire formats: the request body each protocol expects and the answer read back from
 * its response (text, stop reason, token counts). The rest of the client never sees either. */
#include "llm_wire.h"

#include <stdlib.h>
#include <string.h>

/* OpenAI's own API takes max_completion_tokens for its newer models; the servers that copy its
 * protocol (vLLM, SGLang, llama.cpp, Ollama) take max_tokens. */
static json_t *openai_body(const st_llm_model *m, const st_llm_request *q)
{
	json_t *msgs = json_array();
	for (int i = 0; i < q->n_msgs; i++)
		json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", q->msgs[i].role, "content",
		                                      q->msgs[i].content));
	json_t *b = json_pack("{s:s,s:o,s:f}", "model", m->model, "messages", msgs, "temperature",
	                      q->temperature);
	if (q->max_tokens > 0)
		json_object_set_new(b, strcmp(m->provider, "openai") ? "max_tokens"
		                                                     : "max_completion_tokens",
		                    json_integer(q->max_tokens));
	if (q->json_mode)
		json_object_set_new(b, "response_format", json_pack("{s:s}", "type", "json_object"));
	return b;
}

/* Anthropic takes the system prompt apart from the turns, and requires max_tokens. */
static json_t *anthropic_body(const st_llm_model *m, const st_llm_request *q)
{
	json_t *msgs = json_array();
	size_t sys_len = 0;
	for (int i = 0; i < q->n_msgs; i++)
		if (!strcmp(q->msgs[i].role, "system"))
			sys_len += strlen(q->msgs[i].content) + 2;
	char *sys = sys_len ? calloc(1, sys_len + 1) : NULL;
	for (int i = 0; i < q->n_msgs; i++) {
		if (!strcmp(q->msgs[i].role, "system")) {
			if (sys) {
				if (*sys)
					strcat(sys, "\n\n");
				strcat(sys, q->msgs[i].content);
			}
			continue;
		}
		json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", q->msgs[i].role, "content",
		                                      q->msgs[i].content));
	}
	json_t *b = json_pack("{s:s,s:o,s:i,s:f}", "model", m->model, "messages", msgs, "max_tokens",
	                      q->max_tokens > 0 ? q->max_tokens : 4096, "temperature",
	                      q->temperature);
	if (sys && *sys)
		json_object_set_new(b, "system", json_string(sys));
	free(sys);
	return b;
}

json_t *st_llm_wire_body(const st_llm_model *m, const st_llm_request *q)
{
	return m->proto == ST_LLM_ANTHROPIC ? anthropic_body(m, q) : openai_body(m, q);
}

char *st_llm_request_json(const st_llm_model *m, const st_llm_request *q)
{
	json_t *b = st_llm_wire_body(m, q);
	char *s = b ? json_dumps(b, JSON_COMPACT) : NULL;
	json_decref(b);
	return s;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

/* The server's own error message, where its body has one ({"error":{"message":..}} in both). */
const char *st_llm_wire_error_message(const json_t *body)
{
	const json_t *e = json_object_get(body, "error");
	const char *msg = json_string_value(json_object_get(e, "message"));
	return msg ? msg : json_string_value(e);
}

st_status st_llm_wire_parse(const st_llm_model *m, const char *body, size_t len,
                            st_llm_response *r, st_err *err)
{
	json_error_t je;
	json_t *j = json_loadb(body, len, 0, &je);
	if (!j)
		return st_err_set(err, ST_E_IO, "%s: the response is not valid UTF-8 JSON (%s at %d)",
		                  m->base_url, je.text, je.position);
	st_status s = ST_OK;
	if (m->proto == ST_LLM_OPENAI) {
		const json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
		const char *text = json_string_value(json_object_get(json_object_get(c0, "message"),
		                                                     "content"));
		if (!c0 || !text) {
			s = st_err_set(err, ST_E_IO, "%s: the response has no choices[0].message.content",
			               m->base_url);
			goto done;
		}
		r->text = strdup(text);
		r->finish = dup_or_empty(json_string_value(json_object_get(c0, "finish_reason")));
		r->truncated = !strcmp(r->finish, "length");
		const json_t *u = json_object_get(j, "usage");
		r->input_tokens = json_integer_value(json_object_get(u, "prompt_tokens"));
		r->output_tokens = json_integer_value(json_object_get(u, "completion_tokens"));
	} else {
		const json_t *content = json_object_get(j, "content");
		if (!json_is_array(content)) {
			s = st_err_set(err, ST_E_IO, "%s: the response has no content array", m->base_url);
			goto done;
		}
		size_t total = 1, i;
		const json_t *part;
		json_array_foreach(content, i, part)
			if (json_string_value(json_object_get(part, "text")))
				total += strlen(json_string_value(json_object_get(part, "text")));
		r->text = calloc(1, total);
		if (r->text)
			json_array_foreach(content, i, part) {
				const char *t = json_string_value(json_object_get(part, "text"));
				const char *type = json_string_value(json_object_get(part, "type"));
				if (t && (!type || !strcmp(type, "text")))
					strcat(r->text, t);
			}
		r->finish = dup_or_empty(json_string_value(json_object_get(j, "stop_reason")));
		r->truncated = !strcmp(r->finish, "max_tokens");
		const json_t *u = json_object_get(j, "usage");
		r->input_tokens = json_integer_value(json_object_get(u, "input_tokens"));
		r->output_tokens = json_integer_value(json_object_get(u, "output_tokens"));
	}
	if (!r->text || !r->finish)
		s = st_err_set(err, ST_E_NOMEM, "out of memory for a response");
done:
	json_decref(j);
	return s;
}
