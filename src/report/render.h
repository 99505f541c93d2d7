/*
 * render.h — private to src/report/: one renderer per format, and the
 * wording they share (wording.c). The table in report.c picks the
 * renderer; every renderer appends to a struct strbuf. Renderers call
 * wording.c, never report.c, so no two files here call each other in a loop.
 */
#ifndef LP_REPORT_RENDER_H
#define LP_REPORT_RENDER_H

#include <stdint.h>
#include <stdio.h>

#include "report/report.h"
#include "report/census.h"
#include "report/trace.h"
#include "util/util.h"

/* One run, appended to sb. x (may be NULL) is what only html shows. */
void report_write_text(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb);
void report_write_md(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb);
void report_write_csv(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb);
void report_write_json(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb);
void report_write_html(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb);
void report_write_svg(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb);
void report_write_junit(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb);

/* A sweep (sweep_id 0: the latest), appended to sb: the table (sweep.c;
 * text, md, csv, json; by groups the trials), the page (html.c), the chart
 * (svg.c), the verdicts (junit.c): these three every trial, with no --by.
 * 0, or -1 after a message. */
int sweep_write_table(struct store *st, int64_t sweep_id, enum report_format fmt, const char *by,
                      struct strbuf *sb);
/* What a sweep learned of memory (sweep.c): its skipped trials and why,
 * and each memory fit's per-parameter effects, as text or Markdown;
 * nothing when there is none. */
struct sweep_model;
void sweep_memory_model_write(const struct sweep_model *m, struct strbuf *sb, bool md);
int sweep_write_html(struct store *st, int64_t sweep_id, struct strbuf *sb);
int sweep_write_svg(struct store *st, int64_t sweep_id, struct strbuf *sb);
int sweep_write_junit(struct store *st, int64_t sweep_id, struct strbuf *sb);

/* ---- kinds.c: growth kinds, the diagnosis, the OOM flight recorder ------- */

/* The diagnosis line and the growing kinds, as lines of the text report. */
void render_kinds_text(const struct run_summary *s, struct strbuf *sb);
/* The flight recorder's paragraph and table, after an out-of-memory end. */
void render_flight_text(const struct run_summary *s, struct strbuf *sb);
struct json_writer;
/* The members "growth_kinds", "diagnosis" and "flight_recorder" of the
 * JSON report, into the object open in jw. */
void render_kinds_json(const struct run_summary *s, struct json_writer *jw);
/* Whether a growth kind is one the reports list (judged leak, or the
 * copy-on-write the diagnosis names): the same rows in every format. */
struct growth_kind;
bool render_kind_shown(const struct run_summary *s, const struct growth_kind *g);
/* Markdown: the table of the growth kinds shown; the flight recorder's
 * paragraph and its table of processes. Nothing when there is none. */
void render_kinds_md(const struct run_summary *s, struct strbuf *sb);
void render_flight_md(const struct run_summary *s, struct strbuf *sb);
/* HTML sections: every growth kind listed (id growth-kinds, sortable);
 * the flight recorder's table of processes (id flight). */
void render_kinds_html(const struct run_summary *s, struct strbuf *sb);
void render_flight_html(const struct run_summary *s, struct strbuf *sb);

/* ---- wording.c: what the renderers say the same way ---------------------- */

/* "step" or "second": the word for one unit of x. */
const char *render_x_word(const struct run_summary *s);
/* "/step" or "/s". */
const char *render_x_suffix(const struct run_summary *s);
/* A point of the run's x: "step 401", or a duration ("12.5 s"). Returns buf. */
char *render_x_at(char *buf, size_t bufsz, const struct run_summary *s, double x);
/* A signed size: "+1.90 MiB", "-3.10 MiB", "0 B". Returns buf. */
char *render_signed_bytes(char *buf, size_t bufsz, double bytes);
/* A count rounded to three significant digits, with thousands separators:
 * "11,200". Returns buf. */
char *render_count(char *buf, size_t bufsz, double v);
/* "~20 min", "~3 h", "~2 days", "~45 s". Returns buf. */
char *render_approx_duration(char *buf, size_t bufsz, double seconds);
/* The opening line's tail: "exited 0 after 42.1 s, 400 steps (channel)". */
void render_outcome_line(struct strbuf *sb, const struct run_summary *s);
/* Whether the ends of the run's processes are worth a table: more than
 * one process, or one that ended otherwise than by a clean exit. */
bool render_has_ends(const struct run_summary *s);
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
/* Append before, s as render_add_clean() does, then after: " (" s ")". */
void render_add_clean_between(struct strbuf *sb, const char *before, const char *s, const char *after);
/* Append s as text in a Markdown table cell: '|' escaped, control
 * characters as spaces, and '<' that could open raw HTML or an autolink
 * ("<script", "</", "<!", "<?") as "&lt;"; "p < 0.001" stays as it is. */
void render_add_md_cell(struct strbuf *sb, const char *s);
/* Append s as Markdown inline code: backticks (which would end it) as ',
 * control characters as spaces; in_table: '|' escaped (GFM splits a table
 * cell at it even inside code). HTML is not read inside code. */
void render_add_md_code(struct strbuf *sb, const char *s, bool in_table);
/* Append s as one CSV field: quoted when it holds a comma, quote or line
 * break; and, when it starts with '=', '+', '-', '@', tab or carriage
 * return and is not a plain number, with a leading apostrophe, so that a
 * spreadsheet shows it as text instead of running it as a formula (OWASP's
 * advice on CSV injection). */
void render_add_csv_field(struct strbuf *sb, const char *s);
/* NULL for "" (and NULL): what the store keeps as an empty string when it
 * is not known, written null in JSON. */
const char *render_json_known(const char *s);
/* The member key of the object open in jw: a one-line object, left open
 * for the caller's members and jw_end(), when have; else null. Returns
 * have. */
bool render_json_object_or_null(struct json_writer *jw, const char *key, bool have);
/* Label for the per-point change table: "per-step change", "change per
 * second", "change per 2.5 s". Returns buf. */
char *render_change_label(char *buf, size_t bufsz, const struct run_summary *s);

#endif
