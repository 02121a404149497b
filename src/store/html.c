/* The pieces the stitch HTML pages share (html.h). The style sheet lives here once: the bench
 * report's chart classes (bar, grid, one, tick, ...) are the vocabulary every page draws with. */
#include <stdarg.h>

#include "html.h"

void st_html_text(st_buf *out, const char *s, size_t max)
{
	for (size_t n = 0; *s && n < max; s++, n++) {
		switch (*s) {
		case '<': st_buf_puts(out, "&lt;"); break;
		case '>': st_buf_puts(out, "&gt;"); break;
		case '&': st_buf_puts(out, "&amp;"); break;
		case '"': st_buf_puts(out, "&quot;"); break;
		default: st_buf_putc(out, *s);
		}
	}
}

void st_html_head(st_buf *out, const char *title, const char *extra_css)
{
	st_buf_puts(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
	st_html_text(out, title, (size_t)-1);
	st_buf_puts(out, "</title>\n<style>\n"
	                 "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
	                 "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid "
	                 "#ccc;padding:3px 8px;text-align:right}"
	                 "td:first-child,th:first-child{text-align:left}\n"
	                 ".chart{display:block;margin:1em 0}.title{font-weight:bold;font-size:13px}"
	                 ".label{font-size:11px;text-anchor:end}"
	                 ".label2,.value,.tick,.fail{font-size:11px}.fail{fill:#b00}.bar{fill:#4a7ebb}"
	                 ".bar.slow{fill:#d08c2c}.bar.sus{fill:#b03030}.grid{stroke:#ddd}"
	                 ".one{stroke:#555;stroke-dasharray:3 2}\n.facts td{text-align:left}\n");
	st_buf_puts(out, extra_css);
	st_buf_puts(out, "</style></head><body>\n");
}

void st_svg_begin(st_buf *out, const char *id, int width, int height, int title_x,
                  const char *title_fmt, ...)
{
	st_buf_printf(out, "<svg class=\"chart\" id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" "
	                   "width=\"%d\" height=\"%d\" role=\"img\">\n", id, width, height);
	st_buf_printf(out, "<text x=\"%d\" y=\"16\" class=\"title\">", title_x);
	va_list ap;
	va_start(ap, title_fmt);
	st_buf_vprintf(out, title_fmt, ap);
	va_end(ap);
	st_buf_puts(out, "</text>\n");
}

void st_svg_pct_axis(st_buf *out, int left, int right, int top, int hgt)
{
	for (int p = 0; p <= 100; p += 25) {
		int y = top + hgt - hgt * p / 100;
		st_buf_printf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"%s\"/>"
		                   "<text x=\"%d\" y=\"%d\" class=\"tick\">%d%%</text>\n", left, y, right,
		              y, p == 100 ? "one" : "grid", 8, y + 4, p);
	}
}
