/*
 * report.h — what a run's numbers mean, from the store alone: the leak
 * judgment (judge/summary.h) rendered as text (the end-of-run summary),
 * Markdown, CSV, JSON, an HTML page with charts, one chart as SVG, or
 * JUnit XML. Renderers only: they read the model and append to a strbuf.
 */
#ifndef LP_REPORT_H
#define LP_REPORT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "judge/summary.h"
#include "store/store.h"

enum report_format { REPORT_TEXT = 0, REPORT_MD, REPORT_CSV, REPORT_JSON, REPORT_HTML, REPORT_SVG, REPORT_JUNIT };
/* "text", "md" (or "markdown"), "csv", "json", "html", "svg", "junit"; -1
 * for unknown. */
int report_format_parse(const char *name, enum report_format *out);

struct strbuf;
struct report_extras;

/*
 * Render, appended to sb (report.c dispatches through its table of formats):
 *   text  the end-of-run summary (what `leakproof run` prints on stderr)
 *   md    the same as Markdown tables, for bug reports
 *   csv   "step,epoch,t,rss,pss,uss,swap,cgroup,gpu" then one row per step
 *         (per sample, step and epoch empty, when the run marked no steps)
 *   json  one object; the fields are listed in docs/internals/json.md
 *   html  one self-contained page (inline CSS, JS and SVG; a
 *         Content-Security-Policy that forbids any network load): the
 *         verdict and the text summary, memory over steps and over time
 *         with the warm-up, the trend, restarts and ends, metrics on a
 *         second axis (x, may be NULL), the distribution of the per-step
 *         change; hover shows values
 *   svg   one chart as a standalone SVG file: memory over steps (over time
 *         when the run marked none), every measure, the trend, the warm-up
 *   junit the verdict as JUnit XML: one testcase, failed on a leak or when
 *         the run failed (docs/internals/html-report.md)
 */
void report_render(const struct run_summary *s, enum report_format fmt, const struct report_extras *x,
                   struct strbuf *sb);
/* A sweep (sweep_id 0: the latest) in fmt, appended to sb: the table of
 * trials (text, md, csv, json; one row per trial attempt, or per group of
 * trials with equal values of the comma-separated dimensions in by, NULL:
 * no grouping), the html page (memory and its per-step change for every
 * trial, colored by configuration, and the table of trials, sortable by any
 * column), the svg chart of memory, or junit (one testcase per trial). 0, or -1 after a message. */
int sweep_report_render(struct store *st, int64_t sweep_id, enum report_format fmt, const char *by,
                        struct strbuf *sb);
/* A job of several ranks (judge/job.h) in fmt, appended to sb: a row per
 * rank and which rank's memory grows (job.c). text, md, csv and json; -1
 * for another format (nothing appended). */
struct job_model;
int job_report_render(const struct job_model *m, enum report_format fmt, struct strbuf *sb);
/* Write sb to out and flush: 0, or -1 when out failed (no message). */
int report_flush(const struct strbuf *sb, FILE *out);
/* report_render() and report_flush() in one, without extras: 0, or -1 when
 * writing failed (no message). */
int report_write(const struct run_summary *s, enum report_format fmt, FILE *out);
/* sweep_report_render() and report_flush() in one: 0, or -1 (a message
 * only when the sweep could not be read). */
int sweep_report_write(struct store *st, int64_t sweep_id, enum report_format fmt, const char *by, FILE *out);

/* ---- reports to look at (html.c, svg.c; docs/internals/html-report.md) -- */

struct strbuf;

/* One allocation site among those growing the most, from the tracer. */
struct alloc_site {
	const char *label;              /* the function or symbol */
	const char *library;            /* the object file it is in; may be "" */
	double growth_bytes_per_step;   /* its live bytes' growth */
	double live_bytes;              /* live at the end */
};

/* What the html report shows beside the summary. Not owned; every array
 * may be NULL with its count 0. */
struct report_extras {
	const struct metric_row *metrics;   /* the run's client metrics (loss...),
	                                     * store_load_metrics() */
	size_t nmetrics;
	const struct alloc_site *sites;     /* top growing allocation sites, when
	                                     * the run was traced */
	size_t nsites;
};

/* The html page's section for allocation sites: a table of the n rows, the
 * largest growth first as given. Appends nothing when n is 0. */
void report_html_add_alloc_sites(struct strbuf *sb, const struct alloc_site *rows, size_t n);

/* ---- pieces shared with `leakproof ls` ---------------------------------- */

struct strbuf;
/* Append argv as a shell would read it ('quoted' where needed), cut with
 * "..." at about max_chars (0: no cap). */
void report_add_command_line(struct strbuf *sb, char *const *argv, size_t argc, size_t max_chars);
/* How the run ended: "exited 0", "killed by signal 9 (SIGKILL)", "running",
 * "failed to start (exit 127)", "interrupted". Returns buf. */
char *report_fmt_outcome(char *buf, size_t bufsz, const struct run_row *r);
/* Whether a stored verdict was written by another version of the judgment
 * than this leakproof's (shown starred), and the footnote that says so
 * under a table: "* written when the run ended by another version ...;
 * `leakproof report RUN` judges it again" (whose: "the run", "its run"). */
bool report_other_judge(const char *verdict, int judge_version);
void report_add_other_judge_note(struct strbuf *sb, const char *whose, int64_t run_id);
/* Where run r ran, in one line, appended to sb: "vm · SLURM job 12 (array
 * 10_3), step 0 · allocation 300 MiB · GPUs 0,1 · rank 1 of 2 (node 0)";
 * only the host when nothing more is known. Returns whether more was. */
bool report_add_placement(struct strbuf *sb, const struct run_row *r);
struct json_writer;
/* What a command knows of a run that is newer than its stored row: `top`'s
 * judgment so far. */
struct run_json_now {
	const char *verdict;            /* NULL: none yet */
	double growth_bytes_per_step;   /* per x unit */
	int64_t steps;
	double peak_bytes;
};
/* The members of a run's JSON object (docs/internals/json.md), written
 * into the object open in jw: its stored row, with now's values (unless
 * NULL) in place of the row's verdict, growth, steps and peak. `report`
 * (its "run"), `ls` and `top` all write their runs with it. */
void report_json_run(struct json_writer *jw, const struct run_row *r, const struct run_json_now *now);

#endif
