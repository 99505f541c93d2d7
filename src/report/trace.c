/*
 * report/trace.c — a traced run's allocation sites, judged and ranked (see
 * trace.h).
 *
 * The store keeps, per site, its live sampled bytes each time they changed
 * (at most once a second). Here they become one series per site on a
 * common grid of record times (a site's value carries forward; before its
 * first record it held nothing), with x the last step marked by then (or
 * the time, for a run without steps). Each series is judged by
 * analyze_series(), the same judgment as the run's: a site is growing when
 * that says leak, so a large but flat site is not a suspect. Libraries are
 * judged on the sum of their sites' series.
 */
#include "report/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/analyze.h"
#include "platform/symbols.h"
#include "report/render.h"
#include "store/trace.h"
#include "util/util.h"

#define GRID_MAX 2000          /* record times kept per series (evenly thinned) */
#define SITE_MIN_POINTS 10     /* records needed to judge a site (a run's own judgment
                                * wants 20 steps; sites are recorded 5 times a second
                                * at most, so a 2 s run can be judged) */

/* ---- naming frames ----------------------------------------------------- */

/* Split "A\tB\tC\n..." lines: the next line's fields into f[0..nf). Returns
 * the rest of the text, or NULL at the end. Modifies the text. */
static char *next_line(char *text, char **f, int nf)
{
	if (!text || !*text)
		return NULL;
	char *end = strchr(text, '\n');
	if (end)
		*end++ = '\0';
	for (int i = 0; i < nf; i++) {
		f[i] = text;
		char *tab = i < nf - 1 ? strchr(text, '\t') : NULL;
		if (tab) {
			*tab = '\0';
			text = tab + 1;
		} else {
			text += strlen(text);
		}
	}
	return end ? end : text;
}

/* "FUNCTION\tSOURCE\n" per frame of "PATH\tVADDR\tSYMBOL\n" lines. */
static char *symbolize_frames(struct symbolizer **sy, const char *frames)
{
	if (!*sy)
		*sy = symbolizer_new();
	struct strbuf sb = STRBUF_INIT;
	char *copy = xstrdup(frames), *f[3], *p = copy;
	while ((p = next_line(p, f, 3))) {
		char fn[512], src[256];
		/* the tracer sends return addresses less one: inside the call */
		symbolizer_lookup(*sy, f[0], strtoull(f[1], NULL, 16), f[2], fn, sizeof(fn), src, sizeof(src));
		strbuf_addf(&sb, "%s\t%s\n", fn, src);
	}
	free(copy);
	strbuf_addstr(&sb, "");   /* never NULL, even with no frames */
	return strbuf_detach(&sb, NULL);
}

int trace_symbolize_run(struct store *st, int64_t run_id)
{
	struct trace_site_row *rows;
	size_t n;
	if (store_trace_load_sites(st, run_id, &rows, &n) < 0)
		return -1;
	struct symbolizer *sy = NULL;
	int64_t *ids = xcalloc(n + 1, sizeof(*ids));
	char **texts = xcalloc(n + 1, sizeof(*texts));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!rows[i].symbols) {
			ids[k] = rows[i].site;
			texts[k++] = symbolize_frames(&sy, rows[i].frames);
		}
	int r = k ? store_trace_set_symbols(st, run_id, ids, texts, k) : 0;
	for (size_t i = 0; i < k; i++)
		free(texts[i]);
	free(texts);
	free(ids);
	symbolizer_free(sy);
	trace_site_rows_free(rows, n);
	return r < 0 ? -1 : (int)k;
}

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
	while ((p = next_line(p, f, 3))) {
		if (r->nframes == cap) {
			cap = cap ? 2 * cap : 16;
			r->frames = xrealloc(r->frames, cap * sizeof(*r->frames));
		}
		struct trace_frame *fr = &r->frames[r->nframes++];
		const char *slash = strrchr(f[0], '/');
		fr->library = xstrdup(slash ? slash + 1 : f[0]);
		q = next_line(q, g, 2);
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

/* Carry each site's value forward over the record times (with a step when
 * by_step), keeping at most GRID_MAX of them, evenly spaced. */
static void build_grid(const struct trace_live_row *live, size_t nlive, size_t nsites, bool by_step,
                       struct grid *g)
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
		if (r->site >= 1 && (size_t)r->site <= nsites)
			cur[r->site - 1] = (double)r->live;
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

static void judge(const double *x, const double *y, size_t n, int64_t mean, const char *x_unit,
                  double *growth, double *low, double *high, bool *growing)
{
	struct analyze_opts o;
	analyze_opts_init(&o);
	o.x_unit = x_unit;
	/* a site's record moves in steps of about the sampling mean: less
	 * than a few of them over the window is not growth */
	if (o.min_growth_bytes < 4.0 * (double)mean)
		o.min_growth_bytes = 4.0 * (double)mean;
	o.min_points = SITE_MIN_POINTS;
	struct analysis a;
	analyze_series(x, y, n, &o, &a);
	bool fit = a.points >= 2;
	*growth = fit ? a.slope : NAN;
	*low = fit ? a.slope_low : NAN;
	*high = fit ? a.slope_high : NAN;
	*growing = a.verdict == VERDICT_LEAK;
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

int trace_report_load(struct store *st, int64_t run_id, bool by_step, double until, struct trace_report *out)
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
	bool any_step = false;
	for (size_t i = 0; i < nlive && !any_step; i++)
		any_step = live[i].has_step;
	by_step = by_step && any_step;
	out->x_unit = by_step ? "step" : "s";

	/* site ids are 1..n in the order first seen */
	size_t nsites = nrows ? (size_t)rows[nrows - 1].site : 0;
	struct grid g;
	build_grid(live, nlive, nsites, by_step, &g);

	/* frames not named yet (the run was killed before its end): here,
	 * without keeping them (the store is open read-only) */
	struct symbolizer *sy = NULL;
	for (size_t i = 0; i < nrows; i++)
		if (!rows[i].symbols)
			rows[i].symbols = symbolize_frames(&sy, rows[i].frames);
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
		const double *y = g.y + (size_t)(r->site - 1) * g.ncols;
		r->live = g.ncols ? y[g.ncols - 1] : (double)rows[i].live;
		judge(g.x, y, g.ncols, out->mean_bytes, out->x_unit, &r->growth, &r->growth_low, &r->growth_high,
		      &r->growing);
		out->ngrowing += r->growing;
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
			const double *y = g.y + (size_t)(o->site - 1) * g.ncols;
			for (size_t c = 0; c < g.ncols; c++)
				sum[c] += y[c];
			l->live += o->live;
		}
		double lo, hi;
		judge(g.x, sum, g.ncols, out->mean_bytes, out->x_unit, &l->growth, &lo, &hi, &l->growing);
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

/* ---- rendering ----------------------------------------------------------- */

static void add_rate(struct strbuf *sb, double v, const char *unit)
{
	char b[32];
	strbuf_addf(sb, "%s/%s", isfinite(v) ? render_signed_bytes(b, sizeof(b), v) : "?", unit);
}

/* The innermost Python frame that is not in the standard library or a
 * site-package, else the innermost. */
static const struct trace_pyframe *user_frame(const struct trace_site_report *s)
{
	for (size_t i = 0; i < s->npython; i++)
		if (!strstr(s->python[i].file, "/lib/python3") && !strstr(s->python[i].file, "-packages/"))
			return &s->python[i];
	return s->npython ? &s->python[0] : NULL;
}

static void add_site_text(struct strbuf *sb, const struct trace_site_report *s, const char *unit)
{
	char live[32];
	fmt_bytes(live, sizeof(live), s->live);
	strbuf_addstr(sb, "  ");
	size_t at = sb->len;
	add_rate(sb, s->growth, unit);
	while (sb->len < at + 16)
		strbuf_addch(sb, ' ');
	strbuf_addf(sb, "live %-10s", live);
	if (s->nframes) {
		const struct trace_frame *f = &s->frames[s->blame];
		strbuf_addf(sb, " %s  %s", f->library, f->function[0] ? f->function : "?");
		if (f->source[0])
			strbuf_addf(sb, " (%s)", f->source);
		/* one caller more, for context */
		if (s->blame + 1 < s->nframes && s->frames[s->blame + 1].function[0])
			strbuf_addf(sb, " \xe2\x80\xa6 %s", s->frames[s->blame + 1].function);
	}
	if (s->kind == 'a')
		strbuf_addstr(sb, " [mmap]");
	strbuf_addch(sb, '\n');
	const struct trace_pyframe *py = user_frame(s);
	if (py)
		strbuf_addf(sb, "%18scalled from %s:%d in %s\n", "", py->file, py->line, py->function);
}

/* The n largest sites by live bytes that are not growing. */
static void add_largest_flat(struct strbuf *sb, const struct trace_report *r, size_t n)
{
	const struct trace_site_report **v = xcalloc(r->nsites + 1, sizeof(*v));
	size_t k = 0;
	for (size_t i = 0; i < r->nsites; i++)
		if (!r->sites[i].growing)
			v[k++] = &r->sites[i];
	for (size_t i = 0; i < n && i < k; i++) {
		size_t best = i;
		for (size_t j = i + 1; j < k; j++)
			if (v[j]->live > v[best]->live)
				best = j;
		const struct trace_site_report *t = v[i];
		v[i] = v[best];
		v[best] = t;
		add_site_text(sb, v[i], r->x_unit);
	}
	free(v);
}

void trace_report_text(const struct trace_report *r, size_t max_sites, struct strbuf *sb)
{
	const char *unit = r->x_unit;
	char mean[32];
	fmt_bytes(mean, sizeof(mean), (double)r->mean_bytes);
	strbuf_addf(sb, "Allocation sites (one sampled every %s allocated, on average): %zu of %zu growing\n",
	            mean, r->ngrowing, r->nsites);
	size_t shown = 0;
	for (size_t i = 0; i < r->nsites && r->sites[i].growing; i++) {
		if (max_sites && shown == max_sites)
			break;
		add_site_text(sb, &r->sites[i], unit);
		shown++;
	}
	if (!r->ngrowing) {
		strbuf_addstr(sb, "  no site grows across the run; the largest:\n");
		add_largest_flat(sb, r, 3);
	} else if (shown < r->ngrowing) {
		strbuf_addf(sb, "  ... and %zu more (leakproof report RUN --trace)\n", r->ngrowing - shown);
	}
	if (r->nlibs) {
		strbuf_addstr(sb, "By library:");
		for (size_t i = 0; i < r->nlibs && i < 5; i++) {
			strbuf_addf(sb, "%s %s ", i ? "," : "", r->libs[i].library);
			add_rate(sb, r->libs[i].growth, unit);
			if (!r->libs[i].growing)
				strbuf_addstr(sb, " (flat)");
		}
		strbuf_addch(sb, '\n');
	}
}

void trace_report_json(const struct trace_report *r, struct strbuf *sb)
{
	strbuf_addf(sb, "{\"mean_bytes\": %lld, \"x_unit\": ", (long long)r->mean_bytes);
	strbuf_add_json_str(sb, r->x_unit);
	strbuf_addf(sb, ", \"growing_sites\": %zu,\n    \"sites\": [", r->ngrowing);
	for (size_t i = 0; i < r->nsites; i++) {
		const struct trace_site_report *s = &r->sites[i];
		const struct trace_frame *b = s->nframes ? &s->frames[s->blame] : NULL;
		strbuf_addstr(sb, i ? ",\n      {" : "\n      {");
		strbuf_addf(sb, "\"site\": %lld, \"kind\": \"%s\", \"library\": ", (long long)s->site,
		            s->kind == 'a' ? "mmap" : "heap");
		strbuf_add_json_str(sb, b ? b->library : "");
		strbuf_addstr(sb, ", \"function\": ");
		strbuf_add_json_str(sb, b ? b->function : "");
		strbuf_addstr(sb, ", \"source\": ");
		report_add_json_str_or_null(sb, b ? b->source : NULL);
		strbuf_addstr(sb, ", \"growth_bytes_per_step\": ");
		report_add_json_num(sb, s->growth);
		strbuf_addstr(sb, ", \"growth_interval_bytes_per_step\": [");
		report_add_json_num(sb, s->growth_low);
		strbuf_addstr(sb, ", ");
		report_add_json_num(sb, s->growth_high);
		strbuf_addf(sb, "], \"growing\": %s, \"live_bytes\": ", s->growing ? "true" : "false");
		report_add_json_num(sb, s->live);
		strbuf_addf(sb, ", \"sampled_allocations\": %lld, \"sampled_frees\": %lld",
		            (long long)s->allocs, (long long)s->frees);
		strbuf_addstr(sb, ",\n       \"frames\": [");
		for (size_t j = 0; j < s->nframes; j++) {
			strbuf_addstr(sb, j ? ", {\"function\": " : "{\"function\": ");
			strbuf_add_json_str(sb, s->frames[j].function);
			strbuf_addstr(sb, ", \"library\": ");
			strbuf_add_json_str(sb, s->frames[j].library);
			strbuf_addstr(sb, ", \"source\": ");
			report_add_json_str_or_null(sb, s->frames[j].source);
			strbuf_addch(sb, '}');
		}
		strbuf_addstr(sb, "],\n       \"python_stack\": ");
		if (!s->npython) {
			strbuf_addstr(sb, "null");
		} else {
			strbuf_addch(sb, '[');
			for (size_t j = 0; j < s->npython; j++) {
				strbuf_addstr(sb, j ? ", {\"file\": " : "{\"file\": ");
				strbuf_add_json_str(sb, s->python[j].file);
				strbuf_addf(sb, ", \"line\": %d, \"function\": ", s->python[j].line);
				strbuf_add_json_str(sb, s->python[j].function);
				strbuf_addch(sb, '}');
			}
			strbuf_addch(sb, ']');
		}
		strbuf_addch(sb, '}');
	}
	strbuf_addstr(sb, r->nsites ? "\n    ],\n    \"libraries\": [" : "],\n    \"libraries\": [");
	for (size_t i = 0; i < r->nlibs; i++) {
		const struct trace_lib_report *l = &r->libs[i];
		strbuf_addstr(sb, i ? ",\n      {\"library\": " : "\n      {\"library\": ");
		strbuf_add_json_str(sb, l->library);
		strbuf_addstr(sb, ", \"growth_bytes_per_step\": ");
		report_add_json_num(sb, l->growth);
		strbuf_addf(sb, ", \"growing\": %s, \"live_bytes\": ", l->growing ? "true" : "false");
		report_add_json_num(sb, l->live);
		strbuf_addch(sb, '}');
	}
	strbuf_addstr(sb, r->nlibs ? "\n    ]}" : "]}");
}

int trace_report_write_text(const struct trace_report *r, FILE *out)
{
	struct strbuf sb = STRBUF_INIT;
	trace_report_text(r, 0, &sb);
	if (r->ngrowing && r->ngrowing < r->nsites) {
		strbuf_addstr(&sb, "Largest sites that do not grow:\n");
		add_largest_flat(&sb, r, 10);
	}
	int rc = render_flush(&sb, out);
	strbuf_release(&sb);
	return rc;
}
