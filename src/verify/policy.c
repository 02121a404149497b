/* The static policy check (policy.h lists the rules). Candidates are written by a model that is
 * paid for speed, so the check reads what the compiler will read: line continuations are spliced
 * first, comments and literals are skipped as the preprocessor skips them, digraphs and universal
 * character names are normalised, and identifiers are matched as whole tokens. It stays a
 * tokenizer rather than a preprocessor: macros are not expanded (their bodies are checked like
 * any other text, and token pasting is checked for the names it could build) and conditional
 * blocks are checked whether or not they are compiled. The sandbox catches what slips through. */
#include "verify/policy.h"

#include "common/fs.h"
#include "common/grow.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NGRAM 8
/* Distinct hits kept: past this a report is unreadable anyway, and the memory stays bounded. */
#define MAX_HITS 64

/* ---- tokens ------------------------------------------------------------------------------- */

typedef enum tok_kind { T_IDENT, T_NUMBER, T_STRING, T_CHAR, T_PUNCT, T_HEADER } tok_kind;

/* Which preprocessor directive a token belongs to. */
typedef enum dir_kind { D_NONE, D_INCLUDE, D_DEFINE, D_MESSAGE, D_OTHER } dir_kind;

typedef struct tok {
	tok_kind kind;
	dir_kind dir;
	int group; /* tokens of one directive (continued lines included) share it; 0 outside */
	int line;
	size_t text; /* offset of the NUL-terminated text in the pool: string contents without the
	              * quotes, header names without the brackets, identifiers with UCNs decoded */
} tok;

typedef struct lexed {
	tok *v;
	int n, cap;
	char *pool;
	size_t used;
	int groups; /* directives seen so far */
} lexed;

/* What the innermost braces around a token are: a class body declares members, which are no
 * threat whatever they are called, and an unnamed namespace exports nothing; every other scope
 * can declare or call the C library and export symbols. */
typedef enum scope_kind { S_OTHER, S_CLASS, S_UNNAMED } scope_kind;

typedef struct checker {
	int host_c; /* a C solution for the host backend: no kernels to require */
	st_policy_report *rep;
	const st_task *task;
	lexed L;
	unsigned char *scope; /* scope_kind of each token */
	int *pair;            /* index of the matching ')' of each '(', else -1 */
	int oom;
} checker;

static const char *txt(const lexed *L, int i)
{
	return L->pool + L->v[i].text;
}

static int is(const lexed *L, int i, tok_kind k, const char *s)
{
	return i >= 0 && i < L->n && L->v[i].kind == k && !strcmp(txt(L, i), s);
}

static int punct(const lexed *L, int i, const char *s)
{
	return is(L, i, T_PUNCT, s);
}

/* ---- hits --------------------------------------------------------------------------------- */

static void hit(checker *C, int line, const char *rule, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void hit(checker *C, int line, const char *rule, const char *fmt, ...)
{
	if (!C || C->oom)
		return;
	st_policy_report *r = C->rep;
	char msg[sizeof r->hits[0].message];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* One hit per distinct finding: the first line it appears on says where to look. */
	for (int i = 0; i < r->n_hits; i++)
		if (!strcmp(r->hits[i].rule, rule) && !strcmp(r->hits[i].message, msg))
			return;
	if (r->n_hits >= MAX_HITS)
		return;
	st_policy_hit *h = realloc(r->hits, (size_t)(r->n_hits + 1) * sizeof *h);
	if (!h) {
		C->oom = 1;
		return;
	}
	r->hits = h;
	h += r->n_hits++;
	h->line = line;
	snprintf(h->rule, sizeof h->rule, "%s", rule);
	memcpy(h->message, msg, sizeof h->message);
}

/* ---- reading the text --------------------------------------------------------------------- */

/* NUL, control bytes other than whitespace, or broken UTF-8: not something a model should hand
 * in as source, and a way to make the compiler and this check read different things. */
static int check_bytes(checker *C, const char *src, size_t len)
{
	int line = 1;
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)src[i];
		if (c == '\n') {
			line++;
			i++;
			continue;
		}
		if (c < 0x80) {
			if ((c < 0x20 && c != '\t' && c != '\r' && c != '\f' && c != '\v') || c == 0x7f) {
				hit(C, line, "not-source", "control byte 0x%02x at offset %zu: not source text",
				    c, i);
				return 0;
			}
			i++;
			continue;
		}
		int n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
		uint32_t cp = n == 4 ? c & 7u : n == 3 ? c & 15u : c & 31u;
		int ok = n > 0 && c < 0xf5 && i + (size_t)n <= len;
		for (int k = 1; ok && k < n; k++) {
			unsigned char d = (unsigned char)src[i + (size_t)k];
			ok = (d & 0xc0) == 0x80;
			cp = cp << 6 | (d & 0x3fu);
		}
		if (ok) {
			static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
			ok = cp >= min_cp[n] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
		}
		if (!ok) {
			hit(C, line, "not-source", "byte 0x%02x at offset %zu is not valid UTF-8", c, i);
			return 0;
		}
		i += (size_t)n;
	}
	return 1;
}

/* Backslash-newline joins lines before anything else, as in translation phase 2; line[k] keeps
 * the original line of every character that survives so hits point at the file. */
static int splice(const char *src, size_t len, char **out, int **lines, size_t *n)
{
	char *s = malloc(len + 2);
	int *ln = malloc((len + 2) * sizeof *ln);
	if (!s || !ln) {
		free(s);
		free(ln);
		return -1;
	}
	size_t k = 0;
	int line = 1;
	for (size_t i = 0; i < len; i++) {
		if (src[i] == '\\') {
			size_t j = i + 1;
			if (j < len && src[j] == '\r')
				j++;
			if (j < len && src[j] == '\n') {
				line++;
				i = j;
				continue;
			}
		}
		s[k] = src[i];
		ln[k++] = line;
		if (src[i] == '\n')
			line++;
	}
	s[k] = s[k + 1] = 0; /* lookahead of two never leaves the buffer */
	ln[k] = ln[k + 1] = line;
	*out = s;
	*lines = ln;
	*n = k;
	return 0;
}

/* ---- the tokenizer ------------------------------------------------------------------------ */

static int push(lexed *L, tok_kind kind, dir_kind dir, int line, const char *text, size_t len)
{
	if (ST_GROW(L->v, L->cap, L->n + 1, 1024))
		return -1;
	/* The pool was sized for every token's text plus a NUL (see lex), so this never overflows. */
	tok *t = &L->v[L->n++];
	t->kind = kind;
	t->dir = dir;
	t->group = dir == D_NONE ? 0 : L->groups;
	t->line = line;
	t->text = L->used;
	memcpy(L->pool + L->used, text, len);
	L->used += len;
	L->pool[L->used++] = 0;
	return 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0'
	     : c >= 'a' && c <= 'f' ? c - 'a' + 10
	     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A universal character name \uXXXX or \UXXXXXXXX at s: its length, and the code point. */
static int ucn(const char *s, uint32_t *cp)
{
	if (s[0] != '\\' || (s[1] != 'u' && s[1] != 'U'))
		return 0;
	int digits = s[1] == 'u' ? 4 : 8;
	uint32_t v = 0;
	for (int k = 0; k < digits; k++) {
		int h = hexval(s[2 + k]);
		if (h < 0)
			return 0;
		v = v << 4 | (uint32_t)h;
	}
	*cp = v;
	return 2 + digits;
}

static int ident_char(const char *s, size_t i, int first)
{
	unsigned char c = (unsigned char)s[i];
	uint32_t cp;
	if (isalpha(c) || c == '_' || c == '$' || c >= 0x80)
		return 1;
	if (!first && isdigit(c))
		return 1;
	return ucn(s + i, &cp) > 0;
}

/* Identifier text with UCNs decoded, so that dl\u006fpen reads as dlopen. */
static size_t read_ident(const char *s, size_t i, size_t n, char *buf, size_t *blen)
{
	size_t k = 0;
	while (i < n && ident_char(s, i, 0)) {
		uint32_t cp;
		int u = ucn(s + i, &cp);
		if (!u) {
			buf[k++] = s[i++];
			continue;
		}
		i += (size_t)u;
		/* a decoded UCN is never longer than its \u spelling */
		if (cp < 0x80) {
			buf[k++] = (char)cp;
		} else if (cp < 0x800) {
			buf[k++] = (char)(0xc0 | cp >> 6);
			buf[k++] = (char)(0x80 | (cp & 0x3f));
		} else if (cp < 0x10000) {
			buf[k++] = (char)(0xe0 | cp >> 12);
			buf[k++] = (char)(0x80 | (cp >> 6 & 0x3f));
			buf[k++] = (char)(0x80 | (cp & 0x3f));
		} else {
			buf[k++] = (char)(0xf0 | (cp >> 18 & 0x07));
			buf[k++] = (char)(0x80 | (cp >> 12 & 0x3f));
			buf[k++] = (char)(0x80 | (cp >> 6 & 0x3f));
			buf[k++] = (char)(0x80 | (cp & 0x3f));
		}
	}
	*blen = k;
	return i;
}

/* Quoted literal from the opening quote at s[i]; ends at the closing quote or, unterminated,
 * at the end of the line (so prose in #if 0 or #error cannot swallow the file). */
static size_t read_quoted(const char *s, size_t i, size_t n, size_t *body, size_t *blen)
{
	char q = s[i++];
	*body = i;
	while (i < n && s[i] != q && s[i] != '\n') {
		if (s[i] == '\\' && i + 1 < n && s[i + 1] != '\n')
			i++;
		i++;
	}
	*blen = i - *body;
	return i < n && s[i] == q ? i + 1 : i;
}

/* C++ raw string R"delim( ... )delim" from the quote at s[i]; 0 when it is not well formed. */
static size_t read_raw(const char *s, size_t i, size_t n, size_t *body, size_t *blen)
{
	size_t d = i + 1, k = d;
	while (k < n && k - d <= 16 && s[k] != '(' && s[k] != ')' && s[k] != '\\' &&
	       !isspace((unsigned char)s[k]) && s[k] != '"')
		k++;
	if (k >= n || s[k] != '(' || k - d > 16)
		return 0;
	size_t dl = k - d;
	*body = k + 1;
	for (size_t j = k + 1; j < n; j++) {
		/* strncmp stops at the buffer's terminating NULs, so this never reads past them */
		if (s[j] == ')' && !strncmp(s + j + 1, s + d, dl) && s[j + 1 + dl] == '"') {
			*blen = j - *body;
			return j + dl + 2;
		}
	}
	*blen = n - *body;
	return n;
}

static size_t read_number(const char *s, size_t i, size_t n)
{
	while (i < n) {
		char c = s[i];
		if ((c == '+' || c == '-') && strchr("eEpP", s[i - 1]))
			i++;
		else if (isalnum((unsigned char)c) || c == '_' || c == '.')
			i++;
		else if (c == '\'' && (isalnum((unsigned char)s[i + 1]) || s[i + 1] == '_'))
			i++; /* C++14 digit separator */
		else
			break;
	}
	return i;
}

/* Multi-character punctuators, longest first; digraphs map to what they spell. */
static const struct { const char *spell, *as; } puncts[] = {
	{"%:%:", "##"}, {"...", "..."}, {"<<=", "<<="}, {">>=", ">>="}, {"->*", "->*"},
	{"##", "##"},   {"%:", "#"},    {"<%", "{"},    {"%>", "}"},    {"<:", "["},   {":>", "]"},
	{"::", "::"},   {"->", "->"},   {"++", "++"},   {"--", "--"},   {"<<", "<<"},  {">>", ">>"},
	{"<=", "<="},   {">=", ">="},   {"==", "=="},   {"!=", "!="},   {"&&", "&&"},  {"||", "||"},
	{"+=", "+="},   {"-=", "-="},   {"*=", "*="},   {"/=", "/="},   {"%=", "%="},  {"&=", "&="},
	{"|=", "|="},   {"^=", "^="},   {".*", ".*"},
};

static int string_prefix(const char *id, int raw)
{
	static const char *const plain[] = {"L", "u", "U", "u8", NULL};
	static const char *const rawp[] = {"R", "LR", "uR", "UR", "u8R", NULL};
	for (const char *const *p = raw ? rawp : plain; *p; p++)
		if (!strcmp(id, *p))
			return 1;
	return 0;
}

/* Tokens of the spliced text s[0..n). C (may be NULL) receives the include-form hits. */
/* The kind of the directive named `name` (the word after a '#' that starts a line; dir when it
 * is none the checker knows), with the hits its name alone earns. *want_header when an
 * #include's header comes next. */
static dir_kind directive(checker *C, int dir_line, const char *name, dir_kind dir,
                          int *want_header)
{
	if (!strcmp(name, "include")) {
		dir = D_INCLUDE;
		*want_header = 1;
	} else if (!strcmp(name, "include_next") || !strcmp(name, "import") ||
	           !strcmp(name, "embed")) {
		dir = D_INCLUDE;
		hit(C, dir_line, "forbidden-include", "#%s may not be used", name);
	} else if (!strcmp(name, "define")) {
		dir = D_DEFINE;
	} else if (!strcmp(name, "error") || !strcmp(name, "warning")) {
		dir = D_MESSAGE;
	}
	return dir;
}

/* The punctuator at s[i]: its length, and in *as its canonical spelling when it is one of
 * puncts (NULL: a single character as it is). */
static size_t punct_at(const char *s, size_t i, const char **as)
{
	char c = s[i];
	/* "<::" not followed by ':' or '>' is '<' '::' (C++11), as in vector<::T> */
	int templ = c == '<' && s[i + 1] == ':' && s[i + 2] == ':' && s[i + 3] != ':' &&
	            s[i + 3] != '>';
	for (size_t p = 0; !templ && p < sizeof puncts / sizeof puncts[0]; p++) {
		size_t pl = strlen(puncts[p].spell);
		if (!strncmp(s + i, puncts[p].spell, pl)) {
			*as = puncts[p].as;
			return pl;
		}
	}
	return 1;
}

static int lex(const char *s, const int *ln, size_t n, lexed *L, checker *C)
{
	L->pool = malloc(2 * n + 16);
	char *buf = malloc(n + 16);
	if (!L->pool || !buf) {
		free(buf);
		return -1;
	}
	int bol = 1, want_dirname = 0, want_header = 0, rc = 0;
	int dir_line = 0; /* where the current directive starts: hits on it point there */
	dir_kind dir = D_NONE;
	size_t i = 0;
	while (i < n && !rc) {
		char c = s[i];
		if (c == '\n') {
			bol = 1;
			dir = D_NONE;
			want_dirname = want_header = 0;
			i++;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
			i++;
			continue;
		}
		if (c == '/' && s[i + 1] == '/') {
			while (i < n && s[i] != '\n')
				i++;
			continue;
		}
		if (c == '/' && s[i + 1] == '*') {
			i += 2;
			while (i < n && !(s[i] == '*' && s[i + 1] == '/'))
				i++;
			i = i < n ? i + 2 : n;
			continue;
		}
		int line = ln[i];
		if (want_header) {
			want_header = 0;
			if (c == '<' || c == '"') {
				char close = c == '<' ? '>' : '"';
				size_t b = ++i;
				while (i < n && s[i] != close && s[i] != '\n')
					i++;
				if (i >= n || s[i] != close) {
					hit(C, dir_line, "forbidden-include", "malformed #include");
					continue;
				}
				rc = push(L, T_HEADER, D_INCLUDE, dir_line, s + b, i - b);
				i++;
				continue;
			}
			hit(C, dir_line, "forbidden-include",
			    "computed #include: only a literal <header> or \"header\" may be included");
		}
		int was_bol = bol, dirname = want_dirname;
		bol = want_dirname = 0;
		size_t b, blen;
		if (ident_char(s, i, 1)) {
			i = read_ident(s, i, n, buf, &blen);
			buf[blen] = 0;
			size_t j;
			if (s[i] == '"' && string_prefix(buf, 1) && (j = read_raw(s, i, n, &b, &blen))) {
				i = j;
				rc = push(L, T_STRING, dir, line, s + b, blen);
			} else if ((s[i] == '"' || s[i] == '\'') && string_prefix(buf, 0)) {
				tok_kind k = s[i] == '"' ? T_STRING : T_CHAR;
				i = read_quoted(s, i, n, &b, &blen);
				rc = push(L, k, dir, line, s + b, blen);
			} else {
				if (dirname)
					dir = directive(C, dir_line, buf, dir, &want_header);
				rc = push(L, T_IDENT, dir, line, buf, blen);
			}
			continue;
		}
		if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)s[i + 1]))) {
			b = i;
			i = read_number(s, i + 1, n);
			rc = push(L, T_NUMBER, dir, line, s + b, i - b);
			continue;
		}
		if (c == '"' || c == '\'') {
			tok_kind k = c == '"' ? T_STRING : T_CHAR;
			i = read_quoted(s, i, n, &b, &blen);
			rc = push(L, k, dir, line, s + b, blen);
			continue;
		}
		const char *as = NULL;
		size_t sl = punct_at(s, i, &as);
		if (as) {
			rc = push(L, T_PUNCT, dir, line, as, strlen(as));
		} else {
			rc = push(L, T_PUNCT, dir, line, s + i, 1);
		}
		i += sl;
		if (was_bol && !strcmp(txt(L, L->n - 1), "#")) {
			dir = D_OTHER;
			L->v[L->n - 1].dir = D_OTHER;
			L->v[L->n - 1].group = ++L->groups;
			dir_line = line;
			want_dirname = 1;
		}
	}
	free(buf);
	return rc;
}

static void lexed_free(lexed *L)
{
	free(L->v);
	free(L->pool);
	memset(L, 0, sizeof *L);
}

/* Splice and tokenize src; C (may be NULL) collects hits found on the way. */
static int tokenize(const char *src, size_t len, lexed *L, checker *C)
{
	char *s;
	int *ln;
	size_t n;
	memset(L, 0, sizeof *L);
	if (splice(src, len, &s, &ln, &n))
		return -1;
	int rc = lex(s, ln, n, L, C);
	free(s);
	free(ln);
	if (rc)
		lexed_free(L);
	return rc;
}

/* ---- scopes ------------------------------------------------------------------------------- */

/* The '{' at j opens a class body when a class-key comes before it in the same declaration:
 * `struct A : B {`, `template <class T> struct A {`; not `struct A f() {` or `struct A a = {`. */
static scope_kind brace_kind(const lexed *L, int j)
{
	if (is(L, j - 1, T_IDENT, "namespace"))
		return S_UNNAMED;
	for (int k = j - 1; k >= 0; k--) {
		const tok *t = &L->v[k];
		if (t->dir != D_NONE)
			break;
		if (t->kind == T_PUNCT && strchr(";{})=]", txt(L, k)[0]) && txt(L, k)[1] == 0)
			return S_OTHER;
		if (is(L, k, T_IDENT, "struct") || is(L, k, T_IDENT, "class") ||
		    is(L, k, T_IDENT, "union"))
			return S_CLASS;
	}
	return S_OTHER;
}

/* Scopes and matching parentheses, once, so that no rule rescans the file per token (a 1 MiB
 * candidate could otherwise make the check quadratic). Directive lines are paired on their own
 * and open no scope: a brace or parenthesis in a macro body matches nothing where it stands. */
static int index_tokens(checker *C)
{
	const lexed *L = &C->L;
	C->scope = calloc((size_t)L->n + 1, 1);
	C->pair = malloc(((size_t)L->n + 1) * sizeof *C->pair);
	unsigned char *braces = malloc((size_t)L->n + 1);
	int *code = malloc(((size_t)L->n + 1) * sizeof *code);
	int *directive = malloc(((size_t)L->n + 1) * sizeof *directive);
	int ok = C->scope && C->pair && braces && code && directive;
	int depth = 0, n_code = 0, n_dir = 0, group = 0;
	for (int i = 0; ok && i < L->n; i++) {
		const tok *t = &L->v[i];
		C->scope[i] = depth ? braces[depth - 1] : S_OTHER;
		C->pair[i] = -1;
		if (t->kind != T_PUNCT)
			continue;
		if (t->group != group) {
			group = t->group;
			n_dir = 0;
		}
		int *stack = t->dir == D_NONE ? code : directive;
		int *n = t->dir == D_NONE ? &n_code : &n_dir;
		if (punct(L, i, "("))
			stack[(*n)++] = i;
		else if (punct(L, i, ")") && *n > 0)
			C->pair[stack[--*n]] = i;
		if (t->dir != D_NONE)
			continue;
		if (punct(L, i, "{"))
			braces[depth++] = (unsigned char)brace_kind(L, i);
		else if (punct(L, i, "}") && depth > 0)
			depth--;
	}
	free(braces);
	free(code);
	free(directive);
	return ok ? 0 : -1;
}

/* ---- rule 1: includes --------------------------------------------------------------------- */

/* Headers any solution may include. Patterns are fnmatch(3) without FNM_PATHNAME, so cuda/ *
 * covers libcu++'s nested folders; ".." and absolute paths are refused before this is read. */
static const char *const ok_headers[] = {
	"stitch/solution.h",
	/* CUDA toolkit, device code */
	"cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "cuda_fp16.h", "cuda_fp16.hpp",
	"cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp8.h", "cuda_fp8.hpp", "cuda_fp6.h", "cuda_fp6.hpp",
	"cuda_fp4.h", "cuda_fp4.hpp", "cuda_pipeline*.h", "cuda_awbarrier*.h", "mma.h",
	"cooperative_groups.h", "cooperative_groups/*", "cuda/*", "crt/*",
	"device_launch_parameters.h", "device_functions.h", "device_types.h", "driver_types.h",
	"vector_types.h", "vector_functions.h", "vector_functions.hpp", "builtin_types.h",
	"host_defines.h", "math_constants.h", "math_functions.h", "sm_*.h", "cuComplex.h",
	"cuda_texture_types.h", "texture_types.h", "surface_types.h", "channel_descriptor.h",
	"library_types.h", "cuda_occupancy.h", "cuda_device_runtime_api.h",
	/* C, no I/O */
	"stdint.h", "stddef.h", "stdbool.h", "float.h", "limits.h", "math.h", "string.h",
	"stdlib.h", "assert.h", "inttypes.h", "stdarg.h", "stdalign.h", "errno.h",
	/* C++, no I/O, threads or clocks */
	"cstdint", "cstddef", "cfloat", "climits", "cmath", "cstring", "cstdlib", "cassert",
	"cinttypes", "cstdarg", "cerrno", "algorithm", "type_traits", "utility", "limits", "array",
	"vector", "new", "memory", "initializer_list", "tuple", "numeric", "functional", "iterator",
	"optional", "bit", "complex", "string", "string_view", "map", "set", "unordered_map",
	"unordered_set", "span", "numbers", "stdexcept", "exception", "cstdbool",
	/* Console output only: a runner's stdout and stderr go to its private log, never to the
	 * user, so a printed message cannot pass for a result; the file calls stay forbidden. */
	"stdio.h", "cstdio",
	NULL,
};

/* Headers of the libraries a task's policy may allow. */
static const struct { const char *pattern, *library; } lib_headers[] = {
	{"cublas_v2.h", "cublas"},   {"cublas_api.h", "cublas"}, {"cublas.h", "cublas"},
	{"cublasLt.h", "cublasLt"},  {"cusparse*.h", "cusparse"}, {"cufft*.h", "cufft"},
	{"curand*.h", "curand"},     {"cub/*", "cub"},            {"thrust/*", "cub"},
};

/* Why the usual suspects are refused; anything else not on the lists gets a generic reason. */
static const struct { const char *pattern, *why; } bad_headers[] = {
	{"cuda/std/chrono", "reads the clock"}, {"cuda/std/ctime", "reads the clock"},
	{"iostream", "file and console I/O"},   {"fstream", "file and console I/O"},
	{"ostream", "file and console I/O"},    {"istream", "file and console I/O"},
	{"sstream", "file and console I/O"},    {"iomanip", "file and console I/O"},
	{"filesystem", "file access"},          {"fcntl.h", "file access"},
	{"dirent.h", "file access"},            {"unistd.h", "operating-system calls"},
	{"sys/*", "operating-system calls"},    {"dlfcn.h", "loads code at run time"},
	{"spawn.h", "runs other programs"},     {"signal.h", "signals"},
	{"csignal", "signals"},                 {"pthread.h", "threads"},
	{"threads.h", "threads"},               {"thread", "threads"},
	{"mutex", "threads"},                   {"future", "threads"},
	{"condition_variable", "threads"},      {"time.h", "reads the clock"},
	{"ctime", "reads the clock"},           {"chrono", "reads the clock"},
	{"random", "std::random_device reads the operating system's entropy source"},
	{"cupti*.h", "profiling is the harness's"}, {"nvml.h", "device management is the harness's"},
	{"cuda_profiler_api.h", "profiling is the harness's"},
};

static int match(const char *pattern, const char *name)
{
	return fnmatch(pattern, name, 0) == 0;
}

static int task_allows(const st_task *task, const char *library)
{
	/* CUB and Thrust are header-only prebuilt algorithms: fine when libraries are, not in expert
	 * mode, where the work must be hand-written. task.json cannot list "cub" yet. */
	if (!strcmp(library, "cub") && task->policy == ST_POLICY_ENGINEERING)
		return 1;
	for (int i = 0; i < task->n_libraries; i++)
		if (!strcmp(task->libraries[i], library))
			return 1;
	return 0;
}

static void check_include(checker *C, int line, const char *h)
{
	if (h[0] == '/' || strstr(h, "..") || strchr(h, '\\') || !h[0]) {
		hit(C, line, "forbidden-include",
		    "'%s' may not be included (absolute and parent paths reach outside the toolkit)", h);
		return;
	}
	for (size_t i = 0; i < sizeof bad_headers / sizeof bad_headers[0]; i++)
		if (match(bad_headers[i].pattern, h)) {
			hit(C, line, "forbidden-include", "'%s' may not be included (%s)", h,
			    bad_headers[i].why);
			return;
		}
	for (const char *const *p = ok_headers; *p; p++)
		if (match(*p, h))
			return;
	for (size_t i = 0; i < sizeof lib_headers / sizeof lib_headers[0]; i++) {
		if (!match(lib_headers[i].pattern, h))
			continue;
		const char *lib = lib_headers[i].library;
		if (task_allows(C->task, lib))
			return;
		if (C->task->policy == ST_POLICY_EXPERT)
			hit(C, line, "forbidden-include",
			    "'%s' may not be included (library %s; this task is expert mode, hand-written "
			    "CUDA only)", h, lib);
		else
			hit(C, line, "forbidden-include",
			    "'%s' may not be included (library %s is not among this task's libraries)", h,
			    lib);
		return;
	}
	hit(C, line, "forbidden-include",
	    "'%s' may not be included (not a header solutions may use: CUDA toolkit, C/C++ headers "
	    "without I/O, the task's libraries)", h);
}

/* ---- rule 2: names ------------------------------------------------------------------------ */

#define F_PREFIX 1 /* every name that starts with it */
#define F_CALL 2   /* a common word: only as a call, name( or (name) */
#define F_STD 4    /* only as std::name */

#define R_LOAD "loads code at run time"
#define R_EXEC "runs other programs or processes"
#define R_FILE "file access"
#define R_CONSOLE "console I/O"
#define R_ENV "the environment"
#define R_NET "network access"
#define R_PROC "signals, traces or controls processes"
#define R_THREAD "starts threads"
#define R_CLOCK "reads the host clock"
#define R_TIMER "reads the timer the harness measures with"
#define R_DEVICE "the device is the harness's to control"
#define R_L2 "keeps data in L2 across the harness's cache flush"
#define R_LOOKUP "looks up driver functions by name at run time"
#define R_PROFILER "profiling is the harness's"
#define R_ATLOAD "runs code at load or exit time"
#define R_HARNESS "part of the harness, not of the solution ABI"
#define R_SELF "reads or rewrites the loaded program's own tables"

typedef struct fsym {
	const char *name;
	int flags;
	const char *why;
} fsym;

static const fsym forbidden[] = {
	{"dlopen", 0, R_LOAD}, {"dlmopen", 0, R_LOAD}, {"dlsym", 0, R_LOAD}, {"dlvsym", 0, R_LOAD},
	{"dlinfo", 0, R_LOAD}, {"__libc_", F_PREFIX, R_LOAD},

	{"system", F_CALL, R_EXEC}, {"popen", 0, R_EXEC}, {"pclose", 0, R_EXEC},
	{"execl", 0, R_EXEC}, {"execlp", 0, R_EXEC}, {"execle", 0, R_EXEC}, {"execv", 0, R_EXEC},
	{"execvp", 0, R_EXEC}, {"execvpe", 0, R_EXEC}, {"execve", 0, R_EXEC},
	{"fexecve", 0, R_EXEC}, {"fork", 0, R_EXEC}, {"vfork", 0, R_EXEC},
	{"clone", F_CALL, R_EXEC}, {"clone3", 0, R_EXEC}, {"posix_spawn", 0, R_EXEC},
	{"posix_spawnp", 0, R_EXEC},

	{"fopen", 0, R_FILE}, {"fopen64", 0, R_FILE}, {"freopen", 0, R_FILE}, {"fdopen", 0, R_FILE},
	{"tmpfile", 0, R_FILE}, {"tmpnam", 0, R_FILE}, {"mkstemp", 0, R_FILE},
	{"mkdtemp", 0, R_FILE}, {"fread", 0, R_FILE}, {"fwrite", 0, R_FILE}, {"fgets", 0, R_FILE},
	{"fgetc", 0, R_FILE}, {"fscanf", 0, R_FILE}, {"fputs", 0, R_FILE}, {"fputc", 0, R_FILE},
	{"open", F_CALL, R_FILE}, {"open64", 0, R_FILE}, {"openat", 0, R_FILE},
	{"creat", 0, R_FILE}, {"remove", F_CALL, R_FILE}, {"unlink", 0, R_FILE},
	{"unlinkat", 0, R_FILE}, {"rename", F_CALL, R_FILE}, {"renameat", 0, R_FILE},
	{"mkdir", 0, R_FILE}, {"rmdir", 0, R_FILE}, {"opendir", 0, R_FILE}, {"readdir", 0, R_FILE},
	{"chdir", 0, R_FILE}, {"chmod", 0, R_FILE}, {"truncate", 0, R_FILE},
	{"ftruncate", 0, R_FILE}, {"symlink", 0, R_FILE}, {"readlink", 0, R_FILE},
	{"realpath", 0, R_FILE}, {"mmap", 0, R_FILE}, {"mmap64", 0, R_FILE},
	{"mprotect", 0, R_FILE}, {"munmap", 0, R_FILE}, {"shm_open", 0, R_FILE},
	{"memfd_create", 0, R_FILE}, {"dup2", 0, R_FILE}, {"ioctl", 0, R_FILE},
	{"ifstream", 0, R_FILE}, {"ofstream", 0, R_FILE}, {"fstream", 0, R_FILE},
	{"filebuf", 0, R_FILE},

	/* printf, fprintf(stderr, ...), puts and perror are allowed: see stdio.h above. The C++
	 * streams are common variable names (cin: channels in; clog: a complex log) and their
	 * headers are refused by rule 1, so only std::cin and the like count here. */
	{"scanf", 0, R_CONSOLE}, {"stdin", 0, R_CONSOLE}, {"cout", F_STD, R_CONSOLE},
	{"cin", F_STD, R_CONSOLE}, {"cerr", F_STD, R_CONSOLE}, {"clog", F_STD, R_CONSOLE},

	{"getenv", 0, R_ENV}, {"secure_getenv", 0, R_ENV}, {"environ", 0, R_ENV},
	{"__environ", 0, R_ENV}, {"setenv", 0, R_ENV}, {"putenv", 0, R_ENV},
	{"unsetenv", 0, R_ENV}, {"clearenv", 0, R_ENV},

	{"socket", F_CALL, R_NET}, {"connect", F_CALL, R_NET}, {"bind", F_CALL, R_NET},
	{"listen", F_CALL, R_NET}, {"accept", F_CALL, R_NET}, {"accept4", 0, R_NET},
	{"sendto", 0, R_NET}, {"recvfrom", 0, R_NET}, {"sendmsg", 0, R_NET},
	{"recvmsg", 0, R_NET}, {"getaddrinfo", 0, R_NET}, {"gethostbyname", 0, R_NET},

	{"ptrace", 0, R_PROC}, {"syscall", 0, R_PROC}, {"kill", F_CALL, R_PROC},
	{"signal", F_CALL, R_PROC}, {"sigaction", 0, R_PROC}, {"prctl", 0, R_PROC},
	{"process_vm_readv", 0, R_PROC}, {"process_vm_writev", 0, R_PROC},
	{"setrlimit", 0, R_PROC}, {"prlimit", 0, R_PROC},

	{"pthread_create", 0, R_THREAD}, {"thrd_create", 0, R_THREAD},
	{"thread", F_STD, R_THREAD}, {"jthread", F_STD, R_THREAD}, {"async", F_STD, R_THREAD},

	{"clock_gettime", 0, R_CLOCK}, {"gettimeofday", 0, R_CLOCK}, {"time", F_CALL, R_CLOCK},
	{"timespec_get", 0, R_CLOCK}, {"rdtsc", 0, R_CLOCK}, {"__rdtsc", 0, R_CLOCK},
	{"__rdtscp", 0, R_CLOCK}, {"chrono", 0, R_CLOCK}, {"steady_clock", 0, R_CLOCK},
	{"system_clock", 0, R_CLOCK}, {"high_resolution_clock", 0, R_CLOCK},

	{"cudaEventElapsedTime", 0, R_TIMER}, {"cuEventElapsedTime", F_PREFIX, R_TIMER},

	{"cudaDeviceReset", 0, R_DEVICE}, {"cudaSetDevice", 0, R_DEVICE},
	{"cudaIpc", F_PREFIX, R_DEVICE}, {"cuIpc", F_PREFIX, R_DEVICE},
	{"cuDevicePrimaryCtxReset", F_PREFIX, R_DEVICE},

	{"cudaLimitPersistingL2CacheSize", 0, R_L2}, {"cudaAccessPropertyPersisting", 0, R_L2},
	{"CU_LIMIT_PERSISTING_L2_CACHE_SIZE", 0, R_L2}, {"CU_ACCESS_PROPERTY_PERSISTING", 0, R_L2},

	{"cudaGetDriverEntryPoint", F_PREFIX, R_LOOKUP}, {"cuGetProcAddress", F_PREFIX, R_LOOKUP},
	{"cudaGetExportTable", 0, R_LOOKUP}, {"cuGetExportTable", 0, R_LOOKUP},

	{"cudaProfilerStart", 0, R_PROFILER}, {"cudaProfilerStop", 0, R_PROFILER},
	{"cuProfilerStart", 0, R_PROFILER}, {"cuProfilerStop", 0, R_PROFILER},
	{"cupti", F_PREFIX, R_PROFILER},

	{"constructor", 0, R_ATLOAD}, {"destructor", 0, R_ATLOAD},
	{"__constructor__", 0, R_ATLOAD}, {"__destructor__", 0, R_ATLOAD},
	{"atexit", 0, R_ATLOAD}, {"at_quick_exit", 0, R_ATLOAD}, {"on_exit", 0, R_ATLOAD},
	{"__cxa_atexit", 0, R_ATLOAD},

	{"dl_iterate_phdr", 0, R_SELF}, {"_DYNAMIC", 0, R_SELF}, {"_r_debug", 0, R_SELF},
	{"link_map", 0, R_SELF}, {"pkey_mprotect", 0, R_SELF}, {"getauxval", 0, R_SELF},
	{"rb_", F_PREFIX, R_HARNESS}, {"st_proto", F_PREFIX, R_HARNESS},
	{"st_runner", F_PREFIX, R_HARNESS}, {"st_sandbox", F_PREFIX, R_HARNESS},
};

#define N_FORBIDDEN (sizeof forbidden / sizeof forbidden[0])

static const fsym *lookup_forbidden(const char *name)
{
	for (size_t i = 0; i < N_FORBIDDEN; i++) {
		const fsym *f = &forbidden[i];
		if (f->flags & F_PREFIX ? !strncmp(name, f->name, strlen(f->name))
		                        : !strcmp(name, f->name))
			return f;
	}
	return NULL;
}

/* Index of the ')' matching the '(' at i, or -1. */
static int close_paren(const checker *C, int i)
{
	return i >= 0 && i < C->L.n ? C->pair[i] : -1;
}

/* The identifier at i is a member (x.name, p->name) or lives in a namespace other than std. */
static int not_global(const lexed *L, int i)
{
	if (punct(L, i - 1, ".") || punct(L, i - 1, "->"))
		return 1;
	if (punct(L, i - 1, "::") && i >= 2 && L->v[i - 2].kind == T_IDENT)
		return strcmp(txt(L, i - 2), "std") != 0;
	return 0;
}

static int std_qualified(const lexed *L, int i)
{
	return punct(L, i - 1, "::") && is(L, i - 2, T_IDENT, "std");
}

/* A member declared in a class body (`int open(int);`, `bool bind(...)`) rather than a call in a
 * default member initializer (`int x = system("ls");`), which runs like any other code. */
static int member_declaration(const checker *C, int i)
{
	const lexed *L = &C->L;
	if (C->scope[i] != S_CLASS || i == 0)
		return 0;
	return L->v[i - 1].kind == T_IDENT || punct(L, i - 1, "*") || punct(L, i - 1, "&") ||
	       punct(L, i - 1, "&&") || punct(L, i - 1, ">") || punct(L, i - 1, "~");
}

static void check_names(checker *C)
{
	const lexed *L = &C->L;
	for (int i = 0; i < L->n; i++) {
		const tok *t = &L->v[i];
		if (t->kind != T_IDENT || t->dir == D_MESSAGE || t->dir == D_INCLUDE)
			continue;
		const char *name = txt(L, i);
		const fsym *f = lookup_forbidden(name);
		if (!f || not_global(L, i) || member_declaration(C, i))
			continue;
		if ((f->flags & F_STD) && !std_qualified(L, i))
			continue;
		if (f->flags & F_CALL) {
			int called = punct(L, i + 1, "(") || (punct(L, i - 1, "(") && punct(L, i + 1, ")"));
			/* std::remove (<algorithm>) and std::bind (<functional>) are not the C functions */
			if (!called ||
			    (std_qualified(L, i) && (!strcmp(name, "remove") || !strcmp(name, "bind"))))
				continue;
		}
		hit(C, t->line, "forbidden-symbol", "'%s' may not be used (%s)", name, f->why);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Token pasting builds a name the compiler sees but this check does not: with ## in the file,
 * a forbidden name that splits into two tokens the file spells is a hit. */
static void check_pasting(checker *C)
{
	const lexed *L = &C->L;
	int line = 0;
	for (int i = 0; i < L->n && !line; i++)
		if (punct(L, i, "##"))
			line = L->v[i].line;
	if (!line)
		return;
	const char **words = malloc((size_t)L->n * sizeof *words);
	if (!words) {
		C->oom = 1;
		return;
	}
	int nw = 0;
	for (int i = 0; i < L->n; i++)
		if (L->v[i].kind == T_IDENT || L->v[i].kind == T_NUMBER)
			words[nw++] = txt(L, i);
	qsort(words, (size_t)nw, sizeof *words, cmp_str);
	for (size_t f = 0; f < N_FORBIDDEN; f++) {
		const char *name = forbidden[f].name;
		size_t len = strlen(name);
		char a[64], b[64];
		if ((forbidden[f].flags & (F_PREFIX | F_STD)) || len >= sizeof a)
			continue;
		for (size_t k = 1; k < len; k++) {
			memcpy(a, name, k);
			a[k] = 0;
			memcpy(b, name + k, len - k + 1);
			const char *pa = a, *pb = b;
			if (bsearch(&pa, words, (size_t)nw, sizeof *words, cmp_str) &&
			    bsearch(&pb, words, (size_t)nw, sizeof *words, cmp_str)) {
				hit(C, line, "forbidden-symbol",
				    "'%s' may not be used (%s; token pasting can build it from '%s' ## '%s')",
				    name, forbidden[f].why, a, b);
				break;
			}
		}
	}
	free(words);
}

/* Sections whose functions the loader runs: constructors by another name. */
static void check_sections(checker *C)
{
	static const char *const sections[] = {".init_array", ".preinit_array", ".fini_array",
	                                       ".ctors", ".dtors", NULL};
	const lexed *L = &C->L;
	for (int i = 0; i < L->n; i++) {
		if (L->v[i].kind != T_STRING)
			continue;
		for (const char *const *s = sections; *s; s++)
			if (strstr(txt(L, i), *s))
				hit(C, L->v[i].line, "forbidden-symbol", "section '%s' may not be used (%s)",
				    *s, R_ATLOAD);
	}
}

/* ---- rule 3: inline assembly -------------------------------------------------------------- */

static const struct { const char *needle, *what; } bad_asm[] = {
	{"%globaltimer", "read %globaltimer (the GPU's global timer)"},
	{"%clock", "read %clock or %clock64 (the SM's cycle counter)"},
	{"rdtsc", "read the CPU's time-stamp counter (rdtsc)"},
	{"rdpmc", "read the CPU's performance counters (rdpmc)"},
	{"syscall", "make system calls"},
	{"sysenter", "make system calls"},
	{"int $0x80", "make system calls"},
	{"int 0x80", "make system calls"},
	{".incbin", "pull files in at build time (.incbin)"},
	{".include", "pull files in at build time (.include)"},
};

/* Adjacent literals concatenate, so the text is checked whole: "%%global" "timer" is caught. */
static void check_asm_text(checker *C, int line, char *text)
{
	for (char *p = text; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (size_t k = 0; k < sizeof bad_asm / sizeof bad_asm[0]; k++)
		if (strstr(text, bad_asm[k].needle))
			hit(C, line, "forbidden-asm", "inline assembly may not %s", bad_asm[k].what);
	for (char *p = strstr(text, "%pm"); p; p = strstr(p + 1, "%pm"))
		if (isdigit((unsigned char)p[3]))
			hit(C, line, "forbidden-asm",
			    "inline assembly may not read the %%pm performance counters");
}

/* Concatenated string literals of tokens [from, to] into a fresh buffer. */
static char *strings_of(const lexed *L, int from, int to)
{
	size_t total = 1;
	for (int j = from; j <= to; j++)
		if (L->v[j].kind == T_STRING)
			total += strlen(txt(L, j));
	char *s = malloc(total), *p = s;
	if (!s)
		return NULL;
	for (int j = from; j <= to; j++)
		if (L->v[j].kind == T_STRING) {
			size_t n = strlen(txt(L, j));
			memcpy(p, txt(L, j), n);
			p += n;
		}
	*p = 0;
	return s;
}

static void check_asm(checker *C)
{
	const lexed *L = &C->L;
	for (int i = 0; i < L->n; i++) {
		int from = -1, to = -1;
		if (is(L, i, T_IDENT, "asm") || is(L, i, T_IDENT, "__asm__") ||
		    is(L, i, T_IDENT, "__asm")) {
			int j = i + 1;
			while (j < L->n && (is(L, j, T_IDENT, "volatile") ||
			                    is(L, j, T_IDENT, "__volatile__") ||
			                    is(L, j, T_IDENT, "__volatile") || is(L, j, T_IDENT, "goto") ||
			                    is(L, j, T_IDENT, "inline")))
				j++;
			if (!punct(L, j, "(") || (to = close_paren(C, j)) < 0)
				continue;
			from = j;
		} else if (L->v[i].kind == T_STRING && L->v[i].dir == D_DEFINE &&
		           (L->v[i - 1].kind != T_STRING || L->v[i - 1].group != L->v[i].group)) {
			/* a macro body may be pasted into an asm statement; check its literals too */
			from = to = i;
			while (to + 1 < L->n && L->v[to + 1].group == L->v[i].group)
				to++;
		} else {
			continue;
		}
		char *text = strings_of(L, from, to);
		if (!text) {
			C->oom = 1;
			return;
		}
		check_asm_text(C, L->v[i].line, text);
		free(text);
		i = to; /* an asm nested in the operands was part of this text */
	}
}

/* ---- rules 4, 6 and interposition: definitions -------------------------------------------- */

/* The name at i is followed by a parameter list and a body: a function definition. Qualifiers
 * and attributes between ')' and '{' (noexcept, __attribute__((...)), throw()) are skipped. */
static int defines_function(const checker *C, int i)
{
	const lexed *L = &C->L;
	if (!punct(L, i + 1, "("))
		return 0;
	int j = close_paren(C, i + 1);
	if (j < 0)
		return 0;
	/* a handful of qualifiers at most; the bound keeps st_run() st_run() ... linear */
	for (int k = 0, end = j + 1; k < 8 && end < L->n; k++, end++) {
		if (punct(L, end, "{"))
			return 1;
		if (L->v[end].kind != T_IDENT)
			return 0;
		if (punct(L, end + 1, "(") && (end = close_paren(C, end + 1)) < 0)
			return 0;
	}
	return 0;
}

/* __global__ at i is followed by a body before the next ';': a kernel definition. The scan
 * ends at the next __global__ as well, so a file of them is read once, not once per kernel. */
static int defines_kernel(const lexed *L, int i)
{
	int depth = 0;
	for (int j = i + 1; j < L->n; j++) {
		if (is(L, j, T_IDENT, "__global__") || (depth == 0 && punct(L, j, "}")))
			return 0;
		if (punct(L, j, "(") || punct(L, j, "["))
			depth++;
		else if (punct(L, j, ")") || punct(L, j, "]"))
			depth--;
		else if (depth == 0 && punct(L, j, ";"))
			return 0;
		else if (depth == 0 && punct(L, j, "{"))
			return 1;
	}
	return 0;
}

/* A name a CUDA, driver or library API uses: an exported definition of one would replace it. */
static int api_name(const char *s)
{
	static const char *const prefixes[] = {"__cuda", "cublas", "cusparse", "cufft", "curand",
	                                       "cupti", "nccl", "nvrtc", "nvml", NULL};
	if (!strncmp(s, "cuda", 4) && isupper((unsigned char)s[4]))
		return 1;
	if (!strncmp(s, "cu", 2) && isupper((unsigned char)s[2]))
		return 1;
	for (const char *const *p = prefixes; *p; p++)
		if (!strncmp(s, *p, strlen(*p)))
			return 1;
	return 0;
}

/* Whether the declaration that ends at token i exports a host symbol: static, inline and
 * device-only functions do not, so helpers such as `static void cudaCheck(...)` are fine. */
static int exported(const lexed *L, int i)
{
	int device = 0, host = 0;
	for (int j = i - 1; j >= 0; j--) {
		if (punct(L, j, ";") || punct(L, j, "{") || punct(L, j, "}") || L->v[j].dir != D_NONE)
			break;
		const char *s = txt(L, j);
		if (L->v[j].kind != T_IDENT)
			continue;
		if (!strcmp(s, "static") || !strcmp(s, "inline") || !strcmp(s, "__inline__") ||
		    !strcmp(s, "__forceinline__"))
			return 0;
		device |= !strcmp(s, "__device__") || !strcmp(s, "__global__");
		host |= !strcmp(s, "__host__");
	}
	return !device || host;
}

/* Names #define'd to __global__ (#define KERNEL __global__) count as __global__. */
#define MAX_ALIASES 16

static int kernel_word(const lexed *L, int i, const char *const *aliases, int n_aliases)
{
	if (is(L, i, T_IDENT, "__global__"))
		return 1;
	for (int k = 0; k < n_aliases; k++)
		if (is(L, i, T_IDENT, aliases[k]))
			return 1;
	return 0;
}

static void check_definitions(checker *C)
{
	const lexed *L = &C->L;
	const char *aliases[MAX_ALIASES];
	int n_aliases = 0, has_run = 0;
	for (int i = 0; i + 2 < L->n; i++) {
		if (!is(L, i, T_IDENT, "define") || L->v[i].dir != D_DEFINE ||
		    L->v[i + 1].kind != T_IDENT || L->v[i + 1].group != L->v[i].group)
			continue;
		for (int j = i + 2; j < L->n && L->v[j].group == L->v[i].group; j++)
			if (is(L, j, T_IDENT, "__global__") && n_aliases < MAX_ALIASES) {
				aliases[n_aliases++] = txt(L, i + 1);
				break;
			}
	}
	for (int i = 0; i < L->n; i++) {
		const tok *t = &L->v[i];
		if (t->kind != T_IDENT || t->dir != D_NONE)
			continue;
		const char *name = txt(L, i);
		if (kernel_word(L, i, aliases, n_aliases)) {
			if (!C->rep->has_kernel)
				C->rep->has_kernel = defines_kernel(L, i);
		} else if (!strcmp(name, "st_run")) {
			has_run |= !not_global(L, i) && defines_function(C, i);
		} else if (api_name(name) && C->scope[i] == S_OTHER && !not_global(L, i) &&
		           !punct(L, i - 1, "::") && defines_function(C, i) && exported(L, i)) {
			hit(C, t->line, "interpose",
			    "'%s' may not be defined (it would replace the CUDA or library function of "
			    "that name; rename it or make it static)", name);
		}
	}
	if (C->task->policy == ST_POLICY_EXPERT && !C->rep->has_kernel && !C->host_c)
		hit(C, 0, "required-kernel",
		    "no __global__ function is defined (expert mode: the work must be done by "
		    "hand-written kernels)");
	if (!has_run)
		hit(C, 0, "abi", "no st_run definition (the ABI needs st_init, st_run and st_free)");
}

/* ---- rule 5: similarity ------------------------------------------------------------------- */

static const char *const keywords[] = {
	/* sorted for bsearch */
	"__device__", "__forceinline__", "__global__", "__host__", "__launch_bounds__",
	"__restrict__", "__shared__", "alignas", "alignof", "asm", "auto", "bool", "break", "case",
	"catch", "char", "class", "const", "const_cast", "constexpr", "continue", "decltype",
	"default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "extern",
	"false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
	"namespace", "new", "noexcept", "nullptr", "operator", "private", "protected", "public",
	"register", "reinterpret_cast", "restrict", "return", "short", "signed", "sizeof", "static",
	"static_assert", "static_cast", "struct", "switch", "template", "this", "throw", "true",
	"try", "typedef", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
	"while",
};

static int is_keyword(const char *s)
{
	const char *key = s;
	return bsearch(&key, keywords, sizeof keywords / sizeof keywords[0], sizeof keywords[0],
	               cmp_str) != NULL;
}

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sorted, distinct hashes of the normalised token 8-grams; includes are left out, every file
 * has the same ones. *n = 0 when there are fewer than 8 tokens. */
static int gram_set(const lexed *L, uint64_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	uint64_t *h = malloc(((size_t)L->n + 1) * sizeof *h);
	if (!h)
		return -1;
	size_t m = 0;
	for (int i = 0; i < L->n; i++) {
		const tok *t = &L->v[i];
		if (t->dir == D_INCLUDE)
			continue;
		const char *norm = t->kind == T_NUMBER ? "NUM"
		                 : t->kind == T_STRING ? "STR"
		                 : t->kind == T_CHAR   ? "CHR"
		                 : t->kind == T_IDENT && !is_keyword(txt(L, i)) ? "ID" : txt(L, i);
		h[m++] = fnv(norm);
	}
	if (m < NGRAM) {
		free(h);
		return 0;
	}
	size_t g = m - NGRAM + 1;
	uint64_t *grams = malloc(g * sizeof *grams);
	if (!grams) {
		free(h);
		return -1;
	}
	for (size_t i = 0; i < g; i++) {
		uint64_t x = 0x9e3779b97f4a7c15ull;
		for (int k = 0; k < NGRAM; k++)
			x = (x ^ h[i + (size_t)k]) * 0x100000001b3ull + (uint64_t)k;
		grams[i] = x;
	}
	free(h);
	qsort(grams, g, sizeof *grams, cmp_u64);
	size_t u = 0;
	for (size_t i = 0; i < g; i++)
		if (u == 0 || grams[u - 1] != grams[i])
			grams[u++] = grams[i];
	*out = grams;
	*n = u;
	return 0;
}

static double jaccard(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	if (!na || !nb)
		return 0.0;
	size_t i = 0, j = 0, both = 0;
	while (i < na && j < nb) {
		if (a[i] == b[j]) {
			both++;
			i++;
			j++;
		} else if (a[i] < b[j]) {
			i++;
		} else {
			j++;
		}
	}
	return (double)both / (double)(na + nb - both);
}

static int grams_of_text(const char *src, size_t len, uint64_t **out, size_t *n)
{
	lexed L;
	if (tokenize(src, len, &L, NULL))
		return -1;
	int rc = gram_set(&L, out, n);
	lexed_free(&L);
	return rc;
}

double st_policy_similarity(const char *a, size_t alen, const char *b, size_t blen)
{
	uint64_t *ga = NULL, *gb = NULL;
	size_t na = 0, nb = 0;
	double s = 0.0;
	if (!grams_of_text(a, alen, &ga, &na) && !grams_of_text(b, blen, &gb, &nb))
		s = jaccard(ga, na, gb, nb);
	free(ga);
	free(gb);
	return s;
}

static st_status compare_with(checker *C, const uint64_t *g, size_t ng, const char *path,
                              const char *label, st_err *err)
{
	char *src;
	size_t len;
	if (!path)
		return ST_OK;
	st_status s = st_read_file(path, &src, &len, err);
	if (s)
		return st_err_wrap(err, s, "policy check: %s", label);
	uint64_t *other;
	size_t no;
	int rc = grams_of_text(src, len, &other, &no);
	free(src);
	if (rc)
		return st_err_set(err, ST_E_NOMEM, "policy check: out of memory");
	double sim = jaccard(g, ng, other, no);
	free(other);
	if (sim > C->rep->similarity || !C->rep->similar_to[0]) {
		C->rep->similarity = sim;
		snprintf(C->rep->similar_to, sizeof C->rep->similar_to, "%s", label);
	}
	return ST_OK;
}

static st_status check_similarity(checker *C, st_err *err)
{
	uint64_t *g;
	size_t ng;
	if (gram_set(&C->L, &g, &ng))
		return st_err_set(err, ST_E_NOMEM, "policy check: out of memory");
	st_status s = compare_with(C, g, ng, C->task->reference, "reference", err);
	for (int i = 0; !s && i < C->task->n_experts; i++)
		s = compare_with(C, g, ng, C->task->experts[i], "expert", err);
	/* The host backend's C solutions too: a copy of expert.c is as much a copy as one of a .cu. */
	if (!s)
		s = compare_with(C, g, ng, C->task->host_reference, "reference", err);
	if (!s)
		s = compare_with(C, g, ng, C->task->host_expert, "expert", err);
	free(g);
	return s;
}

/* ---- entry points ------------------------------------------------------------------------- */

/* host_c: a C solution for the host backend, which has no kernels to require. */
static st_status check_text(const char *src, size_t len, const st_task *task, int host_c,
                            st_policy_report *rep, st_err *err)
{
	memset(rep, 0, sizeof *rep);
	checker C = {.rep = rep, .task = task, .host_c = host_c};
	if (len > ST_POLICY_MAX_BYTES) {
		hit(&C, 0, "too-large", "the file has %zu bytes; a solution may have at most %zu", len,
		    (size_t)ST_POLICY_MAX_BYTES);
		return C.oom ? st_err_set(err, ST_E_NOMEM, "policy check: out of memory") : ST_OK;
	}
	if (!check_bytes(&C, src, len))
		return C.oom ? st_err_set(err, ST_E_NOMEM, "policy check: out of memory") : ST_OK;
	if (tokenize(src, len, &C.L, &C) || index_tokens(&C)) {
		lexed_free(&C.L);
		free(C.scope);
		free(C.pair);
		st_policy_report_free(rep);
		return st_err_set(err, ST_E_NOMEM, "policy check: out of memory");
	}
	for (int i = 0; i < C.L.n; i++)
		if (C.L.v[i].kind == T_HEADER)
			check_include(&C, C.L.v[i].line, txt(&C.L, i));
	check_names(&C);
	check_pasting(&C);
	check_sections(&C);
	check_asm(&C);
	check_definitions(&C);
	st_status s = check_similarity(&C, err);
	lexed_free(&C.L);
	free(C.scope);
	free(C.pair);
	if (!s && C.oom)
		s = st_err_set(err, ST_E_NOMEM, "policy check: out of memory");
	if (s)
		st_policy_report_free(rep);
	return s;
}

st_status st_policy_check_text(const char *src, size_t len, const st_task *task,
                               st_policy_report *rep, st_err *err)
{
	return check_text(src, len, task, 0, rep, err);
}

st_status st_policy_check(const char *src_path, const st_task *task, st_policy_report *rep,
                          st_err *err)
{
	memset(rep, 0, sizeof *rep);
	struct stat st;
	if (stat(src_path, &st))
		return st_err_set(err, ST_E_IO, "cannot read '%s': %s", src_path, strerror(errno));
	/* Refused before reading: a huge file is a verdict, not a memory or time problem. */
	if (S_ISREG(st.st_mode) && (size_t)st.st_size > ST_POLICY_MAX_BYTES) {
		checker C = {.rep = rep, .task = task};
		hit(&C, 0, "too-large", "the file has %lld bytes; a solution may have at most %zu",
		    (long long)st.st_size, (size_t)ST_POLICY_MAX_BYTES);
		return C.oom ? st_err_set(err, ST_E_NOMEM, "policy check: out of memory") : ST_OK;
	}
	char *src;
	size_t len;
	st_status s = st_read_file(src_path, &src, &len, err);
	if (s)
		return s;
	size_t pl = strlen(src_path);
	s = check_text(src, len, task, pl > 2 && !strcmp(src_path + pl - 2, ".c"), rep, err);
	free(src);
	return s;
}

void st_policy_report_free(st_policy_report *rep)
{
	if (!rep)
		return;
	free(rep->hits);
	rep->hits = NULL;
	rep->n_hits = 0;
}

void st_policy_describe(const st_policy_hit *h, char *buf, size_t len)
{
	if (!buf || !len)
		return;
	if (h->line > 0)
		snprintf(buf, len, "line %d: %s: %s", h->line, h->rule, h->message);
	else
		snprintf(buf, len, "%s: %s", h->rule, h->message);
}
