/*
 * report.h — what a run's numbers mean, from the store alone: the leak
 * judgment (core/analyze) on the run's step series, and its rendering as
 * text (the end-of-run summary), Markdown, CSV or JSON.
 */
#ifndef LP_REPORT_H
#define LP_REPORT_H

#include <stdio.h>
#include <stdint.h>

#include "core/analyze.h"
#include "store/store.h"

enum report_format { REPORT_TEXT = 0, REPORT_MD, REPORT_CSV, REPORT_JSON };
/* "text", "md" (or "markdown"), "csv", "json"; -1 for unknown. */
int report_format_parse(const char *name, enum report_format *out);

/* Everything a report says about one run. */
struct run_summary {
	struct run_row run;
	enum measure measure;          /* what the judgment used */
	const char *x_unit;            /* "step" or "s" (judged over time: no steps) */
	struct analysis a;             /* the judgment */
	size_t steps;                  /* step markers recorded */
	double steps_per_second;       /* median rate; 0 when no steps */
	double duration_s;
	uint64_t peak_bytes;           /* under the measure, over all samples */
	double limit_bytes;            /* limit used for the projection; 0 none */
	const char *limit_source;
	double warmup_steps;           /* x where the judged window starts */
	struct proc_row top_proc;      /* the process that held the most */
	int has_top_proc;
};

/* Build the summary of run_id (0: latest). measure_override < 0 keeps the
 * run's own measure. Returns 0, 1 when the run does not exist, -1 on error. */
int run_summary_load(struct store *st, int64_t run_id, int measure_override,
                     struct run_summary *out);
void run_summary_release(struct run_summary *s);

/* Render. Returns 0 or -1. */
int report_write(const struct run_summary *s, enum report_format fmt, FILE *out);

#endif
