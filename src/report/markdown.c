/*
 * markdown.c — the summary as Markdown tables, to paste into a bug report:
 * a heading with the command, a table of findings, the per-step change
 * table (Min | Q1 | Median | Q3 | Max | steps/s), then, when the run has
 * them, the growing kinds of memory, the census's growing types and their
 * holders, and the flight recorder (kinds.c, census.c). Sizes in binary
 * units.
 * Text from the job (its command, process and result names) is escaped:
 * no '|' splits a cell, no '<' opens raw HTML (render.h).
 */
#include <math.h>
#include <string.h>

#include "judge/kinds.h"
#include "report/render.h"

#define COMMAND_MAX_CHARS 200

static void add_row(struct strbuf *sb, const char *key, const char *value)
{
	strbuf_addf(sb, "| %s | ", key);
	render_add_md_cell(sb, value);
	strbuf_addstr(sb, " |\n");
}

void report_write_md(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb)
{
	(void)x;
	struct strbuf cell = STRBUF_INIT, cmd = STRBUF_INIT;
	const struct analysis *a = &s->a;
	char b1[32], b2[32];

	report_add_command_line(&cmd, s->argv, s->argc, COMMAND_MAX_CHARS);
	strbuf_addf(sb, "### leakproof run %lld: ", (long long)s->run.id);
	render_add_md_code(sb, strbuf_str(&cmd), false);
	strbuf_addstr(sb, "\n\n");

	strbuf_addstr(sb, "| | |\n|---|---|\n");
	strbuf_addf(&cell, "**%s** \xe2\x80\x94 %s", verdict_name(a->verdict), s->reason);
	add_row(sb, "Verdict", strbuf_str(&cell));
	if (s->kinds && s->kinds->has_diagnosis)
		add_row(sb, "Diagnosis", s->kinds->diagnosis);

	strbuf_reset(&cell);
	render_outcome_line(&cell, s);
	add_row(sb, "Run", strbuf_str(&cell));

	add_row(sb, "Measure", run_summary_measure_label(s));
	if (render_have_slope(s)) {
		strbuf_reset(&cell);
		strbuf_addf(&cell, "%s%s", render_signed_bytes(b1, sizeof(b1), a->slope), render_x_suffix(s));
		if (isfinite(a->slope_low) && isfinite(a->slope_high)) {
			strbuf_addstr(&cell, " (95% interval ");
			render_range(&cell, a->slope_low, a->slope_high);
			strbuf_addch(&cell, ')');
		}
		add_row(sb, "Growth", strbuf_str(&cell));
		strbuf_reset(&cell);
		if (!a->warmup_points)
			strbuf_addstr(&cell, "none");
		else
			strbuf_addf(&cell, "ended at %s", render_x_at(b2, sizeof(b2), s, s->warmup_steps));
		add_row(sb, "Warm-up", strbuf_str(&cell));
	}
	add_row(sb, "Peak", fmt_bytes(b1, sizeof(b1), (double)s->peak_bytes));
	if (s->limit_bytes > 0) {
		strbuf_reset(&cell);
		strbuf_addf(&cell, "%s (%s)", fmt_bytes(b2, sizeof(b2), s->limit_bytes),
		            !strcmp(s->limit_source, "machine") ? "machine memory" : s->limit_source);
		struct strbuf proj = STRBUF_INIT;
		if (render_projection(&proj, s))
			strbuf_addf(&cell, ", reached at this rate %s", strbuf_str(&proj));
		strbuf_release(&proj);
		add_row(sb, "Limit", strbuf_str(&cell));
	}
	strbuf_reset(&cell);
	if (report_add_placement(&cell, &s->run))
		add_row(sb, "Host", strbuf_str(&cell));
	if (s->has_top_proc) {
		strbuf_reset(&cell);
		strbuf_addf(&cell, "pid %d (%s) %s", s->top_proc.pid, s->top_proc.name,
		            fmt_bytes(b1, sizeof(b1), render_top_proc_bytes(s)));
		add_row(sb, "Most memory", strbuf_str(&cell));
	}
	if (s->run.bad_lines || s->run.long_lines) {
		strbuf_reset(&cell);
		strbuf_addf(&cell, "%lld malformed lines ignored, %lld too long",
		            (long long)s->run.bad_lines, (long long)s->run.long_lines);
		add_row(sb, "Channel", strbuf_str(&cell));
	}
	for (size_t i = 0; i < s->nresults; i++) {
		strbuf_reset(&cell);
		strbuf_addf(&cell, "%.6g", s->results[i].value);
		struct strbuf key = STRBUF_INIT;
		strbuf_addstr(&key, "Result ");
		render_add_md_code(&key, s->results[i].name, true);
		add_row(sb, strbuf_str(&key), strbuf_str(&cell));
		strbuf_release(&key);
	}

	bool have_q = render_have_slope(s);
	for (int i = 0; i < 5; i++)
		have_q = have_q && isfinite(a->q[i]);
	if (have_q) {
		char label[64];
		render_change_label(label, sizeof(label), s);
		label[0] = (char)(label[0] == 'p' ? 'P' : label[0] == 'c' ? 'C' : label[0]);
		strbuf_addf(sb, "\n%s (%s):\n\n", label, measure_name(s->measure));
		strbuf_addstr(sb, "| Min | Q1 | Median | Q3 | Max | steps/s |\n"
		                   "|---:|---:|---:|---:|---:|---:|\n|");
		for (int i = 0; i < 5; i++)
			strbuf_addf(sb, " %s |", fmt_bytes(b1, sizeof(b1), a->q[i]));
		if (s->steps_per_second > 0)
			strbuf_addf(sb, " %.3g |\n", s->steps_per_second);
		else
			strbuf_addstr(sb, " \xe2\x80\x93 |\n");
	}

	render_kinds_md(s, sb);
	if (s->census)
		census_report_md(s->census, sb);
	render_flight_md(s, sb);

	strbuf_release(&cell);
	strbuf_release(&cmd);
}
