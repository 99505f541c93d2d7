/*
 * text.c — the human summary of a run: what `leakproof run` prints on
 * stderr at the end and `leakproof report` prints by default. Compact (ten
 * lines or so), every number with its unit, nothing claimed that the
 * judgment did not find.
 */
#include <math.h>
#include <string.h>

#include "judge/kinds.h"
#include "report/render.h"

#define COMMAND_MAX_CHARS 120
#define RESULTS_SHOWN 8
#define TRACE_SITES_SHOWN 5       /* growing allocation sites in the summary */

static void add_head(struct strbuf *sb, const struct run_summary *s)
{
	strbuf_addf(sb, "leakproof: run %lld: ", (long long)s->run.id);
	report_add_command_line(sb, s->argv, s->argc, COMMAND_MAX_CHARS);
	strbuf_addstr(sb, " \xe2\x80\x94 ");
	render_outcome_line(sb, s);
	strbuf_addch(sb, '\n');
}

static void add_quantiles(struct strbuf *sb, const struct run_summary *s)
{
	static const char *heads[5] = { "min", "q1", "median", "q3", "max" };
	char label[64], v[32];
	if (!render_have_slope(s))
		return;
	for (int i = 0; i < 5; i++)
		if (!isfinite(s->a.q[i]))
			return;
	render_change_label(label, sizeof(label), s);
	int w = (int)strlen(label) + 3;
	strbuf_addf(sb, "  %-*s", w, label);
	for (int i = 0; i < 5; i++)
		strbuf_addf(sb, "%-10s", heads[i]);
	while (sb->len && sb->buf[sb->len - 1] == ' ')
		sb->buf[--sb->len] = '\0';
	strbuf_addf(sb, "\n  %-*s", w, "");
	for (int i = 0; i < 5; i++)
		strbuf_addf(sb, "%-10s", fmt_bytes(v, sizeof(v), s->a.q[i]));
	while (sb->len && sb->buf[sb->len - 1] == ' ')
		sb->buf[--sb->len] = '\0';
	strbuf_addch(sb, '\n');
}

/* Where the limit is: when the run will reach it, or how far the peak is. */
static void add_limit(struct strbuf *sb, const struct run_summary *s)
{
	struct strbuf proj = STRBUF_INIT;
	char lim[32], level[32];
	if (s->limit_bytes <= 0)
		return;
	fmt_bytes(lim, sizeof(lim), s->limit_bytes);
	const char *src = !strcmp(s->limit_source, "machine") ? "machine memory" :
	                  !strcmp(s->limit_source, "max-mem") ? "--max-mem" : s->limit_source;
	double pct = 100.0 * (double)s->peak_bytes / s->limit_bytes;
	if (s->kinds && s->kinds->cow_level_bytes > 0 && s->kinds->cow_level_bytes < s->limit_bytes)
		strbuf_addf(sb, "  limit     %s (%s); copy-on-write levels off at most at %s, %.0f%% of it\n", lim, src,
		            fmt_bytes(level, sizeof(level), s->kinds->cow_level_bytes),
		            100.0 * s->kinds->cow_level_bytes / s->limit_bytes);
	else if (render_projection(&proj, s))
		strbuf_addf(sb, "  limit     at this rate reaches %s (%s) %s\n", lim, src, strbuf_str(&proj));
	else if (pct < 1)
		strbuf_addf(sb, "  limit     %s (%s); the peak is under 1%% of it\n", lim, src);
	else
		strbuf_addf(sb, "  limit     %s (%s); the peak is %.0f%% of it\n", lim, src, pct);
	strbuf_release(&proj);
}

/* How each process ended, when that is news: a restart, or an end that
 * was not a clean exit. At most SEGMENTS_SHOWN lines, the last ones. */
#define SEGMENTS_SHOWN 12
static void add_segments(struct strbuf *sb, const struct run_summary *s)
{
	char mem[32], mem2[32];
	if (!render_has_ends(s))
		return;
	size_t from = s->nsegments > SEGMENTS_SHOWN ? s->nsegments - SEGMENTS_SHOWN : 0;
	if (from)
		strbuf_addf(sb, "  ends      (%zu earlier not shown)\n", from);
	for (size_t i = from; i < s->nsegments; i++) {
		const struct segment_row *g = &s->segments[i];
		strbuf_addstr(sb, i == from && !from ? "  ends      " : "            ");
		if (s->nsegments > 1)
			strbuf_addf(sb, "#%lld ", (long long)g->seq);
		if (g->cause == CAUSE_NONE) {
			strbuf_addstr(sb, "still running\n");
			continue;
		}
		render_add_clean(sb, cause_name(g->cause));
		if (g->has_step)
			strbuf_addf(sb, " at step %lld", (long long)g->end_step);
		if (g->memory_bytes && s->nsegments > 1 && s->segment_start_bytes[i] >= 0)
			strbuf_addf(sb, " with %s (started at %s)", fmt_bytes(mem, sizeof(mem), (double)g->memory_bytes),
			            fmt_bytes(mem2, sizeof(mem2), s->segment_start_bytes[i]));
		else if (g->memory_bytes)
			strbuf_addf(sb, " with %s", fmt_bytes(mem, sizeof(mem), (double)g->memory_bytes));
		if (g->evidence[0])
			render_add_clean_between(sb, ": ", g->evidence, "");
		if (g->restart[0])
			render_add_clean_between(sb, " \xe2\x86\x92 restarted (", g->restart, ")");
		strbuf_addch(sb, '\n');
	}
	if (s->judged_seq >= 0)
		strbuf_addf(sb, "  judged    on process #%lld alone, the one with the most steps\n",
		            (long long)s->judged_seq);
}

void report_write_text(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb)
{
	(void)x;
	const struct analysis *a = &s->a;
	bool over_time = !strcmp(s->x_unit, "s");
	char b1[32], b2[32];

	add_head(sb, s);
	strbuf_addf(sb, "  verdict   %s \xe2\x80\x94 %s\n", verdict_name(a->verdict), s->reason);
	render_kinds_text(s, sb);

	if (render_have_slope(s)) {
		strbuf_addf(sb, "  growth    %s%s", render_signed_bytes(b1, sizeof(b1), a->slope),
		            render_x_suffix(s));
		if (isfinite(a->slope_low) && isfinite(a->slope_high)) {
			strbuf_addstr(sb, " (95% interval ");
			render_range(sb, a->slope_low, a->slope_high);
			strbuf_addch(sb, ')');
		}
		if (over_time && a->slope > 0)
			strbuf_addf(sb, ", %s/h", fmt_bytes(b2, sizeof(b2), a->slope * 3600));
		strbuf_addf(sb, ", measure %s\n", run_summary_measure_label(s));
		if (!a->warmup_points)
			strbuf_addstr(sb, "  warm-up   none");
		else
			strbuf_addf(sb, "  warm-up   ended at %s", render_x_at(b1, sizeof(b1), s, s->warmup_steps));
		/* a leak that speeds up or starts late has no warm-up: its bend here */
		if (a->rate_late > 0 && a->rate_late > a->rate_early) {
			char b3[32];
			strbuf_addf(sb, "; growth bends upward at %s: %s%s before, %s%s after",
			            render_x_at(b3, sizeof(b3), s, a->window_from_x),
			            render_signed_bytes(b1, sizeof(b1), a->rate_early), render_x_suffix(s),
			            fmt_bytes(b2, sizeof(b2), a->rate_late), render_x_suffix(s));
		}
		strbuf_addch(sb, '\n');
	} else {
		strbuf_addf(sb, "  measure   %s\n", run_summary_measure_label(s));
	}

	if (s->nsamples || s->steps) {
		strbuf_addf(sb, "  peak      %-13s", fmt_bytes(b1, sizeof(b1), (double)s->peak_bytes));
		if (s->steps_per_second > 0)
			strbuf_addf(sb, " rate  %.3g steps/s (median)", s->steps_per_second);
		while (sb->len && sb->buf[sb->len - 1] == ' ')
			sb->buf[--sb->len] = '\0';
		strbuf_addch(sb, '\n');
		add_limit(sb, s);
	}
	/* what the figures above lack: a run too short to sample, a census
	 * asked for that did not run */
	for (size_t i = 0; i < s->nevents; i++)
		if (!strcmp(s->events[i].kind, "peak-rss") || !strcmp(s->events[i].kind, "steps-dropped") ||
		    !strcmp(s->events[i].kind, "census-none"))
			strbuf_addf(sb, "  note      %s\n", s->events[i].detail ? s->events[i].detail : "");
	/* a job leakproof did not start (`leakproof attach`): which, since when */
	for (size_t i = 0; i < s->nevents; i++)
		if (!strcmp(s->events[i].kind, "attach") && s->events[i].detail) {
			const char *d = s->events[i].detail, *cut = strstr(d, "; started_at=");
			char what[400];
			snprintf(what, sizeof(what), "%.*s", cut ? (int)(cut - d) : (int)strlen(d), d);
			render_add_clean_between(sb, "  attached  to ", what, "\n");
		}

	struct strbuf where = STRBUF_INIT;
	if (report_add_placement(&where, &s->run))
		strbuf_addf(sb, "  host      %s\n", strbuf_str(&where));
	strbuf_release(&where);

	add_quantiles(sb, s);

	add_segments(sb, s);

	if (s->run.bad_lines || s->run.long_lines)
		strbuf_addf(sb, "  channel   %lld malformed line%s ignored, %lld too long\n",
		            (long long)s->run.bad_lines, s->run.bad_lines == 1 ? "" : "s",
		            (long long)s->run.long_lines);
	if (s->nresults) {
		strbuf_addstr(sb, "  results  ");
		for (size_t i = 0; i < s->nresults && i < RESULTS_SHOWN; i++) {
			strbuf_addch(sb, ' ');
			render_add_clean(sb, s->results[i].name);
			strbuf_addf(sb, "=%.6g", s->results[i].value);
		}
		if (s->nresults > RESULTS_SHOWN)
			strbuf_addf(sb, " (and %zu more)", s->nresults - RESULTS_SHOWN);
		strbuf_addch(sb, '\n');
	}
	if (s->has_top_proc) {
		strbuf_addf(sb, "  most memory: pid %d (", s->top_proc.pid);
		render_add_clean(sb, s->top_proc.name);
		strbuf_addf(sb, ") %s\n", fmt_bytes(b1, sizeof(b1), render_top_proc_bytes(s)));
	}
	if (s->census)
		census_report_text(s->census, sb);
	if (s->gpu)
		gpu_report_text(s->gpu, sb);
	if (s->trace)
		trace_report_text(s->trace, TRACE_SITES_SHOWN, sb);
	render_flight_text(s, sb);
}
