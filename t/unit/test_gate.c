/*
 * test_gate.c — the memory gate (judge/gate.c) on summaries made by hand:
 * each expectation held and broken, by how much, and what cannot be judged.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "judge/gate.h"
#include "tap.h"

#define MiB (1024.0 * 1024.0)

static void summary(struct run_summary *s, enum verdict v, double slope, double peak)
{
	memset(s, 0, sizeof(*s));
	s->x_unit = "step";
	s->a.verdict = v;
	s->a.points = 100;
	s->a.slope = slope;
	s->a.slope_low = slope * 0.9;
	s->a.slope_high = slope * 1.1;
	s->peak_bytes = (uint64_t)peak;
	snprintf(s->reason, sizeof(s->reason), "too few steps after warm-up");
}

static void test_unset(void)
{
	struct gate g = { 0 };
	CHECK(!gate_is_set(&g)); /* no option: no gate */
	g.has_max_peak = true;
	CHECK(gate_is_set(&g)); /* --max-peak sets it */
}

static void test_no_leak(void)
{
	struct run_summary s;
	struct gate g = { .no_leak = true };
	struct strbuf out = STRBUF_INIT;
	summary(&s, VERDICT_LEAK, 1.5 * MiB, 100 * MiB);
	CHECK(gate_check(&g, &s, &out) == 1); /* a leak breaks --expect no-leak */
	CHECK(strstr(out.buf, "no-leak: broken") && strstr(out.buf, "1.50 MiB per step")); /* it says the growth */
	strbuf_reset(&out);
	summary(&s, VERDICT_NO_LEAK, 0, 100 * MiB);
	CHECK(gate_check(&g, &s, &out) == 0 && strstr(out.buf, "no-leak: held")); /* no leak holds */
	strbuf_reset(&out);
	summary(&s, VERDICT_INCONCLUSIVE, 0, 100 * MiB);
	CHECK(gate_check(&g, &s, &out) == 0 && strstr(out.buf, "inconclusive (too few steps")); /* inconclusive holds and is said */
	strbuf_release(&out);
}

static void test_max_peak(void)
{
	struct run_summary s;
	struct gate g = { .has_max_peak = true, .max_peak_bytes = 512 * MiB };
	struct strbuf out = STRBUF_INIT;
	summary(&s, VERDICT_NO_LEAK, 0, 640 * MiB);
	CHECK(gate_check(&g, &s, &out) == 1); /* a peak above the limit breaks it */
	CHECK(strstr(out.buf, "max-peak 512 MiB: broken") && strstr(out.buf, "128 MiB over (125% of it)")); /* by how much */
	strbuf_reset(&out);
	summary(&s, VERDICT_LEAK, MiB, 512 * MiB);
	CHECK(gate_check(&g, &s, &out) == 0); /* a peak at the limit holds (the verdict is not asked) */
	strbuf_release(&out);
}

static void test_max_growth(void)
{
	struct run_summary s;
	struct gate g = { .has_max_growth = true, .max_growth_bytes = 64 * 1024 };
	struct strbuf out = STRBUF_INIT;
	summary(&s, VERDICT_LEAK, 1.0 * MiB, 100 * MiB);
	CHECK(gate_check(&g, &s, &out) == 1 && strstr(out.buf, "960 KiB/step over")); /* growth above */
	strbuf_reset(&out);
	summary(&s, VERDICT_NO_LEAK, 1000, 100 * MiB);
	CHECK(gate_check(&g, &s, &out) == 0 && strstr(out.buf, "held")); /* growth below holds */
	strbuf_reset(&out);
	s.x_unit = "s";
	CHECK(gate_check(&g, &s, &out) == 1 && strstr(out.buf, "marked no steps")); /* no steps: cannot be judged, broken */
	strbuf_reset(&out);
	summary(&s, VERDICT_INCONCLUSIVE, NAN, 100 * MiB);
	s.a.points = 1;
	CHECK(gate_check(&g, &s, &out) == 1 && strstr(out.buf, "cannot be judged: 1 step after")); /* one point */
	strbuf_release(&out);
}

static void test_all_three(void)
{
	struct run_summary s;
	struct gate g = { .no_leak = true, .has_max_peak = true, .max_peak_bytes = 10 * MiB,
	                  .has_max_growth = true, .max_growth_bytes = 1 };
	struct strbuf out = STRBUF_INIT;
	summary(&s, VERDICT_LEAK, MiB, 100 * MiB);
	CHECK(gate_check(&g, &s, &out) == 3); /* three broken, three lines */
	strbuf_release(&out);
}

TEST_MAIN("gate", TEST(test_unset), TEST(test_no_leak), TEST(test_max_peak), TEST(test_max_growth),
          TEST(test_all_three))
