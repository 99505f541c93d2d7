/*
 * report/census.h — the rendering of a run's object census and of its GPU
 * memory split (allocated, cached, other), loaded and judged by
 * judge/census.h: the text sections and the JSON values.
 */
#ifndef LP_REPORT_CENSUS_H
#define LP_REPORT_CENSUS_H

#include "judge/census.h"

struct strbuf;

/* The census section of the text report: cost, then each growing type
 * with its holder. */
void census_report_text(const struct census_report *r, struct strbuf *sb);
/* The census in Markdown: its cost in a sentence, then a table of the
 * growing types with their holders. */
void census_report_md(const struct census_report *r, struct strbuf *sb);
/* The census section of the html page (id census; the table of growing
 * types, sortable, id census-growing). */
void census_report_html(const struct census_report *r, struct strbuf *sb);
/* Each growing type in one plain line, "census: HOLDER holds +1 Tensor
 * ... per step", for JUnit's system-out; nothing when none grows. */
void census_report_plain(const struct census_report *r, struct strbuf *sb);
struct json_writer;
/* The members of the JSON report's "census" object, into the object open
 * in jw. */
void census_report_json(const struct census_report *r, struct json_writer *jw);
/* The GPU section of the text report: the three series and the diagnosis. */
void gpu_report_text(const struct gpu_report *g, struct strbuf *sb);
/* The members of the JSON report's "gpu_memory" object, into the object
 * open in jw. */
void gpu_report_json(const struct gpu_report *g, struct json_writer *jw);

#endif
