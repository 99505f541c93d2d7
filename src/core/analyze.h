/*
 * analyze.h — the leak judgment: from memory measured at each step (or at
 * each time bin when a job marks no steps) to a verdict with its evidence.
 *
 * Pure functions on arrays; no I/O. Units: memory in bytes, x in steps (or
 * seconds when judging over time), time in seconds. The method is described
 * in docs/internals/statistics.md:
 *   - cycles: a sawtooth (memory freed in bulk, e.g. gc.collect()) of at
 *     least 5 cycles is judged by its floors and peaks;
 *   - warm-up: the leading part that lies below the settled end of the
 *     series or grows faster (slope, level, shape) is skipped, at most half;
 *   - acceleration: growth whose second half is clearly faster is judged
 *     on that half, with both rates;
 *   - trend: Theil–Sen slope with a rank-based 95% interval (Sen 1968), on
 *     block medians when the series is long, so 100,000 steps stay fast;
 *   - significance: Mann–Kendall with the ties correction, its variance
 *     inflated for serial correlation (Hamed & Rao 1998; AR(1) for
 *     persistent series);
 *   - effect: growth over the judged window must matter — at least
 *     min_growth_bytes and min_growth_fraction of the baseline;
 *   - floor: the 5th percentile of the window must rise too, so noise and
 *     caches above a flat floor are not a leak;
 *   - sustained: the growth must not slow down (a cache still filling) and
 *     must stay significant without the first third of the window.
 */
#ifndef LP_ANALYZE_H
#define LP_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

#include "util/stats.h"

enum verdict {
	VERDICT_INCONCLUSIVE = 0,
	VERDICT_NO_LEAK,
	VERDICT_LEAK,
};
const char *verdict_name(enum verdict v);   /* "leak", "no-leak", "inconclusive" */

/* The version of the judgment, stored with a run's verdict when it ends
 * (`ls` shows the stored verdict; `report` judges again): raised whenever
 * a change can turn a verdict, so that `ls` can say which verdicts an
 * older judgment wrote. 1: the first recorded (bends upward, sawtooth
 * cycles, warm-up only where there is one). */
#define JUDGE_VERSION 1

struct analyze_opts {
	double min_growth_bytes;      /* default 1 MiB over the judged window */
	double min_growth_fraction;   /* default 0.01 of the baseline floor */
	double alpha;                 /* significance level, default 0.01 */
	size_t min_points;            /* default 20 points after warm-up */
	double limit_bytes;           /* for projected_to_limit; 0 = unknown */
	const char *x_unit;           /* unit of x in reasons: "step" (default,
	                               * also when NULL) or "s"; not owned */
};
void analyze_opts_init(struct analyze_opts *o);

struct analysis {
	enum verdict verdict;
	char reason[256];             /* one sentence, lowercase, no full stop */
	size_t points;                /* usable points (finite x and y) */
	size_t warmup_points;         /* points skipped as warm-up */
	double warmup_end_x;          /* x where the warm-up ends (the first x when none) */
	double slope;                 /* bytes per unit of x (Theil–Sen) */
	double slope_low, slope_high; /* 95% interval (Sen, with autocorr_factor) */
	double mk_z, mk_p;            /* Mann–Kendall statistic and two-sided p */
	double autocorr_factor;       /* Var S inflation for serial correlation
	                               * (Hamed & Rao 1998); 1 = none */
	double baseline_bytes;        /* floor at the start of the judged window */
	double floor_growth_bytes;    /* rise of the floor across the window */
	double peak_bytes;
	double peak_x;
	double last_bytes;
	double q[5];                  /* per-point change: min, q1, median, q3, max */
	double projected_to_limit;    /* x units until limit_bytes; <0 when none */
	double window_x;              /* length of the judged window, x units */
	double threshold_bytes;       /* growth over the window that matters */
	double cycle_period;          /* x units between the falls of a sawtooth
	                               * (GC cycles) the judgment found; 0: none */
	size_t cycles;                /* its whole cycles */
	double rate_early, rate_late; /* when the growth bends upward (speeds up,
	                               * or starts late): its rate before the bend
	                               * and after (bytes per x unit); 0 when not */
	double window_from_x;         /* x where the judged window starts: where
	                               * the warm-up ends, or the bend */
};

/*
 * Judge the series y[i] measured at x[i] (x strictly increasing is not
 * required: points are taken in order of x, equal x keep their order).
 * Points with a non-finite x or y are dropped. n may be 0; opts NULL means
 * the defaults. Fills *out; never fails. Figures that cannot be computed
 * (no points, one x) are left 0, with mk_p 1 and projected_to_limit -1;
 * with fewer than min_points the trend is still filled in, for information.
 */
void analyze_series(const double *x, const double *y, size_t n,
                    const struct analyze_opts *opts, struct analysis *out);

/* Building blocks, exposed for tests. */
/* Theil–Sen slope and Sen's 95% interval (low/high may be NULL). Returns
 * the slope; NAN if no two points have distinct x. Series longer than 1000
 * points are first reduced to 1000 block medians (see statistics.md). */
double theil_sen(const double *x, const double *y, size_t n, double *low, double *high);
/* Mann–Kendall on y in order: z statistic (ties-corrected, with the
 * continuity correction), two-sided p in *p (may be NULL). O(n log n). */
double mann_kendall(const double *y, size_t n, double *p);
/* quantile_sorted() and sort_doubles() are in util/stats.h. */
/* Median of v (copied, v untouched). NAN when n == 0. */
double median_of(const double *v, size_t n);

#endif
