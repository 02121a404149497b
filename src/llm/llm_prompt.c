/* Prompt templates: a Markdown file under prompts/ with {{name}} placeholders filled from a JSON
 * object of variables. The filling is deliberately dumb: one pass, values are inserted verbatim
 * and never scanned again (a reference source full of `{{` initialisers must come through
 * untouched), and a placeholder nobody filled is an error rather than an empty hole, because a
 * prompt missing its task text still "works" and silently wastes a whole model call. */
#include "llm/llm_prompt.h"

#include "common/buf.h"
#include "common/fs.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int key_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.';
}

/* The value's text as it goes into the prompt; NULL only when out of memory. *owned says whether
 * the caller frees it. */
static const char *value_text(const json_t *v, char *num, size_t numlen, int *owned)
{
	*owned = 0;
	switch (json_typeof(v)) {
	case JSON_STRING:
		return json_string_value(v);
	case JSON_INTEGER:
		snprintf(num, numlen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return num;
	case JSON_REAL:
		/* %.15g prints 2.0 as "2" and 1.5 as "1.5": what a person would write in a prompt. */
		snprintf(num, numlen, "%.15g", json_real_value(v));
		return num;
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	case JSON_NULL:
		/* An explicit null is a value the caller chose ("nothing here"), unlike a missing key. */
		return "";
	default: {
		char *s = json_dumps(v, JSON_ENCODE_ANY);
		*owned = s != NULL;
		return s;
	}
	}
}

st_status st_prompt_render_text(const char *tmpl, const char *name, const json_t *vars,
                                char **out, st_err *err)
{
	*out = NULL;
	if (!name)
		name = "(template)";
	if (!tmpl)
		return st_err_set(err, ST_E_INVALID, "prompt %s: no template text", name);
	st_buf b = {0};
	st_buf_add(&b, "", 0); /* an empty template renders as "", not NULL */
	int line = 1;
	const char *p = tmpl;
	while (*p) {
		const char *open = strstr(p, "{{");
		if (!open) {
			st_buf_add(&b, p, strlen(p));
			break;
		}
		for (const char *q = p; q < open; q++)
			line += *q == '\n';
		st_buf_add(&b, p, (size_t)(open - p));
		if (!strncmp(open, "{{{{", 4)) {
			st_buf_add(&b, "{{", 2);
			p = open + 4;
			continue;
		}
		/* {{ key }}: spaces inside the braces are forgiven, anything else is a template bug. */
		const char *k = open + 2;
		while (*k == ' ')
			k++;
		const char *ke = k;
		while (key_char(*ke))
			ke++;
		const char *c = ke;
		while (*c == ' ')
			c++;
		if (ke == k || strncmp(c, "}}", 2)) {
			free(b.p);
			return st_err_set(err, ST_E_INVALID, "prompt %s, line %d: '{{' does not open a "
			                  "{{name}} placeholder (write {{{{ for a literal {{)", name, line);
		}
		char key[128];
		if ((size_t)(ke - k) >= sizeof key) {
			free(b.p);
			return st_err_set(err, ST_E_INVALID, "prompt %s, line %d: placeholder name too long",
			                  name, line);
		}
		memcpy(key, k, (size_t)(ke - k));
		key[ke - k] = 0;
		const json_t *v = json_is_object(vars) ? json_object_get(vars, key) : NULL;
		if (!v) {
			free(b.p);
			return st_err_set(err, ST_E_INVALID, "prompt %s, line %d: no value for {{%s}}", name,
			                  line, key);
		}
		char num[64];
		int owned;
		const char *text = value_text(v, num, sizeof num, &owned);
		if (!text) {
			free(b.p);
			return st_err_set(err, ST_E_NOMEM, "prompt %s: out of memory", name);
		}
		st_buf_add(&b, text, strlen(text));
		if (owned)
			free((char *)text);
		p = c + 2;
	}
	if (b.oom) {
		free(b.p);
		return st_err_set(err, ST_E_NOMEM, "prompt %s: out of memory", name);
	}
	*out = b.p;
	return ST_OK;
}

st_status st_prompt_render(const char *dir, const char *name, const json_t *vars, char **out,
                           st_err *err)
{
	*out = NULL;
	if (!dir || !name || !*name)
		return st_err_set(err, ST_E_INVALID, "prompt: no folder or name given");
	size_t nl = strlen(name);
	const char *ext = nl > 3 && !strcmp(name + nl - 3, ".md") ? "" : ".md";
	char path[4096];
	if ((size_t)snprintf(path, sizeof path, "%s/%s%s", dir, name, ext) >= sizeof path)
		return st_err_set(err, ST_E_INVALID, "prompt %s: path too long", name);
	char *tmpl;
	size_t len;
	st_status s = st_read_file(path, &tmpl, &len, err);
	if (s)
		return st_err_wrap(err, s, "prompt %s", name);
	if (memchr(tmpl, 0, len)) {
		free(tmpl);
		return st_err_set(err, ST_E_INVALID, "prompt %s: %s holds a NUL byte", name, path);
	}
	s = st_prompt_render_text(tmpl, name, vars, out, err);
	free(tmpl);
	return s;
}
