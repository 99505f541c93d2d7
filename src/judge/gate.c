/*
 * gate.c — expectations of a run checked against its summary (gate.h).
 * Pure: reads the summary, appends the lines that say what held and what
 * broke. Sizes in bytes; growth per step (the summary's x unit).
 */
#include "judge/gate.h"

#include <math.h>
#include <string.h>

bool gate_is_set(const struct gate *g)
{
	return g->no_leak || g->has_max_peak || g->has_max_growth;
}

static int check_no_leak(const struct run_summary *s, struct strbuf *out)
{
	char v[32];
	strbuf_addstr(out, "  expect    no-leak: ");
	switch (s->a.verdict) {
	case VERDICT_LEAK:
		strbuf_addf(out, "broken \xe2\x80\x94 the verdict is leak, memory grows %s per %s\n",
		            fmt_bytes(v, sizeof(v), s->a.slope), !strcmp(s->x_unit, "s") ? "second" : "step");
		return 1;
	case VERDICT_INCONCLUSIVE:
		strbuf_addf(out, "held, not judged \xe2\x80\x94 the verdict is inconclusive (%s)\n", s->reason);
		return 0;
	case VERDICT_NO_LEAK:
		break;
	}
	strbuf_addstr(out, "held\n");
	return 0;
}

static int check_max_peak(const struct gate *g, const struct run_summary *s, struct strbuf *out)
{
	char lim[32], peak[32], over[32];
	double p = (double)s->peak_bytes;
	strbuf_addf(out, "  expect    max-peak %s: ", fmt_bytes(lim, sizeof(lim), g->max_peak_bytes));
	fmt_bytes(peak, sizeof(peak), p);
	if (p <= g->max_peak_bytes) {
		strbuf_addf(out, "held \xe2\x80\x94 the peak is %s\n", peak);
		return 0;
	}
	strbuf_addf(out, "broken \xe2\x80\x94 the peak is %s, %s over (%.0f%% of it)\n", peak,
	            fmt_bytes(over, sizeof(over), p - g->max_peak_bytes), 100.0 * p / g->max_peak_bytes);
	return 1;
}

static int check_max_growth(const struct gate *g, const struct run_summary *s, struct strbuf *out)
{
	char lim[32], got[32], lo[32], hi[32], over[32];
	strbuf_addf(out, "  expect    max-growth %s/step: ", fmt_bytes(lim, sizeof(lim), g->max_growth_bytes));
	if (!strcmp(s->x_unit, "s")) {
		strbuf_addstr(out, "broken \xe2\x80\x94 cannot be judged: the run marked no steps\n");
		return 1;
	}
	if (s->a.points < 2 || !isfinite(s->a.slope)) {
		strbuf_addf(out, "broken \xe2\x80\x94 cannot be judged: %zu step%s after warm-up, too few\n", s->a.points,
		            s->a.points == 1 ? "" : "s");
		return 1;
	}
	fmt_bytes(got, sizeof(got), s->a.slope);
	fmt_bytes(lo, sizeof(lo), s->a.slope_low);
	fmt_bytes(hi, sizeof(hi), s->a.slope_high);
	if (s->a.slope <= g->max_growth_bytes) {
		strbuf_addf(out, "held \xe2\x80\x94 growth is %s/step (95%% interval %s to %s)\n", got, lo, hi);
		return 0;
	}
	strbuf_addf(out, "broken \xe2\x80\x94 growth is %s/step (95%% interval %s to %s), %s/step over\n",
	            got, lo, hi, fmt_bytes(over, sizeof(over), s->a.slope - g->max_growth_bytes));
	return 1;
}

int gate_check(const struct gate *g, const struct run_summary *s, struct strbuf *out)
{
	int broken = 0;
	if (g->no_leak)
		broken += check_no_leak(s, out);
	if (g->has_max_peak)
		broken += check_max_peak(g, s, out);
	if (g->has_max_growth)
		broken += check_max_growth(g, s, out);
	return broken;
}
