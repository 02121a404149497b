/* What the HTML pages of src/store (the bench report in render.c, the eval leaderboard in
 * eval_render.c) share: escaping, one page head and style sheet so every stitch page looks the
 * same, and the parts of their inline SVG charts. The pages carry no scripts and fetch nothing,
 * so they open from a file anywhere. Internal to src/store. */
#ifndef ST_STORE_HTML_H
#define ST_STORE_HTML_H

#include <stddef.h>

#include "common/buf.h"

/* At most `max` bytes of s, with < > & " escaped: safe in element text and in attributes. */
void st_html_text(st_buf *out, const char *s, size_t max);

/* Everything up to and including <body>: the doctype, the title and the common style sheet,
 * then extra_css (rules of one page; "" for none). */
void st_html_head(st_buf *out, const char *title, const char *extra_css);

/* A chart's opening <svg class="chart" id=ID ...> of width x height and its bold title line at
 * (title_x, 16); title_fmt is printf-style and not escaped: pass fixed text. */
void st_svg_begin(st_buf *out, const char *id, int width, int height, int title_x,
                  const char *title_fmt, ...) __attribute__((format(printf, 6, 7)));

/* A 0-100 % y axis: grid lines from x = left to right every 25 %, the top one dashed, labelled
 * at the left edge; the plot spans y = top (100 %) to top + hgt (0 %). */
void st_svg_pct_axis(st_buf *out, int left, int right, int top, int hgt);

#endif
