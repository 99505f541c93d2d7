/*
 * test_census.c — the GPU memory split judged on recorded series (a tensor
 * leak, a fragmenting cache, memory outside PyTorch, a clean loop), census
 * types in words, and the exact test that judges a type on few censuses
 * (judge/census.c).
 */
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "judge/census.h"

#define MIB (1024.0 * 1024.0)
#define N 150

/* A recorded-like series: allocated, reserved and NVML in bytes per step,
 * with a MiB of noise on allocated. */
static void series(double *x, double *alloc, double *res, double *nvml, double *retries,
                   double alloc_per, double cache_per, double other_per)
{
	unsigned seed = 7;
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		double noise = (double)((seed >> 16) % 2) * MIB;
		x[i] = i;
		alloc[i] = 512 * MIB + noise + alloc_per * i;
		res[i] = 640 * MIB + alloc_per * i + cache_per * i;
		nvml[i] = res[i] + 300 * MIB + other_per * i;
		retries[i] = cache_per > 0 ? i / 10 : 0;
	}
}

static void test_gpu_split(void)
{
	double x[N], a[N], r[N], nv[N], rt[N];
	struct gpu_report g;

	series(x, a, r, nv, rt, 4 * MIB, 0, 0);
	gpu_report_judge(x, a, r, nv, rt, N, "step", &g);
	CHECK(g.allocated.a.verdict == VERDICT_LEAK);
	CHECK_NEAR(g.allocated.a.slope, 4 * MIB, 0.05 * MIB);
	CHECK(g.cached.a.verdict != VERDICT_LEAK && g.other.a.verdict != VERDICT_LEAK);
	CHECK(strstr(g.diagnosis, "tensor leak") != NULL);
	CHECK(strstr(g.diagnosis, "expandable_segments") == NULL);

	series(x, a, r, nv, rt, 0, 8 * MIB, 0);
	gpu_report_judge(x, a, r, nv, rt, N, "step", &g);
	CHECK(g.cached.a.verdict == VERDICT_LEAK);
	CHECK(g.allocated.a.verdict != VERDICT_LEAK && g.other.a.verdict != VERDICT_LEAK);
	CHECK(strstr(g.diagnosis, "expandable_segments:True") != NULL);
	CHECK_EQ_INT((long long)g.alloc_retries, 14);

	series(x, a, r, nv, rt, 0, 0, 6 * MIB);
	gpu_report_judge(x, a, r, nv, rt, N, "step", &g);
	CHECK(g.other.a.verdict == VERDICT_LEAK);
	CHECK_NEAR(g.other.a.slope, 6 * MIB, 0.05 * MIB);
	CHECK(strstr(g.diagnosis, "NCCL") != NULL);

	series(x, a, r, nv, rt, 0, 0, 0);
	gpu_report_judge(x, a, r, nv, rt, N, "step", &g);
	CHECK(g.allocated.a.verdict != VERDICT_LEAK && g.cached.a.verdict != VERDICT_LEAK &&
	      g.other.a.verdict != VERDICT_LEAK);
	CHECK_STR(g.diagnosis, "");

	/* no NVML figure: the third series is absent, the others judged */
	series(x, a, r, nv, rt, 4 * MIB, 0, 0);
	gpu_report_judge(x, a, r, NULL, NULL, N, "step", &g);
	CHECK(!g.other.present && g.allocated.present && g.allocated.a.verdict == VERDICT_LEAK);
	CHECK(isnan(g.alloc_retries));
}

static void test_type_words(void)
{
	char b[256];
	CHECK_STR(census_type_words(b, sizeof(b), "torch.Tensor/cpu/float32/grad_fn"),
	          "Tensor (cpu, float32) with grad_fn");
	CHECK_STR(census_type_words(b, sizeof(b), "torch.nn.parameter.Parameter/cuda:0/float16"),
	          "Parameter (cuda:0, float16)");
	CHECK_STR(census_type_words(b, sizeof(b), "numpy.ndarray/float64"), "numpy.ndarray (float64)");
	CHECK_STR(census_type_words(b, sizeof(b), "list"), "list");
	CHECK_STR(census_type_words(b, 8, "collections.OrderedDict"), "collect");
	/* a container: what it holds */
	CHECK_STR(census_type_words(b, sizeof(b), "held#3/list/torch.Tensor/cpu/float32/grad_fn"),
	          "Tensor (cpu, float32) with grad_fn");
	CHECK_STR(census_type_words(b, sizeof(b), "held#0/functools._lru_cache_wrapper/numpy.ndarray/float64"),
	          "numpy.ndarray (float64)");
	CHECK_STR(census_type_words(b, sizeof(b), "held#12/dict/dict"), "dict");
	CHECK(census_type_is_held("held#12/dict/dict") && !census_type_is_held("dict"));
}

/* The exact Mann–Kendall p-value against the permutation count: n values
 * all rising are 1 of n! orders; one adjacent pair swapped adds the n - 1
 * orders with one inversion. */
static void test_exact_p(void)
{
	double x[12], y[12];
	for (int i = 0; i < 12; i++) {
		x[i] = 10.0 * i;
		y[i] = 19.0 + 60.0 * i;
	}
	CHECK_NEAR(census_mk_exact_p(x, y, 4), 1.0 / 24, 1e-12);
	CHECK_NEAR(census_mk_exact_p(x, y, 6), 1.0 / 720, 1e-12);
	CHECK_NEAR(census_mk_exact_p(x, y, 12), 1.0 / 479001600.0, 1e-18);
	y[3] = y[2] - 1;     /* 2 and 3 out of order */
	CHECK_NEAR(census_mk_exact_p(x, y, 6), 6.0 / 720, 1e-12);
	CHECK_NEAR(census_mk_exact_p(x, y, 7), 7.0 / 5040, 1e-12);
	/* a falling series: every order is at least as rising */
	for (int i = 0; i < 6; i++)
		y[i] = 100.0 - i;
	CHECK_NEAR(census_mk_exact_p(x, y, 6), 1.0, 1e-12);
	/* a census with no step between it and the one before: that pair is
	 * no evidence (half an inversion, rounded against the rise) */
	for (int i = 0; i < 6; i++)
		y[i] = 10.0 * i;
	x[3] = x[2];
	CHECK_NEAR(census_mk_exact_p(x, y, 6), 6.0 / 720, 1e-12);
}

static void test_few_rising(void)
{
	double x[8], p;
	/* 6 censuses, a count that rises with the step at each: growing */
	double kept[] = { 19, 77, 145, 212, 302, 359 };
	for (int i = 0; i < 6; i++)
		x[i] = 26.0 * i + 3;
	CHECK(census_few_rising(x, kept, 6, &p));
	CHECK(p < 0.002);
	/* 5 of them: not yet (1/120 could be noise in one of 40 series) */
	CHECK(!census_few_rising(x, kept, 5, NULL));
	/* a bounded cache filling then full: not growing */
	double full[] = { 10, 20, 32, 32, 32, 32, 32 };
	for (int i = 0; i < 7; i++)
		x[i] = i;
	CHECK(!census_few_rising(x, full, 7, NULL));
	/* rising at each census by less than the growth that matters */
	double small[] = { 1000, 1001, 1002, 1003, 1004, 1005 };
	CHECK(!census_few_rising(x, small, 6, NULL));
	/* noise: a dict count wandering at step boundaries */
	double noise[] = { 11657, 11659, 11656, 11660, 11658, 11661, 11657 };
	CHECK(!census_few_rising(x, noise, 7, NULL));
	/* 7 censuses with one pair out of order: still growing */
	double jitter[] = { 5, 30, 28, 60, 90, 121, 150 };
	CHECK(census_few_rising(x, jitter, 7, &p));
	CHECK_NEAR(p, 7.0 / 5040, 1e-12);
	/* no step between the first and the last: nothing to judge against */
	for (int i = 0; i < 6; i++)
		x[i] = 4;
	CHECK(!census_few_rising(x, kept, 6, NULL));
}

/* Under the null (exchangeable counts), the rule fires at most at its
 * level: simulated series of 6 and 7 censuses of random counts. */
static void test_few_rising_level(void)
{
	double x[7], y[7];
	unsigned seed = 12345;
	int fired = 0, trials = 200000;
	for (int i = 0; i < 7; i++)
		x[i] = i;
	for (int k = 0; k < trials; k++) {
		size_t n = 6 + (size_t)(k & 1);
		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			y[i] = 1000 + (double)((seed >> 8) % 400);
		}
		fired += census_few_rising(x, y, n, NULL);
	}
	CHECK((double)fired / trials <= CENSUS_FEW_ALPHA);
}

TEST_MAIN("census", TEST(test_gpu_split), TEST(test_type_words), TEST(test_exact_p), TEST(test_few_rising),
          TEST(test_few_rising_level))
