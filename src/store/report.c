/* `stitch bench --report DIR`: the run as report.md and a self-contained report.html, each
 * written whole or not at all (temp + rename), so a browser or a reader never sees half a page. */
#include <stdio.h>

#include "bench.h"
#include "common/fs.h"

typedef void (*render_fn)(const json_t *, const json_t *, const json_t *, const char *, st_buf *);

static st_status write_one(const char *dir, const char *name, render_fn render, const json_t *run,
                           const json_t *rows, const json_t *score, const char *baseline,
                           st_err *err)
{
	st_buf page = {0};
	render(run, rows, score, baseline, &page);
	if (page.oom) {
		st_buf_free(&page);
		return st_err_set(err, ST_E_NOMEM, "report: out of memory");
	}
	char path[4096];
	st_status s;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
		s = st_err_set(err, ST_E_INVALID, "report: folder path too long");
	else
		s = st_write_file_atomic(path, st_buf_str(&page), page.n, err);
	st_buf_free(&page);
	return s;
}

st_status st_bench_report(const char *dir, const json_t *run, const json_t *rows,
                          const json_t *score, const char *baseline, st_err *err)
{
	st_status s = st_mkdirs(dir, err);
	if (!s)
		s = write_one(dir, "report.md", st_bench_print_md, run, rows, score, baseline, err);
	if (!s)
		s = write_one(dir, "report.html", st_bench_print_html, run, rows, score, baseline, err);
	return s ? st_err_wrap(err, s, "bench report in %s", dir) : ST_OK;
}
