/*
 * charts.c — from a stored run (struct run_summary) or sweep to the charts
 * the html and svg reports draw (see charts.h).
 *
 * The judged series is rebuilt here the way report.c builds it for the
 * judgment (the steps of the judged segment, x the step number or, when
 * the numbers do not increase, the ordinal; or the samples binned into
 * s->bin_seconds bins, each bin's median), so that the warm-up boundary
 * (analysis.warmup_end_x) and the trend (analysis.slope) land where the
 * judgment put them. The trend's intercept is Theil–Sen's: the median of
 * y - slope * x over the judged window.
 *
 * Units: bytes; x in steps or seconds since the run started.
 */
#include "report/charts.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "judge/kinds.h"
#include "report/render.h"
#include "util/stats.h"

#define MAX_HIST_BINS 40
#define MIN_HIST_BINS 5

static const struct {
	enum measure m;
	const char *key, *name, *color;
} measures[] = {
	{ MEASURE_PSS, "pss", "PSS", "#1f77b4" },
	{ MEASURE_RSS, "rss", "RSS", "#ff7f0e" },
	{ MEASURE_USS, "uss", "USS", "#2ca02c" },
	{ MEASURE_CGROUP, "cgroup", "cgroup", "#9467bd" },
	{ MEASURE_GPU, "gpu", "GPU", "#8c564b" },
};
#define NMEASURES (sizeof(measures) / sizeof(measures[0]))

static const char *const metric_colors[CHARTS_MAX_METRICS] = { "#e377c2", "#17becf", "#bcbd22", "#7f7f7f" };

static void *keep(struct run_charts *c, void *p)
{
	if (c->npool == c->pool_cap) {
		c->pool_cap = c->pool_cap ? c->pool_cap * 2 : 32;
		c->pool = xrealloc(c->pool, c->pool_cap * sizeof(void *));
	}
	c->pool[c->npool++] = p;
	return p;
}

static double *doubles(struct run_charts *c, size_t n)
{
	return keep(c, xmalloc((n ? n : 1) * sizeof(double)));
}

static char *keep_printf(struct run_charts *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *keep_printf(struct run_charts *c, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	return keep(c, strbuf_detach(&sb, NULL));
}

/* ---- the judged series -------------------------------------------------- */

struct judged {
	const double *ax, *y;   /* as the judgment saw it (the summary's): analysis x, bytes */
	double *px;         /* x on the chart it is drawn on */
	size_t n;
};

static bool steps_increasing(const struct run_summary *s, size_t first, size_t end)
{
	for (size_t i = first + 1; i < end; i++)
		if (s->step_recs[i].step <= s->step_recs[i - 1].step)
			return false;
	return true;
}

/* The judged series (the summary's), placed on the chart of its x: a
 * step where the steps chart draws it, a time bin at its time. */
static void judged_series(struct run_charts *c, const struct run_summary *s, const double *step_px,
                          struct judged *j)
{
	j->n = s->judged_n;
	j->ax = s->judged_x;
	j->y = s->judged_y;
	j->px = doubles(c, j->n);
	for (size_t i = 0; i < j->n; i++)
		j->px[i] = s->judged_rec ? step_px[s->judged_rec[i]] : s->judged_x[i];
}

/* The chart x of analysis x ax: that of the first judged point at or
 * after it. */
static double chart_x_of(const struct judged *j, double ax)
{
	for (size_t i = 0; i < j->n; i++)
		if (j->ax[i] >= ax)
			return j->px[i];
	return j->n ? j->px[j->n - 1] : NAN;
}

/* Warm-up band and trend line of the judgment on the chart the judged
 * series is drawn on. */
static void add_judgment(struct run_charts *c, const struct run_summary *s, const struct judged *j, struct plot *p)
{
	if (!j->n)
		return;
	if (s->a.warmup_points > 0 && isfinite(s->a.warmup_end_x)) {
		struct plot_band *b = keep(c, xcalloc(1, sizeof(*b)));
		b->x0 = j->px[0];
		b->x1 = chart_x_of(j, s->a.warmup_end_x);
		b->label = "warm-up";
		p->bands = b;
		p->nbands = 1;
	}
	if (!render_have_slope(s))
		return;
	/* Theil–Sen intercept over the judged window */
	double *r = xmalloc(j->n * sizeof(double));
	size_t k = 0, from = j->n;
	for (size_t i = 0; i < j->n; i++)
		if (j->ax[i] >= s->a.window_from_x) {
			if (from == j->n)
				from = i;
			r[k++] = j->y[i] - s->a.slope * j->ax[i];
		}
	if (k >= 2) {
		qsort(r, k, sizeof(double), cmp_double);
		double b0 = median_sorted(r, k);
		struct plot_trend *t = keep(c, xcalloc(1, sizeof(*t)));
		double a0 = j->ax[from], a1 = j->ax[j->n - 1];
		t->x0 = j->px[from];
		t->x1 = j->px[j->n - 1];
		t->y0 = b0 + s->a.slope * a0;
		t->y1 = b0 + s->a.slope * a1;
		char g[32];
		t->label = keep_printf(c, "trend over the judged window: %s%s (Theil\xe2\x80\x93Sen)",
		                       render_signed_bytes(g, sizeof(g), s->a.slope), render_x_suffix(s));
		p->trends = t;
		p->ntrends = 1;
	}
	free(r);
}

/* ---- markers ------------------------------------------------------------ */

/* Step index of the first step at or after time t; s->steps when none. */
static size_t step_at_or_after(const struct run_summary *s, double t)
{
	size_t lo = 0, hi = s->steps;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->step_recs[mid].mem.t < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Restarts and ends that were not clean exits, on a chart of steps (step_px
 * not NULL) or of time. */
static void add_markers(struct run_charts *c, const struct run_summary *s, const double *step_px, struct plot *p)
{
	struct plot_vline *v = keep(c, xcalloc(2 * s->nsegments + 1, sizeof(*v)));
	size_t n = 0;
	char mem[32];
	for (size_t k = 0; k < s->nsegments; k++) {
		const struct segment_row *g = &s->segments[k];
		if (k > 0) {
			double t = g->started_at - s->run.started_at;
			double x = t;
			if (step_px) {
				size_t i = step_at_or_after(s, t);
				x = i < s->steps ? step_px[i] : NAN;
			}
			if (isfinite(x)) {
				v[n].x = x;
				v[n].kind = PLOT_MARK_RESTART;
				v[n].label = keep_printf(c, "restart #%lld", (long long)g->seq);
				v[n].title = keep_printf(c, "process #%lld started (%s)", (long long)g->seq,
				                         s->segments[k - 1].restart[0] ? s->segments[k - 1].restart : "restart");
				n++;
			}
		}
		if (g->cause == CAUSE_NONE || g->cause == CAUSE_EXIT || g->ended_at <= 0)
			continue;
		double t = g->ended_at - s->run.started_at, x = t;
		if (step_px) {
			size_t i = step_at_or_after(s, t + 1e-9);
			x = i > 0 ? step_px[i - 1] : NAN;
		}
		if (!isfinite(x))
			continue;
		v[n].x = x;
		v[n].kind = PLOT_MARK_END;
		v[n].cause = cause_name(g->cause);
		v[n].label = cause_name(g->cause);
		struct strbuf title = STRBUF_INIT;
		strbuf_addf(&title, "process #%lld ended: %s", (long long)g->seq, cause_name(g->cause));
		if (g->has_step)
			strbuf_addf(&title, " at step %lld", (long long)g->end_step);
		if (g->memory_bytes)
			strbuf_addf(&title, " with %s", fmt_bytes(mem, sizeof(mem), (double)g->memory_bytes));
		if (g->evidence[0]) {
			strbuf_addstr(&title, ": ");
			strbuf_addstr(&title, g->evidence);
		}
		v[n++].title = keep(c, strbuf_detach(&title, NULL));
	}
	p->vlines = v;
	p->nvlines = n;
}

/* ---- the memory charts -------------------------------------------------- */

/* Whether measure m has a value in any of the n samples. */
static bool measure_present(const struct mem_sample *sm, size_t n, size_t stride, enum measure m)
{
	for (size_t i = 0; i < n; i++) {
		const struct mem_sample *x = (const struct mem_sample *)((const char *)sm + i * stride);
		if (mem_sample_value(x, m) > 0)
			return true;
	}
	return false;
}

/* Series of every measure recorded, the judged one first and bold. */
static size_t add_measures(struct run_charts *c, const struct run_summary *s, const struct mem_sample *sm,
                           size_t n, size_t stride, const double *x, struct plot_series *out)
{
	size_t k = 0;
	for (int pass = 0; pass < 2; pass++)
		for (size_t m = 0; m < NMEASURES; m++) {
			bool judged = measures[m].m == s->measure;
			if (judged != (pass == 0) || !measure_present(sm, n, stride, measures[m].m))
				continue;
			double *y = doubles(c, n);
			for (size_t i = 0; i < n; i++) {
				const struct mem_sample *ms = (const struct mem_sample *)((const char *)sm + i * stride);
				double v = mem_sample_value(ms, measures[m].m);
				y[i] = v >= 0 ? v : NAN;
			}
			struct plot_series *se = &out[k++];
			se->name = judged ? keep_printf(c, "%s (judged)", measures[m].name) : measures[m].name;
			se->key = measures[m].key;
			se->color = measures[m].color;
			se->x = x;
			se->y = y;
			se->n = n;
			se->stroke_px = judged ? 2.5 : 1.2;
		}
	return k;
}

/* Client metrics against x: on steps (step_px, by the time each was sent)
 * or on time. */
static size_t add_metrics(struct run_charts *c, const struct run_summary *s, const struct metric_row *mr,
                          size_t nm, const double *step_px, struct plot_series *out, const char **y2_label)
{
	const char *names[CHARTS_MAX_METRICS];
	size_t nnames = 0;
	c->metrics_left_out = 0;
	for (size_t i = 0; i < nm; i++) {
		size_t k = 0;
		while (k < nnames && strcmp(names[k], mr[i].name))
			k++;
		if (k < nnames)
			continue;
		if (nnames == CHARTS_MAX_METRICS) {
			bool seen = false;
			for (size_t j = 0; j < i && !seen; j++)
				seen = !strcmp(mr[j].name, mr[i].name);
			c->metrics_left_out += !seen;
			continue;
		}
		names[nnames++] = mr[i].name;
	}
	struct strbuf label = STRBUF_INIT;
	for (size_t k = 0; k < nnames; k++) {
		double *x = doubles(c, nm), *y = doubles(c, nm);
		size_t n = 0;
		for (size_t i = 0; i < nm; i++) {
			if (strcmp(mr[i].name, names[k]) || !isfinite(mr[i].value))
				continue;
			double xi = mr[i].t;
			if (step_px) {
				size_t at = step_at_or_after(s, mr[i].t);
				if (at >= s->steps)
					continue;
				xi = step_px[at];
			}
			x[n] = xi;
			y[n++] = mr[i].value;
		}
		struct plot_series *se = &out[k];
		se->name = names[k];
		se->key = keep_printf(c, "metric-%s", names[k]);
		se->color = metric_colors[k];
		se->x = x;
		se->y = y;
		se->n = n;
		se->stroke_px = 1.2;
		se->right_axis = true;
		strbuf_addstr(&label, k ? ", " : "");
		strbuf_addstr(&label, names[k]);
	}
	*y2_label = nnames ? keep(c, strbuf_detach(&label, NULL)) : NULL;
	strbuf_release(&label);
	return nnames;
}

static void build_histogram(struct run_charts *c, const struct run_summary *s, const struct judged *j,
                            const char *prefix)
{
	if (j->n < 3 || !render_have_slope(s))
		return;
	size_t nd = j->n - 1;
	double *d = doubles(c, nd);
	double lo = INFINITY, hi = -INFINITY;
	for (size_t i = 0; i < nd; i++) {
		d[i] = j->y[i + 1] - j->y[i];
		lo = fmin(lo, d[i]);
		hi = fmax(hi, d[i]);
	}
	size_t nb = (size_t)ceil(sqrt((double)nd));
	nb = nb < MIN_HIST_BINS ? MIN_HIST_BINS : nb > MAX_HIST_BINS ? MAX_HIST_BINS : nb;
	double w = (hi - lo) / (double)nb;
	if (!(w > 0)) {
		nb = 1;
		w = fmax(fabs(lo) * 0.1, 1);
		lo -= w / 2;
	}
	double *bx = doubles(c, nb), *by = doubles(c, nb);
	for (size_t b = 0; b < nb; b++) {
		bx[b] = lo + w * ((double)b + 0.5);
		by[b] = 0;
	}
	for (size_t i = 0; i < nd; i++) {
		size_t b = (size_t)((d[i] - lo) / w);
		by[b < nb ? b : nb - 1] += 1;
	}
	struct plot_series *se = keep(c, xcalloc(1, sizeof(*se)));
	se->name = "points";
	se->key = "change";
	se->color = "#1f77b4";
	se->x = bx;
	se->y = by;
	se->n = nb;
	se->bars = true;
	se->bar_width = w;
	static const char *const qnames[5] = { "min", "q1", "median", "q3", "max" };
	struct plot_vline *v = keep(c, xcalloc(5, sizeof(*v)));
	size_t nv = 0;
	char b1[32];
	for (int q = 0; q < 5; q++) {
		c->q[q] = s->a.q[q];
		if (!isfinite(s->a.q[q]))
			continue;
		v[nv].x = s->a.q[q];
		v[nv].kind = PLOT_MARK_QUANTILE;
		v[nv].label = qnames[q];
		v[nv].title = keep_printf(c, "%s %s", qnames[q], fmt_bytes(b1, sizeof(b1), s->a.q[q]));
		nv++;
	}
	char label[64];
	render_change_label(label, sizeof(label), s);
	struct plot *p = &c->change;
	p->id = keep_printf(c, "%s-change", prefix);
	p->title = keep_printf(c, "Distribution of the %s (%s)", label, measure_name(s->measure));
	p->x_label = keep_printf(c, "%s (bytes)", label);
	p->y_label = strcmp(s->x_unit, "s") ? "steps" : "time bins";
	p->x_kind = PLOT_BYTES;
	p->y_kind = PLOT_NUMBER;
	p->height_px = 300;
	p->y_from_zero = true;
	p->series = se;
	p->nseries = 1;
	p->vlines = v;
	p->nvlines = nv;
	c->have_change = true;
}

/* A chart of memory: every measure recorded in the n records from sm
 * (stride bytes apart), the client's metrics on the second axis, the
 * restarts and ends; x is each record's place, in steps as drawn (steps)
 * or in seconds. The caller names the chart and its x. Whether it has a
 * series. */
static bool build_memory(struct run_charts *c, const struct run_summary *s, const struct mem_sample *sm, size_t n,
                         size_t stride, const double *x, bool steps, const struct metric_row *metrics,
                         size_t nmetrics, struct plot *p)
{
	const double *step_px = steps ? x : NULL;
	struct plot_series *se = keep(c, xcalloc(NMEASURES + CHARTS_MAX_METRICS, sizeof(*se)));
	size_t ns = add_measures(c, s, sm, n, stride, x, se);
	ns += add_metrics(c, s, metrics, nmetrics, step_px, se + ns, &p->y2_label);
	p->y_label = "memory";
	p->x_kind = steps ? PLOT_NUMBER : PLOT_SECONDS;
	p->y_kind = PLOT_BYTES;
	p->y2_kind = PLOT_NUMBER;
	p->series = se;
	p->nseries = ns;
	add_markers(c, s, step_px, p);
	return ns > 0;
}

static const struct {
	const char *key, *name, *color;
} kind_series[KIND_COUNT] = {
	[KIND_ANONYMOUS] = { "kind-anonymous", "anonymous (every process)", "#d62728" },
	[KIND_COW] = { "kind-copy-on-write", "copy-on-write (forked workers)", "#e377c2" },
	[KIND_FILE] = { "kind-file-cache", "file-cache", "#17becf" },
	[KIND_SHMEM] = { "kind-shared-memory", "shared-memory", "#bcbd22" },
	[KIND_GPU] = { "kind-gpu", "GPU (processes)", "#8c564b" },
};

/* The job's memory by kind at the judged chart's points: each step's time
 * (x the step as drawn), or each sample's. */
static void build_kinds(struct run_charts *c, const struct run_summary *s, const double *step_px,
                        const char *prefix)
{
	size_t n = s->steps ? s->steps : s->nsamples;
	if (!s->kinds || !s->kinds->nrows || !n)
		return;
	double *t = doubles(c, n), *y[KIND_COUNT];
	for (size_t i = 0; i < n; i++)
		t[i] = s->steps ? s->step_recs[i].mem.t : s->samples[i].t;
	for (int k = 0; k < KIND_COUNT; k++)
		y[k] = doubles(c, n);
	unsigned mask = run_kinds_totals(s->kinds, t, n, y);
	struct plot_series *se = keep(c, xcalloc(KIND_COUNT, sizeof(*se)));
	size_t ns = 0;
	for (int k = 0; k < KIND_COUNT; k++) {
		if (!(mask & (1u << k)))
			continue;
		se[ns].name = kind_series[k].name;
		se[ns].key = kind_series[k].key;
		se[ns].color = kind_series[k].color;
		se[ns].x = s->steps ? step_px : t;
		se[ns].y = y[k];
		se[ns].n = n;
		se[ns++].stroke_px = 1.5;
	}
	struct plot *p = &c->kinds;
	p->id = keep_printf(c, "%s-kinds", prefix);
	p->title = keep_printf(c, "Memory by kind \xe2\x80\x94 run %lld", (long long)s->run.id);
	p->x_label = s->steps ? "step" : "time since the start";
	p->y_label = "memory";
	p->x_kind = s->steps ? PLOT_NUMBER : PLOT_SECONDS;
	p->y_kind = PLOT_BYTES;
	p->y_from_zero = true;
	p->series = se;
	p->nseries = ns;
	c->have_kinds = ns > 0;
}

void run_charts_build(struct run_charts *c, const struct run_summary *s,
                      const struct metric_row *metrics, size_t nmetrics, const char *prefix)
{
	memset(c, 0, sizeof(*c));
	for (int q = 0; q < 5; q++)
		c->q[q] = NAN;
	const char *mname = measure_name(s->measure);
	const char *verdict = verdict_name(s->a.verdict);
	if (!metrics)
		nmetrics = 0;

	/* memory over steps */
	double *step_px = NULL;
	if (s->steps) {
		bool inc = steps_increasing(s, 0, s->steps);
		step_px = doubles(c, s->steps);
		for (size_t i = 0; i < s->steps; i++)
			step_px[i] = inc ? (double)s->step_recs[i].step : (double)(i + 1);
		struct plot *p = &c->steps;
		p->id = keep_printf(c, "%s-steps", prefix);
		p->title = keep_printf(c, "Memory over steps \xe2\x80\x94 run %lld, %s by %s", (long long)s->run.id,
		                       verdict, mname);
		p->x_label = inc ? "step" : "step (in the order marked)";
		c->have_steps = build_memory(c, s, &s->step_recs[0].mem, s->steps, sizeof(struct step_rec), step_px,
		                             true, metrics, nmetrics, p);
	}

	/* memory over time */
	if (s->nsamples) {
		double *t = doubles(c, s->nsamples);
		for (size_t i = 0; i < s->nsamples; i++)
			t[i] = s->samples[i].t;
		struct plot *p = &c->time;
		p->id = keep_printf(c, "%s-time", prefix);
		p->title = keep_printf(c, "Memory over time \xe2\x80\x94 run %lld", (long long)s->run.id);
		if (!s->steps)
			p->title = keep_printf(c, "Memory over time \xe2\x80\x94 run %lld, %s by %s", (long long)s->run.id,
			                       verdict, mname);
		p->x_label = "time since the start";
		c->have_time = build_memory(c, s, s->samples, s->nsamples, sizeof(struct mem_sample), t, false, metrics,
		                            nmetrics, p);
	}

	/* the judgment, on the chart of its own x */
	struct judged j;
	judged_series(c, s, step_px, &j);
	add_judgment(c, s, &j, s->steps ? &c->steps : &c->time);
	build_histogram(c, s, &j, prefix);
	build_kinds(c, s, step_px, prefix);
}

void run_charts_release(struct run_charts *c)
{
	for (size_t i = 0; i < c->npool; i++)
		free(c->pool[i]);
	free(c->pool);
	memset(c, 0, sizeof(*c));
}

/* ---- sweeps ------------------------------------------------------------- */

/* The memory series of one trial's run, and its change. */
static int load_trial_series(struct store *st, const struct sweep_charts *c, struct sweep_trial_series *ts)
{
	if (sweep_trial_series_load(st, ts->t, c->over_time, &ts->x, &ts->y, &ts->n) < 0)
		return -1;
	ts->dy = xmalloc((ts->n ? ts->n : 1) * sizeof(double));
	for (size_t i = 0; i < ts->n; i++)
		ts->dy[i] = i ? ts->y[i] - ts->y[i - 1] : NAN;
	return 0;
}

int sweep_charts_open(struct store *st, int64_t sweep_id, struct sweep_charts *c)
{
	memset(c, 0, sizeof(*c));
	if (sweep_model_open(st, sweep_id, &c->m) < 0)
		return -1;

	bool any_steps = false;
	for (size_t i = 0; i < c->m.ntrials; i++)
		any_steps = any_steps || c->m.trials[i].steps > 0;
	c->over_time = !any_steps;
	c->ts = xcalloc(c->m.ntrials + 1, sizeof(*c->ts));
	char **configs = xcalloc(c->m.ntrials + 1, sizeof(char *));
	for (size_t i = 0; i < c->m.ntrials; i++) {
		struct sweep_trial_series *ts = &c->ts[i];
		ts->t = &c->m.trials[i];
		snprintf(ts->label, sizeof(ts->label), ts->t->attempt ? "trial %lld.%lld" : "trial %lld",
		         (long long)ts->t->idx + 1, (long long)ts->t->attempt);
		ts->config = sweep_trial_config(&c->m, ts->t);
		size_t k = 0;
		while (k < c->nconfigs && strcmp(configs[k], ts->config))
			k++;
		if (k == c->nconfigs)
			configs[c->nconfigs++] = ts->config;
		ts->config_index = k;
		if (load_trial_series(st, c, ts) < 0) {
			free(configs);
			sweep_charts_release(c);
			return -1;
		}
	}
	free(configs);

	c->series = xcalloc(2 * c->m.ntrials + 1, sizeof(*c->series));
	size_t nm = 0, nc = 0;
	struct plot_series *mem = c->series, *chg = c->series + c->m.ntrials;
	for (size_t i = 0; i < c->m.ntrials; i++) {
		struct sweep_trial_series *ts = &c->ts[i];
		if (!ts->n)
			continue;
		const char *color = plot_color(ts->config_index);
		mem[nm] = (struct plot_series){ .name = ts->label, .key = ts->label, .color = color, .x = ts->x,
		                                .y = ts->y, .n = ts->n, .stroke_px = 1.5, .no_legend = true };
		nm++;
		chg[nc] = (struct plot_series){ .name = ts->label, .key = ts->label, .color = color, .x = ts->x,
		                                .y = ts->dy, .n = ts->n, .stroke_px = 1, .no_legend = true };
		nc++;
	}
	c->memory = (struct plot){
		.id = "sweep-memory", .x_label = c->over_time ? "time since the trial started" : "step",
		.y_label = "memory", .x_kind = c->over_time ? PLOT_SECONDS : PLOT_NUMBER, .y_kind = PLOT_BYTES,
		.series = mem, .nseries = nm,
	};
	c->change = (struct plot){
		.id = "sweep-change", .x_label = c->over_time ? "time since the trial started" : "step",
		.y_label = c->over_time ? "change per sample" : "change per step",
		.x_kind = c->over_time ? PLOT_SECONDS : PLOT_NUMBER, .y_kind = PLOT_BYTES,
		.series = chg, .nseries = nc,
	};
	return 0;
}

void sweep_charts_release(struct sweep_charts *c)
{
	for (size_t i = 0; c->ts && i < c->m.ntrials; i++) {
		free(c->ts[i].config);
		free(c->ts[i].x);
		free(c->ts[i].y);
		free(c->ts[i].dy);
	}
	free(c->ts);
	free(c->series);
	sweep_model_release(&c->m);
	memset(c, 0, sizeof(*c));
}

struct plot_legend_item *sweep_charts_legend(const struct sweep_charts *c)
{
	struct plot_legend_item *items = xcalloc(c->nconfigs + 1, sizeof(*items));
	for (size_t i = 0; i < c->m.ntrials; i++) {
		size_t k = c->ts[i].config_index;
		if (!items[k].name) {
			items[k].name = c->ts[i].config;
			items[k].color = plot_color(k);
		}
	}
	return items;
}
