/*
 * report/census.h — the rendering of a run's object census and of its GPU
 * memory split (allocated, cached, other), loaded and judged by
 * model/census.h: the text sections and the JSON values.
 */
#ifndef LP_REPORT_CENSUS_H
#define LP_REPORT_CENSUS_H

#include "model/census.h"

struct strbuf;

/* The census section of the text report: cost, then each growing type
 * with its holder. */
void census_report_text(const struct census_report *r, struct strbuf *sb);
/* The value of the JSON report's "census" key. */
void census_report_json(const struct census_report *r, struct strbuf *sb);
/* The GPU section of the text report: the three series and the diagnosis. */
void gpu_report_text(const struct gpu_report *g, struct strbuf *sb);
/* The value of the JSON report's "gpu_memory" key. */
void gpu_report_json(const struct gpu_report *g, struct strbuf *sb);

#endif
