/*
 * judge/sweep.c — a stored sweep loaded for the renderers (see sweep.h):
 * one loader for the table, the charts and the JUnit verdicts.
 */
#include "judge/sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sweep/spec.h"
#include "util/util.h"

#define SEP '\x1f'             /* between the values of trial_row.vals */

/* What was predicted of each trial (both lists by idx then attempt), and
 * the memory model fitted on every finished trial. */
static int load_predictions(struct store *st, struct sweep_model *m)
{
	struct trial_prediction *p = NULL;
	size_t np = 0;
	if (store_load_trial_predictions(st, m->sw.id, &p, &np) < 0)
		return -1;
	m->pred = xcalloc(m->ntrials + 1, sizeof(*m->pred));
	size_t k = 0;
	for (size_t i = 0; i < m->ntrials; i++) {
		const struct trial_row *t = &m->trials[i];
		struct trial_prediction *q = &m->pred[i];
		q->idx = t->idx;
		q->attempt = t->attempt;
		for (int j = 0; j < 3; j++)
			q->peak[j] = q->gpu[j] = NAN;
		q->growth = NAN;
		while (k < np && (p[k].idx < t->idx || (p[k].idx == t->idx && p[k].attempt < t->attempt)))
			k++;
		if (k < np && p[k].idx == t->idx && p[k].attempt == t->attempt) {
			*q = p[k];
			m->have_pred = true;
		}
	}
	free(p);
	for (size_t i = 1; i < m->ntrials; i++)
		m->have_alloc |= m->trials[i].run_id && m->trials[i].limit_bytes != m->trials[0].limit_bytes;
	if (!m->have_spec)
		return 0;
	char ***vals = xcalloc(m->ntrials + 1, sizeof(char **));
	for (size_t i = 0; i < m->ntrials; i++) {
		vals[i] = xcalloc(m->ndims + 1, sizeof(char *));
		for (size_t d = 0; d < m->ndims; d++)
			vals[i][d] = sweep_trial_value(&m->trials[i], d);
	}
	memmodel_build(&m->mem, m->ndims, m->trials, (char *const *const *)vals, m->ntrials, m->budget_bytes, 0);
	for (size_t i = 0; i < m->ntrials; i++) {
		for (size_t d = 0; d < m->ndims; d++)
			free(vals[i][d]);
		free(vals[i]);
	}
	free(vals);
	return 0;
}

int sweep_model_load(struct store *st, int64_t sweep_id, struct sweep_model *m)
{
	memset(m, 0, sizeof(*m));
	int rc = store_get_sweep(st, sweep_id, &m->sw);
	if (rc)
		return rc;
	struct sweep_spec spec;
	m->have_spec = sweep_spec_parse(m->sw.text, strlen(m->sw.text), m->sw.file, &spec) == 0;
	if (m->have_spec) {
		m->dims = xcalloc(spec.ndims + 1, sizeof(char *));
		for (size_t d = 0; d < spec.ndims; d++)
			m->dims[d] = xstrdup(spec.dims[d].name);
		m->ndims = spec.ndims;
		/* a percentage is of a machine not known here */
		if (spec.memory_max && !strchr(spec.memory_max, '%') && parse_size(spec.memory_max, 0, &m->budget_bytes) < 0)
			m->budget_bytes = 0;
		sweep_spec_free(&spec);
	} else {
		warning("the sweep's file no longer parses; showing parameters as JSON");
	}
	if (store_load_trials(st, m->sw.id, &m->trials, &m->ntrials) < 0)
		return -1;
	return load_predictions(st, m);
}

int sweep_model_open(struct store *st, int64_t sweep_id, struct sweep_model *m)
{
	int rc = sweep_model_load(st, sweep_id, m);
	if (rc > 0)
		error(sweep_id ? "no sweep %lld in the store" : "no sweep in the store", (long long)sweep_id);
	if (rc)
		sweep_model_release(m);
	return rc ? -1 : 0;
}

void sweep_model_release(struct sweep_model *m)
{
	free_strings(m->dims, m->ndims);
	trial_rows_free(m->trials, m->ntrials);
	free(m->pred);
	sweep_row_release(&m->sw);
	memset(m, 0, sizeof(*m));
}

char *sweep_trial_value(const struct trial_row *t, size_t d)
{
	const char *p = t->vals;
	for (size_t i = 0; i < d && p; i++) {
		p = strchr(p, SEP);
		if (p)
			p++;
	}
	if (!p)
		return xstrdup("?");
	const char *end = strchr(p, SEP);
	size_t n = end ? (size_t)(end - p) : strlen(p);
	char *v = xmalloc(n + 1);
	memcpy(v, p, n);
	v[n] = '\0';
	return v;
}

char *sweep_trial_config(const struct sweep_model *m, const struct trial_row *t)
{
	struct strbuf sb = STRBUF_INIT;
	const char *p = t->vals;
	for (size_t d = 0; d < m->ndims && p; d++) {
		const char *end = strchr(p, SEP);
		size_t n = end ? (size_t)(end - p) : strlen(p);
		strbuf_addf(&sb, "%s%s=", d ? ", " : "", m->dims[d]);
		strbuf_add(&sb, p, n);
		p = end ? end + 1 : NULL;
	}
	if (!m->ndims)
		strbuf_addstr(&sb, t->params);
	return strbuf_detach(&sb, NULL);
}

int sweep_trial_series_load(struct store *st, const struct trial_row *t, bool over_time, double **xo,
                            double **yo, size_t *no)
{
	*xo = *yo = NULL;
	*no = 0;
	struct run_row run;
	if (!t->run_id || store_get_run(st, t->run_id, &run) != 0)
		return 0;
	enum measure m = run.measure;
	run_row_release(&run);
	double *x, *y;
	size_t k = 0;
	if (!over_time) {
		struct step_rec *steps = NULL;
		size_t n = 0;
		if (store_load_steps(st, t->run_id, &steps, &n) < 0)
			return -1;
		bool inc = true;
		for (size_t i = 1; i < n; i++)
			inc = inc && steps[i].step > steps[i - 1].step;
		x = xmalloc((n ? n : 1) * sizeof(double));
		y = xmalloc((n ? n : 1) * sizeof(double));
		for (size_t i = 0; i < n; i++) {
			double v = mem_sample_value(&steps[i].mem, m);
			x[k] = inc ? (double)steps[i].step : (double)(i + 1);
			y[k++] = v >= 0 ? v : NAN;
		}
		free(steps);
	} else {
		struct mem_sample *sm = NULL;
		size_t n = 0;
		if (store_load_samples(st, t->run_id, &sm, &n) < 0)
			return -1;
		x = xmalloc((n ? n : 1) * sizeof(double));
		y = xmalloc((n ? n : 1) * sizeof(double));
		for (size_t i = 0; i < n; i++) {
			double v = mem_sample_value(&sm[i], m);
			x[k] = sm[i].t;
			y[k++] = v >= 0 ? v : NAN;
		}
		free(sm);
	}
	*xo = x;
	*yo = y;
	*no = k;
	return 0;
}
