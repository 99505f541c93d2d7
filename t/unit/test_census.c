/*
 * test_census.c — the GPU memory split judged on recorded series (a tensor
 * leak, a fragmenting cache, memory outside PyTorch, a clean loop), and
 * census types in words (model/census.c).
 */
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/census.h"

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
}

TEST_MAIN("census", TEST(test_gpu_split), TEST(test_type_words))
