/* The LLM client the agents talk through: one interface over two wire protocols (OpenAI-style
 * chat completions, which vLLM, SGLang, llama.cpp, Ollama and most gateways speak, and
 * Anthropic's messages API), with retries that honour Retry-After, token and cost accounting,
 * and a response cache in SQLite keyed by the whole request, so that a run can be replayed
 * offline and give the same answers. API keys come from the environment and never appear in a
 * message, a log or the cache. */
#ifndef ST_LLM_H
#define ST_LLM_H

#include <stdint.h>

#include "common/st_error.h"

typedef enum st_llm_proto {
	ST_LLM_OPENAI,    /* POST {base}/chat/completions */
	ST_LLM_ANTHROPIC, /* POST {base}/messages */
} st_llm_proto;

/* A parsed model string. Syntax (also in `stitch solve --help`):
 *   openai:MODEL                  https://api.openai.com/v1, key OPENAI_API_KEY (required)
 *   anthropic:MODEL               https://api.anthropic.com/v1, key ANTHROPIC_API_KEY (required)
 *   vllm|sglang|ollama|llamacpp|openai-compat:URL:MODEL
 *                                 OpenAI protocol at URL; OPENAI_API_KEY sent when set
 *   anthropic-compat:URL:MODEL    Anthropic protocol at URL; ANTHROPIC_API_KEY sent when set
 * URL is scheme://host[:port]/path (the path is required, e.g. /v1); MODEL is everything after
 * the ':' that follows the path, so it may itself contain ':' (ollama's "qwen3:32b"). */
typedef struct st_llm_model {
	st_llm_proto proto;
	char provider[32];
	char base_url[512]; /* without a trailing '/' */
	char model[256];
	char key_env[32];   /* environment variable holding the key */
	int key_required;
} st_llm_model;

st_status st_llm_model_parse(const char *spec, st_llm_model *m, st_err *err);

/* Before any work: the key is set where the provider needs one, and the endpoint's host accepts
 * a connection within timeout_s (no request is sent). */
st_status st_llm_model_check(const st_llm_model *m, double timeout_s, st_err *err);

typedef struct st_llm_msg {
	const char *role;    /* "system", "user" or "assistant" */
	const char *content;
} st_llm_msg;

typedef struct st_llm_request {
	const st_llm_msg *msgs;
	int n_msgs;
	double temperature;
	int max_tokens;
	int json_mode;    /* ask for a JSON object (OpenAI response_format; Anthropic: prompt only) */
	int sample;       /* which of several samples of the same request; part of the cache key */
} st_llm_request;

typedef struct st_llm_response {
	char *text;          /* the assistant's answer, UTF-8 */
	char *finish;        /* the server's reason: "stop", "length", "end_turn", "max_tokens", ... */
	int truncated;       /* it stopped at the token limit */
	int64_t input_tokens, output_tokens;
	double cost_usd;     /* 0 for a cached answer */
	int cached;          /* served from the cache (no request was made) */
	int attempts;        /* HTTP requests it took (retries included) */
	double latency_s;    /* wall time of the call, retries and waits included */
} st_llm_response;

void st_llm_response_free(st_llm_response *r);

typedef struct st_llm_opts {
	double timeout_s;        /* one HTTP request, connection included (default 600) */
	int max_retries;         /* after the first attempt (default 5) */
	double backoff_base_s;   /* first retry's wait before jitter (default 1); doubles each time */
	double backoff_max_s;    /* cap on one wait, Retry-After included (default 60) */
	const char *cache_path;  /* SQLite file; NULL: no cache */
	int replay;              /* answer from the cache only; a miss is an error */
	double price_in_per_mtok, price_out_per_mtok; /* USD per million tokens; 0: unknown */
	int64_t max_response_bytes; /* default 16 MiB */
} st_llm_opts;

void st_llm_opts_default(st_llm_opts *o);

/* What a client has spent so far. */
typedef struct st_llm_usage {
	int calls, cache_hits, retries;
	int64_t input_tokens, output_tokens;
	double cost_usd;
} st_llm_usage;

typedef struct st_llm_client st_llm_client;

/* Checks the key (when the provider needs one) and opens the cache; nothing is sent yet. */
st_status st_llm_client_new(const st_llm_model *m, const st_llm_opts *o, st_llm_client **c,
                            st_err *err);
void st_llm_client_free(st_llm_client *c);

/* One completion. ST_OK with *r filled, or an error that says what and where (HTTP status and
 * the server's message, a network error, a parse error, a replay miss). Retries first. */
st_status st_llm_complete(st_llm_client *c, const st_llm_request *q, st_llm_response *r,
                          st_err *err);

st_llm_usage st_llm_client_usage(const st_llm_client *c);

/* The request body as sent for this model (for the trajectory); caller frees. */
char *st_llm_request_json(const st_llm_model *m, const st_llm_request *q);

#endif
