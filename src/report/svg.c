/*
 * svg.c — one chart as a standalone SVG file, for pasting into an issue or
 * a paper: a run's memory over steps (over time when it marked no steps)
 * with every measure, the job's memory of each growth kind (thin lines,
 * keys kind-*), the warm-up and the trend of the judgment, restarts and
 * ends; or a sweep's memory per trial, colored by configuration.
 *
 * Drawn entirely from C (plot.c): no script, no external font or style; a
 * valid XML document that browsers, image viewers and converters such as
 * rsvg-convert and Inkscape open alike.
 */
#include <stdlib.h>
#include <string.h>

#include "report/charts.h"
#include "report/render.h"

void report_write_svg(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb)
{
	(void)x;
	struct run_charts c;
	/* no metrics: one chart, about memory, with one axis */
	run_charts_build(&c, s, NULL, 0, "run");
	struct plot *p = c.have_steps || !c.have_time ? &c.steps : &c.time;
	if (!c.have_steps && !c.have_time) {
		/* nothing recorded: empty axes still make a valid picture */
		p->title = "no memory was recorded for this run";
		p->x_kind = PLOT_NUMBER;
		p->y_kind = PLOT_BYTES;
	}
	p->id = "run";
	/* the growth kinds, summed over the job, as series of their own on
	 * the judged chart (the kinds chart's x is that chart's) */
	struct plot_series *all = NULL;
	if (c.have_kinds && p == (s->steps ? &c.steps : &c.time)) {
		all = xcalloc(p->nseries + c.kinds.nseries, sizeof(*all));
		memcpy(all, p->series, p->nseries * sizeof(*all));
		for (size_t i = 0; i < c.kinds.nseries; i++) {
			all[p->nseries + i] = c.kinds.series[i];
			all[p->nseries + i].stroke_px = 1.0;
		}
		p->series = all;
		p->nseries += c.kinds.nseries;
	}
	plot_svg(sb, p, true, NULL, NULL);
	free(all);
	run_charts_release(&c);
}

int sweep_write_svg(struct store *st, int64_t sweep_id, struct strbuf *sb)
{
	struct sweep_charts c;
	if (sweep_charts_open(st, sweep_id, &c) < 0)
		return -1;
	struct strbuf title = STRBUF_INIT;
	struct plot_legend_item *legend = sweep_charts_legend(&c);
	strbuf_addf(&title, "leakproof sweep %lld: memory over %s, by configuration", (long long)c.m.sw.id,
	            c.over_time ? "time" : "steps");
	c.memory.title = strbuf_str(&title);
	c.memory.legend = legend;
	c.memory.nlegend = c.nconfigs;
	c.memory.id = "sweep";
	plot_svg(sb, &c.memory, true, NULL, NULL);
	free(legend);
	strbuf_release(&title);
	sweep_charts_release(&c);
	return 0;
}
