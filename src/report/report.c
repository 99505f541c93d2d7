/*
 * report.c — the formats: one table of {name, run writer, sweep writer},
 * the parsing of a format's name, and the dispatch to its writer. Each
 * writer lives in its own file and appends to a struct strbuf; the caller
 * writes the buffer out (report_flush). Adding a format is one file with
 * its writer plus one entry here (and its enum value in report.h).
 */
#include "report/report.h"

#include <stdio.h>
#include <string.h>

#include "report/render.h"
#include "util/util.h"

struct report_writer {
	const char *name;
	enum report_format fmt;
	/* one run; x (may be NULL) is what only the html page shows */
	void (*run)(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb);
	/* a sweep, as a page of its own: 0, or -1 after a message; NULL: the
	 * table of sweep.c in this format, its trials grouped by --by */
	int (*sweep)(struct store *st, int64_t sweep_id, struct strbuf *sb);
};

static const struct report_writer writers[] = {
	{ "text", REPORT_TEXT, report_write_text, NULL },
	{ "md", REPORT_MD, report_write_md, NULL },
	{ "markdown", REPORT_MD, report_write_md, NULL },
	{ "csv", REPORT_CSV, report_write_csv, NULL },
	{ "json", REPORT_JSON, report_write_json, NULL },
	{ "html", REPORT_HTML, report_write_html, sweep_write_html },
	{ "svg", REPORT_SVG, report_write_svg, sweep_write_svg },
	{ "junit", REPORT_JUNIT, report_write_junit, sweep_write_junit },
};
#define NWRITERS (sizeof(writers) / sizeof(writers[0]))

static const struct report_writer *writer_of(enum report_format fmt)
{
	for (size_t i = 0; i < NWRITERS; i++)
		if (writers[i].fmt == fmt)
			return &writers[i];
	return NULL;
}

int report_format_parse(const char *name, enum report_format *out)
{
	for (size_t i = 0; name && i < NWRITERS; i++)
		if (!strcmp(name, writers[i].name)) {
			*out = writers[i].fmt;
			return 0;
		}
	return -1;
}

void report_render(const struct run_summary *s, enum report_format fmt, const struct report_extras *x,
                   struct strbuf *sb)
{
	const struct report_writer *w = writer_of(fmt);
	if (w)
		w->run(s, x, sb);
}

int sweep_report_render(struct store *st, int64_t sweep_id, enum report_format fmt, const char *by,
                        struct strbuf *sb)
{
	const struct report_writer *w = writer_of(fmt);
	if (!w)
		return -1;
	return w->sweep ? w->sweep(st, sweep_id, sb) : sweep_write_table(st, sweep_id, fmt, by, sb);
}

int report_flush(const struct strbuf *sb, FILE *out)
{
	if (sb->len && fwrite(sb->buf, 1, sb->len, out) != sb->len)
		return -1;
	return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}

int report_write(const struct run_summary *s, enum report_format fmt, FILE *out)
{
	struct strbuf sb = STRBUF_INIT;
	report_render(s, fmt, NULL, &sb);
	int rc = report_flush(&sb, out);
	strbuf_release(&sb);
	return rc;
}

int sweep_report_write(struct store *st, int64_t sweep_id, enum report_format fmt, const char *by, FILE *out)
{
	struct strbuf sb = STRBUF_INIT;
	int rc = sweep_report_render(st, sweep_id, fmt, by, &sb);
	if (rc == 0)
		rc = report_flush(&sb, out);
	strbuf_release(&sb);
	return rc;
}
