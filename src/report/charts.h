/*
 * charts.h — private to src/report/: the charts of a run and of a sweep,
 * as struct plot (plot.h), built from the model (judge/summary.h,
 * judge/sweep.h); shared by the
 * html report (html.c) and the standalone svg (svg.c).
 *
 * A run has up to three charts: memory over steps (when it marked steps),
 * memory over time, and the distribution of the judged series' per-point
 * change. The memory charts show every measure recorded (PSS, RSS, USS,
 * cgroup, GPU), the judged one drawn bold; the warm-up the judgment
 * skipped, shaded; its Theil–Sen trend over the judged window, dashed;
 * restarts and ends that were not a clean exit, as vertical lines named
 * by their cause; metrics from the client (loss...) on a second axis.
 * The growth kinds, summed over the job's processes (run_kinds_totals()),
 * are a fourth chart, one line per kind measured.
 *
 * Units: bytes; x in steps or seconds since the run started.
 */
#ifndef LP_REPORT_CHARTS_H
#define LP_REPORT_CHARTS_H

#include <stdbool.h>

#include "report/plot.h"
#include "report/report.h"
#include "judge/sweep.h"

#define CHARTS_MAX_METRICS 4   /* metric names drawn; more are left out */

/* The charts of one run. Owns what its plots point to; released with
 * run_charts_release(). */
struct run_charts {
	struct plot steps;           /* memory over steps; steps.nseries 0 when none */
	struct plot time;            /* memory over time */
	struct plot change;          /* histogram of the per-point change */
	struct plot kinds;           /* the job's memory by kind (judge/kinds.h), on
	                              * the x of the judged chart; kinds.nseries 0
	                              * when the run stored no kinds */
	bool have_steps, have_time, have_change, have_kinds;
	size_t metrics_left_out;     /* metric names beyond CHARTS_MAX_METRICS */
	/* the change quantiles, as the text report prints them */
	double q[5];
	/* storage */
	void **pool;
	size_t npool, pool_cap;
};

/* Build the charts of s; metrics (may be NULL) are the run's client
 * metrics (store_load_metrics), drawn on the second axis. id_prefix makes
 * the plots' ids unique in a page. */
void run_charts_build(struct run_charts *c /* out */, const struct run_summary *s,
                      const struct metric_row *metrics, size_t nmetrics, const char *id_prefix);
void run_charts_release(struct run_charts *c);

/* One trial of a sweep, with its memory series. */
struct sweep_trial_series {
	const struct trial_row *t;
	char label[48];              /* "trial 3", "trial 2.1" (attempt 1) */
	char *config;                /* "keep=loss, OMP_NUM_THREADS=1"; owned */
	size_t config_index;         /* configurations in order of first appearance */
	double *x, *y, *dy;          /* memory at each step (or time bin), and its change */
	size_t n;
};

/* The charts of a sweep, and what the table needs. Released with
 * sweep_charts_release(). */
struct sweep_charts {
	struct sweep_model m;        /* the sweep, its dimensions and trials */
	struct sweep_trial_series *ts;   /* one per trial, same order */
	size_t nconfigs;
	bool over_time;              /* no trial marked steps: memory over time */
	struct plot memory, change;
	struct plot_series *series;  /* 2 * ntrials: memory, then change */
};

/* Load sweep sweep_id (0: the latest) and build its charts: 0, or -1
 * after a message (a missing sweep's as sweep_model_open() says it; *c
 * is then released). */
int sweep_charts_open(struct store *st, int64_t sweep_id, struct sweep_charts *c /* out */);
void sweep_charts_release(struct sweep_charts *c);
/* One legend item per configuration, in the colors of its trials. The
 * caller frees the array (not the strings, which c owns) with free(). */
struct plot_legend_item *sweep_charts_legend(const struct sweep_charts *c);

#endif
