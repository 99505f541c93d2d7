/*
 * render.h — private to src/report/: one renderer per format, and the
 * wording they share. report_write() in report.c picks the renderer.
 * Each returns 0, or -1 when writing to out failed.
 */
#ifndef LP_REPORT_RENDER_H
#define LP_REPORT_RENDER_H

#include <stdio.h>

#include "report/report.h"
#include "report/trace.h"
#include "util/util.h"

int report_write_text(const struct run_summary *s, FILE *out);
int report_write_md(const struct run_summary *s, FILE *out);
int report_write_csv(const struct run_summary *s, FILE *out);
int report_write_json(const struct run_summary *s, FILE *out);

/* Write sb to out; 0, or -1 when out failed. */
int render_flush(struct strbuf *sb, FILE *out);

/* "step" or "second": the word for one unit of x. */
const char *render_x_word(const struct run_summary *s);
/* "/step" or "/s". */
const char *render_x_suffix(const struct run_summary *s);
/* A signed size: "+1.90 MiB", "-3.10 MiB", "0 B". Returns buf. */
char *render_signed_bytes(char *buf, size_t bufsz, double bytes);
/* A count rounded to three significant digits, with thousands separators:
 * "11,200". Returns buf. */
char *render_count(char *buf, size_t bufsz, double v);
/* "~20 min", "~3 h", "~2 days", "~45 s". Returns buf. */
char *render_approx_duration(char *buf, size_t bufsz, double seconds);
/* The opening line's tail: "exited 0 after 42.1 s, 400 steps (channel)". */
void render_outcome_line(struct strbuf *sb, const struct run_summary *s);
/* Whether the judgment has a slope to show. */
int render_have_slope(const struct run_summary *s);
/* The projection to the limit, when it is worth saying (a leak that
 * reaches it): "in about 11,200 steps (~20 min)". 0 when there is none. */
int render_projection(struct strbuf *sb, const struct run_summary *s);
/* The value of the top process under the summary's measure. */
double render_top_proc_bytes(const struct run_summary *s);
/* "1.80–2.00 MiB": both ends in the unit of the larger. */
void render_range(struct strbuf *sb, double low, double high);
/* Append s with control characters shown as '?' (names from the job). */
void render_add_clean(struct strbuf *sb, const char *s);
/* Label for the per-point change table: "per-step change", "change per
 * second", "change per 2.5 s". Returns buf. */
char *render_change_label(char *buf, size_t bufsz, const struct run_summary *s);

#endif
