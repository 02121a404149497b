/* Model strings (see llm.h for the syntax): provider, base URL, model name, which key. */
#include "llm.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *provider;
	st_llm_proto proto;
	const char *base_url; /* NULL: the string carries a URL */
	const char *key_env;
	int key_required;
} providers[] = {
	{"openai", ST_LLM_OPENAI, "https://api.openai.com/v1", "OPENAI_API_KEY", 1},
	{"anthropic", ST_LLM_ANTHROPIC, "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY", 1},
	{"vllm", ST_LLM_OPENAI, NULL, "OPENAI_API_KEY", 0},
	{"sglang", ST_LLM_OPENAI, NULL, "OPENAI_API_KEY", 0},
	{"ollama", ST_LLM_OPENAI, NULL, "OPENAI_API_KEY", 0},
	{"llamacpp", ST_LLM_OPENAI, NULL, "OPENAI_API_KEY", 0},
	{"openai-compat", ST_LLM_OPENAI, NULL, "OPENAI_API_KEY", 0},
	{"anthropic-compat", ST_LLM_ANTHROPIC, NULL, "ANTHROPIC_API_KEY", 0},
};

#define N_PROVIDERS (sizeof providers / sizeof providers[0])

static st_status bad(st_err *err, const char *spec, const char *why)
{
	return st_err_set(err, ST_E_INVALID, "model '%s': %s (forms: openai:MODEL, anthropic:MODEL, "
	                  "vllm|sglang|ollama|llamacpp|openai-compat|anthropic-compat:URL:MODEL)",
	                  spec, why);
}

st_status st_llm_model_parse(const char *spec, st_llm_model *m, st_err *err)
{
	memset(m, 0, sizeof *m);
	const char *colon = spec ? strchr(spec, ':') : NULL;
	if (!colon)
		return bad(err, spec ? spec : "", "no provider");
	size_t plen = (size_t)(colon - spec);
	size_t k = 0;
	while (k < N_PROVIDERS && (strlen(providers[k].provider) != plen ||
	                           strncmp(providers[k].provider, spec, plen)))
		k++;
	if (k == N_PROVIDERS)
		return bad(err, spec, "unknown provider");
	snprintf(m->provider, sizeof m->provider, "%s", providers[k].provider);
	m->proto = providers[k].proto;
	snprintf(m->key_env, sizeof m->key_env, "%s", providers[k].key_env);
	m->key_required = providers[k].key_required;
	const char *rest = colon + 1;
	const char *model = rest;
	if (providers[k].base_url) {
		snprintf(m->base_url, sizeof m->base_url, "%s", providers[k].base_url);
	} else {
		const char *scheme = strstr(rest, "://");
		if (!scheme || (strncmp(rest, "http://", 7) && strncmp(rest, "https://", 8)))
			return bad(err, spec, "a URL starting with http:// or https:// must follow the "
			           "provider");
		const char *path = strchr(scheme + 3, '/');
		if (!path)
			return bad(err, spec, "the URL needs a path such as /v1 before ':MODEL'");
		const char *sep = strchr(path, ':');
		if (!sep)
			return bad(err, spec, "no ':MODEL' after the URL");
		size_t ulen = (size_t)(sep - rest);
		while (ulen > 0 && rest[ulen - 1] == '/')
			ulen--;
		if (ulen >= sizeof m->base_url)
			return bad(err, spec, "URL too long");
		memcpy(m->base_url, rest, ulen);
		m->base_url[ulen] = '\0';
		if (strchr(scheme + 3, ' ') && strchr(scheme + 3, ' ') < sep)
			return bad(err, spec, "spaces in the URL");
		model = sep + 1;
	}
	if (!*model)
		return bad(err, spec, "empty model name");
	if (strlen(model) >= sizeof m->model)
		return bad(err, spec, "model name too long");
	snprintf(m->model, sizeof m->model, "%s", model);
	return ST_OK;
}
