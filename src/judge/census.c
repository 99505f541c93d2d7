/*
 * judge/census.c — the object census judged type by type, and the GPU's
 * memory split into what tensors hold, what PyTorch's caching allocator
 * keeps, and what other libraries hold (census.h; docs/internals/census.md).
 *
 * A census type is a series of counts, one per census, against the last
 * step marked by then (or the time, in a run without steps); it is judged
 * with the statistics of the leak verdict (core/analyze.c), thresholds in
 * objects instead of bytes (CENSUS_MIN_GROWTH_*). Only the types judged
 * `leak` are kept, with the last holder the client named.
 */
#include "judge/census.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/stats.h"
#include "util/util.h"

/* ---- the object census ------------------------------------------------- */

static int by_type(const void *a, const void *b)
{
	const struct census_row *x = *(const struct census_row *const *)a;
	const struct census_row *y = *(const struct census_row *const *)b;
	int c = strcmp(x->type, y->type);
	if (c)
		return c;
	return x->t < y->t ? -1 : x->t > y->t;
}

static int by_growth(const void *a, const void *b)
{
	const struct census_type *x = a, *y = b;
	return x->growth > y->growth ? -1 : x->growth < y->growth;
}

/* The exact null distribution of Mann–Kendall's S for n distinct values:
 * the number of permutations of n with k inversions (Mahonian numbers),
 * S = n(n-1)/2 - 2k. P(S >= s) = P(inversions <= (N - s) / 2). */
double census_mk_exact_p(const double *x, const double *y, size_t n)
{
	if (n < 3 || n > CENSUS_EXACT_MAX)
		return 1.0;
	/* S over the pairs in order of x; a pair with equal x or equal y
	 * counts half an inversion (conservative) */
	double inv = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			double dx = x[j] - x[i], dy = y[j] - y[i];
			if (dx == 0 || dy == 0)
				inv += 0.5;
			else if ((dx > 0) != (dy > 0))
				inv += 1;
		}
	size_t k = (size_t)ceil(inv);
	/* counts[m][k]: permutations of m with k inversions */
	double cur[CENSUS_EXACT_MAX * CENSUS_EXACT_MAX] = { 1 }, next[CENSUS_EXACT_MAX * CENSUS_EXACT_MAX];
	size_t top = 0;             /* the most inversions so far */
	double total = 1;
	for (size_t m = 2; m <= n; m++) {
		size_t ntop = top + m - 1;
		for (size_t q = 0; q <= ntop; q++) {
			double v = 0;
			for (size_t d = 0; d < m && d <= q; d++)
				if (q - d <= top)
					v += cur[q - d];
			next[q] = v;
		}
		top = ntop;
		memcpy(cur, next, (top + 1) * sizeof(double));
		total *= (double)m;
	}
	double at_most = 0;
	for (size_t q = 0; q <= k && q <= top; q++)
		at_most += cur[q];
	return at_most / total;
}

bool census_few_rising(const double *x, const double *y, size_t n, double *p_out)
{
	double p = census_mk_exact_p(x, y, n);
	if (p_out)
		*p_out = p;
	if (n < CENSUS_FEW_POINTS || n > CENSUS_EXACT_MAX || !(p <= CENSUS_FEW_ALPHA))
		return false;
	double rise = y[n - 1] - y[0];
	return rise >= CENSUS_MIN_GROWTH_OBJECTS && rise >= CENSUS_MIN_GROWTH_FRACTION * fabs(y[0]) &&
	       x[n - 1] > x[0];
}

/* Judge the rows of one type (in order of time); add it to r when it grows:
 * by the statistics of the verdict on CENSUS_MIN_POINTS censuses or more;
 * on fewer, by the exact Mann–Kendall test (census_few_rising()). */
static void judge_type(struct census_report *r, struct census_row *const *rows, size_t n, bool by_step,
                       double *x, double *y, double *yb)
{
	bool bytes_known = true;
	for (size_t i = 0; i < n; i++) {
		x[i] = by_step ? (double)rows[i]->step : rows[i]->t;
		y[i] = (double)rows[i]->count;
		yb[i] = (double)rows[i]->bytes;
		if (rows[i]->bytes < 0)
			bytes_known = false;
	}
	if (n < CENSUS_FEW_POINTS)
		return;
	r->types++;
	struct analysis a;
	if (n >= CENSUS_MIN_POINTS) {
		struct analyze_opts o;
		analyze_opts_init(&o);
		o.min_growth_bytes = CENSUS_MIN_GROWTH_OBJECTS;
		o.min_growth_fraction = CENSUS_MIN_GROWTH_FRACTION;
		o.min_points = CENSUS_MIN_POINTS;
		o.x_unit = r->x_unit;
		analyze_series(x, y, n, &o, &a);
		if (a.verdict != VERDICT_LEAK || !(a.slope > 0))
			return;
	} else {
		double p;
		if (!census_few_rising(x, y, n, &p))
			return;
		memset(&a, 0, sizeof(a));
		a.verdict = VERDICT_LEAK;
		a.points = n;
		a.warmup_end_x = a.window_from_x = x[0];
		a.slope = theil_sen(x, y, n, &a.slope_low, &a.slope_high);
		a.mk_p = p;
		a.last_bytes = y[n - 1];
		if (!(a.slope > 0))
			return;
	}
	r->growing = xrealloc(r->growing, (r->ngrowing + 1) * sizeof(*r->growing));
	struct census_type *c = &r->growing[r->ngrowing++];
	memset(c, 0, sizeof(*c));
	snprintf(c->type, sizeof(c->type), "%s", rows[0]->type);
	c->a = a;
	c->growth = a.slope;
	c->bytes_growth = NAN;
	if (bytes_known) {
		/* over the window the counts were judged on */
		size_t from = 0;
		while (from < n && x[from] < a.window_from_x)
			from++;
		if (n - from >= 2)
			c->bytes_growth = theil_sen(x + from, yb + from, n - from, NULL, NULL);
	}
	if (census_type_is_held(c->type) && !(c->bytes_growth >= CENSUS_HELD_MIN_ITEM_BYTES * c->growth)) {
		r->ngrowing--;          /* a list of numbers: no memory to speak of */
		return;
	}
	c->last_count = rows[n - 1]->count;
	c->last_bytes = rows[n - 1]->bytes;
	for (size_t i = n; i-- > 0;)
		if (rows[i]->holder) {
			c->holder = xstrdup(rows[i]->holder);
			break;
		}
}

/* The element key of a container's key "held#N/CONTAINER/ELEMENT"; NULL
 * for a type's key. */
static const char *held_element(const char *type)
{
	if (strncmp(type, CENSUS_HELD_PREFIX, strlen(CENSUS_HELD_PREFIX)))
		return NULL;
	const char *p = strchr(type, '/');
	p = p ? strchr(p + 1, '/') : NULL;
	return p ? p + 1 : "";
}

bool census_type_is_held(const char *type)
{
	return held_element(type) != NULL;
}

/* A growing container that a growing type already names as its holder is
 * the same finding: a type of tensors or arrays keeps it (it has their
 * bytes), a plain type gives it up to the container (whose length is
 * exact, where the type's count mixes in every other object of that type).
 * A type with no holder whose objects a growing container holds is the
 * same finding too: the container keeps it. */
static void merge_held(struct census_report *r)
{
	bool *drop = xcalloc(r->ngrowing + 1, sizeof(bool));
	for (size_t i = 0; i < r->ngrowing; i++) {
		const struct census_type *c = &r->growing[i];
		const char *elem = held_element(c->type);
		if (!elem || !c->holder)
			continue;
		for (size_t j = 0; j < r->ngrowing; j++) {
			const struct census_type *t = &r->growing[j];
			if (held_element(t->type) || drop[j])
				continue;
			if (t->holder && !strcmp(t->holder, c->holder)) {
				if (isfinite(t->bytes_growth)) {    /* tensors, arrays */
					drop[i] = true;
					break;
				}
				drop[j] = true;
				continue;
			}
			if (!t->holder && !strcmp(t->type, elem))
				drop[j] = true;
		}
	}
	size_t k = 0;
	for (size_t i = 0; i < r->ngrowing; i++) {
		if (drop[i]) {
			free(r->growing[i].holder);
			continue;
		}
		r->growing[k++] = r->growing[i];
	}
	r->ngrowing = k;
	free(drop);
}

int census_report_load(struct store *st, int64_t run_id, size_t steps, double duration_s,
                       struct census_report *out)
{
	memset(out, 0, sizeof(*out));
	struct census_row *rows;
	size_t n;
	if (store_load_census(st, run_id, &rows, &n) < 0)
		return -1;
	if (!n) {
		census_rows_free(rows, n);
		return 1;
	}

	/* The censuses themselves ("*" rows): their number and cost. */
	bool by_step = steps > 0;
	double *cost = xcalloc(n, sizeof(double)), *gap = xcalloc(n, sizeof(double));
	size_t ncost = 0, ngap = 0;
	double last_t = NAN;
	struct census_row **typed = xcalloc(n, sizeof(*typed));
	size_t ntyped = 0;
	for (size_t i = 0; i < n; i++) {
		struct census_row *c = &rows[i];
		if (strcmp(c->type, "*")) {
			/* in a run with steps, a census before the first step has
			 * no place on the x axis: left out */
			if (!by_step || c->step >= 0)
				typed[ntyped++] = c;
			continue;
		}
		out->censuses++;
		out->objects_last = (double)c->count;
		if (isfinite(last_t) && c->t > last_t)
			gap[ngap++] = c->t - last_t;
		last_t = c->t;
		if (c->cost_us >= 0) {
			double s = (double)c->cost_us / 1e6;
			cost[ncost++] = s;
			out->cost_total_s += s;
			out->cost_max_s = fmax(out->cost_max_s, s);
		}
	}
	out->x_unit = by_step ? "step" : "s";
	out->cost_mean_s = ncost ? out->cost_total_s / (double)ncost : NAN;
	out->interval_median_s = ngap ? median_of(gap, ngap) : NAN;
	out->cost_per_step_s = steps ? out->cost_total_s / (double)steps : NAN;
	out->cost_fraction = duration_s > 0 ? out->cost_total_s / duration_s : NAN;
	free(cost);
	free(gap);

	/* Each type's series, judged. */
	if (ntyped)
		qsort(typed, ntyped, sizeof(*typed), by_type);
	double *x = xcalloc(ntyped + 1, sizeof(double));
	double *y = xcalloc(ntyped + 1, sizeof(double));
	double *yb = xcalloc(ntyped + 1, sizeof(double));
	for (size_t i = 0; i < ntyped;) {
		size_t j = i;
		while (j < ntyped && !strcmp(typed[j]->type, typed[i]->type))
			j++;
		judge_type(out, typed + i, j - i, by_step, x, y, yb);
		i = j;
	}
	merge_held(out);
	if (out->ngrowing > 1)
		qsort(out->growing, out->ngrowing, sizeof(*out->growing), by_growth);
	free(x);
	free(y);
	free(yb);
	free(typed);
	census_rows_free(rows, n);
	return 0;
}

void census_report_release(struct census_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->ngrowing; i++)
		free(r->growing[i].holder);
	free(r->growing);
	for (size_t i = 0; i < r->nrecent; i++)
		free(r->recent[i].holder);
	free(r->recent);
	memset(r, 0, sizeof(*r));
}

static int by_rise(const void *a, const void *b)
{
	const struct census_change *x = a, *y = b;
	int64_t dx = x->to - x->from, dy = y->to - y->from;
	return dx > dy ? -1 : dx < dy;
}

int census_report_window(struct store *st, int64_t run_id, double t_from, double t_to,
                         struct census_report *r)
{
	struct census_row *rows;
	size_t n;
	if (store_load_census(st, run_id, &rows, &n) < 0)
		return -1;
	/* the censuses of the heap: those with type rows (a census of
	 * containers only has none, and would make every type new) */
	int64_t *heap = xcalloc(n + 1, sizeof(*heap));
	size_t nheap = 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].type, "*") && !census_type_is_held(rows[i].type) &&
		    (!nheap || heap[nheap - 1] != rows[i].seq))
			heap[nheap++] = rows[i].seq;
	/* the censuses ("*" rows) by time: the last at or before t_to, and
	 * the one to compare it with */
	int64_t seq_to = -1, seq_from = -1, seq_prev = -1, seq_first = -1;
	double at_to = NAN, at_from = NAN, at_prev = NAN, at_first = NAN;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(rows[i].type, "*") || rows[i].t > t_to)
			continue;
		bool of_heap = false;
		for (size_t j = nheap; j-- > 0 && !of_heap;)
			of_heap = heap[j] == rows[i].seq;
		if (!of_heap)
			continue;
		if (rows[i].t <= t_from) {
			seq_from = rows[i].seq;
			at_from = rows[i].t;
		} else if (seq_first < 0) {
			seq_first = rows[i].seq;
			at_first = rows[i].t;
		}
		if (seq_to >= 0) {
			seq_prev = seq_to;
			at_prev = at_to;
		}
		seq_to = rows[i].seq;
		at_to = rows[i].t;
	}
	if (seq_from < 0) {          /* none before the window: its first */
		seq_from = seq_first;
		at_from = at_first;
	}
	if (seq_from < 0 || seq_from == seq_to) {
		seq_from = seq_prev;
		at_from = at_prev;
	}
	free(heap);
	if (seq_to < 0 || seq_from < 0) {
		census_rows_free(rows, n);
		return 0;
	}
	r->has_window = true;
	r->window_from_t = at_from;
	r->window_to_t = at_to;
	/* each type at the later census, against its count at the earlier */
	for (size_t i = 0; i < n; i++) {
		const struct census_row *c = &rows[i];
		if (c->seq != seq_to || !strcmp(c->type, "*"))
			continue;
		if (census_type_is_held(c->type) && c->holder) {
			/* a container a type names as its holder: the type says it */
			bool said = false;
			for (size_t j = 0; j < n && !said; j++)
				said = rows[j].seq == seq_to && rows[j].holder && !census_type_is_held(rows[j].type) &&
				       strcmp(rows[j].type, "*") && !strcmp(rows[j].holder, c->holder);
			if (said)
				continue;
		}
		int64_t from = 0, bytes_from = 0;
		for (size_t j = 0; j < n; j++)
			if (rows[j].seq == seq_from && !strcmp(rows[j].type, c->type)) {
				from = rows[j].count;
				bytes_from = rows[j].bytes;
				break;
			}
		if ((double)(c->count - from) < CENSUS_MIN_GROWTH_OBJECTS)
			continue;
		r->recent = xrealloc(r->recent, (r->nrecent + 1) * sizeof(*r->recent));
		struct census_change *ch = &r->recent[r->nrecent++];
		memset(ch, 0, sizeof(*ch));
		snprintf(ch->type, sizeof(ch->type), "%s", c->type);
		ch->from = from;
		ch->to = c->count;
		ch->bytes_from = bytes_from;
		ch->bytes_to = c->bytes;
		ch->holder = c->holder && *c->holder ? xstrdup(c->holder) : NULL;
	}
	if (r->nrecent > 1)
		qsort(r->recent, r->nrecent, sizeof(*r->recent), by_rise);
	while (r->nrecent > CENSUS_RECENT_MAX)
		free(r->recent[--r->nrecent].holder);
	census_rows_free(rows, n);
	return 0;
}

#define FLIGHT_TYPES_SAID 3

char *census_flight_words(const struct census_report *r, const char *x_word, char *buf, size_t bufsz)
{
	char words[256], b1[32], b2[32];
	size_t n = 0;
	buf[0] = '\0';
#define PUT(...) do { \
		if (n < bufsz) { \
			int put_ = snprintf(buf + n, bufsz - n, __VA_ARGS__); \
			n += put_ > 0 ? (size_t)put_ : 0; \
		} \
	} while (0)
	if (r->has_window && r->nrecent) {
		PUT("Python objects between the censuses at %s and %s:", fmt_duration(b1, sizeof(b1), r->window_from_t),
		    fmt_duration(b2, sizeof(b2), r->window_to_t));
		for (size_t i = 0; i < r->nrecent && i < FLIGHT_TYPES_SAID; i++) {
			const struct census_change *c = &r->recent[i];
			PUT("%s +%lld %s", i ? ";" : "", (long long)(c->to - c->from),
			    census_type_words(words, sizeof(words), c->type));
			if (c->bytes_to >= 0 && c->bytes_from >= 0 && c->bytes_to > c->bytes_from)
				PUT(" (+%s)", fmt_bytes(b1, sizeof(b1), (double)(c->bytes_to - c->bytes_from)));
			PUT(" to %lld", (long long)c->to);
			if (c->holder)
				PUT(", held by %s", c->holder);
		}
		if (r->nrecent > FLIGHT_TYPES_SAID)
			PUT("; %zu more type%s", r->nrecent - FLIGHT_TYPES_SAID,
			    r->nrecent - FLIGHT_TYPES_SAID == 1 ? "" : "s");
		PUT(".");
	} else if (r->ngrowing) {
		PUT("The census found growing over the run:");
		for (size_t i = 0; i < r->ngrowing && i < FLIGHT_TYPES_SAID; i++) {
			const struct census_type *c = &r->growing[i];
			PUT("%s ", i ? ";" : "");
			if (c->holder)
				PUT("%s holds ", c->holder);
			PUT("+%.3g %s per %s", c->growth, census_type_words(words, sizeof(words), c->type), x_word);
		}
		PUT(".");
	} else if (r->has_window) {
		PUT("No type of Python object grew between the censuses at %s and %s.",
		    fmt_duration(b1, sizeof(b1), r->window_from_t), fmt_duration(b2, sizeof(b2), r->window_to_t));
	} else {
		PUT("The census found no type of Python object growing.");
	}
#undef PUT
	if (n >= bufsz && bufsz > 4)
		memcpy(buf + bufsz - 4, "...", 4);     /* cut: say so */
	return buf;
}

char *census_type_words(char *buf, size_t bufsz, const char *type)
{
	/* "MODULE.CLASS/DEVICE/DTYPE[/grad_fn]" for tensors, "MODULE.CLASS/DTYPE"
	 * for arrays, the type's name otherwise */
	char base[128], dev[64] = "", dtype[64] = "";
	bool grad = false;
	const char *elem = held_element(type);
	if (elem)                /* a container: what it holds */
		type = *elem ? elem : "?";
	const char *p = strchr(type, '/');
	size_t blen = p ? (size_t)(p - type) : strlen(type);
	snprintf(base, sizeof(base), "%.*s", (int)(blen < sizeof(base) ? blen : sizeof(base) - 1), type);
	if (!p) {
		snprintf(buf, bufsz, "%s", base);
		return buf;
	}
	const char *parts[3] = { NULL, NULL, NULL };
	size_t lens[3] = { 0, 0, 0 }, np = 0;
	while (p && np < 3) {
		const char *s = p + 1;
		p = strchr(s, '/');
		parts[np] = s;
		lens[np++] = p ? (size_t)(p - s) : strlen(s);
	}
	const char *short_base = strncmp(base, "torch.", 6) ? base : strrchr(base, '.') + 1;
	if (np >= 2) {       /* a tensor */
		snprintf(dev, sizeof(dev), "%.*s", (int)lens[0], parts[0]);
		snprintf(dtype, sizeof(dtype), "%.*s", (int)lens[1], parts[1]);
		grad = np == 3 && lens[2] == 7 && !strncmp(parts[2], "grad_fn", 7);
		snprintf(buf, bufsz, "%s (%s, %s)%s", short_base, dev, dtype, grad ? " with grad_fn" : "");
	} else {
		snprintf(dtype, sizeof(dtype), "%.*s", (int)lens[0], parts[0]);
		snprintf(buf, bufsz, "%s (%s)", base, dtype);
	}
	return buf;
}

/* ---- the GPU: tensors, cache, and the rest ------------------------------ */

static void judge_series(struct gpu_series *g, const char *name, const double *x, const double *y,
                         size_t n, const char *x_unit)
{
	struct analyze_opts o;
	analyze_opts_init(&o);
	o.x_unit = x_unit;
	g->name = name;
	g->present = false;
	g->last_bytes = NAN;
	size_t finite = 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(y[i])) {
			finite++;
			g->last_bytes = y[i];
		}
	if (!finite)
		return;
	g->present = true;
	analyze_series(x, y, n, &o, &g->a);
}

void gpu_report_judge(const double *x, const double *allocated, const double *reserved,
                      const double *nvml, const double *retries, size_t n, const char *x_unit,
                      struct gpu_report *out)
{
	memset(out, 0, sizeof(*out));
	out->x_unit = x_unit;
	out->points = n;
	out->inactive_split_bytes = NAN;
	out->alloc_retries = NAN;
	out->ooms = NAN;
	double *cached = xcalloc(n + 1, sizeof(double)), *other = xcalloc(n + 1, sizeof(double));
	for (size_t i = 0; i < n; i++) {
		cached[i] = reserved[i] - allocated[i];
		other[i] = nvml && isfinite(nvml[i]) && nvml[i] > 0 ? nvml[i] - reserved[i] : NAN;
	}
	judge_series(&out->allocated, "allocated", x, allocated, n, x_unit);
	judge_series(&out->cached, "cached", x, cached, n, x_unit);
	judge_series(&out->other, "other", x, other, n, x_unit);
	free(cached);
	free(other);
	if (retries)
		for (size_t i = n; i-- > 0;)
			if (isfinite(retries[i])) {
				out->alloc_retries = retries[i];
				break;
			}

	/* The sentence: what grows, the largest first; the cache's advice. */
	struct strbuf sb = STRBUF_INIT;
	char b[32];
	const char *unit = strcmp(x_unit, "s") ? "step" : "s";
	if (out->allocated.present && out->allocated.a.verdict == VERDICT_LEAK)
		strbuf_addf(&sb, "tensors grow: PyTorch's allocated memory rises %s/%s (a tensor leak: see the census); ",
		            fmt_bytes(b, sizeof(b), out->allocated.a.slope), unit);
	bool retried = isfinite(out->alloc_retries) && out->alloc_retries > 0;
	if (out->cached.present && (out->cached.a.verdict == VERDICT_LEAK || retried))
		strbuf_addf(&sb, "the caching allocator %s (reserved minus allocated %s %s%s%s); try "
		            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; ",
		            out->cached.a.verdict == VERDICT_LEAK ? "holds more and more memory it does not use"
		                                                  : "fragments memory",
		            out->cached.a.verdict == VERDICT_LEAK ? "rises" : "is",
		            out->cached.a.verdict == VERDICT_LEAK ? fmt_bytes(b, sizeof(b), out->cached.a.slope)
		                                                  : fmt_bytes(b, sizeof(b), out->cached.last_bytes),
		            out->cached.a.verdict == VERDICT_LEAK ? "/" : "",
		            out->cached.a.verdict == VERDICT_LEAK ? unit : ", with allocation retries");
	if (out->other.present && out->other.a.verdict == VERDICT_LEAK)
		strbuf_addf(&sb, "memory outside PyTorch's allocator grows %s/%s (NVML minus reserved: NCCL, "
		            "cuBLAS workspaces, other libraries); ",
		            fmt_bytes(b, sizeof(b), out->other.a.slope), unit);
	if (sb.len >= 2) {
		sb.buf[sb.len - 2] = '\0';      /* the last "; " */
		snprintf(out->diagnosis, sizeof(out->diagnosis), "%s", sb.buf);
	}
	strbuf_release(&sb);
}

int gpu_report_load(struct store *st, int64_t run_id, const struct step_rec *steps, size_t nsteps,
                    struct gpu_report *out)
{
	memset(out, 0, sizeof(*out));
	struct metric_row *m;
	size_t nm;
	if (store_load_metrics(st, run_id, &m, &nm) < 0)
		return -1;
	/* one point per gpu.allocated row; the other figures at or before it */
	size_t n = 0;
	for (size_t i = 0; i < nm; i++)
		if (!strcmp(m[i].name, "gpu.allocated"))
			n++;
	if (!n) {
		free(m);
		return 1;
	}
	bool by_step = nsteps > 0;
	double *x = xcalloc(n, sizeof(double)), *alloc = xcalloc(n, sizeof(double));
	double *res = xcalloc(n, sizeof(double)), *nvml = xcalloc(n, sizeof(double));
	double *retries = xcalloc(n, sizeof(double));
	double reserved = NAN, retry = NAN, split = NAN, ooms = NAN;
	size_t k = 0, si = 0;
	for (size_t i = 0; i < nm; i++) {
		const struct metric_row *r = &m[i];
		if (!strcmp(r->name, "gpu.reserved"))
			reserved = r->value;
		else if (!strcmp(r->name, "gpu.alloc_retries"))
			retry = r->value;
		else if (!strcmp(r->name, "gpu.inactive_split"))
			split = r->value;
		else if (!strcmp(r->name, "gpu.ooms"))
			ooms = r->value;
		if (strcmp(r->name, "gpu.allocated"))
			continue;
		/* the line's other figures follow it: take them from the same line */
		double line_reserved = reserved;
		for (size_t j = i + 1; j < nm && m[j].t == r->t && strncmp(m[j].name, "gpu.", 4) == 0 &&
		                       strcmp(m[j].name, "gpu.allocated"); j++) {
			if (!strcmp(m[j].name, "gpu.reserved"))
				line_reserved = m[j].value;
			else if (!strcmp(m[j].name, "gpu.alloc_retries"))
				retry = m[j].value;
		}
		x[k] = by_step ? (double)r->step : r->t;
		alloc[k] = r->value;
		res[k] = line_reserved;
		retries[k] = retry;
		nvml[k] = NAN;
		/* NVML's figure of the tree at that step (steps are in order) */
		while (si < nsteps && steps[si].step < r->step)
			si++;
		if (by_step && si < nsteps && steps[si].step == r->step && steps[si].mem.gpu > 0)
			nvml[k] = (double)steps[si].mem.gpu;
		k++;
	}
	gpu_report_judge(x, alloc, res, nvml, retries, k, by_step ? "step" : "s", out);
	out->inactive_split_bytes = split;
	out->ooms = ooms;
	free(x);
	free(alloc);
	free(res);
	free(nvml);
	free(retries);
	free(m);
	return 0;
}
