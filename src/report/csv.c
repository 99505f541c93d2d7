/*
 * csv.c — a run's memory as CSV, for spreadsheets and scripts. The columns
 * are a stable contract (docs/internals/store.md):
 *
 *   step,epoch,t,rss,pss,uss,swap,cgroup,gpu
 *
 * one row per step; t in seconds since the run started, sizes in bytes;
 * an empty field where there is no value (epoch unknown, cgroup or GPU not
 * measured). A run that marked no steps gets one row per memory sample
 * instead, with step and epoch empty. A run that stored growth kinds
 * (docs/internals/growth-kinds.md) gets four more columns after these,
 *
 *   anonymous,copy_on_write,file_cache,shared_memory
 *
 * the job's memory of each kind at the row's time, summed over its
 * processes (judge/kinds.h run_kinds_totals()); empty where no process was
 * measured. A run without kinds renders as before. Appended to a buffer:
 * a million rows cost about 60 MB (100 MB with the kinds).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "judge/kinds.h"
#include "report/render.h"

#define NKIND_COLUMNS 4     /* anonymous .. shared-memory: GPU is the gpu column */

static void put_kinds(struct strbuf *sb, double *const kind[KIND_COUNT], size_t i)
{
	for (int k = 0; kind[0] && k < NKIND_COLUMNS; k++) {
		strbuf_addch(sb, ',');
		if (isfinite(kind[k][i]))
			strbuf_addf(sb, "%.0f", kind[k][i]);
	}
}

static void put_row(struct strbuf *sb, const char *step, const char *epoch, const struct mem_sample *m)
{
	strbuf_addf(sb, "%s,%s,%.6f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",",
	        step, epoch, m->t, m->rss, m->pss, m->uss, m->swap);
	if (m->has_cgroup)
		strbuf_addf(sb, "%" PRIu64, m->cgroup);
	strbuf_addch(sb, ',');
	if (m->has_gpu)
		strbuf_addf(sb, "%" PRIu64, m->gpu);
}

void report_write_csv(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb)
{
	(void)x;
	size_t n = s->steps ? s->steps : s->nsamples;
	double *kind[KIND_COUNT] = { NULL };
	if (s->kinds && s->kinds->nrows && n) {
		double *t = xmalloc(n * sizeof(double));
		for (size_t i = 0; i < n; i++)
			t[i] = s->steps ? s->step_recs[i].mem.t : s->samples[i].t;
		for (int k = 0; k < NKIND_COLUMNS; k++)
			kind[k] = xmalloc(n * sizeof(double));
		run_kinds_totals(s->kinds, t, n, kind);
		free(t);
	}
	strbuf_addstr(sb, "step,epoch,t,rss,pss,uss,swap,cgroup,gpu");
	if (kind[0])
		strbuf_addstr(sb, ",anonymous,copy_on_write,file_cache,shared_memory");
	strbuf_addch(sb, '\n');
	for (size_t i = 0; i < n; i++) {
		if (s->steps) {
			char step[24], epoch[24] = "";
			snprintf(step, sizeof(step), "%" PRId64, s->step_recs[i].step);
			if (s->step_recs[i].epoch >= 0)
				snprintf(epoch, sizeof(epoch), "%" PRId64, s->step_recs[i].epoch);
			put_row(sb, step, epoch, &s->step_recs[i].mem);
		} else {
			put_row(sb, "", "", &s->samples[i]);
		}
		put_kinds(sb, kind, i);
		strbuf_addch(sb, '\n');
	}
	for (int k = 0; k < KIND_COUNT; k++)
		free(kind[k]);
}
