/*
 * memmodel.c — the memory model of a sweep (memmodel.h): an offset power
 * law fitted by least squares in log space, monotone (no exponent below
 * zero), with a Student's t prediction interval; and the glue that builds
 * the host, GPU and growth fits of a sweep from its trial rows. Pure: no
 * I/O, nothing allocated that outlives a call. docs/internals/memory-model.md.
 *
 * Units: bytes (peaks), bytes per step (growth); x in the parameters' own.
 */
#include "sweep/memmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define NBASES 24                  /* base scan: min exact peak * (1 - 2^(-k/2)), k <= 24 */
#define REFINE_ROUNDS 24           /* ternary search steps around the best */
#define IMPUTE_ROUNDS 4            /* refits with censored peaks raised to the fit */
#define MIN_TRIALS 5               /* no fit from fewer finished trials */
#define MIN_SD 0.01                /* residual sd floor, log space */
#define FLOOR_FRAC 0.03            /* the interval is at least ±3% of the point */
#define MAXP (MEMFIT_MAX_DIMS + 1)

double mem_t95(int dof)
{
	static const double t[] = {
		INFINITY, 6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
		1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
		1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697,
	};
	if (dof < 1)
		return INFINITY;
	if (dof <= 30)
		return t[dof];
	if (dof <= 60)
		return 1.697 - (1.697 - 1.671) * (dof - 30) / 30.0;
	if (dof <= 120)
		return 1.671 - (1.671 - 1.658) * (dof - 60) / 60.0;
	return 1.645;
}

/* Invert the p x p matrix a (row-major) into inv by Gauss-Jordan with
 * partial pivoting: 0, or -1 when it is (numerically) singular. */
static int invert(const double *a, size_t p, double *inv)
{
	double m[MAXP * 2 * MAXP];
	size_t w = 2 * p;
	double scale = 0;
	for (size_t i = 0; i < p; i++)
		for (size_t j = 0; j < p; j++) {
			m[i * w + j] = a[i * p + j];
			m[i * w + p + j] = i == j;
			if (fabs(a[i * p + j]) > scale)
				scale = fabs(a[i * p + j]);
		}
	if (scale == 0)
		return -1;
	for (size_t c = 0; c < p; c++) {
		size_t piv = c;
		for (size_t r = c + 1; r < p; r++)
			if (fabs(m[r * w + c]) > fabs(m[piv * w + c]))
				piv = r;
		if (fabs(m[piv * w + c]) < 1e-10 * scale)
			return -1;
		if (piv != c)
			for (size_t j = 0; j < w; j++) {
				double tmp = m[c * w + j];
				m[c * w + j] = m[piv * w + j];
				m[piv * w + j] = tmp;
			}
		double d = m[c * w + c];
		for (size_t j = 0; j < w; j++)
			m[c * w + j] /= d;
		for (size_t r = 0; r < p; r++) {
			if (r == c || m[r * w + c] == 0)
				continue;
			double k = m[r * w + c];
			for (size_t j = 0; j < w; j++)
				m[r * w + j] -= k * m[c * w + j];
		}
	}
	for (size_t i = 0; i < p; i++)
		for (size_t j = 0; j < p; j++)
			inv[i * p + j] = m[i * w + p + j];
	return 0;
}

/* The regressors of row x for the dimensions in f->used: z[0] = 1. */
static void regressors(const struct mem_fit *f, const double *x, double *z)
{
	z[0] = 1;
	for (size_t k = 0; k + 1 < f->p; k++)
		z[k + 1] = log(x[f->used[k]]) - f->centre[k];
}

/* log of what is above base at regressors z. */
static double mu_at(const struct mem_fit *f, const double *beta, const double *z)
{
	double mu = 0;
	for (size_t k = 0; k < f->p; k++)
		mu += beta[k] * z[k];
	return mu;
}

/* Ordinary least squares of t on the regressors of x (the rows not left
 * out: leave NULL, or true to leave row i out): beta, and (X'X)^-1 into
 * f->cov. 0, or -1 when singular. */
static int ols(struct mem_fit *f, const double *x, const double *t, size_t n, const bool *leave, double *beta)
{
	size_t p = f->p;
	double a[MAXP * MAXP] = { 0 }, c[MAXP] = { 0 }, z[MAXP];
	for (size_t i = 0; i < n; i++) {
		if (leave && leave[i])
			continue;
		regressors(f, x + i * f->ndims, z);
		for (size_t j = 0; j < p; j++) {
			c[j] += z[j] * t[i];
			for (size_t k = 0; k < p; k++)
				a[j * p + k] += z[j] * z[k];
		}
	}
	if (invert(a, p, f->cov) < 0)
		return -1;
	for (size_t j = 0; j < p; j++) {
		beta[j] = 0;
		for (size_t k = 0; k < p; k++)
			beta[j] += f->cov[j * p + k] * c[k];
	}
	return 0;
}

/*
 * The fit with the dimensions in f->used and this base: beta, f->cov,
 * f->sd; censored peaks imputed (raised to the fit) a few rounds. Returns
 * the squared error of log y (exact peaks, and censored ones the fit
 * stays below), or NAN when singular.
 */
static double fit_base(struct mem_fit *f, const double *x, const double *y, const bool *cens, size_t n,
                       double base, double *yeff, double *t, double *beta)
{
	double z[MAXP];
	for (size_t i = 0; i < n; i++)
		yeff[i] = y[i];
	/* the first round on the exact peaks alone when they are enough: a
	 * bound taken as a peak would pull the fit down to itself for good */
	bool exact_first = f->n_censored && n - f->n_censored >= f->p + 1;
	for (int round = 0; round <= IMPUTE_ROUNDS; round++) {
		for (size_t i = 0; i < n; i++)
			t[i] = log(fmax(yeff[i] - base, 1.0));
		if (ols(f, x, t, n, round == 0 && exact_first ? cens : NULL, beta) < 0) {
			if (round == 0 && exact_first) {
				exact_first = false;
				round--;
				continue;
			}
			return NAN;
		}
		if (!f->n_censored)
			break;
		for (size_t i = 0; i < n; i++) {
			if (!cens || !cens[i])
				continue;
			regressors(f, x + i * f->ndims, z);
			yeff[i] = fmax(y[i], base + exp(mu_at(f, beta, z)));
		}
	}
	double score = 0, sse = 0;
	for (size_t i = 0; i < n; i++) {
		regressors(f, x + i * f->ndims, z);
		double mu = mu_at(f, beta, z);
		double pred = base + exp(mu);
		double r = log(y[i]) - log(pred);
		if (!(cens && cens[i]) || pred < y[i])
			score += r * r;
		sse += (t[i] - mu) * (t[i] - mu);
	}
	f->base = base;
	f->sd = sqrt(sse / (double)(n - f->p));
	return score;
}

/*
 * Fit with the dimensions in f->used, the base chosen as the fraction of
 * the smallest exact peak with the least error: a coarse scan (fractions
 * 1 - 2^(-k/2), dense near the top, where a large base with a small
 * varying part lies), then a ternary search between the best one's
 * neighbours. 0, or -1 when singular.
 */
static int fit_bases(struct mem_fit *f, const double *x, const double *y, const bool *cens, size_t n,
                     double ymin, double *beta_out)
{
	double *yeff = xmalloc((n ? n : 1) * sizeof(double)), *t = xmalloc((n ? n : 1) * sizeof(double));
	double beta[MAXP];
	double frac[NBASES + 1];
	int best = -1;
	double best_score = INFINITY;
	for (int k = 0; k <= NBASES; k++) {
		frac[k] = 1 - pow(2, -k / 2.0);
		double s = fit_base(f, x, y, cens, n, ymin * frac[k], yeff, t, beta);
		if (isnan(s)) {
			free(yeff);
			free(t);
			return -1;
		}
		if (s < best_score) {
			best_score = s;
			best = k;
		}
	}
	double a = frac[best > 0 ? best - 1 : 0], b = best < NBASES ? frac[best + 1] : 1 - pow(2, -(NBASES + 2) / 2.0);
	for (int i = 0; i < REFINE_ROUNDS; i++) {
		double m1 = a + (b - a) / 3, m2 = b - (b - a) / 3;
		double s1 = fit_base(f, x, y, cens, n, ymin * m1, yeff, t, beta);
		double s2 = fit_base(f, x, y, cens, n, ymin * m2, yeff, t, beta);
		if (!(s1 <= s2))
			a = m1;
		else
			b = m2;
	}
	double fa = (a + b) / 2;
	if (!(fit_base(f, x, y, cens, n, ymin * fa, yeff, t, beta) <= best_score))
		fit_base(f, x, y, cens, n, ymin * frac[best], yeff, t, beta);
	memcpy(beta_out, beta, sizeof(beta));
	free(yeff);
	free(t);
	return 0;
}

int mem_fit_run(struct mem_fit *f, size_t ndims, const double *x, const double *y, const bool *cens, size_t n)
{
	memset(f, 0, sizeof(*f));
	f->ndims = ndims;
	size_t nd = ndims < MEMFIT_MAX_DIMS ? ndims : MEMFIT_MAX_DIMS;
	f->n = n;
	double ymin = INFINITY;
	for (size_t i = 0; i < n; i++) {
		if (cens && cens[i])
			f->n_censored++;
		else if (y[i] < ymin)
			ymin = y[i];
	}
	if (n < MIN_TRIALS || !isfinite(ymin) || ymin <= 0)
		return 1;

	/* the candidates: dimensions with a positive number in every row, varied */
	size_t cand[MEMFIT_MAX_DIMS], ncand = 0, distinct[MEMFIT_MAX_DIMS];
	for (size_t d = 0; d < nd; d++) {
		f->numeric[d] = true;
		f->seen_lo[d] = INFINITY;
		f->seen_hi[d] = -INFINITY;
		for (size_t i = 0; i < n; i++) {
			double v = x[i * ndims + d];
			if (!(isfinite(v) && v > 0)) {
				f->numeric[d] = false;
				break;
			}
			f->seen_lo[d] = fmin(f->seen_lo[d], v);
			f->seen_hi[d] = fmax(f->seen_hi[d], v);
		}
		if (!f->numeric[d]) {
			f->seen_lo[d] = f->seen_hi[d] = NAN;
			f->varied[d] = true;            /* unknown: pooled */
			continue;
		}
		f->varied[d] = f->seen_hi[d] > f->seen_lo[d];
		if (!f->varied[d])
			continue;
		/* distinct values (n is small: quadratic is fine) */
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			bool seen = false;
			for (size_t j = 0; j < i && !seen; j++)
				seen = x[j * ndims + d] == x[i * ndims + d];
			k += !seen;
		}
		distinct[ncand] = k;
		cand[ncand++] = d;
	}

	double beta[MAXP];
	for (;;) {
		/* too few trials for every candidate: leave out the least varied */
		while (ncand && n < ncand + 3) {
			size_t worst = 0;
			for (size_t k = 1; k < ncand; k++)
				if (distinct[k] <= distinct[worst])
					worst = k;
			cand[worst] = cand[ncand - 1];
			distinct[worst] = distinct[ncand - 1];
			ncand--;
		}
		f->p = ncand + 1;
		for (size_t k = 0; k < ncand; k++) {
			f->used[k] = cand[k];
			double s = 0;
			for (size_t i = 0; i < n; i++)
				s += log(x[i * ndims + cand[k]]);
			f->centre[k] = s / (double)n;
		}
		int rc = fit_bases(f, x, y, cens, n, ymin, beta);
		size_t drop = SIZE_MAX;
		if (rc < 0) {
			if (!ncand)
				return 1;
			drop = ncand - 1;
		} else {
			/* monotone: the most negative exponent goes, and the rest are fitted again */
			double worst = 0;
			for (size_t k = 0; k < ncand; k++)
				if (beta[k + 1] < worst) {
					worst = beta[k + 1];
					drop = k;
				}
		}
		if (drop == SIZE_MAX)
			break;
		cand[drop] = cand[ncand - 1];
		distinct[drop] = distinct[ncand - 1];
		ncand--;
	}
	f->b0 = beta[0];
	for (size_t k = 0; k + 1 < f->p; k++)
		f->coef[f->used[k]] = beta[k + 1];
	f->dof = (int)(n - f->p);
	if (!(f->sd >= MIN_SD))
		f->sd = MIN_SD;
	f->ok = true;
	return 0;
}

bool mem_fit_predict(const struct mem_fit *f, const double *x, struct mem_pred *out)
{
	memset(out, 0, sizeof(*out));
	if (!f->ok)
		return false;
	double z[MAXP];
	for (size_t k = 0; k + 1 < f->p; k++) {
		double v = x[f->used[k]];
		if (!(isfinite(v) && v > 0))
			return false;
	}
	regressors(f, x, z);
	double beta[MAXP];
	beta[0] = f->b0;
	for (size_t k = 0; k + 1 < f->p; k++)
		beta[k + 1] = f->coef[f->used[k]];
	double mu = mu_at(f, beta, z);
	double q = 1;
	for (size_t j = 0; j < f->p; j++)
		for (size_t k = 0; k < f->p; k++)
			q += z[j] * f->cov[j * f->p + k] * z[k];
	double half = mem_t95(f->dof) * f->sd * sqrt(q);
	out->point = f->base + exp(mu);
	out->lo = f->base + exp(mu - half);
	out->hi = f->base + exp(mu + half);
	out->lo = fmin(out->lo, out->point * (1 - FLOOR_FRAC));
	out->hi = fmax(out->hi, out->point * (1 + FLOOR_FRAC));
	out->inside = true;
	for (size_t k = 0; k + 1 < f->p; k++) {
		size_t d = f->used[k];
		out->inside = out->inside && x[d] >= f->seen_lo[d] && x[d] <= f->seen_hi[d];
	}
	/* a numeric dimension the trials all had one value of, and this one
	 * a smaller (or no) number: the fit knows nothing of the difference */
	out->lower_sound = true;
	size_t nd = f->ndims < MEMFIT_MAX_DIMS ? f->ndims : MEMFIT_MAX_DIMS;
	for (size_t d = 0; d < nd; d++)
		if (f->numeric[d] && !f->varied[d] && !(x[d] >= f->seen_lo[d]))
			out->lower_sound = false;
	return true;
}

double mem_fit_largest(const struct mem_fit *f, const double *x, size_t d, double lo, double hi, double budget)
{
	if (!f->ok || d >= MEMFIT_MAX_DIMS || !(f->coef[d] > 0) || !(lo > 0) || !(hi >= lo))
		return NAN;
	double xv[MEMFIT_MAX_DIMS];
	size_t nd = f->ndims < MEMFIT_MAX_DIMS ? f->ndims : MEMFIT_MAX_DIMS;
	memcpy(xv, x, nd * sizeof(double));
	struct mem_pred p;
	xv[d] = hi;
	if (mem_fit_predict(f, xv, &p) && p.hi <= budget)
		return hi;
	xv[d] = lo;
	if (!mem_fit_predict(f, xv, &p) || p.hi > budget)
		return NAN;
	/* bisection on log v: the bound grows with v (the exponent is positive) */
	double a = log(lo), b = log(hi);
	for (int i = 0; i < 60; i++) {
		double m = (a + b) / 2;
		xv[d] = exp(m);
		if (mem_fit_predict(f, xv, &p) && p.hi <= budget)
			a = m;
		else
			b = m;
	}
	return exp(a);
}

/* ---- a sweep's fits ----------------------------------------------------- */

void memmodel_values(size_t ndims, char *const *vals, double *x)
{
	for (size_t d = 0; d < ndims; d++) {
		char *end;
		double v = vals && vals[d] ? strtod(vals[d], &end) : NAN;
		x[d] = vals && vals[d] && end != vals[d] && !*end && isfinite(v) && v > 0 ? v : NAN;
	}
}

void memmodel_build(struct memmodel *m, size_t ndims, const struct trial_row *rows, char *const *const *vals,
                    size_t n, uint64_t budget, size_t max_rows)
{
	memset(m, 0, sizeof(*m));
	m->ndims = ndims;
	size_t cap = max_rows && max_rows < n ? max_rows : n;
	size_t nd = ndims ? ndims : 1;
	double *x = xmalloc((cap ? cap : 1) * nd * sizeof(double));
	double *y = xmalloc((cap ? cap : 1) * sizeof(double));
	bool *cens = xmalloc((cap ? cap : 1) * sizeof(bool));
	for (int w = 0; w < MEM_NWHAT; w++) {
		size_t k = 0;
		for (size_t i = n; i-- > 0 && k < cap;) {
			const struct trial_row *t = &rows[i];
			if (!vals[i])
				continue;
			bool oom = t->status == TRIAL_OOM;
			if (!oom && t->status != TRIAL_OK && t->status != TRIAL_FAILED)
				continue;
			double v;
			bool c = false;
			/* an OOM'd trial never reached its peak: a lower bound, raised
			 * to the budget it ran out of (the host's: its own allocation,
			 * else the sweep's) */
			c = oom;
			if (w == MEM_HOST) {
				double ran_out = t->limit_bytes ? (double)t->limit_bytes : (double)budget;
				v = (double)t->peak_bytes;
				if (oom && t->cause != CAUSE_CUDA_OOM && ran_out > v)
					v = ran_out;
			} else if (w == MEM_GPU) {
				v = (double)t->gpu_peak_bytes;
			} else {
				v = t->growth_bytes_per_step;
				if (oom || cause_is_oom(t->cause))
					continue;
			}
			if (!(isfinite(v) && v > 0))
				continue;
			memmodel_values(ndims, vals[i], x + k * nd);
			y[k] = v;
			cens[k] = c;
			k++;
		}
		mem_fit_run(&m->fit[w], ndims, x, y, cens, k);
	}
	free(x);
	free(y);
	free(cens);
}

bool memmodel_predict(const struct memmodel *m, enum mem_what w, char *const *vals, struct mem_pred *out)
{
	double x[MEMFIT_MAX_DIMS];
	size_t nd = m->ndims < MEMFIT_MAX_DIMS ? m->ndims : MEMFIT_MAX_DIMS;
	memmodel_values(nd, vals, x);
	return mem_fit_predict(&m->fit[w], x, out);
}

double mem_fit_effect(const struct mem_fit *f, size_t d, double v)
{
	if (!f->ok || !(v > 0))
		return NAN;
	double mu = f->b0;
	for (size_t k = 0; k + 1 < f->p; k++)
		if (f->used[k] == d)
			mu += f->coef[d] * (log(v) - f->centre[k]);
	return f->base + exp(mu);
}
