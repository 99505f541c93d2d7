/*
 * report/trace.h — the rendering of a traced run's allocation sites, loaded
 * and judged by judge/sites.h.
 */
#ifndef LP_REPORT_TRACE_H
#define LP_REPORT_TRACE_H

#include "judge/sites.h"

struct strbuf;

/* The trace section of the text report: the growing sites (at most
 * max_sites, 0 for all) and the libraries. */
void trace_report_text(const struct trace_report *r, size_t max_sites, struct strbuf *sb);
/* `report --trace`: every growing site, then the largest that do not grow
 * (flat or undecided, with why). */
void trace_report_write_text(const struct trace_report *r, struct strbuf *sb);
struct json_writer;
/* The members of the JSON report's "trace" object, into the object open in
 * jw. */
void trace_report_json(const struct trace_report *r, struct json_writer *jw);

#endif
