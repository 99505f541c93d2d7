/*
 * sweep.c — the table of a sweep: one row per configuration with the
 * per-step memory change Min / Q1 / Median / Q3 / Max, the median step
 * rate, the peak, the verdict, the status and the metric — the table people
 * otherwise build by hand across a matrix of runtime flags. --by groups the
 * trials by some dimensions only.
 *
 * Everything comes from two queries (the sweep, its trials joined with
 * their runs, whose summaries were kept at the end of each run), so a
 * sweep of 10,000 trials reports in well under a second.
 *
 * What the sweep learned of memory (sweep/memmodel.h) follows the table
 * once its model has something to say: the peak each trial was predicted
 * before it ran (a column), the trials skipped and why, and which
 * parameter drives memory — each dimension's effect on the fitted peak
 * across the values the trials had.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/render.h"
#include "judge/sweep.h"
#include "util/jsonw.h"
#include "util/stats.h"

#define SEP '\x1f'

struct row {
	char **vals;                /* per shown dimension */
	const char *status, *cause, *verdict, *note;
	int64_t trials;
	/* the numbers shown: the trial's own (a copy; its strings are the
	 * model's), or the group's (fill_group(): no idx, attempt or run) */
	struct trial_row sum;
	double pred;                /* predicted peak (bytes) before it ran; NAN none */
	const struct trial_row *t;  /* the trial (ungrouped); the first of the group */
	size_t first;               /* index of that trial */
	char statuses[96];          /* grouped: "3 ok, 1 oom" */
	bool other_judge;           /* a verdict another version of the judgment wrote (starred) */
};

struct table {
	struct sweep_model m;       /* the sweep, its dimensions and trials */
	char **names;               /* the dimensions shown */
	size_t nnames;
	size_t *dim_of;             /* their index in m.dims */
	struct row *rows;
	size_t nrows;
	bool grouped;
};

/* Median of the finite values (NAN when none); sorts v. */
static double median_finite(double *v, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i]))
			v[k++] = v[i];
	if (!k)
		return NAN;
	qsort(v, k, sizeof(double), cmp_double);
	return median_sorted(v, k);
}

struct keyed {
	char *key;                  /* the chosen values, SEP-joined */
	char **vals;
	size_t i;                   /* the trial */
};

static int cmp_keyed(const void *x, const void *y)
{
	const struct keyed *a = x, *b = y;
	int c = strcmp(a->key, b->key);
	return c ? c : (a->i > b->i) - (a->i < b->i);
}

static int cmp_row_first(const void *x, const void *y)
{
	const struct row *a = x, *b = y;
	return (a->first > b->first) - (a->first < b->first);
}

/* "3" for trial index 2, "3.1" for its attempt 1: how the reports name a
 * trial. Returns buf. */
static char *trial_id(char *buf, size_t bufsz, const struct trial_row *t)
{
	snprintf(buf, bufsz, t->attempt ? "%lld.%lld" : "%lld", (long long)t->idx + 1, (long long)t->attempt);
	return buf;
}

static void fill_trial(struct row *g, const struct trial_row *t)
{
	g->status = trial_status_name(t->status);
	g->cause = cause_name(t->cause);
	g->verdict = t->verdict;
	g->other_judge = report_other_judge(t->verdict, t->judge_version);
	g->note = t->note;
	g->sum = *t;
}

/* A group: the min of the mins, the max of the maxes, the medians of the
 * middle quantiles, of the rates and of the growths; the largest peak and
 * budget; the worst verdict (leak if any); the best metric; the statuses
 * counted. */
static void fill_group(const struct table *tb, struct row *g, const struct keyed *members, size_t n,
                       double *tmp)
{
	static const enum trial_status order[] = { TRIAL_OK, TRIAL_OOM, TRIAL_FAILED, TRIAL_INTERRUPTED, TRIAL_SKIPPED,
	                                           TRIAL_PRUNED, TRIAL_RUNNING };
	int counts[7] = { 0 }, leaks = 0, noleak = 0;
	g->sum.q[0] = NAN;
	g->sum.q[4] = NAN;
	for (size_t j = 0; j < n; j++) {
		const struct trial_row *t = &tb->m.trials[members[j].i];
		if (isfinite(t->q[0]) && !(t->q[0] >= g->sum.q[0]))
			g->sum.q[0] = t->q[0];
		if (isfinite(t->q[4]) && !(t->q[4] <= g->sum.q[4]))
			g->sum.q[4] = t->q[4];
		if (t->peak_bytes > g->sum.peak_bytes)
			g->sum.peak_bytes = t->peak_bytes;
		if (t->limit_bytes > g->sum.limit_bytes)
			g->sum.limit_bytes = t->limit_bytes;
		for (int s = 0; s < 7; s++)
			if (t->status == order[s])
				counts[s]++;
		g->other_judge |= report_other_judge(t->verdict, t->judge_version);
		leaks += !strcmp(t->verdict, "leak");
		noleak += !strcmp(t->verdict, "no-leak");
		if (t->has_metric &&
		    (!g->sum.has_metric || (tb->m.sw.maximize ? t->metric > g->sum.metric : t->metric < g->sum.metric))) {
			g->sum.has_metric = true;
			g->sum.metric = t->metric;
		}
	}
	for (int q = 1; q <= 3; q++) {
		for (size_t j = 0; j < n; j++)
			tmp[j] = tb->m.trials[members[j].i].q[q];
		g->sum.q[q] = median_finite(tmp, n);
	}
	for (size_t j = 0; j < n; j++)
		tmp[j] = tb->m.trials[members[j].i].steps_per_second;
	g->sum.steps_per_second = median_finite(tmp, n);
	for (size_t j = 0; j < n; j++)
		tmp[j] = tb->m.trials[members[j].i].growth_bytes_per_step;
	g->sum.growth_bytes_per_step = median_finite(tmp, n);
	g->verdict = leaks ? "leak" : noleak ? "no-leak" : "inconclusive";
	size_t off = 0;
	for (int s = 0; s < 7; s++)
		if (counts[s] && off < sizeof(g->statuses))
			off += (size_t)snprintf(g->statuses + off, sizeof(g->statuses) - off, "%s%d %s",
			                        off ? ", " : "", counts[s], trial_status_name(order[s]));
	g->status = g->statuses;
	g->cause = g->note = "";
}

/* dim_of of the `host` column of --by host: where the trial's run ran */
#define HOST_DIM ((size_t)-1)

/* 0, or -1 after a message; *tb is freed with free_table() either way. */
static int load_table(struct store *st, int64_t sweep_id, const char *by, struct table *tb)
{
	memset(tb, 0, sizeof(*tb));
	if (sweep_model_open(st, sweep_id, &tb->m) < 0)
		return -1;

	/* the dimensions shown: --by's, else all */
	size_t nd = tb->m.ndims;
	tb->names = xcalloc(nd + 1, sizeof(char *));
	tb->dim_of = xcalloc(nd + 1, sizeof(size_t));
	if (by && tb->m.have_spec) {
		char *copy = xstrdup(by), *save = NULL;
		for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
			size_t d = 0;
			while (d < nd && strcmp(tb->m.dims[d], p))
				d++;
			if (d == nd && !strcmp(p, "host") && tb->nnames <= nd) {
				/* not a dimension: where each trial ran, so a bad node stands out */
				tb->names[tb->nnames] = "host";
				tb->dim_of[tb->nnames++] = HOST_DIM;
				continue;
			}
			if (d == nd || tb->nnames > nd) {
				error("--by '%s': the sweep has no dimension '%s' (nor is it `host`)", by, p);
				free(copy);
				return -1;
			}
			tb->names[tb->nnames] = tb->m.dims[d];
			tb->dim_of[tb->nnames++] = d;
		}
		free(copy);
		tb->grouped = true;
	} else {
		for (size_t d = 0; d < nd; d++) {
			tb->names[d] = tb->m.dims[d];
			tb->dim_of[d] = d;
		}
		tb->nnames = nd;
	}

	/* one row per trial attempt, or per group of equal values: the trials
	 * sorted by their values of the chosen dimensions, so each group is a
	 * run of neighbours (O(n log n), whatever the number of groups) */
	size_t n = tb->m.ntrials;
	struct keyed *k = xcalloc(n + 1, sizeof(*k));
	for (size_t i = 0; i < n; i++) {
		k[i].i = i;
		k[i].vals = xcalloc(tb->nnames + 1, sizeof(char *));
		struct strbuf key = STRBUF_INIT;
		for (size_t m = 0; m < tb->nnames; m++) {
			const struct trial_row *t = &tb->m.trials[i];
			k[i].vals[m] = tb->dim_of[m] == HOST_DIM ? xstrdup(t->host[0] ? t->host : "?")
			                                         : sweep_trial_value(t, tb->dim_of[m]);
			strbuf_addstr(&key, k[i].vals[m]);
			strbuf_addch(&key, SEP);
		}
		k[i].key = strbuf_detach(&key, NULL);
	}
	if (tb->grouped)
		qsort(k, n, sizeof(*k), cmp_keyed);
	tb->rows = xcalloc(n + 1, sizeof(*tb->rows));
	double *tmp = xmalloc((n + 1) * sizeof(double));
	for (size_t a = 0; a < n;) {
		size_t b = a + 1;
		while (tb->grouped && b < n && !strcmp(k[a].key, k[b].key))
			b++;
		struct row *g = &tb->rows[tb->nrows++];
		g->vals = k[a].vals;
		k[a].vals = NULL;
		g->t = &tb->m.trials[k[a].i];
		g->trials = (int64_t)(b - a);
		g->first = k[a].i;
		g->pred = NAN;
		if (!tb->grouped) {
			fill_trial(g, g->t);
			g->pred = tb->m.pred[k[a].i].peak[0];
		} else {
			fill_group(tb, g, k + a, b - a, tmp);
		}
		a = b;
	}
	free(tmp);
	for (size_t i = 0; i < n; i++) {
		if (k[i].vals) {
			for (size_t m = 0; m < tb->nnames; m++)
				free(k[i].vals[m]);
			free(k[i].vals);
		}
		free(k[i].key);
	}
	free(k);
	/* groups in the order of their first trial */
	if (tb->grouped)
		qsort(tb->rows, tb->nrows, sizeof(*tb->rows), cmp_row_first);
	return 0;
}

static void free_table(struct table *tb)
{
	for (size_t j = 0; j < tb->nrows; j++) {
		for (size_t k = 0; k < tb->nnames; k++)
			free(tb->rows[j].vals[k]);
		free(tb->rows[j].vals);
	}
	free(tb->rows);
	free(tb->names);
	free(tb->dim_of);
	sweep_model_release(&tb->m);
}

/* The cells of a row, as text, in column order. */
#define FIXED_COLS 14
#define COL_ALLOC 11
#define COL_PREDICTED 12
#define COL_RUN 13
static const char *const fixed_heads[FIXED_COLS] = {
	"status", "metric", "verdict", "growth/step", "min", "q1", "median", "q3", "max", "steps/s", "peak",
	"alloc", "predicted", "run",
};

/* Whether fixed column c is shown: the predicted peak only when the
 * memory model predicted something. */
static bool col_shown(const struct table *tb, size_t c)
{
	return (c != COL_PREDICTED || tb->m.have_pred) && (c != COL_ALLOC || tb->m.have_alloc);
}

static void cells(const struct table *tb, const struct row *g, char cell[][48])
{
	snprintf(cell[0], 48, "%s", g->status);
	if (g->sum.has_metric)
		snprintf(cell[1], 48, "%.6g", g->sum.metric);
	else
		snprintf(cell[1], 48, "-");
	snprintf(cell[2], 48, "%s%s", g->verdict[0] ? g->verdict : "-", g->other_judge ? "*" : "");
	if (isfinite(g->sum.growth_bytes_per_step))
		render_signed_bytes(cell[3], 48, g->sum.growth_bytes_per_step);
	else
		snprintf(cell[3], 48, "-");
	for (int q = 0; q < 5; q++) {
		if (isfinite(g->sum.q[q]))
			fmt_bytes(cell[4 + q], 48, g->sum.q[q]);
		else
			snprintf(cell[4 + q], 48, "-");
	}
	if (isfinite(g->sum.steps_per_second) && g->sum.steps_per_second > 0)
		snprintf(cell[9], 48, "%.3g", g->sum.steps_per_second);
	else
		snprintf(cell[9], 48, "-");
	if (g->sum.peak_bytes)
		fmt_bytes(cell[10], 48, (double)g->sum.peak_bytes);
	else
		snprintf(cell[10], 48, "-");
	if (g->sum.limit_bytes)
		fmt_bytes(cell[COL_ALLOC], 48, (double)g->sum.limit_bytes);
	else
		snprintf(cell[COL_ALLOC], 48, "-");
	if (isfinite(g->pred))
		fmt_bytes(cell[COL_PREDICTED], 48, g->pred);
	else
		snprintf(cell[COL_PREDICTED], 48, "-");
	if (tb->grouped)
		snprintf(cell[COL_RUN], 48, "%lld trial%s", (long long)g->trials, g->trials == 1 ? "" : "s");
	else if (g->sum.run_id)
		snprintf(cell[COL_RUN], 48, "%lld", (long long)g->sum.run_id);
	else
		snprintf(cell[COL_RUN], 48, "-");
}

static void write_text(const struct table *tb, struct strbuf *sb, bool md)
{
	size_t ncol = 1 + tb->nnames + FIXED_COLS;
	size_t *w = xcalloc(ncol, sizeof(size_t));
	char (*cell)[48] = xmalloc(FIXED_COLS * sizeof(*cell));
	const char *first = tb->grouped ? "" : "trial";
	w[0] = strlen(first);
	for (size_t k = 0; k < tb->nnames; k++)
		w[1 + k] = strlen(tb->names[k]);
	for (int c = 0; c < FIXED_COLS; c++)
		w[1 + tb->nnames + (size_t)c] = strlen(c == COL_RUN && tb->grouped ? "trials" : fixed_heads[c]);
	/* Each row's cells are formatted once, into one arena (NUL-separated,
	 * offsets per cell), and read again for the output: a sweep of
	 * 100,000 trials is 1.2 million cells. */
	struct strbuf arena = STRBUF_INIT;
	size_t *at = xmalloc((tb->nrows * FIXED_COLS + 1) * sizeof(size_t));
	for (size_t j = 0; j < tb->nrows; j++) {
		const struct row *g = &tb->rows[j];
		char id[32];
		trial_id(id, sizeof(id), &g->sum);
		if (!tb->grouped && strlen(id) > w[0])
			w[0] = strlen(id);
		for (size_t k = 0; k < tb->nnames; k++)
			if (strlen(g->vals[k]) > w[1 + k])
				w[1 + k] = strlen(g->vals[k]);
		cells(tb, g, cell);
		for (int c = 0; c < FIXED_COLS; c++) {
			size_t len = strlen(cell[c]);
			if (len > w[1 + tb->nnames + (size_t)c])
				w[1 + tb->nnames + (size_t)c] = len;
			at[j * FIXED_COLS + (size_t)c] = arena.len;
			strbuf_add(&arena, cell[c], len + 1);
		}
	}
	bool skip0 = tb->grouped;
	/* header */
	for (size_t c = skip0; c < ncol; c++) {
		if (c > tb->nnames && !col_shown(tb, c - 1 - tb->nnames))
			continue;
		const char *h = c == 0 ? first : c <= tb->nnames ? tb->names[c - 1] :
		                (c - 1 - tb->nnames == COL_RUN && tb->grouped) ? "trials" : fixed_heads[c - 1 - tb->nnames];
		if (md) {
			struct strbuf head = STRBUF_INIT;
			render_add_md_cell(&head, h);
			strbuf_addf(sb, "| %-*s ", (int)w[c], strbuf_str(&head));
			strbuf_release(&head);
		} else {
			strbuf_addf(sb, "%-*s  ", (int)w[c], h);
		}
	}
	while (!md && sb->len && sb->buf[sb->len - 1] == ' ')
		sb->buf[--sb->len] = '\0';
	strbuf_addstr(sb, md ? "|\n" : "\n");
	for (size_t c = skip0; c < ncol; c++) {
		if (c > tb->nnames && !col_shown(tb, c - 1 - tb->nnames))
			continue;
		if (md)
			strbuf_addstr(sb, "|");
		for (size_t i = 0; i < w[c] + (md ? 2 : 0); i++)
			strbuf_addch(sb, '-');
		if (!md)
			strbuf_addstr(sb, "  ");
	}
	while (!md && sb->len && sb->buf[sb->len - 1] == ' ')
		sb->buf[--sb->len] = '\0';
	strbuf_addstr(sb, md ? "|\n" : "\n");
	for (size_t j = 0; j < tb->nrows; j++) {
		const struct row *g = &tb->rows[j];
		char id[32];
		trial_id(id, sizeof(id), &g->sum);
		for (size_t c = skip0; c < ncol; c++) {
			if (c > tb->nnames && !col_shown(tb, c - 1 - tb->nnames))
				continue;
			const char *v = c == 0 ? id : c <= tb->nnames ? g->vals[c - 1] :
			                arena.buf + at[j * FIXED_COLS + (c - 1 - tb->nnames)];
			if (md)
				strbuf_addstr(sb, "| ");
			size_t from = sb->len;
			if (md)
				render_add_md_cell(sb, v);
			else
				render_add_clean(sb, v);
			for (size_t pad = sb->len - from; pad < w[c]; pad++)   /* as %-*s: bytes */
				strbuf_addch(sb, ' ');
			strbuf_addstr(sb, md ? " " : "  ");
		}
		while (!md && sb->len && sb->buf[sb->len - 1] == ' ')
			sb->buf[--sb->len] = '\0';
		strbuf_addstr(sb, md ? "|\n" : "\n");
	}
	strbuf_release(&arena);
	free(at);
	free(cell);
	free(w);
	for (size_t i = 0; i < tb->m.ntrials; i++)
		if (tb->m.trials[i].run_id && report_other_judge(tb->m.trials[i].verdict, tb->m.trials[i].judge_version)) {
			report_add_other_judge_note(sb, "the trial's run", tb->m.trials[i].run_id);
			break;
		}
}

/* One CSV field: quoted, and guarded against spreadsheet formulas (render.h). */
static void csv_field(struct strbuf *sb, const char *v)
{
	render_add_csv_field(sb, v);
}

static void num_or_empty(struct strbuf *sb, double v)
{
	if (isfinite(v))
		strbuf_addf(sb, ",%.17g", v);
	else
		strbuf_addstr(sb, ",");
}

static void write_csv(const struct table *tb, struct strbuf *sb)
{
	strbuf_addstr(sb, tb->grouped ? "trials" : "trial,attempt");
	for (size_t k = 0; k < tb->nnames; k++) {
		strbuf_addch(sb, ',');
		csv_field(sb, tb->names[k]);
	}
	strbuf_addstr(sb, ",status,cause,metric,verdict,growth_bytes_per_step,min,q1,median,q3,max,"
	                  "steps_per_second,peak_bytes");
	strbuf_addstr(sb, tb->m.have_alloc ? ",allocation_bytes" : "");
	strbuf_addstr(sb, tb->m.have_pred ? ",predicted_peak_bytes,run\n" : ",run\n");
	for (size_t j = 0; j < tb->nrows; j++) {
		const struct row *g = &tb->rows[j];
		if (tb->grouped)
			strbuf_addf(sb, "%lld", (long long)g->trials);
		else
			strbuf_addf(sb, "%lld,%lld", (long long)g->sum.idx + 1, (long long)g->sum.attempt);
		for (size_t k = 0; k < tb->nnames; k++) {
			strbuf_addch(sb, ',');
			csv_field(sb, g->vals[k]);
		}
		strbuf_addch(sb, ',');
		csv_field(sb, g->status);
		strbuf_addch(sb, ',');
		csv_field(sb, g->cause);
		num_or_empty(sb, g->sum.has_metric ? g->sum.metric : NAN);
		strbuf_addch(sb, ',');
		csv_field(sb, g->verdict);
		num_or_empty(sb, g->sum.growth_bytes_per_step);
		for (int q = 0; q < 5; q++)
			num_or_empty(sb, g->sum.q[q]);
		num_or_empty(sb, g->sum.steps_per_second > 0 ? g->sum.steps_per_second : NAN);
		num_or_empty(sb, g->sum.peak_bytes ? (double)g->sum.peak_bytes : NAN);
		if (tb->m.have_alloc)
			num_or_empty(sb, g->sum.limit_bytes ? (double)g->sum.limit_bytes : NAN);
		if (tb->m.have_pred)
			num_or_empty(sb, g->pred);
		if (!tb->grouped && g->sum.run_id)
			strbuf_addf(sb, ",%lld\n", (long long)g->sum.run_id);
		else
			strbuf_addstr(sb, ",\n");
	}
}

/* "" for NULL. */
static const char *text(const char *s)
{
	return s ? s : "";
}

/* "key": text that is JSON already (a trial's params, env, argv, as stored). */
static void json_raw(struct json_writer *jw, const char *key, const char *json)
{
	jw_object_key(jw, key);
	strbuf_addstr(jw->sb, json ? json : "null");
}

static void json_quantiles(struct json_writer *jw, const double q[5])
{
	jw_object_array(jw, "step_change_quantiles_bytes", false);
	for (int i = 0; i < 5; i++)
		jw_array_double(jw, q[i]);
	jw_end(jw);
}

static void json_prediction(struct json_writer *jw, const struct trial_prediction *p);
static void json_memory_model(const struct table *tb, struct json_writer *jw);

static void write_json(const struct table *tb, struct strbuf *sb)
{
	const struct sweep_row *s = &tb->m.sw;
	struct json_writer jw;
	jw_init(&jw, sb);
	jw_object_begin(&jw, true);
	jw_object_object(&jw, "sweep", false);
	jw_object_intmax(&jw, "id", s->id);
	jw_object_string(&jw, "file", text(s->file));
	jw_object_string(&jw, "method", text(s->method));
	jw_object_string(&jw, "metric", render_json_known(s->metric));
	jw_object_string(&jw, "goal", s->maximize ? "maximize" : "minimize");
	jw_object_string(&jw, "status", sweep_status_name(s->status));
	jw_object_double(&jw, "started_at", s->started_at);
	jw_object_double(&jw, "ended_at", s->ended_at > 0 ? s->ended_at : NAN);
	if (s->optuna_study[0]) {
		jw_object_string(&jw, "optuna_storage", text(s->optuna_storage));
		jw_object_string(&jw, "optuna_study", text(s->optuna_study));
	}
	jw_end(&jw);
	jw_object_array(&jw, "trials", true);
	for (size_t i = 0; i < tb->m.ntrials; i++) {
		const struct trial_row *t = &tb->m.trials[i];
		jw_array_object(&jw, false);
		jw_object_intmax(&jw, "trial", t->idx + 1);
		jw_object_intmax(&jw, "attempt", t->attempt);
		json_raw(&jw, "params", t->params);
		json_raw(&jw, "env", t->env);
		json_raw(&jw, "argv", t->argv);
		jw_object_string(&jw, "status", trial_status_name(t->status));
		jw_object_string(&jw, "cause", render_json_known(cause_name(t->cause)));
		jw_object_double(&jw, "metric", t->has_metric ? t->metric : NAN);
		jw_object_string(&jw, "verdict", render_json_known(t->verdict));
		jw_object_double(&jw, "judge_version", t->judge_version ? t->judge_version : NAN);
		jw_object_double(&jw, "growth_bytes_per_step", t->growth_bytes_per_step);
		jw_object_double(&jw, "peak_bytes", t->run_id ? (double)t->peak_bytes : NAN);
		json_quantiles(&jw, t->q);
		jw_object_double(&jw, "steps_per_second", t->steps_per_second);
		jw_object_intmax(&jw, "steps", t->steps);
		jw_object_double(&jw, "run", t->run_id ? (double)t->run_id : NAN);
		jw_object_double(&jw, "allocation_bytes", t->limit_bytes ? (double)t->limit_bytes : NAN);
		jw_object_double(&jw, "optuna_number", t->optuna_number >= 0 ? (double)t->optuna_number : NAN);
		jw_object_string(&jw, "note", render_json_known(t->note));
		if (tb->m.have_pred)
			json_prediction(&jw, &tb->m.pred[i]);
		jw_end(&jw);
	}
	jw_end(&jw);
	json_memory_model(tb, &jw);
	if (tb->grouped) {
		/* --by: the table's rows, one per combination of those values */
		jw_object_array(&jw, "by", false);
		for (size_t k = 0; k < tb->nnames; k++)
			jw_array_string(&jw, text(tb->names[k]));
		jw_end(&jw);
		jw_object_array(&jw, "groups", true);
		for (size_t j = 0; j < tb->nrows; j++) {
			const struct row *g = &tb->rows[j];
			jw_array_object(&jw, false);
			jw_object_object(&jw, "values", false);
			for (size_t k = 0; k < tb->nnames; k++)
				jw_object_string(&jw, text(tb->names[k]), text(g->vals[k]));
			jw_end(&jw);
			jw_object_intmax(&jw, "trials", g->trials);
			jw_object_string(&jw, "statuses", text(g->status));
			jw_object_double(&jw, "metric", g->sum.has_metric ? g->sum.metric : NAN);
			jw_object_string(&jw, "verdict", text(g->verdict));
			jw_object_double(&jw, "growth_bytes_per_step", g->sum.growth_bytes_per_step);
			json_quantiles(&jw, g->sum.q);
			jw_object_double(&jw, "steps_per_second", g->sum.steps_per_second);
			jw_object_double(&jw, "peak_bytes", g->sum.peak_bytes ? (double)g->sum.peak_bytes : NAN);
			jw_end(&jw);
		}
		jw_end(&jw);
	}
	jw_end(&jw);
	strbuf_addch(sb, '\n');
}

/* ---- what the sweep learned of memory ------------------------------------ */

static const char *const what_names[MEM_NWHAT] = { "host peak", "GPU peak", "growth per step" };
static const char *const what_keys[MEM_NWHAT] = { "host", "gpu", "growth" };

struct effect {
	size_t d;
	double from, to, at_from, at_to;   /* the values seen, and the fit there */
};

static int cmp_effect(const void *x, const void *y)
{
	const struct effect *a = x, *b = y;
	double ra = a->at_to / a->at_from, rb = b->at_to / b->at_from;
	return (ra < rb) - (ra > rb);
}

/* The dimensions in fit f with their effect, largest first; n of them. */
static size_t effects(const struct sweep_model *m, const struct mem_fit *f, struct effect *e)
{
	size_t n = 0;
	for (size_t d = 0; d < m->ndims && d < MEMFIT_MAX_DIMS; d++) {
		if (!f->numeric[d] || !f->varied[d])
			continue;
		e[n].d = d;
		e[n].from = f->seen_lo[d];
		e[n].to = f->seen_hi[d];
		e[n].at_from = mem_fit_effect(f, d, e[n].from);
		e[n].at_to = mem_fit_effect(f, d, e[n].to);
		n++;
	}
	if (n)
		qsort(e, n, sizeof(*e), cmp_effect);
	return n;
}

/* Predicted (before the trial ran) against measured host peaks: how many
 * trials had both, the median relative error, how many fell inside the
 * interval. */
static void accuracy(const struct sweep_model *m, size_t *n, double *median_err, size_t *inside)
{
	double *err = xmalloc((m->ntrials + 1) * sizeof(double));
	*n = *inside = 0;
	for (size_t i = 0; i < m->ntrials; i++) {
		const struct trial_row *t = &m->trials[i];
		const struct trial_prediction *p = &m->pred[i];
		if (!isfinite(p->peak[0]) || !t->peak_bytes || (t->status != TRIAL_OK && t->status != TRIAL_FAILED))
			continue;
		double got = (double)t->peak_bytes;
		err[(*n)++] = fabs(p->peak[0] - got) / got;
		*inside += got >= p->peak[1] && got <= p->peak[2];
	}
	*median_err = *n ? median_finite(err, *n) : NAN;
	free(err);
}

static bool any_fit(const struct sweep_model *m)
{
	for (int w = 0; w < MEM_NWHAT; w++)
		if (m->mem.fit[w].ok)
			return true;
	return false;
}

static void fmt_amount(char *buf, size_t sz, int w, double v)
{
	if (w == MEM_GROWTH) {
		fmt_bytes(buf, sz, v);
		size_t len = strlen(buf);
		snprintf(buf + len, sz - len, "/step");
	} else {
		fmt_bytes(buf, sz, v);
	}
}

/* Text and Markdown (render.h): the skipped trials and why, then each fit's effects. */
void sweep_memory_model_write(const struct sweep_model *m, struct strbuf *sb, bool md)
{
	bool skipped = false;
	for (size_t i = 0; i < m->ntrials; i++) {
		const struct trial_row *t = &m->trials[i];
		if (t->status != TRIAL_SKIPPED)
			continue;
		if (!skipped)
			strbuf_addstr(sb, md ? "\n**skipped** (not started: predicted not to fit)\n\n" :
			                       "\nskipped (not started: predicted not to fit):\n");
		skipped = true;
		char id[48];
		trial_id(id, sizeof(id), t);
		strbuf_addf(sb, md ? "- trial %s: " : "  trial %s: ", id);
		if (md)
			render_add_md_cell(sb, t->note);
		else
			render_add_clean(sb, t->note);
		strbuf_addch(sb, '\n');
	}
	if (!any_fit(m))
		return;
	strbuf_addstr(sb, md ? "\n**memory model**\n" : "\nmemory model:\n");
	for (int w = 0; w < MEM_NWHAT; w++) {
		const struct mem_fit *f = &m->mem.fit[w];
		if (!f->ok)
			continue;
		char base[32];
		fmt_amount(base, sizeof(base), w, f->base);
		strbuf_addf(sb, md ? "\n%s, from %zu trials" : "  %s, from %zu trials", what_names[w], f->n);
		if (f->n_censored)
			strbuf_addf(sb, " (%zu ran out of memory: lower bounds)", f->n_censored);
		strbuf_addf(sb, ": %s + a power law of the parameters; what drives it:%s", base, md ? "\n\n" : "\n");
		struct effect e[MEMFIT_MAX_DIMS];
		size_t ne = effects(m, f, e);
		for (size_t k = 0; k < ne; k++) {
			char a[32], b[32], lo[32], hi[32];
			fmt_amount(a, sizeof(a), w, e[k].at_from);
			fmt_amount(b, sizeof(b), w, e[k].at_to);
			snprintf(lo, sizeof(lo), "%.6g", e[k].from);
			snprintf(hi, sizeof(hi), "%.6g", e[k].to);
			double ratio = e[k].at_to / e[k].at_from;
			if (md) {
				/* a list, not a table: the trials' table stays the page's only one */
				strbuf_addstr(sb, "- ");
				render_add_md_code(sb, m->dims[e[k].d], false);
				strbuf_addf(sb, " %s → %s: %s → %s (×%.3g, exponent %.3g)\n", lo, hi, a, b, ratio, f->coef[e[k].d]);
			} else {
				strbuf_addstr(sb, "    ");
				struct strbuf name = STRBUF_INIT;
				render_add_clean(&name, m->dims[e[k].d]);
				strbuf_addf(sb, "%-16s %s → %s: %s → %s (×%.3g, exponent %.3g)\n", strbuf_str(&name), lo, hi, a,
				            b, ratio, f->coef[e[k].d]);
				strbuf_release(&name);
			}
		}
		if (w == MEM_HOST) {
			size_t n, inside;
			double err;
			accuracy(m, &n, &err, &inside);
			if (n)
				strbuf_addf(sb, "%spredicted before they ran, against measured: %zu trial%s, median error %.1f%%, "
				            "%zu within the interval\n", md ? "\n" : "    ", n, n == 1 ? "" : "s", 100 * err, inside);
		}
	}
}

static void json_triple(struct json_writer *jw, const char *key, const double v[3])
{
	char interval[64];
	snprintf(interval, sizeof(interval), "%s_interval", key);
	jw_object_double(jw, key, v[0]);
	jw_object_array(jw, interval, false);
	jw_array_double(jw, v[1]);
	jw_array_double(jw, v[2]);
	jw_end(jw);
}

/* A trial's prediction, "predicted": {...} (null: none). */
static void json_prediction(struct json_writer *jw, const struct trial_prediction *p)
{
	if (!render_json_object_or_null(jw, "predicted", isfinite(p->peak[0]) || isfinite(p->gpu[0])))
		return;
	json_triple(jw, "peak_bytes", p->peak);
	json_triple(jw, "gpu_peak_bytes", p->gpu);
	jw_object_double(jw, "growth_bytes_per_step", p->growth);
	jw_end(jw);
}

/* "memory_model": {...} when a fit has something to say. */
static void json_memory_model(const struct table *tb, struct json_writer *jw)
{
	if (!any_fit(&tb->m))
		return;
	jw_object_object(jw, "memory_model", true);
	for (int w = 0; w < MEM_NWHAT; w++) {
		const struct mem_fit *f = &tb->m.mem.fit[w];
		if (!f->ok)
			continue;
		jw_object_object(jw, what_keys[w], false);
		jw_object_intmax(jw, "trials", (intmax_t)f->n);
		jw_object_intmax(jw, "censored", (intmax_t)f->n_censored);
		jw_object_double(jw, "base", f->base);
		jw_object_double(jw, "residual_sd_log", f->sd);
		jw_object_array(jw, "effects", false);
		struct effect e[MEMFIT_MAX_DIMS];
		size_t ne = effects(&tb->m, f, e);
		for (size_t k = 0; k < ne; k++) {
			jw_array_object(jw, false);
			jw_object_string(jw, "parameter", text(tb->m.dims[e[k].d]));
			jw_object_double(jw, "exponent", f->coef[e[k].d]);
			jw_object_double(jw, "from", e[k].from);
			jw_object_double(jw, "to", e[k].to);
			jw_object_double(jw, "fitted_from", e[k].at_from);
			jw_object_double(jw, "fitted_to", e[k].at_to);
			jw_end(jw);
		}
		jw_end(jw);
		if (w == MEM_HOST) {
			size_t n, inside;
			double err;
			accuracy(&tb->m, &n, &err, &inside);
			jw_object_intmax(jw, "predicted_trials", (intmax_t)n);
			jw_object_double(jw, "median_relative_error", err);
			jw_object_intmax(jw, "within_interval", (intmax_t)inside);
		}
		jw_end(jw);
	}
	jw_end(jw);
}

int sweep_write_table(struct store *st, int64_t sweep_id, enum report_format fmt, const char *by, struct strbuf *sb)
{
	struct table tb;
	if (load_table(st, sweep_id, by, &tb) < 0) {
		free_table(&tb);
		return -1;
	}
	if (fmt == REPORT_JSON) {
		write_json(&tb, sb);
	} else if (fmt == REPORT_CSV) {
		write_csv(&tb, sb);
	} else {
		int n[TRIAL_STATUS_UNKNOWN + 1] = { 0 };
		for (size_t i = 0; i < tb.m.ntrials; i++)
			n[tb.m.trials[i].status <= TRIAL_STATUS_UNKNOWN ? tb.m.trials[i].status : TRIAL_STATUS_UNKNOWN]++;
		int ok = n[TRIAL_OK], oom = n[TRIAL_OOM], failed = n[TRIAL_FAILED], skipped = n[TRIAL_SKIPPED];
		int pruned = n[TRIAL_PRUNED], other = (int)tb.m.ntrials - ok - oom - failed - skipped - pruned;
		if (fmt == REPORT_MD) {
			strbuf_addf(sb, "**leakproof sweep %lld** (", (long long)tb.m.sw.id);
			render_add_md_code(sb, tb.m.sw.file, false);
		} else {
			strbuf_addf(sb, "leakproof: sweep %lld: ", (long long)tb.m.sw.id);
			render_add_clean(sb, tb.m.sw.file);
		}
		strbuf_addf(sb, "%s, %s, %s: %zu trial%s — %d ok, %d oom, %d failed", fmt == REPORT_MD ? ")" : "",
		            tb.m.sw.method, sweep_status_name(tb.m.sw.status), tb.m.ntrials, tb.m.ntrials == 1 ? "" : "s", ok, oom, failed);
		if (skipped)
			strbuf_addf(sb, ", %d skipped", skipped);
		if (pruned)
			strbuf_addf(sb, ", %d pruned", pruned);
		if (other)
			strbuf_addf(sb, ", %d other", other);
		strbuf_addstr(sb, fmt == REPORT_MD ? "\n\n" : "\n");
		if (tb.m.sw.metric[0]) {
			strbuf_addstr(sb, "metric ");
			if (fmt == REPORT_MD)
				render_add_md_cell(sb, tb.m.sw.metric);
			else
				render_add_clean(sb, tb.m.sw.metric);
			strbuf_addf(sb, " (%s)%s", tb.m.sw.maximize ? "maximize" : "minimize",
			            fmt == REPORT_MD ? "\n\n" : "\n");
		}
		write_text(&tb, sb, fmt == REPORT_MD);
		sweep_memory_model_write(&tb.m, sb, fmt == REPORT_MD);
	}
	free_table(&tb);
	return 0;
}
