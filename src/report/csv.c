/*
 * csv.c — a run's memory as CSV, for spreadsheets and scripts. The columns
 * are a stable contract (docs/internals/store.md):
 *
 *   step,epoch,t,rss,pss,uss,swap,cgroup,gpu
 *
 * one row per step; t in seconds since the run started, sizes in bytes;
 * an empty field where there is no value (epoch unknown, cgroup or GPU not
 * measured). A run that marked no steps gets one row per memory sample
 * instead, with step and epoch empty. Appended to a
 * buffer: a million rows cost about 60 MB.
 */
#include <inttypes.h>

#include "report/render.h"

static void put_row(struct strbuf *sb, const char *step, const char *epoch, const struct mem_sample *m)
{
	strbuf_addf(sb, "%s,%s,%.6f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",",
	        step, epoch, m->t, m->rss, m->pss, m->uss, m->swap);
	if (m->has_cgroup)
		strbuf_addf(sb, "%" PRIu64, m->cgroup);
	strbuf_addch(sb, ',');
	if (m->has_gpu)
		strbuf_addf(sb, "%" PRIu64, m->gpu);
	strbuf_addch(sb, '\n');
}

void report_write_csv(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb)
{
	(void)x;
	strbuf_addstr(sb, "step,epoch,t,rss,pss,uss,swap,cgroup,gpu\n");
	if (s->steps) {
		for (size_t i = 0; i < s->steps; i++) {
			char step[24], epoch[24] = "";
			snprintf(step, sizeof(step), "%" PRId64, s->step_recs[i].step);
			if (s->step_recs[i].epoch >= 0)
				snprintf(epoch, sizeof(epoch), "%" PRId64, s->step_recs[i].epoch);
			put_row(sb, step, epoch, &s->step_recs[i].mem);
		}
	} else {
		for (size_t i = 0; i < s->nsamples; i++)
			put_row(sb, "", "", &s->samples[i]);
	}
}
