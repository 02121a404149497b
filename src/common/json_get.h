/* Reading a member of a JSON object with a default, the two ways the code reads verdicts,
 * history records and rows: a number (0 when absent or not a number) and a string (a fallback
 * when absent or not a string). */
#ifndef ST_JSON_GET_H
#define ST_JSON_GET_H

#include <jansson.h>

/* o[key] as a number; 0 when o is NULL, the key is absent or its value is not a number. */
double st_json_num(const json_t *o, const char *key);

/* o[key] as a string; fallback when o is NULL, the key is absent or its value is not a
 * string. */
const char *st_json_str_or(const json_t *o, const char *key, const char *fallback);

#endif
