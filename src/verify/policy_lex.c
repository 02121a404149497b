/* The policy check's tokenizer: backslash-newline splicing as in translation phase 2, then
 * tokens as the preprocessor sees them (comments and literals skipped, digraphs and universal
 * character names normalised, directives marked), so that the rules match what the compiler
 * will read. The hits the form of a directive earns on its own (#include_next, ...) are
 * recorded here. */
#include "verify/policy_int.h"

#include "common/grow.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
		pol_hit(C, dir_line, "forbidden-include", "#%s may not be used", name);
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
					pol_hit(C, dir_line, "forbidden-include", "malformed #include");
					continue;
				}
				rc = push(L, T_HEADER, D_INCLUDE, dir_line, s + b, i - b);
				i++;
				continue;
			}
			pol_hit(C, dir_line, "forbidden-include",
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

void pol_lexed_free(lexed *L)
{
	free(L->v);
	free(L->pool);
	memset(L, 0, sizeof *L);
}

/* Splice and tokenize src; C (may be NULL) collects hits found on the way. */
int pol_tokenize(const char *src, size_t len, lexed *L, checker *C)
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
		pol_lexed_free(L);
	return rc;
}
