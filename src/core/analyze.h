/*
 * analyze.h — the leak judgment: from memory measured at each step (or at
 * each time bin when a job marks no steps) to a verdict with its evidence.
 *
 * Pure functions on arrays; no I/O. Units: memory in bytes, x in steps (or
 * seconds when judging over time), time in seconds. The method is described
 * in docs/internals/statistics.md:
 *   - warm-up: the leading part whose growth is faster than the settled
 *     trend is skipped (at most half of the series);
 *   - trend: Theil–Sen slope with a rank-based 95% interval (Sen 1968), on
 *     block medians when the series is long, so 100,000 steps stay fast;
 *   - significance: Mann–Kendall with the ties correction;
 *   - effect: growth over the judged window must matter — at least
 *     min_growth_bytes and min_growth_fraction of the baseline;
 *   - floor: the minimum of late windows must rise too, so noise and caches
 *     above a flat floor are not a leak.
 */
#ifndef LP_ANALYZE_H
#define LP_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

enum verdict {
	VERDICT_INCONCLUSIVE = 0,
	VERDICT_NO_LEAK,
	VERDICT_LEAK,
};
const char *verdict_name(enum verdict v);   /* "leak", "no-leak", "inconclusive" */

struct analyze_opts {
	double min_growth_bytes;      /* default 1 MiB over the judged window */
	double min_growth_fraction;   /* default 0.01 of the baseline floor */
	double alpha;                 /* significance level, default 0.01 */
	size_t min_points;            /* default 20 points after warm-up */
	double limit_bytes;           /* for projected_steps_to_limit; 0 = unknown */
};
void analyze_opts_init(struct analyze_opts *o);

struct analysis {
	enum verdict verdict;
	char reason[256];             /* one sentence, lowercase, no full stop */
	size_t points;                /* points in the series */
	size_t warmup_points;         /* points skipped as warm-up */
	double warmup_end_x;          /* x where the judged window starts */
	double slope;                 /* bytes per unit of x (Theil–Sen) */
	double slope_low, slope_high; /* 95% interval */
	double mk_z, mk_p;            /* Mann–Kendall statistic and two-sided p */
	double baseline_bytes;        /* floor at the start of the judged window */
	double floor_growth_bytes;    /* rise of the floor across the window */
	double peak_bytes;
	double peak_x;
	double last_bytes;
	double q[5];                  /* per-point change: min, q1, median, q3, max */
	double projected_to_limit;    /* x units until limit_bytes; <0 when none */
};

/*
 * Judge the series y[i] measured at x[i] (x strictly increasing is not
 * required; equal x are allowed). n may be 0. Fills *out; never fails.
 */
void analyze_series(const double *x, const double *y, size_t n,
                    const struct analyze_opts *opts, struct analysis *out);

/* Building blocks, exposed for tests. */
/* Theil–Sen slope and Sen's 95% interval. Returns the slope; NAN if n < 2. */
double theil_sen(const double *x, const double *y, size_t n, double *low, double *high);
/* Mann–Kendall: z statistic (ties-corrected), two-sided p in *p. */
double mann_kendall(const double *y, size_t n, double *p);
/* Quantile (type 7, as R and numpy's default) of v[0..n); sorts v in place. */
double quantile_sorted(const double *sorted, size_t n, double q);
void sort_doubles(double *v, size_t n);
/* Median of v (copied, v untouched). NAN when n == 0. */
double median_of(const double *v, size_t n);

#endif
