/*
 * analyze.c — the leak judgment: warm-up, robust trend, significance,
 * effect and floor, from a memory series to a verdict with its evidence.
 *
 * Pure computation on arrays (no I/O); the method and the reasons for each
 * choice are in docs/internals/statistics.md. Units: memory in bytes, x in
 * the caller's unit (steps, or seconds when a job marks no steps), slopes in
 * bytes per unit of x.
 *
 * Cost: every step is O(n) or O(n log n) on the raw points, except the
 * pairwise slopes, which run on at most TS_MAX_POINTS block medians (and
 * the warm-up search on at most WARMUP_MAX_POINTS), so 100,000 points take
 * some tens of milliseconds. Scratch memory is at most a few MiB (the
 * 499,500 slopes of 1000 points); allocation failure exits via xmalloc().
 */
#include "core/analyze.h"
#include "util/stats.h"
#include "util/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TS_MAX_POINTS 1000       /* pairwise slopes on at most this many points */
#define WARMUP_MAX_POINTS 300    /* resolution of the warm-up search */
#define WARMUP_CANDIDATES 64     /* starts tried before refining */
#define WARMUP_CHUNK_MIN 6       /* points in the level test's chunk, at least */
#define WARMUP_LEVEL_P 0.001     /* a chunk this unlike the rest is still warm-up */
#define WARMUP_SLOPE_RATIO 1.25  /* a window this much faster than the settled rate is still warm-up */
#define WARMUP_FAR_WIDTHS 3.0    /* "far below the settled band", in band widths */
#define WARMUP_IMMATERIAL 0.1    /* of the growth that matters: a difference this small
                                    cannot change a verdict, so starts no warm-up */
#define WARMUP_SHARE 0.05        /* ... or of the settled growth over the run */
#define ACCEL_RATIO 1.25         /* the second part's rate this many times the first's: accelerates */
#define BEND_MAX_POINTS 300      /* block medians searched for where growth bends upward */
#define BEND_MIN_POINTS 10       /* ... each part at least this many of them */
#define BEND_MIN_SHARE 0.2       /* ... and the second at least this share of the window */
#define FLOOR_QUANTILE 0.05      /* the floor of a window: its 5th percentile */
#define FLOOR_SHARE 0.5          /* the floor must rise at least this share of the trend */
#define SUSTAIN_SHARE 0.5        /* the late growth rate must reach this share */
#define CURVE_Z 2.326            /* concave beyond this many standard errors: settling */
#define SLOW_SHARE 0.9           /* ... and the late rate below this share of the slope */
#define WANDER_RATIO 25.0        /* growth / residual sd beyond any random walk's */
#define Z_975 1.959963984540054  /* normal quantile for a 95% interval */
#define Z_995 2.575829303548901  /* ... for a 99% interval */

const char *verdict_name(enum verdict v)
{
	switch (v) {
	case VERDICT_LEAK: return "leak";
	case VERDICT_NO_LEAK: return "no-leak";
	default: return "inconclusive";
	}
}

void analyze_opts_init(struct analyze_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->min_growth_bytes = 1024.0 * 1024.0;
	o->min_growth_fraction = 0.01;
	o->alpha = 0.01;
	o->min_points = 20;
	o->limit_bytes = 0;
	o->x_unit = "step";
}

/* ---- order statistics ---------------------------------------------------- */

static void swap_d(double *a, double *b)
{
	double t = *a;
	*a = *b;
	*b = t;
}

/*
 * Floyd–Rivest selection on v[left..right]: afterwards v[k] is the value
 * that a full sort would put there, nothing before it is larger and
 * nothing after it smaller. Large ranges first recurse on a small sample
 * range around k, so the partition pivot is close to the answer: about
 * 1.5 comparisons per element. A budget of rounds proportional to log n
 * falls back to sorting what is left, so the worst case stays O(n log n).
 * v must hold no NaN.
 */
static void fr_select(double *v, ptrdiff_t left, ptrdiff_t right, ptrdiff_t k, int budget)
{
	while (right > left) {
		if (budget-- <= 0) {
			sort_doubles(v + left, (size_t)(right - left + 1));
			return;
		}
		if (right - left > 600) {
			double n = (double)(right - left + 1);
			double i = (double)(k - left + 1);
			double z = log(n);
			double s = 0.5 * exp(2 * z / 3);
			double sd = 0.5 * sqrt(z * s * (n - s) / n) * (i - n / 2 < 0 ? -1 : 1);
			ptrdiff_t nl = (ptrdiff_t)fmax((double)left, (double)k - i * s / n + sd);
			ptrdiff_t nr = (ptrdiff_t)fmin((double)right, (double)k + (n - i) * s / n + sd);
			fr_select(v, nl, nr, k, budget);
		}
		double t = v[k];
		ptrdiff_t i = left, j = right;
		swap_d(&v[left], &v[k]);
		if (v[right] > t)
			swap_d(&v[right], &v[left]);
		while (i < j) {
			swap_d(&v[i], &v[j]);
			i++;
			j--;
			while (v[i] < t)
				i++;
			while (v[j] > t)
				j--;
		}
		if (v[left] == t) {
			swap_d(&v[left], &v[j]);
		} else {
			j++;
			swap_d(&v[j], &v[right]);
		}
		if (j <= k)
			left = j + 1;
		if (k <= j)
			right = j - 1;
	}
}

/* The k-th smallest of v[0..n) (0-based), by fr_select(); reorders v. */
static double select_kth(double *v, size_t n, size_t k)
{
	int budget = 16;
	for (size_t m = n; m > 1; m >>= 1)
		budget += 4;
	fr_select(v, 0, (ptrdiff_t)n - 1, (ptrdiff_t)k, budget);
	return v[k];
}

static double min_of(const double *v, size_t n)
{
	double m = v[0];
	for (size_t i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

static double max_of(const double *v, size_t n)
{
	double m = v[0];
	for (size_t i = 1; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

/* Type-7 quantile of v by selection; reorders v. n > 0. */
static double quantile_select(double *v, size_t n, double q)
{
	if (q <= 0)
		return min_of(v, n);
	if (q >= 1)
		return max_of(v, n);
	double h = (double)(n - 1) * q;
	size_t lo = (size_t)floor(h);
	double a = select_kth(v, n, lo);
	if (lo + 1 >= n || h == (double)lo)
		return a;
	double b = min_of(v + lo + 1, n - lo - 1);
	return a + (h - (double)lo) * (b - a);
}

/* Median by selection; reorders v. n > 0. */
static double median_select(double *v, size_t n)
{
	return quantile_select(v, n, 0.5);
}

double median_of(const double *v, size_t n)
{
	if (n == 0)
		return NAN;
	double *c = xmalloc(n * sizeof(*c));
	memcpy(c, v, n * sizeof(*c));
	double m = median_select(c, n);
	free(c);
	return m;
}

/* Type-7 quantile of v[0..n) without touching v; tmp holds n doubles. */
static double quantile_copy(const double *v, size_t n, double q, double *tmp)
{
	memcpy(tmp, v, n * sizeof(*tmp));
	return quantile_select(tmp, n, q);
}

/* ---- scratch space ------------------------------------------------------- */

/* A buffer reused across calls; released with work_release(). */
struct work {
	double *buf;
	size_t cap;
};

static double *work_get(struct work *w, size_t n)
{
	if (n > w->cap) {
		free(w->buf);
		w->cap = n > 2 * w->cap ? n : 2 * w->cap;
		w->buf = xmalloc(w->cap * sizeof(*w->buf));
	}
	return w->buf;
}

static void work_release(struct work *w)
{
	free(w->buf);
	w->buf = NULL;
	w->cap = 0;
}

/* ---- Kendall's S, Mann–Kendall ------------------------------------------- */

/*
 * Merge sort of v[0..n) (tmp: n doubles) counting strict inversions: pairs
 * i < j with v[i] > v[j]. Equal values are not inversions.
 */
static double sort_count_inversions(double *v, double *tmp, size_t n)
{
	double inv = 0;
	for (size_t width = 1; width < n; width *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * width) {
			size_t mid = lo + width < n ? lo + width : n;
			size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi) {
				if (v[i] <= v[j]) {
					tmp[k++] = v[i++];
				} else {
					inv += (double)(mid - i);
					tmp[k++] = v[j++];
				}
			}
			while (i < mid)
				tmp[k++] = v[i++];
			while (j < hi)
				tmp[k++] = v[j++];
		}
		memcpy(v, tmp, n * sizeof(*v));
	}
	return inv;
}

/* Tie sums over the runs of equal values of sorted v: Σt(t-1), Σt(t-1)(t-2),
 * Σt(t-1)(2t+5) and the number of tied pairs Σt(t-1)/2. */
struct tie_sums {
	double t1, t2, t25, pairs;
};

static void add_tie_sums(const double *sorted, size_t n, struct tie_sums *ts)
{
	memset(ts, 0, sizeof(*ts));
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && sorted[j] == sorted[i])
			j++;
		double t = (double)(j - i);
		if (t > 1) {
			ts->t1 += t * (t - 1);
			ts->t2 += t * (t - 1) * (t - 2);
			ts->t25 += t * (t - 1) * (2 * t + 5);
			ts->pairs += t * (t - 1) / 2;
		}
		i = j;
	}
}

/* Σ_{i<j} sign(v[j] - v[i]) of the sequence v; sorts a copy in buf. */
static double sequence_s(const double *v, size_t n, double *buf, double *tmp, struct tie_sums *ts)
{
	memcpy(buf, v, n * sizeof(*buf));
	double inv = sort_count_inversions(buf, tmp, n);
	add_tie_sums(buf, n, ts);
	double all = (double)n * (double)(n - 1) / 2;
	double up = all - inv - ts->pairs;
	return up - inv;
}

/*
 * Kendall's S = Σ_{i<j} sign(x_j - x_i) sign(y_j - y_i) and its variance
 * under no association, with ties in x and in y (Kendall 1970).
 * x must be sorted ascending, or NULL for x = 0, 1, 2, ...
 * O(n log n). n >= 0.
 */
static double kendall_s(const double *x, const double *y, size_t n, struct work *w, double *var_s)
{
	*var_s = 0;
	if (n < 2)
		return 0;
	double *buf = work_get(w, 2 * n);
	double *tmp = buf + n;
	struct tie_sums ty, tx = { 0, 0, 0, 0 }, tg;
	double s = sequence_s(y, n, buf, tmp, &ty);

	if (x) {
		/* Pairs with equal x count zero: take out what the plain sequence
		 * counted inside each run of equal x. */
		for (size_t i = 0; i < n;) {
			size_t j = i + 1;
			while (j < n && x[j] == x[i])
				j++;
			if (j - i > 1)
				s -= sequence_s(y + i, j - i, buf, tmp, &tg);
			i = j;
		}
		add_tie_sums(x, n, &tx);
	}

	double nn = (double)n;
	double v = (nn * (nn - 1) * (2 * nn + 5) - tx.t25 - ty.t25) / 18;
	v += tx.t1 * ty.t1 / (2 * nn * (nn - 1));
	if (n > 2)
		v += tx.t2 * ty.t2 / (9 * nn * (nn - 1) * (nn - 2));
	*var_s = v > 0 ? v : 0;
	return s;
}

/* z with the continuity correction, and the two-sided p. */
static double mk_z_from_s(double s, double var_s, double *p)
{
	double z = 0;
	if (var_s > 0) {
		if (s > 0)
			z = (s - 1) / sqrt(var_s);
		else if (s < 0)
			z = (s + 1) / sqrt(var_s);
	}
	if (p)
		*p = erfc(fabs(z) / sqrt(2.0));
	return z;
}

double mann_kendall(const double *y, size_t n, double *p)
{
	struct work w = { NULL, 0 };
	double var_s;
	double s = kendall_s(NULL, y, n, &w, &var_s);
	work_release(&w);
	return mk_z_from_s(s, var_s, p);
}

/* ---- series and block medians -------------------------------------------- */

/* Points sorted by x; start[i] is the raw index where point i's block starts. */
struct series {
	double *x;
	double *y;
	size_t *start;
	size_t n;
};

static void series_alloc(struct series *s, size_t n)
{
	size_t m = n ? n : 1;
	s->x = xmalloc(m * sizeof(*s->x));
	s->y = xmalloc(m * sizeof(*s->y));
	s->start = xmalloc(m * sizeof(*s->start));
	s->n = n;
}

static void series_release(struct series *s)
{
	free(s->x);
	free(s->y);
	free(s->start);
	memset(s, 0, sizeof(*s));
}

/*
 * Reduce x/y[0..n) (sorted by x) to at most max_points block medians:
 * consecutive blocks of equal size (±1), each point the median x and the
 * median y of its block. Shorter series are copied. first is the raw index
 * of x[0], recorded in out->start.
 */
static void reduce_blocks(const double *x, const double *y, size_t n, size_t first,
                          size_t max_points, struct work *w, struct series *out)
{
	if (n <= max_points) {
		series_alloc(out, n);
		if (n) {
			memcpy(out->x, x, n * sizeof(*x));
			memcpy(out->y, y, n * sizeof(*y));
		}
		for (size_t i = 0; i < n; i++)
			out->start[i] = first + i;
		return;
	}
	size_t blocks = max_points;
	series_alloc(out, blocks);
	double *tmp = work_get(w, n / blocks + 2);
	for (size_t b = 0; b < blocks; b++) {
		size_t lo = b * n / blocks, hi = (b + 1) * n / blocks;
		size_t len = hi - lo;
		out->start[b] = first + lo;
		/* x is sorted: its median is the middle of the block */
		out->x[b] = len % 2 ? x[lo + len / 2] : (x[lo + len / 2 - 1] + x[lo + len / 2]) / 2;
		memcpy(tmp, y + lo, len * sizeof(*tmp));
		out->y[b] = median_select(tmp, len);
	}
}

/* ---- Theil–Sen ----------------------------------------------------------- */

/* The slopes of all pairs with distinct x, in w's buffer; their count in *k. */
static double *pair_slopes(const double *x, const double *y, size_t n, struct work *w, size_t *k)
{
	double *sl = work_get(w, n > 1 ? n * (n - 1) / 2 : 1);
	size_t m = 0;
	for (size_t i = 0; i + 1 < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (x[j] != x[i])
				sl[m++] = (y[j] - y[i]) / (x[j] - x[i]);
	*k = m;
	return sl;
}

/* Median of sl[0..k) by selection, leaving sl partitioned at (k-1)/2. */
static double slopes_median(double *sl, size_t k)
{
	size_t p = (k - 1) / 2;   /* lower middle */
	double med = select_kth(sl, k, p);
	if (k % 2 == 0)
		med = (med + min_of(sl + p + 1, k - p - 1)) / 2;
	return med;
}

/* Theil–Sen slope alone on points sorted by x; NAN when no pair has distinct x. */
static double ts_median(const double *x, const double *y, size_t n, struct work *w)
{
	size_t k;
	double *sl = pair_slopes(x, y, n, w, &k);
	return k ? slopes_median(sl, k) : NAN;
}

struct idx_val {
	double v;
	size_t i;
};

static int cmp_idx_val(const void *a, const void *b)
{
	const struct idx_val *p = a, *q = b;
	return (p->v > q->v) - (p->v < q->v);
}

/*
 * Hamed & Rao (1998): the factor n/n* by which serial correlation inflates
 * Var S. From the ranks of the residuals around the slope b, the
 * autocorrelations ρ_k that are significant (|ρ_k| > 1.96/sqrt(n)) enter
 * n/n* = 1 + 2/(n(n-1)(n-2)) Σ (n-k)(n-k-1)(n-k-2) ρ_k. Never below 1: a
 * negative correlation is not allowed to make the test bolder.
 */
static double autocorr_factor(const double *x, const double *y, size_t n, double b)
{
	if (n < 10)
		return 1;
	struct idx_val *t = xmalloc(n * sizeof(*t));
	double *r = xmalloc(n * sizeof(*r));
	for (size_t i = 0; i < n; i++)
		t[i] = (struct idx_val){ y[i] - b * x[i], i };
	qsort(t, n, sizeof(*t), cmp_idx_val);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && t[j].v == t[i].v)
			j++;
		double rank = (double)(i + j + 1) / 2;   /* average rank, 1-based */
		for (size_t q = i; q < j; q++)
			r[t[q].i] = rank;
		i = j;
	}
	double nn = (double)n, mean = (nn + 1) / 2, den = 0;
	for (size_t i = 0; i < n; i++) {
		r[i] -= mean;
		den += r[i] * r[i];
	}
	double sum = 0, sig = Z_975 / sqrt(nn), rho1 = 0;
	size_t positive = 0;   /* lags before the correlation first drops to 0 */
	if (den > 0) {
		for (size_t k = 1; k + 2 < n; k++) {
			double num = 0;
			for (size_t i = 0; i + k < n; i++)
				num += r[i] * r[i + k];
			double rho = num / den;
			if (k == 1)
				rho1 = rho;
			if (positive == k - 1 && rho > 0)
				positive = k;
			if (fabs(rho) > sig) {
				double m = nn - (double)k;
				sum += m * (m - 1) * (m - 2) * rho;
			}
		}
	}
	free(t);
	free(r);
	double f = 1 + 2 * sum / (nn * (nn - 1) * (nn - 2));
	/* For a persistent series (a random walk, a slow AR process: the
	 * correlation stays positive over many lags) Hamed–Rao's sum lets the
	 * negative long-lag correlations that detrending leaves cancel the
	 * short-lag ones; the AR(1) factor (Yue & Wang 2004) from the lag-1
	 * correlation alone does not. A periodic residual (a GC sawtooth)
	 * turns negative within half a period and keeps Hamed–Rao's factor,
	 * which is right for it: whole periods add nothing to S. */
	size_t persist = n / 20 > 5 ? n / 20 : 5;
	if (rho1 > sig && positive > persist) {
		if (rho1 > 0.99)
			rho1 = 0.99;
		double f1 = (1 + rho1) / (1 - rho1);
		if (f1 > f)
			f = f1;
	}
	return f > 1 ? f : 1;
}

/*
 * Whether the growth b·(x[n-1] - x[0]) is so large against the spread of
 * the residuals around it that no serially correlated noise explains it.
 * The most persistent null, a driftless random walk, gives a ratio of
 * fitted growth to residual sd below 20 in 999 of 1000 series at any
 * length (simulated; docs/internals/statistics.md); a leak of 1 MiB a
 * step whose allocator hands memory out in steps of a few MiB gives
 * hundreds. There the autocorrelation correction, which would shrink the
 * effective sample to a handful, is not applied.
 */
static int beyond_wander(const double *x, const double *y, size_t n, double b)
{
	if (n < 10 || !(b > 0))
		return 0;
	double mean = 0, ss = 0;
	for (size_t i = 0; i < n; i++)
		mean += y[i] - b * x[i];
	mean /= (double)n;
	for (size_t i = 0; i < n; i++) {
		double e = y[i] - b * x[i] - mean;
		ss += e * e;
	}
	double sd = sqrt(ss / (double)(n - 1));
	return b * (x[n - 1] - x[0]) > WANDER_RATIO * sd;
}

/* A robust trend with its evidence. */
struct trend {
	double slope, low, high;   /* Theil–Sen, Sen's interval */
	double z, p;               /* Mann–Kendall, two-sided */
	double var_factor;         /* serial-correlation inflation of Var S (1: none) */
};

/*
 * Theil–Sen on points sorted by x: the median of the slopes of all pairs
 * with distinct x, and Sen's (1968) interval: the order statistics of the
 * slopes at ranks (N ∓ C)/2 (+1 for the upper), C = zq·sqrt(Var S), Var S
 * Kendall's variance with ties (zq = 1.96 for 95%); the Mann–Kendall test
 * from the same S and Var S. With autocorr, Var S is first inflated by
 * autocorr_factor(). Returns -1 (and NANs) when no pair has distinct x.
 * O(n^2) in time and space: callers reduce first.
 */
static int trend_fit(const double *x, const double *y, size_t n, struct work *w, double zq,
                     int autocorr, struct trend *t)
{
	t->slope = t->low = t->high = NAN;
	t->z = 0;
	t->p = 1;
	t->var_factor = 1;
	size_t k;
	double *sl = pair_slopes(x, y, n, w, &k);
	if (k == 0)
		return -1;
	double med = slopes_median(sl, k);
	size_t p = (k - 1) / 2;

	/* sl is partitioned at p and needed below: Var S has its own buffer */
	struct work kw = { NULL, 0 };
	double var_s, s = kendall_s(x, y, n, &kw, &var_s);
	work_release(&kw);
	if (autocorr && !beyond_wander(x, y, n, med))
		t->var_factor = autocorr_factor(x, y, n, med);
	var_s *= t->var_factor;
	t->z = mk_z_from_s(s, var_s, &t->p);

	double c = zq * sqrt(var_s);
	double kk = (double)k;
	/* the ranks, each within 1..k (k >= 1) */
	double r_lo = fmin(fmax(nearbyint((kk - c) / 2), 1), kk);
	double r_hi = fmin(fmax(nearbyint((kk + c) / 2 + 1), 1), kk);
	size_t i_lo = (size_t)r_lo - 1, i_hi = (size_t)r_hi - 1;
	t->slope = med;
	t->low = i_lo <= p ? select_kth(sl, p + 1, i_lo) : select_kth(sl + p, k - p, i_lo - p);
	t->high = i_hi >= p ? select_kth(sl + p, k - p, i_hi - p) : select_kth(sl, p + 1, i_hi);
	return 0;
}

struct xy {
	double x, y;
	size_t i;
};

static int cmp_xy(const void *a, const void *b)
{
	const struct xy *p = a, *q = b;
	if (p->x != q->x)
		return p->x < q->x ? -1 : 1;
	return (p->i > q->i) - (p->i < q->i);
}

/*
 * Copy the finite points of x/y into a series sorted by x (stable: equal x
 * keep their order). Returns the number kept.
 */
static size_t sorted_finite(const double *x, const double *y, size_t n, struct series *out)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(x[i]) && isfinite(y[i]))
			m++;
	series_alloc(out, m);
	int sorted = 1;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(x[i]) || !isfinite(y[i]))
			continue;
		out->x[k] = x[i];
		out->y[k] = y[i];
		out->start[k] = k;
		if (k && out->x[k] < out->x[k - 1])
			sorted = 0;
		k++;
	}
	if (!sorted) {
		struct xy *t = xmalloc(m * sizeof(*t));
		for (size_t i = 0; i < m; i++)
			t[i] = (struct xy){ out->x[i], out->y[i], i };
		qsort(t, m, sizeof(*t), cmp_xy);
		for (size_t i = 0; i < m; i++) {
			out->x[i] = t[i].x;
			out->y[i] = t[i].y;
		}
		free(t);
	}
	return m;
}

double theil_sen(const double *x, const double *y, size_t n, double *low, double *high)
{
	struct series raw, s;
	struct work w = { NULL, 0 };
	size_t m = sorted_finite(x, y, n, &raw);
	reduce_blocks(raw.x, raw.y, m, 0, TS_MAX_POINTS, &w, &s);
	struct trend t;
	trend_fit(s.x, s.y, s.n, &w, Z_975, 0, &t);
	if (low)
		*low = t.low;
	if (high)
		*high = t.high;
	series_release(&s);
	series_release(&raw);
	work_release(&w);
	return t.slope;
}

/* ---- settling: is the growth slowing down? ------------------------------- */

struct concavity {
	double z;          /* rank association of the residuals with the hump shape */
	double late;       /* slope between the last two thirds */
	double late_low, late_high;   /* its 95% interval */
};

/*
 * Does the growth of x/y[0..n) slow down? Around the line of slope b the
 * residuals e = y - b·x of a straight trend have no shape, while a growth
 * that slows down (a cache filling to its cap) leaves them arched: the
 * ends below, the middle above. z is the Mann–Kendall z of e against the
 * arch u = -(x - x_mid)^2 (Kendall's S with ties, since u ties in
 * symmetric pairs): large and positive when the growth slows down.
 *
 * Also the slope between the last two thirds, b + (R3 - R2)/Δx with R the
 * thirds' median residuals, and its 95% interval from a robust scale of e
 * (1.4826·MAD) and the median's standard error 1.2533·σ/sqrt(k).
 * tmp holds 2n doubles. n >= 9.
 */
static struct concavity concavity(const double *x, const double *y, size_t n, double b, double *tmp)
{
	struct concavity cv = { 0, NAN, -INFINITY, INFINITY };
	double *e = tmp, *t = tmp + n;
	for (size_t i = 0; i < n; i++)
		e[i] = y[i] - b * x[i];

	/* the arch */
	struct xy *ue = xmalloc(n * sizeof(*ue));
	double xm = (x[0] + x[n - 1]) / 2;
	for (size_t i = 0; i < n; i++)
		ue[i] = (struct xy){ -(x[i] - xm) * (x[i] - xm), e[i], i };
	qsort(ue, n, sizeof(*ue), cmp_xy);
	double *us = xmalloc(2 * n * sizeof(*us)), *es = us + n;
	for (size_t i = 0; i < n; i++) {
		us[i] = ue[i].x;
		es[i] = ue[i].y;
	}
	struct work kw = { NULL, 0 };
	double var_s, s = kendall_s(us, es, n, &kw, &var_s);
	cv.z = mk_z_from_s(s, var_s, NULL);
	work_release(&kw);
	free(us);
	free(ue);

	/* the late slope */
	size_t k = n / 3, mid = n - 2 * k;
	double med = quantile_copy(e, n, 0.5, t);
	for (size_t i = 0; i < n; i++)
		t[i] = fabs(e[i] - med);
	double sigma = 1.4826 * median_select(t, n);
	double r2 = quantile_copy(e + k, mid, 0.5, t);
	double r3 = quantile_copy(e + k + mid, k, 0.5, t);
	double x2 = quantile_copy(x + k, mid, 0.5, t);
	double x3 = quantile_copy(x + k + mid, k, 0.5, t);
	double se_end = 1.2533 * sigma / sqrt((double)k);
	double se_mid = 1.2533 * sigma / sqrt((double)mid);
	if (x3 > x2) {
		double d = Z_975 * sqrt(se_mid * se_mid + se_end * se_end) / (x3 - x2);
		cv.late = b + (r3 - r2) / (x3 - x2);
		cv.late_low = cv.late - d;
		cv.late_high = cv.late + d;
	}
	return cv;
}

/* ---- cycles: a sawtooth (garbage collection) ---------------------------- */

/*
 * A job that frees memory in bulk every so often (reference cycles and
 * gc.collect(), a cache flushed when full) makes a sawtooth: memory climbs
 * step by step and falls back at once. Judged as a trend, the phase at
 * which the run starts and ends tilts the line by a fraction of the
 * sawtooth's height, far more than a leak that matters on a small job. A
 * sawtooth is judged by what a leak would change: the floors its falls
 * reach and the peaks before them.
 *
 * A fall is a run of consecutive decreases (equal samples inside it
 * allowed: one taken mid-fall) whose total is large against the
 * range of the series (a quarter of its 5th–95th percentile span) and
 * against the ordinary point-to-point change (four times the 75th
 * percentile of |Δy|), and that comes mostly at once (its largest single
 * drop at least half of it: a collection frees in one step, a sample
 * taken mid-fall splits it in two, while AR(1) noise adds up such falls
 * from runs of ordinary decreases); noise whose falls are that large
 * against its own changes has no such range, and a plateau with rare
 * dips climbs back in one step, which a sawtooth does not (no single rise
 * in a cycle is more than half the median fall). A cycle runs from the low point after one
 * fall to the point before the next.
 */
#define CYCLE_RANGE_SHARE 0.25   /* a fall: at least this share of the 5-95% range */
#define CYCLE_CHANGE_TIMES 4.0   /* ... and this many times the 75th percentile of |dy| */
#define CYCLE_RISE_SHARE 0.5     /* no single rise in a cycle above this share of a fall */
#define CYCLE_DROP_SHARE 0.5     /* a fall's largest single drop: at least this share of it */
#define CYCLES_MIN 5             /* whole cycles needed to judge by cycles */

struct cycles {
	size_t count;               /* whole cycles */
	size_t first;               /* raw index where the first one starts */
	double period;              /* median length of a whole cycle, x units */
	double span;                /* x from the first cycle's start to the end */
	double baseline;            /* median floor */
	struct trend floor, peak;   /* trends of the floors and the peaks */
	double floor_range;         /* highest floor less the lowest */
	double floor_lift;          /* the rise of the floors' lower quartile from
	                             * the first half of the cycles to the second,
	                             * scaled to the span */
	double tail_peak;           /* the highest point after the last fall */
	double peak_max;            /* the highest peak of the whole cycles */
};

/* Find a sawtooth in raw[0..n); 1 with *cy filled when there are at least
 * CYCLES_MIN whole cycles, 0 otherwise. */
static int find_cycles(const struct series *raw, struct work *w, struct cycles *cy)
{
	size_t n = raw->n;
	const double *x = raw->x, *y = raw->y;
	memset(cy, 0, sizeof(*cy));
	if (n < 4 * (CYCLES_MIN + 1))
		return 0;
	double *tmp = work_get(w, n);
	double range = quantile_copy(y, n, 0.95, tmp) - quantile_copy(y, n, 0.05, tmp);
	for (size_t i = 1; i < n; i++)
		tmp[i - 1] = fabs(y[i] - y[i - 1]);
	double change = quantile_select(tmp, n - 1, 0.75);
	double big = fmax(CYCLE_RANGE_SHARE * range, CYCLE_CHANGE_TIMES * change);
	if (!(range > 0) || !(big > 0))
		return 0;

	/* the falls: low[k] is the index of the low point that ends fall k */
	size_t *low = xmalloc(n * sizeof(*low)), nf = 0;
	double *fall = xmalloc(n * sizeof(*fall));
	for (size_t i = 1; i < n;) {
		if (!(y[i] < y[i - 1])) {
			i++;
			continue;
		}
		size_t j = i;
		while (j + 1 < n && y[j + 1] <= y[j])   /* a sample taken mid-fall */
			j++;
		while (j > i && y[j] == y[j - 1])
			j--;
		double f = y[i - 1] - y[j], drop = 0;
		for (size_t k = i; k <= j; k++)
			drop = fmax(drop, y[k - 1] - y[k]);
		if (f >= big && drop >= CYCLE_DROP_SHARE * f) {
			low[nf] = j;
			fall[nf++] = f;
		}
		i = j + 1;
	}
	int found = 0;
	if (nf < CYCLES_MIN + 1)
		goto out;
	size_t whole = nf - 1;
	double med_fall = quantile_copy(fall, nf, 0.5, tmp);
	/* climbs, not jumps: no single rise inside a cycle near a fall's size */
	for (size_t i = low[0] + 1; i < n; i++)
		if (y[i] - y[i - 1] > CYCLE_RISE_SHARE * med_fall)
			goto out;
	/* the cycles go on to the end: what follows the last fall is not much
	 * longer than the longest cycle */
	double longest = 0;
	for (size_t k = 0; k < whole; k++)
		longest = fmax(longest, x[low[k + 1]] - x[low[k]]);
	if (x[n - 1] - x[low[nf - 1]] > 2 * longest)
		goto out;

	/* floors (whole cycles and what follows the last fall) and peaks */
	double *fx = xmalloc(2 * nf * sizeof(*fx)), *fy = fx + nf;
	double *px = xmalloc(2 * nf * sizeof(*px)), *py = px + nf;
	for (size_t k = 0; k < nf; k++) {
		size_t a = low[k], b = k + 1 < nf ? low[k + 1] - 1 : n - 1;   /* the cycle, inclusive */
		size_t lo = a, hi = a;
		for (size_t i = a; i <= b; i++) {
			if (y[i] < y[lo])
				lo = i;
			if (y[i] > y[hi])
				hi = i;
		}
		fx[k] = x[lo];
		fy[k] = y[lo];
		if (k + 1 < nf) {
			px[k] = x[hi];
			py[k] = y[hi];
			cy->peak_max = k ? fmax(cy->peak_max, y[hi]) : y[hi];
		} else {
			cy->tail_peak = y[hi];
		}
	}
	for (size_t k = 0; k < whole; k++)
		tmp[k] = x[low[k + 1]] - x[low[k]];
	cy->period = quantile_select(tmp, whole, 0.5);
	cy->count = whole;
	cy->first = low[0];
	cy->span = x[n - 1] - x[low[0]];
	cy->baseline = quantile_copy(fy, nf, 0.5, tmp);
	cy->floor_range = max_of(fy, nf) - min_of(fy, nf);
	/* a floor is where a fall ended; a sample taken before the collector
	 * finished, or one that freed less, leaves it higher, never lower:
	 * the lower quartile of each half of the floors is the floor there */
	size_t fh = nf / 2;
	double q1 = quantile_copy(fy, fh, 0.25, tmp), q2 = quantile_copy(fy + fh, nf - fh, 0.25, tmp);
	double x1 = quantile_copy(fx, fh, 0.5, tmp), x2 = quantile_copy(fx + fh, nf - fh, 0.5, tmp);
	cy->floor_lift = x2 > x1 ? (q2 - q1) * (x[n - 1] - x[low[0]]) / (x2 - x1) : INFINITY;
	struct series fs, ps;
	struct work tw = { NULL, 0 };
	reduce_blocks(fx, fy, nf, 0, TS_MAX_POINTS, &tw, &fs);
	reduce_blocks(px, py, whole, 0, TS_MAX_POINTS, &tw, &ps);
	found = trend_fit(fs.x, fs.y, fs.n, &tw, Z_975, 1, &cy->floor) == 0 &&
	        trend_fit(ps.x, ps.y, ps.n, &tw, Z_975, 1, &cy->peak) == 0 && cy->span > 0;
	series_release(&fs);
	series_release(&ps);
	work_release(&tw);
	free(fx);
	free(px);
out:
	free(low);
	free(fall);
	return found;
}

/* ---- warm-up --------------------------------------------------------------- */

/*
 * Two-sided Mann–Whitney p of a[0..na) against b[0..nb) (normal
 * approximation; ties count one half and the variance is not reduced for
 * them, which only makes the test more cautious).
 */
static double mann_whitney_p(const double *a, size_t na, const double *b, size_t nb)
{
	if (!na || !nb)
		return 1;
	double u = 0;
	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++)
			u += a[i] > b[j] ? 1.0 : a[i] == b[j] ? 0.5 : 0.0;
	double fa = (double)na, fb = (double)nb;
	double sd = sqrt(fa * fb * (fa + fb + 1) / 12);
	double z = (u - fa * fb / 2) / sd;
	return erfc(fabs(z) / sqrt(2.0));
}

struct warmup_ctx {
	const struct series *c;   /* the (reduced) series being searched */
	double ref_b;             /* settled slope (last third) */
	double ref_low, ref_high; /* ... its interval */
	double immaterial;        /* a difference too small to matter (WARMUP_IMMATERIAL) */
	size_t half, chunk;
	double *tmp;              /* scratch: 2·c->n doubles */
	struct work *w;
};

/* Is the series from point v on consistent with the settled regime? */
static int warmup_accept(const struct warmup_ctx *k, size_t v)
{
	const struct series *c = k->c;
	size_t len = c->n - v;
	if (v >= k->half)
		return 1;
	double b = ts_median(c->x + v, c->y + v, len, k->w);
	if (isnan(b))
		return 1;
	/* slope: the window's robust slope within the settled slope's
	 * interval, widened by a difference too small to matter over it, or
	 * less than WARMUP_SLOPE_RATIO times the settled slope: a leak whose
	 * rate wanders by a tenth (the allocator's doing: 1.46, 1.82, then
	 * 1.56 MiB a step in the bundled demo) has no warm-up, and was given
	 * 339 of 800 steps of one */
	double span = c->x[c->n - 1] - c->x[v];
	double tol = span > 0 ? k->immaterial / span : 0;
	if (b > k->ref_high + tol && b > WARMUP_SLOPE_RATIO * k->ref_b)
		return 0;
	/* settling: the window's growth must not slow down, unless even the
	 * lower bound of its late rate is short of its slope by a difference
	 * too small to matter over it (memory of almost no noise, a leak in
	 * whole pages, makes an arch of a few pages significant) */
	if (len >= 9) {
		struct concavity cv = concavity(c->x + v, c->y + v, len, b, k->tmp);
		if (cv.z > CURVE_Z && !((b - cv.late_low) * span < k->immaterial))
			return 0;
	}
	/* level: around the window's own trend, its first chunk against the
	 * rest of it, lower and by a difference that matters (without noise,
	 * a page is significant) */
	if (len < 2 * k->chunk)
		return 1;
	double *r = k->tmp, *t = k->tmp + len;
	for (size_t i = 0; i < len; i++)
		r[i] = c->y[v + i] - b * c->x[v + i];
	if (mann_whitney_p(r, k->chunk, r + k->chunk, len - k->chunk) >= WARMUP_LEVEL_P)
		return 1;
	double shift = quantile_copy(r, k->chunk, 0.5, t) - quantile_copy(r + k->chunk, len - k->chunk, 0.5, t);
	return shift > -k->immaterial;
}

/*
 * The warm-up: the earliest start v such that the series from v on agrees
 * with its last third (the settled regime): no point before v lies far
 * below the settled band, the robust slope from v is within the settled
 * slope's 99% interval, the growth from v does not slow down, and the
 * first chunk from v is not shifted against the rest (rank test). At most
 * half the series. Works on at most WARMUP_MAX_POINTS block medians;
 * returns a raw index.
 */
static size_t find_warmup(const struct series *raw, const struct analyze_opts *o, struct work *w)
{
	size_t n = raw->n;
	if (n < 3 * WARMUP_CHUNK_MIN)
		return 0;
	struct series c;
	reduce_blocks(raw->x, raw->y, n, 0, WARMUP_MAX_POINTS, w, &c);
	size_t m = c.n, half = m / 2, ref = m - m / 3;
	struct work tw = { NULL, 0 };
	struct trend rt;
	size_t found = 0;
	if (trend_fit(c.x + ref, c.y + ref, m - ref, &tw, Z_995, 1, &rt) < 0)
		goto out;
	double ref_b = rt.slope, ref_low = rt.low, ref_high = rt.high;

	double *r = xmalloc(m * sizeof(*r));
	double *tmp = xmalloc(2 * m * sizeof(*tmp));
	double ymax = 0;
	for (size_t i = 0; i < m; i++) {
		r[i] = c.y[i] - ref_b * c.x[i];
		if (fabs(c.y[i]) > ymax)
			ymax = fabs(c.y[i]);
	}
	/* the settled band: the reference's residuals from its own trend */
	double q05 = quantile_copy(r + ref, m - ref, FLOOR_QUANTILE, tmp);
	double q50 = quantile_copy(r + ref, m - ref, 0.5, tmp);
	double width = q50 - q05;
	if (width < 1e-9 * ymax + 1)
		width = 1e-9 * ymax + 1;
	double xc = quantile_copy(c.x + ref, m - ref, 0.5, tmp);
	double floor_late = quantile_copy(c.y + ref, m - ref, FLOOR_QUANTILE, tmp);
	double thr = o->min_growth_fraction * (floor_late > 0 ? floor_late : 0);
	if (thr < o->min_growth_bytes)
		thr = o->min_growth_bytes;

	/* no window starts before a point far below the settled band, the
	 * band widened by what the slope's uncertainty makes of the distance;
	 * "far" is at least a difference that matters (memory that moves by
	 * whole pages makes a band of no width) */
	double immaterial = fmax(WARMUP_IMMATERIAL * thr, WARMUP_SHARE * fmax(ref_b, 0) * (c.x[m - 1] - c.x[0]));
	size_t start = 0;
	for (size_t i = 0; i < half; i++) {
		double far = q05 - fmax(WARMUP_FAR_WIDTHS * width, immaterial) - (ref_high - ref_low) / 2 * (xc - c.x[i]);
		if (r[i] < far)
			start = i + 1;
	}

	struct warmup_ctx k = {
		.c = &c, .ref_b = ref_b, .ref_low = ref_low, .ref_high = ref_high, .immaterial = immaterial, .half = half,
		.chunk = m / 20 > WARMUP_CHUNK_MIN ? m / 20 : WARMUP_CHUNK_MIN, .tmp = tmp, .w = &tw,
	};
	size_t step = (half - (start < half ? start : half)) / WARMUP_CANDIDATES + 1;
	found = half;
	size_t rejected = start;   /* candidates before this one were rejected */
	for (size_t v = start; v < half; v += step) {
		if (warmup_accept(&k, v)) {
			found = v;
			/* refine between the last rejected candidate and v */
			for (size_t u = rejected; u < v; u++)
				if (warmup_accept(&k, u)) {
					found = u;
					break;
				}
			break;
		}
		rejected = v + 1;
	}
	free(r);
	free(tmp);
out:
	found = found < m ? c.start[found] : n;
	series_release(&c);
	work_release(&tw);
	return found <= n / 2 ? found : n / 2;
}

/* ---- the judgment ------------------------------------------------------------ */

static const char *unit_name(const struct analyze_opts *o)
{
	if (!o->x_unit || !strcmp(o->x_unit, "step"))
		return "step";
	if (!strcmp(o->x_unit, "s"))
		return "second";
	return o->x_unit;
}

static const char *points_name(const struct analyze_opts *o)
{
	return strcmp(unit_name(o), "step") ? "points" : "steps";
}

static void fmt_p(char *buf, size_t sz, double p)
{
	if (p < 0.001)
		snprintf(buf, sz, "p < 0.001");
	else
		snprintf(buf, sz, "p = %.2g", p);
}

static void fmt_x(char *buf, size_t sz, double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		snprintf(buf, sz, "%.0f", v);
	else
		snprintf(buf, sz, "%.3g", v);
}

static void set_reason(struct analysis *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(struct analysis *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->reason, sizeof(a->reason), fmt, ap);
	va_end(ap);
}

/* Quantiles of the per-point change, peak and last value. */
static void describe(const struct series *s, struct work *w, struct analysis *a)
{
	size_t n = s->n;
	if (n == 0)
		return;
	a->peak_bytes = s->y[0];
	a->peak_x = s->x[0];
	for (size_t i = 1; i < n; i++)
		if (s->y[i] > a->peak_bytes) {
			a->peak_bytes = s->y[i];
			a->peak_x = s->x[i];
		}
	a->last_bytes = s->y[n - 1];
	if (n < 2)
		return;
	double *d = work_get(w, n - 1);
	for (size_t i = 1; i < n; i++)
		d[i - 1] = s->y[i] - s->y[i - 1];
	static const double qs[5] = { 0, 0.25, 0.5, 0.75, 1 };
	for (int i = 0; i < 5; i++)
		a->q[i] = quantile_select(d, n - 1, qs[i]);
}

/*
 * The floor quantile of v[0..k) with a distribution-free 95% interval: the
 * order statistics at ranks k·q ∓ 1.96·sqrt(k·q·(1-q)) (the binomial
 * interval for a quantile). tmp holds k doubles.
 */
static double floor_of(const double *v, size_t k, double *tmp, double *low, double *high)
{
	double q = FLOOR_QUANTILE, kk = (double)k;
	double d = Z_975 * sqrt(kk * q * (1 - q));
	double r_lo = floor(kk * q - d), r_hi = ceil(kk * q + d) + 1;
	if (r_lo < 1)
		r_lo = 1;
	if (r_hi > kk)
		r_hi = kk;
	memcpy(tmp, v, k * sizeof(*tmp));
	*low = select_kth(tmp, k, (size_t)r_lo - 1);
	*high = select_kth(tmp, k, (size_t)r_hi - 1);
	return quantile_select(tmp, k, q);
}

/*
 * The floor at the start of raw[from..n) (its first third) and its rise to
 * the last third, scaled to the whole window, with a conservative 95%
 * interval of the rise.
 */
static void floor_rise(const struct series *raw, size_t from, struct work *w, double *baseline,
                       double *rise, double *rise_low, double *rise_high)
{
	size_t len = raw->n - from, third = len / 3;
	if (third < 1)
		third = 1;
	const double *x = raw->x + from, *y = raw->y + from;
	double *tmp = work_get(w, third);
	double l1, h1, l3, h3;
	double f1 = floor_of(y, third, tmp, &l1, &h1);
	double f3 = floor_of(y + len - third, third, tmp, &l3, &h3);
	double x1 = quantile_copy(x, third, 0.5, tmp);
	double x3 = quantile_copy(x + len - third, third, 0.5, tmp);
	double span = x[len - 1] - x[0];
	double scale = x3 > x1 ? span / (x3 - x1) : 1;
	*baseline = f1;
	*rise = (f3 - f1) * scale;
	*rise_low = (l3 - h1) * scale;
	*rise_high = (h3 - l1) * scale;
}

/* The standard deviation of the residuals of a and b, each around its own
 * line of slope ba, bb (each centred on its mean), pooled. */
static double pooled_sd(const struct series *a, double ba, const struct series *b, double bb)
{
	double ss = 0;
	size_t df = 0;
	const struct series *s[2] = { a, b };
	double sl[2] = { ba, bb };
	for (int k = 0; k < 2; k++) {
		double mean = 0;
		for (size_t i = 0; i < s[k]->n; i++)
			mean += s[k]->y[i] - sl[k] * s[k]->x[i];
		mean /= (double)s[k]->n;
		for (size_t i = 0; i < s[k]->n; i++) {
			double e = s[k]->y[i] - sl[k] * s[k]->x[i] - mean;
			ss += e * e;
		}
		df += s[k]->n - 1;
	}
	return sqrt(ss / (double)df);
}

/*
 * Where a line through raw[from..n) bends upward most: the split of the
 * window (its block medians, at most BEND_MAX_POINTS) into a first part of
 * at least BEND_MIN_POINTS and a second of at least BEND_MIN_SHARE of it
 * whose two least-squares lines leave the least squared residual. A raw
 * index, or n when the window is too short to split.
 */
static size_t find_bend(const struct series *raw, size_t from, struct work *w)
{
	size_t len = raw->n - from;
	struct series c;
	reduce_blocks(raw->x + from, raw->y + from, len, from, BEND_MAX_POINTS, w, &c);
	size_t m = c.n, last = m - (size_t)ceil(BEND_MIN_SHARE * (double)m), best = raw->n;
	if (m < 2 * BEND_MIN_POINTS || last < BEND_MIN_POINTS)
		goto out;
	/* prefix sums, x and y centred for accuracy */
	double x0 = c.x[0], y0 = c.y[0];
	double *ps = xmalloc(5 * (m + 1) * sizeof(*ps));
	double *sx = ps, *sy = ps + m + 1, *sxx = ps + 2 * (m + 1), *sxy = ps + 3 * (m + 1), *syy = ps + 4 * (m + 1);
	sx[0] = sy[0] = sxx[0] = sxy[0] = syy[0] = 0;
	for (size_t i = 0; i < m; i++) {
		double dx = c.x[i] - x0, dy = c.y[i] - y0;
		sx[i + 1] = sx[i] + dx;
		sy[i + 1] = sy[i] + dy;
		sxx[i + 1] = sxx[i] + dx * dx;
		sxy[i + 1] = sxy[i] + dx * dy;
		syy[i + 1] = syy[i] + dy * dy;
	}
	double best_sse = INFINITY;
	for (size_t k = BEND_MIN_POINTS; k <= last; k++) {
		double sse = 0;
		size_t part[2][2] = { { 0, k }, { k, m } };
		for (int q = 0; q < 2; q++) {
			size_t a = part[q][0], b = part[q][1];
			double nn = (double)(b - a);
			double mx = (sx[b] - sx[a]) / nn, my = (sy[b] - sy[a]) / nn;
			double vxx = (sxx[b] - sxx[a]) - nn * mx * mx;
			double vxy = (sxy[b] - sxy[a]) - nn * mx * my;
			double vyy = (syy[b] - syy[a]) - nn * my * my;
			sse += vxx > 0 ? vyy - vxy * vxy / vxx : vyy;
		}
		if (sse < best_sse) {
			best_sse = sse;
			best = c.start[k];
		}
	}
	free(ps);
out:
	series_release(&c);
	return best;
}

/*
 * Does the growth of raw[from..n) speed up, or start late? The window is
 * split where it bends upward most (find_bend()), and the Theil–Sen rates
 * of the two parts, each with its 95% interval, must differ: the second's
 * lower bound above the first's upper bound, at least ACCEL_RATIO times
 * it, and by a difference that matters over the second part; and both the
 * second part's growth and the extra growth the bend makes over it beyond
 * any random walk's wander (WANDER_RATIO times the residual sd, as in
 * beyond_wander(): a leak riding on a wandering heap has halves whose
 * rates differ by a third, a stretch of a random walk turns upward). The
 * second part is then judged on its own; the first is no warm-up: it
 * grows too, only slower (accelerates), or not at all (a leak that starts
 * late, which one line through the whole window would hide: its
 * residuals, bent, read as serial correlation). *onset is 1 then.
 */
static int accelerates(const struct series *raw, size_t from, double thr, struct work *w,
                       struct trend *t1, struct trend *t2, size_t *second, int *onset)
{
	size_t n = raw->n;
	*onset = 0;
	if (n - from < 2 * BEND_MIN_POINTS)
		return 0;
	size_t h = find_bend(raw, from, w);
	if (h >= n)
		return 0;
	const double *x = raw->x + from, *y = raw->y + from;
	size_t k = h - from, len = n - from;
	double span2 = x[len - 1] - x[k];
	struct series s1, s2;
	reduce_blocks(x, y, k, 0, TS_MAX_POINTS, w, &s1);
	reduce_blocks(x + k, y + k, len - k, 0, TS_MAX_POINTS, w, &s2);
	int ok = trend_fit(s1.x, s1.y, s1.n, w, Z_975, 1, t1) == 0 &&
	         trend_fit(s2.x, s2.y, s2.n, w, Z_975, 1, t2) == 0 &&
	         t2->low > t1->high && t2->slope > ACCEL_RATIO * fmax(t1->slope, 0) &&
	         (t2->slope - t1->slope) * span2 >= thr && beyond_wander(s2.x, s2.y, s2.n, t2->slope) &&
	         (t2->slope - t1->slope) * span2 > WANDER_RATIO * pooled_sd(&s1, t1->slope, &s2, t2->slope);
	/* flat before: the first part's growth, at its upper bound, does not matter */
	*onset = ok && t1->high * (x[k] - x[0]) < thr;
	series_release(&s1);
	series_release(&s2);
	*second = h;
	return ok;
}

/*
 * The judgment of a sawtooth by its cycles (find_cycles()): no-leak when
 * the upper bounds of both the floors' and the peaks' growth over the
 * cycles stay below what matters (and nothing after the last fall climbs
 * above the peaks); leak when the floors rise significantly and their
 * lower bound matters. Returns 1 with *a filled then, 0 to judge the
 * series as a trend (cycle_period and cycles are filled either way).
 */
static int judge_cycles(const struct series *raw, const struct cycles *cy, const struct analyze_opts *o,
                        struct analysis *a)
{
	double thr = fmax(o->min_growth_bytes, o->min_growth_fraction * fmax(cy->baseline, 0));
	double span = cy->span;
	const struct trend *f = &cy->floor, *p = &cy->peak;
	a->cycle_period = cy->period;
	a->cycles = cy->count;
	/* floors: the upper bound of their growth, or no significant rise and
	 * either all of them within less than what matters or their lower
	 * quartile rising less (ten floors that wander by 0.7 MiB leave an
	 * upper bound near 1 MiB; one collection that freed less, 5 MiB); peaks (which vary with
	 * the period when it is irregular): no significant rise, or an upper
	 * bound below what matters */
	int floor_up = f->p < o->alpha && f->z > 0, peak_up = p->p < o->alpha && p->z > 0;
	int flat = (f->high * span < thr || (fmin(cy->floor_range, cy->floor_lift) < thr && !floor_up)) &&
	           (p->high * span < thr || !peak_up) && cy->tail_peak < cy->peak_max + thr;
	int rising = floor_up && f->low * span >= thr;
	if (!flat && !rising)
		return 0;
	a->warmup_points = 0;
	a->warmup_end_x = a->window_from_x = raw->x[0];
	a->window_x = span;
	a->threshold_bytes = thr;
	a->baseline_bytes = cy->baseline;
	a->floor_growth_bytes = f->slope * span;
	a->slope = f->slope;
	a->slope_low = f->low;
	a->slope_high = f->high;
	a->mk_z = f->z;
	a->mk_p = f->p;
	a->autocorr_factor = f->var_factor;
	const char *unit = unit_name(o);
	char per[32], g1[32], g2[32], pv[32];
	fmt_x(per, sizeof(per), cy->period >= 10 ? nearbyint(cy->period) : cy->period);
	if (flat) {
		a->verdict = VERDICT_NO_LEAK;
		set_reason(a, "memory rises and falls in cycles of ~%s %ss; floors and peaks do not rise (floors %s over %zu cycles; %s matters)",
		           per, unit, fmt_bytes(g1, sizeof(g1), f->slope * span), cy->count, fmt_bytes(g2, sizeof(g2), thr));
		return 1;
	}
	a->verdict = VERDICT_LEAK;
	fmt_p(pv, sizeof(pv), f->p);
	set_reason(a, "memory rises and falls in cycles of ~%s %ss and its floor rises %s per %s (%s)",
	           per, unit, fmt_bytes(g1, sizeof(g1), f->slope), unit, pv);
	if (o->limit_bytes > 0 && f->slope > 0) {
		double to_limit = (o->limit_bytes - a->last_bytes) / f->slope;
		a->projected_to_limit = to_limit > 0 ? to_limit : 0;
	}
	return 1;
}

void analyze_series(const double *x, const double *y, size_t n,
                    const struct analyze_opts *opts, struct analysis *out)
{
	struct analyze_opts defaults;
	if (!opts) {
		analyze_opts_init(&defaults);
		opts = &defaults;
	}
	struct analysis *a = out;
	memset(a, 0, sizeof(*a));
	a->verdict = VERDICT_INCONCLUSIVE;
	a->mk_p = 1;
	a->projected_to_limit = -1;

	struct work w = { NULL, 0 };
	struct series raw = { NULL, NULL, NULL, 0 }, s = { NULL, NULL, NULL, 0 };
	n = (x && y) ? sorted_finite(x, y, n, &raw) : (series_alloc(&raw, 0), 0);
	a->points = n;
	describe(&raw, &w, a);

	const char *unit = unit_name(opts), *pts = points_name(opts);
	size_t need = opts->min_points > 2 ? opts->min_points : 2;
	if (n < need) {
		set_reason(a, "only %zu %.*s; need %zu", n, (int)strlen(pts) - (n == 1), pts, need);   /* 1 point, 1 step */
		if (n >= 2) {
			/* the trend for information only */
			struct trend t;
			reduce_blocks(raw.x, raw.y, n, 0, TS_MAX_POINTS, &w, &s);
			if (trend_fit(s.x, s.y, s.n, &w, Z_975, 1, &t) == 0) {
				a->slope = t.slope;
				a->slope_low = t.low;
				a->slope_high = t.high;
				a->mk_z = t.z;
				a->mk_p = t.p;
				a->autocorr_factor = t.var_factor;
			}
		}
		if (n)
			a->warmup_end_x = a->window_from_x = raw.x[0];
		goto out;
	}

	struct cycles cy;
	if (find_cycles(&raw, &w, &cy) && judge_cycles(&raw, &cy, opts, a))
		goto out;

	size_t warm = find_warmup(&raw, opts, &w);
	a->warmup_points = warm;
	a->warmup_end_x = raw.x[warm];
	double floor_low, floor_high;
	floor_rise(&raw, warm, &w, &a->baseline_bytes, &a->floor_growth_bytes, &floor_low, &floor_high);
	double thr = opts->min_growth_fraction * (a->baseline_bytes > 0 ? a->baseline_bytes : 0);
	if (thr < opts->min_growth_bytes)
		thr = opts->min_growth_bytes;
	a->threshold_bytes = thr;
	/* growth that speeds up: one line through both rates leaves residuals
	 * bent far beyond its noise, which the serial-correlation correction
	 * takes for a wander. The second half is judged, at its own rate; the
	 * first is no warm-up (it grows too, only slower). */
	struct trend t1, t2;
	size_t from = warm;
	int onset = 0;
	int accel = accelerates(&raw, warm, thr, &w, &t1, &t2, &from, &onset) && n - from >= need;
	if (!accel)
		from = warm;
	else
		floor_rise(&raw, from, &w, &a->baseline_bytes, &a->floor_growth_bytes, &floor_low, &floor_high);
	size_t judged = n - from;
	double span = raw.x[n - 1] - raw.x[from];
	a->window_x = span;
	a->window_from_x = raw.x[from];

	reduce_blocks(raw.x + from, raw.y + from, judged, from, TS_MAX_POINTS, &w, &s);
	struct trend t;
	int fit = trend_fit(s.x, s.y, s.n, &w, Z_975, 1, &t);
	double b = t.slope, lo = t.low, hi = t.high;
	a->mk_z = t.z;
	a->mk_p = t.p;
	a->autocorr_factor = t.var_factor;

	if (fit == 0) {
		a->slope = b;
		a->slope_low = lo;
		a->slope_high = hi;
	}
	char bend[48], after[64];
	fmt_x(bend, sizeof(bend), raw.x[from]);
	if (accel)
		snprintf(after, sizeof(after), strcmp(unit, "step") ? " from %s s on" : " from step %s on", bend);
	else
		snprintf(after, sizeof(after), "%s", warm ? " after warm-up" : "");
	if (judged < need) {
		set_reason(a, "only %zu %.*s after warm-up; need %zu", judged, (int)strlen(pts) - (judged == 1), pts, need);
		goto out;
	}
	if (fit < 0 || !(span > 0)) {
		set_reason(a, "all %zu points share one x", judged);
		goto out;
	}

	char rate[32], p[32], len[32], thr_s[32], g1[32], g2[32];
	fmt_bytes(rate, sizeof(rate), b);
	fmt_p(p, sizeof(p), a->mk_p);
	fmt_x(len, sizeof(len), span);
	fmt_bytes(thr_s, sizeof(thr_s), thr);

	/* the upper bound of the growth does not matter */
	if (hi * span < thr) {
		a->verdict = VERDICT_NO_LEAK;
		if (hi <= 0)
			set_reason(a, "memory does not grow%s (%s per %s)", after, rate, unit);
		else
			set_reason(a, "memory grows at most %s over %s %ss%s, below the %s that matters",
			           fmt_bytes(g1, sizeof(g1), hi * span), len, unit, after, thr_s);
		goto out;
	}
	/* no significant upward trend */
	if (!(a->mk_p < opts->alpha) || a->mk_z <= 0) {
		a->verdict = VERDICT_NO_LEAK;
		if (a->mk_p < opts->alpha)
			set_reason(a, "memory falls %s per %s%s (%s)", fmt_bytes(g1, sizeof(g1), -b), unit, after, p);
		else
			set_reason(a, "no significant growth%s (%s per %s, %s)", after, rate, unit, p);
		goto out;
	}
	/* the floor must rise with the trend: not clearly less than half of it */
	if (floor_high < FLOOR_SHARE * b * span) {
		fmt_bytes(g1, sizeof(g1), a->floor_growth_bytes);
		if (floor_high < thr) {
			a->verdict = VERDICT_NO_LEAK;
			set_reason(a, "memory trends up %s per %s%s (%s) but its floor stays flat (%s over the window): noise above a steady floor",
			           rate, unit, after, p, g1);
		} else {
			set_reason(a, "memory grows %s per %s%s (%s) but its floor rises only %s of the %s expected",
			           rate, unit, after, p, g1, fmt_bytes(g2, sizeof(g2), b * span));
		}
		goto out;
	}
	/* the growth must go on: not slowing down (a cache still filling) */
	if (s.n >= 9) {
		struct concavity cv = concavity(s.x, s.y, s.n, b, work_get(&w, 2 * s.n));
		if (cv.late_high * span < thr) {
			a->verdict = VERDICT_NO_LEAK;
			set_reason(a, "memory rose early in the window but has levelled off (%s per %s at the end, at most %s)",
			           fmt_bytes(g1, sizeof(g1), cv.late), unit, fmt_bytes(g2, sizeof(g2), cv.late_high));
			goto out;
		}
		if (cv.late_high < SUSTAIN_SHARE * b || (cv.z > CURVE_Z && cv.late < SLOW_SHARE * b)) {
			set_reason(a, "memory grows %s per %s%s (%s) but the growth slows down (%s per %s at the end); it may still settle",
			           rate, unit, after, p, fmt_bytes(g1, sizeof(g1), cv.late), unit);
			goto out;
		}
	}
	/* ... and not hang on where the warm-up was judged to end: without the
	 * first third of the window the growth must still be significant */
	if (judged / 3 > 0) {
		struct series ls;
		struct trend lt;
		size_t lf = from + judged / 3;
		reduce_blocks(raw.x + lf, raw.y + lf, n - lf, lf, TS_MAX_POINTS, &w, &ls);
		int ok = trend_fit(ls.x, ls.y, ls.n, &w, Z_975, 1, &lt) == 0 &&
		         lt.p < opts->alpha && lt.z > 0 && lt.low > 0;
		series_release(&ls);
		if (!ok) {
			fmt_p(g2, sizeof(g2), lt.p);
			set_reason(a, "memory grows %s per %s%s (%s) but not significantly without the first third of the window (%s per %s, %s); run longer",
			           rate, unit, after, p, fmt_bytes(g1, sizeof(g1), lt.slope), unit, g2);
			goto out;
		}
	}
	/* the lower bound of the growth must matter */
	if (lo * span < thr) {
		set_reason(a, "memory grows %s per %s%s (%s) but the growth over %s %ss, %s to %s, may be below the %s that matters",
		           rate, unit, after, p, len, unit, fmt_bytes(g1, sizeof(g1), lo * span),
		           fmt_bytes(g2, sizeof(g2), hi * span), thr_s);
		goto out;
	}
	a->verdict = VERDICT_LEAK;
	if (accel) {
		a->rate_early = t1.slope;
		a->rate_late = b;
		if (onset)
			set_reason(a, "memory grows %s per %s%s, flat before (%s)", rate, unit, after, p);
		else
			set_reason(a, "memory grows faster and faster%s: %s per %s, then %s per %s%s (%s)",
			           warm ? " after warm-up" : "", fmt_bytes(g1, sizeof(g1), t1.slope), unit, rate, unit,
			           after, p);
	} else {
		set_reason(a, "memory grows %s per %s%s (%s) and its floor rises with it", rate, unit, after, p);
	}
	if (opts->limit_bytes > 0 && b > 0) {
		double to_limit = (opts->limit_bytes - a->last_bytes) / b;
		a->projected_to_limit = to_limit > 0 ? to_limit : 0;
	}
out:
	series_release(&s);
	series_release(&raw);
	work_release(&w);
}
