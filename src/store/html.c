/* The pieces the stitch HTML pages share (html.h). The style sheet lives here once: the bench
 * report's chart classes (bar, grid, one, tick, ...) are the vocabulary every page draws with. */
#include <stdarg.h>

#include "html.h"

void st_html_text(FILE *f, const char *s, size_t max)
{
	for (size_t n = 0; *s && n < max; s++, n++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

void st_html_head(FILE *f, const char *title, const char *extra_css)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
	st_html_text(f, title, (size_t)-1);
	fputs("</title>\n<style>\n"
	      "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
	      "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
	      "text-align:right}td:first-child,th:first-child{text-align:left}\n"
	      ".chart{display:block;margin:1em 0}.title{font-weight:bold;font-size:13px}"
	      ".label{font-size:11px;text-anchor:end}.label2,.value,.tick,.fail{font-size:11px}"
	      ".fail{fill:#b00}.bar{fill:#4a7ebb}.bar.slow{fill:#d08c2c}.bar.sus{fill:#b03030}"
	      ".grid{stroke:#ddd}.one{stroke:#555;stroke-dasharray:3 2}\n"
	      ".facts td{text-align:left}\n", f);
	fputs(extra_css, f);
	fputs("</style></head><body>\n", f);
}

void st_svg_begin(FILE *f, const char *id, int width, int height, int title_x,
                  const char *title_fmt, ...)
{
	fprintf(f, "<svg class=\"chart\" id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" "
	           "width=\"%d\" height=\"%d\" role=\"img\">\n", id, width, height);
	fprintf(f, "<text x=\"%d\" y=\"16\" class=\"title\">", title_x);
	va_list ap;
	va_start(ap, title_fmt);
	vfprintf(f, title_fmt, ap);
	va_end(ap);
	fputs("</text>\n", f);
}

void st_svg_pct_axis(FILE *f, int left, int right, int top, int hgt)
{
	for (int p = 0; p <= 100; p += 25) {
		int y = top + hgt - hgt * p / 100;
		fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"%s\"/><text x=\"%d\" "
		           "y=\"%d\" class=\"tick\">%d%%</text>\n", left, y, right, y,
		        p == 100 ? "one" : "grid", 8, y + 4, p);
	}
}
