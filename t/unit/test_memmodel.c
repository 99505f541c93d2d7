/*
 * test_memmodel.c — the memory model of a sweep (src/sweep/memmodel.c) on
 * known series: a pure power law and a base plus a linear term recovered
 * with their exponents; a parameter that does not drive memory gets no
 * effect; a negative effect is never kept (monotone); censored (OOM'd)
 * trials raise the fit; the interval holds the truth and is wide with few
 * trials; too few (under five) fit nothing; the largest value that fits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "sweep/memmodel.h"

#define MIB (1024.0 * 1024.0)

/* peak = 200 MiB + 0.5 MiB * batch * (width / 64): a base and a product */
static double truth(double batch, double width)
{
	return 200 * MIB + 0.5 * MIB * batch * width / 64;
}

static void test_base_and_product(void)
{
	double x[64 * 3], y[64];
	size_t n = 0;
	const double batches[] = { 8, 16, 32, 64 }, widths[] = { 64, 128, 256 };
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 3; j++) {
			x[n * 3] = batches[i];
			x[n * 3 + 1] = widths[j];
			x[n * 3 + 2] = 0.01 * (1 + (n % 3));   /* lr: no effect */
			/* a little noise, deterministic */
			y[n] = truth(batches[i], widths[j]) + 0.2 * MIB * ((double)(n % 5) - 2);
			n++;
		}
	struct mem_fit f;
	CHECK_EQ_INT(mem_fit_run(&f, 3, x, y, NULL, n), 0);
	CHECK(f.ok);
	CHECK_NEAR(f.coef[0], 1.0, 0.15);
	CHECK_NEAR(f.coef[1], 1.0, 0.15);
	CHECK(f.coef[2] < 0.05);
	CHECK(f.base > 100 * MIB && f.base < 220 * MIB);
	/* extrapolated to batch 256, width 256: the truth within the interval */
	double at[3] = { 256, 256, 0.02 };
	struct mem_pred p;
	CHECK(mem_fit_predict(&f, at, &p));
	double want = truth(256, 256);
	CHECK(p.lo <= want && want <= p.hi);
	CHECK_NEAR(p.point / want, 1.0, 0.15);
	CHECK(!p.inside);
	CHECK(p.lower_sound);
	/* inside: close */
	double in[3] = { 32, 128, 0.01 };
	CHECK(mem_fit_predict(&f, in, &p));
	CHECK(p.inside);
	CHECK_NEAR(p.point / truth(32, 128), 1.0, 0.03);
	/* the per-dimension effect: batch from 8 to 64 moves the peak more than lr */
	double eb = mem_fit_effect(&f, 0, 64) / mem_fit_effect(&f, 0, 8);
	double el = mem_fit_effect(&f, 2, 0.03) / mem_fit_effect(&f, 2, 0.01);
	CHECK_NEAR(eb, 264.0 / 208.0, 0.05);
	CHECK_NEAR(el, 1.0, 0.02);
}

static void test_monotone_and_few(void)
{
	/* memory falls with k: the fit keeps no negative exponent */
	double x[8], y[8];
	for (int i = 0; i < 8; i++) {
		x[i] = 1 << i;
		y[i] = 500 * MIB / (1 + 0.1 * i);
	}
	struct mem_fit f;
	CHECK_EQ_INT(mem_fit_run(&f, 1, x, y, NULL, 8), 0);
	CHECK(f.coef[0] >= 0);
	/* two trials: nothing */
	CHECK_EQ_INT(mem_fit_run(&f, 1, x, y, NULL, 2), 1);
	CHECK(!f.ok);
	struct mem_pred p;
	CHECK(!mem_fit_predict(&f, x, &p));
	/* four: still nothing; five trials of one dimension: a fit, with a wide interval */
	double x3[5] = { 10, 20, 40, 15, 25 }, y3[5] = { 110 * MIB, 120 * MIB, 140 * MIB, 115 * MIB, 125.5 * MIB };
	CHECK_EQ_INT(mem_fit_run(&f, 1, x3, y3, NULL, 4), 1);
	CHECK_EQ_INT(mem_fit_run(&f, 1, x3, y3, NULL, 5), 0);
	double at = 30;
	CHECK(mem_fit_predict(&f, &at, &p));
	CHECK(p.lo < 130 * MIB && p.hi > 130 * MIB);
	CHECK(mem_t95(1) > 6 && mem_t95(1000) < 1.7);
}

static void test_censored_and_largest(void)
{
	/* y = 236 MiB + extra; budget 400 MiB; the two largest were OOM-killed
	 * at the budget (their peak a lower bound) */
	double x[6] = { 10, 20, 40, 80, 300, 450 }, y[6];
	bool cens[6] = { false, false, false, false, true, true };
	for (int i = 0; i < 6; i++)
		y[i] = cens[i] ? 400 * MIB : (236 + x[i]) * MIB;
	struct mem_fit f;
	CHECK_EQ_INT(mem_fit_run(&f, 1, x, y, cens, 6), 0);
	CHECK_EQ_INT(f.n_censored, 2);
	struct mem_pred p;
	double at = 300;
	CHECK(mem_fit_predict(&f, &at, &p));
	CHECK(p.point > 400 * MIB);
	/* the largest extra predicted (upper bound) to fit 400 MiB: below 164 */
	double v = mem_fit_largest(&f, x, 0, 1, 450, 400 * MIB);
	CHECK(isfinite(v) && v > 60 && v < 164);
	/* nothing fits 100 MiB */
	CHECK(isnan(mem_fit_largest(&f, x, 0, 1, 450, 100 * MIB)));
	/* a constant dimension: a smaller value is not a sound lower bound */
	double x2[10], y2[5];
	for (int i = 0; i < 5; i++) {
		x2[2 * i] = 10 * (i + 1);
		x2[2 * i + 1] = 4;
		y2[i] = (100 + 10 * (i + 1)) * MIB;
	}
	CHECK_EQ_INT(mem_fit_run(&f, 2, x2, y2, NULL, 5), 0);
	double big[2] = { 20, 8 }, small[2] = { 20, 2 };
	CHECK(mem_fit_predict(&f, big, &p) && p.lower_sound);
	CHECK(mem_fit_predict(&f, small, &p) && !p.lower_sound);
}

TEST_MAIN("memmodel", TEST(test_base_and_product), TEST(test_monotone_and_few), TEST(test_censored_and_largest))
