/* The response cache (llm_cache.c): SQLite, one row per request key. */
#ifndef ST_LLM_CACHE_H
#define ST_LLM_CACHE_H

#include <stddef.h>

#include "common/st_error.h"

typedef struct st_llm_cache st_llm_cache;

st_status st_llm_cache_open(const char *path, st_llm_cache **c, st_err *err);
void st_llm_cache_close(st_llm_cache *c);
/* 1 and *body (caller frees) when the key is stored, 0 when not, -1 on error (err set). */
int st_llm_cache_get(st_llm_cache *c, const char *key, char **body, size_t *len, st_err *err);
st_status st_llm_cache_put(st_llm_cache *c, const char *key, const char *request,
                           const char *body, size_t len, st_err *err);

#endif
