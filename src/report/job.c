/*
 * job.c — one job of several ranks (judge/job.h) as a table, a row per
 * rank (rank, node, host, run, how it ended, steps, peak, growth, verdict),
 * then which rank's memory grows: text, Markdown, CSV or JSON. A rank
 * that grows while the others do not points at its data, its node or its
 * role (rank 0 often keeps what the others discard); every rank growing
 * points at the code they share. Units: bytes; growth per step, or per
 * second for a rank that marked no steps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge/job.h"
#include "report/render.h"
#include "util/jsonw.h"

#define JOB_COLS 10
static const char *const heads[JOB_COLS] = {
	"rank", "node", "host", "run", "status", "steps", "peak", "growth", "verdict", "gpus",
};

static void cells(const struct job_rank *k, char cell[][64])
{
	const struct placement *p = &k->run.place;
	char b[32];
	snprintf(cell[0], 64, "%d", p->rank);
	if (p->node_id >= 0)
		snprintf(cell[1], 64, "%d", p->node_id);
	else
		snprintf(cell[1], 64, "-");
	snprintf(cell[2], 64, "%.63s", k->run.hostname[0] ? k->run.hostname : "?");
	snprintf(cell[3], 64, "%lld", (long long)k->run.id);
	report_fmt_outcome(cell[4], 64, &k->run);
	snprintf(cell[5], 64, "%zu", k->steps);
	if (k->peak_bytes)
		fmt_bytes(cell[6], 64, (double)k->peak_bytes);
	else
		snprintf(cell[6], 64, "-");
	if (isfinite(k->growth))
		snprintf(cell[7], 64, "%s/%s", render_signed_bytes(b, sizeof(b), k->growth), k->x_unit);
	else
		snprintf(cell[7], 64, "-");
	snprintf(cell[8], 64, "%s", verdict_name(k->verdict));
	snprintf(cell[9], 64, "%.63s", p->gpus[0] ? p->gpus : "-");
}

/* Which rank grows, in one sentence (no full stop). */
static void add_finding(struct strbuf *sb, const struct job_model *m)
{
	const struct job_rank *w = &m->ranks[m->worst];
	char b[32];
	if (!m->growing) {
		size_t noleak = 0;
		for (size_t i = 0; i < m->nranks; i++)
			noleak += m->ranks[i].verdict == VERDICT_NO_LEAK;
		strbuf_addf(sb, "no rank's memory grows (%zu no-leak, %zu inconclusive)", noleak, m->nranks - noleak);
		return;
	}
	render_signed_bytes(b, sizeof(b), w->growth);
	if (m->growing == 1) {
		strbuf_addf(sb, "rank %d grows: %s/%s on ", w->run.place.rank, b, w->x_unit);
		render_add_clean(sb, w->run.hostname);
		if (w->run.place.node_id >= 0)
			strbuf_addf(sb, " (node %d)", w->run.place.node_id);
		strbuf_addf(sb, ", run %lld; %s", (long long)w->run.id,
		            m->nranks == 1 ? "no other rank is recorded" :
		            m->nranks == 2 ? "the other rank does not" : "the other ranks do not");
	} else if (m->growing == m->nranks) {
		strbuf_addf(sb, "every rank grows (the fastest: rank %d, %s/%s): the code they share leaks",
		            w->run.place.rank, b, w->x_unit);
	} else {
		strbuf_addstr(sb, "ranks ");
		size_t said = 0;
		for (size_t i = 0; i < m->nranks; i++)
			if (m->ranks[i].verdict == VERDICT_LEAK)
				strbuf_addf(sb, "%s%d", said++ ? ", " : "", m->ranks[i].run.place.rank);
		strbuf_addf(sb, " grow (the fastest: rank %d, %s/%s); the other %zu do not", w->run.place.rank, b,
		            w->x_unit, m->nranks - m->growing);
	}
}

static void add_title(struct strbuf *sb, const struct job_model *m)
{
	const struct placement *p = &m->ranks[0].run.place;
	strbuf_addstr(sb, "job ");
	render_add_clean(sb, m->key);
	strbuf_addf(sb, " \xe2\x80\x94 %zu rank%s recorded", m->nranks, m->nranks == 1 ? "" : "s");
	if (p->world_size > 0 && (size_t)p->world_size != m->nranks)
		strbuf_addf(sb, " of %d", p->world_size);
	if (p->launcher[0])
		render_add_clean_between(sb, " (", p->launcher, ")");
}

static void write_text(const struct job_model *m, struct strbuf *sb, bool md)
{
	size_t w[JOB_COLS];
	char (*cell)[64] = xmalloc(JOB_COLS * sizeof(*cell));
	for (int c = 0; c < JOB_COLS; c++)
		w[c] = strlen(heads[c]);
	for (size_t i = 0; i < m->nranks; i++) {
		cells(&m->ranks[i], cell);
		for (int c = 0; c < JOB_COLS; c++)
			if (strlen(cell[c]) > w[c])
				w[c] = strlen(cell[c]);
	}
	strbuf_addstr(sb, md ? "## leakproof " : "leakproof: ");
	add_title(sb, m);
	strbuf_addstr(sb, md ? "\n\n" : "\n");
	for (int c = 0; c < JOB_COLS; c++)
		if (md)
			strbuf_addf(sb, "| %s ", heads[c]);
		else
			strbuf_addf(sb, "  %-*s", c == JOB_COLS - 1 ? 0 : (int)w[c], heads[c]);
	strbuf_addstr(sb, md ? "|\n" : "\n");
	if (md) {
		for (int c = 0; c < JOB_COLS; c++)
			strbuf_addstr(sb, c == 5 || c == 6 || c == 7 ? "|---:" : "|---");
		strbuf_addstr(sb, "|\n");
	}
	for (size_t i = 0; i < m->nranks; i++) {
		cells(&m->ranks[i], cell);
		for (int c = 0; c < JOB_COLS; c++) {
			if (md) {
				strbuf_addstr(sb, "| ");
				render_add_md_cell(sb, cell[c]);
				strbuf_addch(sb, ' ');
			} else {
				size_t at = sb->len;
				strbuf_addstr(sb, "  ");
				render_add_clean(sb, cell[c]);
				for (size_t pad = sb->len - at - 2; pad < w[c]; pad++)
					strbuf_addch(sb, ' ');
			}
		}
		if (!md)
			while (sb->len && sb->buf[sb->len - 1] == ' ')
				sb->buf[--sb->len] = '\0';
		strbuf_addstr(sb, md ? "|\n" : "\n");
	}
	strbuf_addstr(sb, md ? "\n**" : "  ");
	add_finding(sb, m);
	strbuf_addstr(sb, md ? "**\n" : "\n");
	free(cell);
}

static void write_csv(const struct job_model *m, struct strbuf *sb)
{
	strbuf_addstr(sb, "rank,local_rank,node,host,run,status,steps,peak_bytes,growth_bytes,growth_per,verdict,gpus\n");
	for (size_t i = 0; i < m->nranks; i++) {
		const struct job_rank *k = &m->ranks[i];
		const struct placement *p = &k->run.place;
		char out[64];
		strbuf_addf(sb, "%d,", p->rank);
		if (p->local_rank >= 0)
			strbuf_addf(sb, "%d", p->local_rank);
		strbuf_addch(sb, ',');
		if (p->node_id >= 0)
			strbuf_addf(sb, "%d", p->node_id);
		strbuf_addch(sb, ',');
		render_add_csv_field(sb, k->run.hostname);
		strbuf_addf(sb, ",%lld,", (long long)k->run.id);
		render_add_csv_field(sb, report_fmt_outcome(out, sizeof(out), &k->run));
		strbuf_addf(sb, ",%zu,%llu,", k->steps, (unsigned long long)k->peak_bytes);
		if (isfinite(k->growth))
			strbuf_addf(sb, "%.17g", k->growth);
		strbuf_addf(sb, ",%s,%s,", k->x_unit, verdict_name(k->verdict));
		render_add_csv_field(sb, p->gpus);
		strbuf_addch(sb, '\n');
	}
}

static void write_json(const struct job_model *m, struct strbuf *sb)
{
	const struct placement *p0 = &m->ranks[0].run.place;
	struct json_writer jw;
	jw_init(&jw, sb);
	jw_object_begin(&jw, true);
	jw_object_string(&jw, "job", m->key);
	jw_object_string(&jw, "launcher", render_json_known(p0->launcher));
	jw_object_double(&jw, "world_size", p0->world_size > 0 ? p0->world_size : NAN);
	/* The ranks' rows keep their own names (growth_bytes, growth_per): not
	 * yet the run object of report_json_run(). */
	jw_object_array(&jw, "ranks", true);
	for (size_t i = 0; i < m->nranks; i++) {
		const struct job_rank *k = &m->ranks[i];
		const struct placement *p = &k->run.place;
		jw_array_object(&jw, false);
		jw_object_intmax(&jw, "rank", p->rank);
		jw_object_double(&jw, "local_rank", p->local_rank >= 0 ? p->local_rank : NAN);
		jw_object_double(&jw, "node_id", p->node_id >= 0 ? p->node_id : NAN);
		jw_object_string(&jw, "hostname", k->run.hostname ? k->run.hostname : "");
		jw_object_intmax(&jw, "run", k->run.id);
		jw_object_string(&jw, "status", run_status_name(k->run.status));
		jw_object_intmax(&jw, "steps", (intmax_t)k->steps);
		jw_object_intmax(&jw, "peak_bytes", (intmax_t)k->peak_bytes);
		jw_object_string(&jw, "measure", k->measure);
		jw_object_double(&jw, "growth_bytes", k->growth);
		jw_object_string(&jw, "growth_per", k->x_unit ? k->x_unit : "");
		jw_object_string(&jw, "verdict", verdict_name(k->verdict));
		jw_object_string(&jw, "reason", k->reason);
		jw_object_string(&jw, "gpus", render_json_known(p->gpus));
		jw_object_string(&jw, "slurm_job_id", render_json_known(p->slurm_job_id));
		jw_end(&jw);
	}
	jw_end(&jw);
	jw_object_array(&jw, "growing_ranks", false);
	for (size_t i = 0; i < m->nranks; i++)
		if (m->ranks[i].verdict == VERDICT_LEAK)
			jw_array_intmax(&jw, m->ranks[i].run.place.rank);
	jw_end(&jw);
	struct strbuf f = STRBUF_INIT;
	add_finding(&f, m);
	jw_object_string(&jw, "finding", strbuf_str(&f));
	strbuf_release(&f);
	jw_end(&jw);
	strbuf_addch(sb, '\n');
}

int job_report_render(const struct job_model *m, enum report_format fmt, struct strbuf *sb)
{
	if (!m->nranks)
		return -1;
	switch (fmt) {
	case REPORT_TEXT: write_text(m, sb, false); return 0;
	case REPORT_MD: write_text(m, sb, true); return 0;
	case REPORT_CSV: write_csv(m, sb); return 0;
	case REPORT_JSON: write_json(m, sb); return 0;
	default: return -1;
	}
}
