/*
 * judge/job.c — a job of several ranks, loaded from the store and each
 * rank judged (run_summary_load, the judgment `report RUN` makes): the
 * table of ranks and which one grows. See judge/job.h.
 */
#include "judge/job.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge/summary.h"
#include "util/util.h"

int job_key_of_run(struct store *st, int64_t run_id, char *key, size_t cap)
{
	struct run_row r;
	key[0] = '\0';
	if (store_get_run(st, run_id, &r) != 0)
		return -1;
	if (r.has_place)
		snprintf(key, cap, "%s", r.place.job_key);
	run_row_release(&r);
	return 0;
}

/* key_or_run as a run id: > 0, or 0 when it is not one. */
static int64_t as_run_id(const char *s)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	return !errno && *s && !*end && v > 0 ? v : 0;
}

static void judge_rank(struct store *st, int measure, struct job_rank *k)
{
	struct run_summary sum;
	k->verdict = VERDICT_INCONCLUSIVE;
	k->growth = NAN;
	k->x_unit = "step";
	if (run_summary_load(st, k->run.id, measure, &sum) != 0) {
		snprintf(k->reason, sizeof(k->reason), "cannot be judged: its rows cannot be read");
		return;
	}
	k->verdict = sum.a.verdict;
	snprintf(k->reason, sizeof(k->reason), "%s", sum.reason);
	k->x_unit = !strcmp(sum.x_unit, "s") ? "s" : "step";
	k->growth = sum.a.points >= 2 ? sum.a.slope : NAN;
	k->peak_bytes = sum.peak_bytes;
	k->steps = sum.steps;
	snprintf(k->measure, sizeof(k->measure), "%s", measure_name(sum.measure));
	run_summary_release(&sum);
}

int job_model_load(struct store *st, const char *key_or_run, int measure, struct job_model *m)
{
	memset(m, 0, sizeof(*m));
	int64_t id = as_run_id(key_or_run);
	if (id || !*key_or_run) {
		if (job_key_of_run(st, id, m->key, sizeof(m->key)) < 0) {
			if (id)
				error("no run %lld in the store", (long long)id);
			else
				error("no runs in the store yet");
			return 1;
		}
		if (!m->key[0]) {
			error("run %s is not one rank of a job of several (it ran alone: see `leakproof report%s%s`)",
			      id ? key_or_run : "latest", id ? " " : "", id ? key_or_run : "");
			return 1;
		}
	} else {
		snprintf(m->key, sizeof(m->key), "%s", key_or_run);
	}
	struct run_row *rows;
	size_t n;
	if (store_list_job_runs(st, m->key, &rows, &n) < 0)
		return -1;
	if (!n) {
		free(rows);
		error("no job '%s' in the store (job keys: `leakproof ls --format json`, placement.job_key)", m->key);
		return 1;
	}
	m->ranks = xcalloc(n, sizeof(*m->ranks));
	m->nranks = n;
	for (size_t i = 0; i < n; i++) {
		m->ranks[i].run = rows[i];   /* moved: the array alone is freed */
		judge_rank(st, measure, &m->ranks[i]);
		if (m->ranks[i].verdict == VERDICT_LEAK) {
			if (!m->growing++ || m->ranks[i].growth > m->ranks[m->worst].growth)
				m->worst = i;
		}
	}
	free(rows);
	return 0;
}

void job_model_release(struct job_model *m)
{
	for (size_t i = 0; i < m->nranks; i++)
		run_row_release(&m->ranks[i].run);
	free(m->ranks);
	memset(m, 0, sizeof(*m));
}
