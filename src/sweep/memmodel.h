/*
 * memmodel.h — what a sweep learns of memory from its finished trials: a
 * fit of peak memory (host, GPU) and of growth per step against the
 * numeric parameters, with a prediction interval, used to pack parallel
 * trials, to skip a configuration that clearly will not fit its budget,
 * and to choose the value an OOM'd trial is retried with
 * (docs/internals/memory-model.md).
 *
 * The fit (struct mem_fit) is pure: numbers in, numbers out, no I/O, no
 * allocation. It is an offset power law,
 *
 *     y = base + exp(b0 + Σ_d b_d · log x_d),     every b_d ≥ 0,
 *
 * a log-log least-squares fit of what is above a base (chosen from 16
 * candidates by the smallest squared error of log y), over the
 * dimensions whose values are positive numbers that vary among the
 * trials. Trials that ran out of memory are censored: their peak is a
 * lower bound (iteratively imputed). The interval is the usual one-sided
 * 95% prediction interval of the regression (Student's t), at least ±3%.
 *
 * struct memmodel is the three fits of one sweep, built from its trial
 * rows (what the runner and the report both have). Memory is bytes,
 * growth bytes per step.
 */
#ifndef LP_SWEEP_MEMMODEL_H
#define LP_SWEEP_MEMMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/sweeps.h"

#define MEMFIT_MAX_DIMS 16           /* dimensions beyond are left out of the fit */

struct mem_fit {
	bool ok;                         /* fitted: predictions can be made */
	size_t ndims;                    /* dimensions of x (the sweep's) */
	size_t n, n_censored;            /* trials fitted; of them, lower bounds */
	size_t p;                        /* coefficients: 1 + dimensions used */
	size_t used[MEMFIT_MAX_DIMS];    /* the dimensions in the fit, p - 1 of them */
	double centre[MEMFIT_MAX_DIMS];  /* mean log x of each used dimension */
	double coef[MEMFIT_MAX_DIMS];    /* exponent per dimension (index d), 0 when unused */
	bool varied[MEMFIT_MAX_DIMS];    /* the dimension's values differed among the trials */
	bool numeric[MEMFIT_MAX_DIMS];   /* every trial had a positive number there */
	double seen_lo[MEMFIT_MAX_DIMS], seen_hi[MEMFIT_MAX_DIMS];   /* their range */
	double b0;                       /* log of what is above base, at the centre */
	double base;                     /* bytes every configuration needs */
	double sd;                       /* residual standard deviation (log space) */
	int dof;                         /* n - p */
	double cov[(MEMFIT_MAX_DIMS + 1) * (MEMFIT_MAX_DIMS + 1)];   /* (X'X)^-1, p x p */
};

struct mem_pred {
	double point, lo, hi;            /* bytes; lo and hi the 95% one-sided bounds */
	bool inside;                     /* every used value within the range seen */
	bool lower_sound;                /* the values not in the fit are at least those
	                                  * seen (so, memory being monotone, the peak is
	                                  * at least what the fit says) */
};

/*
 * Fit y (n values, > 0) against x (n rows of ndims values: a positive
 * number, or NAN where the value is not one). censored[i]: y[i] is only a
 * lower bound (the trial was killed there); NULL: none. 0 when fitted,
 * 1 when there are too few trials (fewer than p + 2, or fewer than five,
 * or none exact), f->ok telling the same.
 */
int mem_fit_run(struct mem_fit *f, size_t ndims, const double *x, const double *y, const bool *censored, size_t n);
/* The prediction at x (ndims values as above): true, or false when the
 * fit is not ok or a used dimension has no positive number in x. */
bool mem_fit_predict(const struct mem_fit *f, const double *x, struct mem_pred *out);
/*
 * The largest v in [lo, hi] for dimension d such that the upper bound at x
 * with x[d] = v is at most budget (x is not changed); NAN when even lo
 * does not fit, or d does not drive the fit (then no value helps).
 */
double mem_fit_largest(const struct mem_fit *f, const double *x, size_t d, double lo, double hi, double budget);
/* The fit's peak at x[d] = v, every other used dimension at its centre
 * (the geometric mean of its values): the dimension's own effect, as the
 * report charts it. NAN when not fitted. */
double mem_fit_effect(const struct mem_fit *f, size_t d, double v);
/* Student's t quantile for a one-sided 95% bound with dof degrees of
 * freedom (dof < 1: infinity). */
double mem_t95(int dof);

/* What a memory model fits. */
enum mem_what { MEM_HOST, MEM_GPU, MEM_GROWTH, MEM_NWHAT };

/* The fits of one sweep, from its finished trials. */
struct memmodel {
	size_t ndims;
	struct mem_fit fit[MEM_NWHAT];
};

/*
 * Fit from rows[0..n) (a sweep's trials, any status; vals[i] the values
 * of row i in the spec's order, NULL to leave the row out). Host: the
 * peaks of trials that ended (ok, failed, oom; an OOM'd trial's peak is a
 * lower bound, raised to budget_bytes when it ran out of host memory);
 * GPU: the same of GPU peaks (every OOM a lower bound); growth: positive
 * per-step growth of trials that did not run out of memory. Only the last max_rows rows with
 * a peak are used (0: all).
 */
void memmodel_build(struct memmodel *m, size_t ndims, const struct trial_row *rows, char *const *const *vals,
                    size_t n, uint64_t budget_bytes, size_t max_rows);
/* x[0..ndims) from a trial's values (NAN where not a positive number). */
void memmodel_values(size_t ndims, char *const *vals, double *x);
/* Predict what of a trial with these values: true with *out, else false. */
bool memmodel_predict(const struct memmodel *m, enum mem_what w, char *const *vals, struct mem_pred *out);

#endif
