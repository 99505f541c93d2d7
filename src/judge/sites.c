/*
 * judge/sites.c — a traced run's allocation sites, loaded and judged and
 * ranked (see sites.h); report/trace.c renders them.
 *
 * The store keeps, per site, its live sampled bytes each time they changed
 * (at most once a second). Here they become one series per site on a
 * common grid of record times (a site's value carries forward; before its
 * first record it held nothing), with x the last step marked by then (or
 * the time, for a run without steps). Each series is judged by
 * analyze_series(), the same judgment as the run's: a site is growing when
 * that says leak, so a large but flat site is not a suspect. They are
 * judged on the run's window (from the end of its warm-up); when the run
 * leaks and a site's records are too few (or too mixed) to judge on their
 * own, its share of the run's growth decides; a site that rises without
 * carrying it is undecided, never flat. Libraries are judged on the sum of
 * their sites' series.
 */
#include "judge/sites.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/analyze.h"
#include "core/symbolize.h"
#include "platform/symbols.h"
#include "store/trace.h"
#include "util/util.h"

#define GRID_MAX 2000          /* record times kept per series (evenly thinned) */
#define SITE_MIN_POINTS 10     /* records needed to judge a site (a run's own judgment
                                * wants 20 steps; sites are recorded 5 times a second
                                * at most, so a 2 s run can be judged) */
#define RUN_MIN_POINTS 20      /* below this many, a site's own no-leak is weak */
#define RUN_SHARE 0.25         /* share of the run's growth that makes a site growing
                                * when its own records cannot tell */

/* Frames that only pass an allocation on: the site is named after the
 * first frame that is none of these. */
static bool is_allocator(const struct trace_frame *f)
{
	static const char *const exact[] = {
		"malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign",
		"valloc", "pvalloc", "reallocarray", "mmap", "mmap64", "operator new", "operator new[]",
		"PyMem_Malloc", "PyMem_Calloc", "PyMem_Realloc", "PyMem_RawMalloc", "PyMem_RawCalloc",
		"PyMem_RawRealloc", "PyObject_Malloc", "PyObject_Calloc", "PyObject_Realloc",
		"c10::alloc_cpu", "H5MM_malloc", "H5MM_calloc", "H5MM_realloc",
	};
	static const char *const prefix[] = { "_PyObject_", "_PyMem_", "__libc_", "_int_", "c10::DefaultCPUAllocator::",
	                                      "std::__new_allocator<", "__gnu_cxx::new_allocator<" };
	/* libraries that only allocate for their callers: the C library, the
	 * C++ runtime (operator new), PyTorch's c10 (c10::alloc_cpu and its
	 * allocators), other malloc implementations */
	static const char *const libs[] = { "libleakproof-trace", "ld-linux", "libc.so", "libstdc++.so", "libc10.so",
	                                    "libjemalloc.so", "libtcmalloc" };
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		if (!strncmp(f->library, libs[i], strlen(libs[i])))
			return true;
	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (!strcmp(f->function, exact[i]))
			return true;
	for (size_t i = 0; i < sizeof(prefix) / sizeof(prefix[0]); i++)
		if (!strncmp(f->function, prefix[i], strlen(prefix[i])))
			return true;
	return false;
}

static void parse_frames(struct trace_site_report *r, const struct trace_site_row *row)
{
	char *frames = xstrdup(row->frames), *syms = row->symbols ? xstrdup(row->symbols) : NULL;
	char *p = frames, *q = syms, *f[3], *g[2];
	size_t cap = 0;
	while ((p = trace_text_next_line(p, f, 3))) {
		if (r->nframes == cap) {
			cap = cap ? 2 * cap : 16;
			r->frames = xrealloc(r->frames, cap * sizeof(*r->frames));
		}
		struct trace_frame *fr = &r->frames[r->nframes++];
		const char *slash = strrchr(f[0], '/');
		fr->library = xstrdup(slash ? slash + 1 : f[0]);
		q = trace_text_next_line(q, g, 2);
		if (q && g[0][0]) {
			fr->function = xstrdup(g[0]);
		} else {
			char fn[512];
			symbol_pretty(f[2], fn, sizeof(fn));
			fr->function = xstrdup(fn);
		}
		fr->source = xstrdup(q ? g[1] : "");
	}
	free(frames);
	free(syms);
	r->blame = 0;
	while (r->blame + 1 < r->nframes && is_allocator(&r->frames[r->blame]))
		r->blame++;
}

/* "LINE:FUNCTION:FILE\t..." */
static void parse_python(struct trace_site_report *r, const char *text)
{
	if (!text || !*text)
		return;
	char *copy = xstrdup(text), *save = NULL;
	size_t cap = 0;
	for (char *tok = strtok_r(copy, "\t", &save); tok; tok = strtok_r(NULL, "\t", &save)) {
		char *c1 = strchr(tok, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c1 = *c2 = '\0';
		if (r->npython == cap) {
			cap = cap ? 2 * cap : 8;
			r->python = xrealloc(r->python, cap * sizeof(*r->python));
		}
		struct trace_pyframe *pf = &r->python[r->npython++];
		pf->line = atoi(tok);
		pf->function = xstrdup(c1 + 1);
		pf->file = xstrdup(c2 + 1);
	}
	free(copy);
}

/* ---- the series -------------------------------------------------------- */

struct grid {
	double *x;             /* ncols */
	double *y;             /* nsites x ncols, row-major */
	size_t ncols, nsites;
};

/* The index in rows (sorted by site id, as the store loads them) of site,
 * or SIZE_MAX when there is none. The store is outside input: its ids need
 * not be 1..n, and a live row may name a site that is not there. */
static size_t site_index(const struct trace_site_row *rows, size_t nrows, int64_t site)
{
	size_t lo = 0, hi = nrows;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rows[mid].site < site)
			lo = mid + 1;
		else if (rows[mid].site > site)
			hi = mid;
		else
			return mid;
	}
	return SIZE_MAX;
}

/* Carry each site's value forward over the record times (with a step when
 * by_step), keeping at most GRID_MAX of them, evenly spaced. Row s of the
 * grid is rows[s]. */
static void build_grid(const struct trace_live_row *live, size_t nlive, const struct trace_site_row *rows,
                       size_t nsites, bool by_step, struct grid *g)
{
	size_t times = 0;
	for (size_t i = 0; i < nlive; i++)
		if ((!by_step || live[i].has_step) && (i == 0 || live[i].t != live[i - 1].t))
			times++;
	size_t stride = times > GRID_MAX ? (times + GRID_MAX - 1) / GRID_MAX : 1;
	g->nsites = nsites;
	g->ncols = 0;
	g->x = xcalloc(times / stride + 2, sizeof(double));
	g->y = xcalloc(nsites * (times / stride + 2) + 1, sizeof(double));
	double *cur = xcalloc(nsites + 1, sizeof(double));
	size_t group = 0;
	for (size_t i = 0; i < nlive; i++) {
		const struct trace_live_row *r = &live[i];
		size_t k = site_index(rows, nsites, r->site);
		if (k != SIZE_MAX)
			cur[k] = (double)r->live;
		bool last_of_time = i + 1 == nlive || live[i + 1].t != r->t;
		if (!last_of_time || (by_step && !r->has_step))
			continue;
		bool keep = group % stride == 0 || i + 1 == nlive;
		group++;
		if (!keep)
			continue;
		size_t c = g->ncols++;
		g->x[c] = by_step ? (double)r->step : r->t;
		for (size_t s = 0; s < nsites; s++)
			g->y[s * (times / stride + 2) + c] = cur[s];
	}
	/* rows were laid out with room for every kept column: compact them */
	size_t width = times / stride + 2;
	for (size_t s = 1; s < nsites; s++)
		memmove(g->y + s * g->ncols, g->y + s * width, g->ncols * sizeof(double));
	free(cur);
}

const char *site_state_name(enum site_state s)
{
	switch (s) {
	case SITE_GROWING: return "growing";
	case SITE_UNDECIDED: return "undecided";
	default: return "flat";
	}
}

/* The series carries the run's growth: its trend is a share of the run's,
 * it matters, and its last value is above its first by half of it (a
 * site's own rise, not a spike: short-lived sites stay out). */
static bool carries_run_growth(const double *x, const double *y, size_t n, double slope, double thr,
                               const struct analysis *run)
{
	if (!run || run->verdict != VERDICT_LEAK || !(run->slope > 0) || n < 2 || !isfinite(slope))
		return false;
	double span = x[n - 1] - x[0];
	return span > 0 && slope >= RUN_SHARE * run->slope && slope * span >= thr &&
	       y[n - 1] - y[0] >= 0.5 * slope * span;
}

void trace_judge_series(const double *x, const double *y, size_t n, int64_t mean, const char *x_unit,
                        const struct analysis *run, struct site_judgment *out)
{
	struct analyze_opts o;
	analyze_opts_init(&o);
	o.x_unit = x_unit;
	/* a site's record moves in steps of about the sampling mean: less
	 * than a few of them over the window is not growth */
	double thr = 4.0 * (double)mean;
	if (o.min_growth_bytes < thr)
		o.min_growth_bytes = thr;
	o.min_points = SITE_MIN_POINTS;
	struct analysis a;
	analyze_series(x, y, n, &o, &a);
	bool fit = a.points >= 2;
	out->growth = fit ? a.slope : NAN;
	out->growth_low = fit ? a.slope_low : NAN;
	out->growth_high = fit ? a.slope_high : NAN;
	snprintf(out->reason, sizeof(out->reason), "%s", a.reason);
	if (a.verdict == VERDICT_LEAK) {
		out->state = SITE_GROWING;
		return;
	}
	/* too few records, or a judgment that could not decide, while the run
	 * leaks: the share of its growth decides. Its own no-leak on the
	 * records a run needs stands. */
	bool weak = a.verdict == VERDICT_INCONCLUSIVE || a.points - a.warmup_points < RUN_MIN_POINTS;
	if (weak && carries_run_growth(x, y, n, a.slope, thr, run)) {
		char g[32], r[32];
		out->state = SITE_GROWING;
		snprintf(out->reason, sizeof(out->reason),
		         "grows %s per %s, %.0f%% of the run's %s, over the run's window (on its own: %.150s)",
		         fmt_bytes(g, sizeof(g), a.slope), x_unit, 100.0 * a.slope / run->slope,
		         fmt_bytes(r, sizeof(r), run->slope), a.reason);
		return;
	}
	if (a.verdict == VERDICT_NO_LEAK) {
		out->state = SITE_FLAT;
		return;
	}
	/* undecided, unless its few records show no rise that matters at all */
	bool rises = !fit || !(a.slope * (x[n - 1] - x[0]) < thr) || y[n - 1] - y[0] >= thr;
	out->state = rises ? SITE_UNDECIDED : SITE_FLAT;
}

static void judge(const double *x, const double *y, size_t n, int64_t mean, const char *x_unit,
                  const struct analysis *run, double *growth, double *low, double *high,
                  enum site_state *state, bool *growing, char *reason, size_t reason_size)
{
	struct site_judgment j;
	trace_judge_series(x, y, n, mean, x_unit, run, &j);
	*growth = j.growth;
	*low = j.growth_low;
	*high = j.growth_high;
	*state = j.state;
	*growing = j.state == SITE_GROWING;
	snprintf(reason, reason_size, "%s", j.reason);
}

static int by_growth(double ga, bool wa, double gb, bool wb)
{
	if (wa != wb)
		return wa ? -1 : 1;
	if (isnan(ga) || isnan(gb))
		return isnan(ga) - isnan(gb);
	return ga > gb ? -1 : ga < gb;
}

static int cmp_sites(const void *a, const void *b)
{
	const struct trace_site_report *x = a, *y = b;
	int c = by_growth(x->growth, x->growing, y->growth, y->growing);
	return c ? c : (x->live > y->live ? -1 : x->live < y->live);
}

static int cmp_libs(const void *a, const void *b)
{
	const struct trace_lib_report *x = a, *y = b;
	int c = by_growth(x->growth, x->growing, y->growth, y->growing);
	return c ? c : (x->live > y->live ? -1 : x->live < y->live);
}

int trace_report_load(struct store *st, int64_t run_id, bool by_step, double until, const struct analysis *run,
                      struct trace_report *out)
{
	memset(out, 0, sizeof(*out));
	if (store_trace_mean(st, run_id, &out->mean_bytes) < 0)
		return -1;
	if (out->mean_bytes <= 0)
		return 1;
	struct trace_site_row *rows;
	struct trace_live_row *live;
	size_t nrows, nlive;
	if (store_trace_load_sites(st, run_id, &rows, &nrows) < 0)
		return -1;
	if (store_trace_load_live(st, run_id, &live, &nlive) < 0) {
		trace_site_rows_free(rows, nrows);
		return -1;
	}
	/* records after `until` (the job's teardown, after its last step) are
	 * not part of the training: Python frees everything as it exits */
	if (until > 0)
		while (nlive && live[nlive - 1].t > until)
			nlive--;
	/* a run that marked steps only after its first records: judge by step
	 * only if there are steps at all */
	bool asked_by_step = by_step, any_step = false;
	for (size_t i = 0; i < nlive && !any_step; i++)
		any_step = live[i].has_step;
	by_step = by_step && any_step;
	out->x_unit = by_step ? "step" : "s";

	struct grid g;
	build_grid(live, nlive, rows, nrows, by_step, &g);
	/* the run's window, from where its warm-up ends, when the sites have
	 * the run's x (a run without steps is judged over time) */
	if (by_step != asked_by_step)
		run = NULL;
	size_t from = 0;
	if (run && run->points && isfinite(run->window_from_x))
		while (from < g.ncols && g.x[from] < run->window_from_x)
			from++;
	size_t nwin = g.ncols - from;

	/* frames not named yet (the run was killed before its end): here,
	 * without keeping them (the store is open read-only) */
	struct symbolizer *sy = NULL;
	for (size_t i = 0; i < nrows; i++)
		if (!rows[i].symbols)
			rows[i].symbols = trace_symbolize_frames(&sy, rows[i].frames);
	symbolizer_free(sy);

	out->sites = xcalloc(nrows + 1, sizeof(*out->sites));
	for (size_t i = 0; i < nrows; i++) {
		struct trace_site_report *r = &out->sites[out->nsites++];
		r->site = rows[i].site;
		r->kind = rows[i].kind;
		r->allocs = rows[i].allocs;
		r->frees = rows[i].frees;
		parse_frames(r, &rows[i]);
		parse_python(r, rows[i].python);
		const double *y = g.y + i * g.ncols;
		r->live = g.ncols ? y[g.ncols - 1] : (double)rows[i].live;
		judge(g.x + from, y + from, nwin, out->mean_bytes, out->x_unit, run, &r->growth, &r->growth_low,
		      &r->growth_high, &r->state, &r->growing, r->reason, sizeof(r->reason));
		out->ngrowing += r->growing;
		out->nundecided += r->state == SITE_UNDECIDED;
	}

	/* libraries: the sum of their sites */
	out->libs = xcalloc(out->nsites + 1, sizeof(*out->libs));
	double *sum = xcalloc(g.ncols + 1, sizeof(double));
	for (size_t i = 0; i < out->nsites; i++) {
		const struct trace_site_report *r = &out->sites[i];
		const char *lib = r->nframes ? r->frames[r->blame].library : "?";
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = out->sites[j].nframes && !strcmp(out->sites[j].frames[out->sites[j].blame].library, lib);
		if (seen)
			continue;
		memset(sum, 0, g.ncols * sizeof(double));
		struct trace_lib_report *l = &out->libs[out->nlibs++];
		l->library = xstrdup(lib);
		for (size_t j = i; j < out->nsites; j++) {
			const struct trace_site_report *o = &out->sites[j];
			if (!o->nframes || strcmp(o->frames[o->blame].library, lib))
				continue;
			const double *y = g.y + j * g.ncols;
			for (size_t c = 0; c < g.ncols; c++)
				sum[c] += y[c];
			l->live += o->live;
		}
		double lo, hi;
		judge(g.x + from, sum + from, nwin, out->mean_bytes, out->x_unit, run, &l->growth, &lo, &hi, &l->state,
		      &l->growing, l->reason, sizeof(l->reason));
	}
	free(sum);
	free(g.x);
	free(g.y);
	free(live);
	trace_site_rows_free(rows, nrows);
	qsort(out->sites, out->nsites, sizeof(*out->sites), cmp_sites);
	qsort(out->libs, out->nlibs, sizeof(*out->libs), cmp_libs);
	return 0;
}

void trace_report_release(struct trace_report *r)
{
	for (size_t i = 0; i < r->nsites; i++) {
		struct trace_site_report *s = &r->sites[i];
		for (size_t j = 0; j < s->nframes; j++) {
			free(s->frames[j].function);
			free(s->frames[j].library);
			free(s->frames[j].source);
		}
		free(s->frames);
		for (size_t j = 0; j < s->npython; j++) {
			free(s->python[j].file);
			free(s->python[j].function);
		}
		free(s->python);
	}
	free(r->sites);
	for (size_t i = 0; i < r->nlibs; i++)
		free(r->libs[i].library);
	free(r->libs);
	memset(r, 0, sizeof(*r));
}
