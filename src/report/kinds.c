/*
 * report/kinds.c — the growth kinds of a run, its diagnosis and the OOM
 * flight recorder (model/kinds.h), as text lines and as JSON members, for
 * text.c, markdown.c and json.c. Field names of the JSON are part of its
 * contract (docs/internals/growth-kinds.md). Sizes in bytes; growth per
 * unit of the run's x.
 */
#include <math.h>
#include <string.h>

#include "model/kinds.h"
#include "report/render.h"

#define KINDS_SHOWN 6           /* lines of growth kinds in the text report */

static const char *short_kind(enum mem_kind k)
{
	return mem_kind_name(k);
}

void render_kinds_text(const struct run_summary *s, struct strbuf *sb)
{
	const struct run_kinds *k = s->kinds;
	char b1[32], b2[32];
	if (!k)
		return;
	if (k->has_diagnosis) {
		strbuf_addstr(sb, "  diagnosis ");
		render_add_clean(sb, k->diagnosis);
		strbuf_addch(sb, '\n');
	}
	size_t shown = 0;
	for (size_t i = 0; i < k->n && shown < KINDS_SHOWN; i++) {
		const struct growth_kind *g = &k->k[i];
		if (g->a.verdict != VERDICT_LEAK && !(g->kind == KIND_COW && k->has_diagnosis &&
		                                      k->diagnosis_kind == KIND_COW))
			continue;
		strbuf_addf(sb, "  %-9s %-13s ", shown ? "" : "by kind", short_kind(g->kind));
		if (g->pid)
			strbuf_addf(sb, "pid %d (", g->pid);
		else
			strbuf_addstr(sb, "the job's cgroup (");
		render_add_clean(sb, g->role);
		strbuf_addf(sb, ") %s%s, now %s", render_signed_bytes(b1, sizeof(b1), g->a.slope),
		            render_x_suffix(s), fmt_bytes(b2, sizeof(b2), g->bytes));
		if (g->kind == KIND_COW && g->bound_bytes > 0)
			strbuf_addf(sb, " of at most %s", fmt_bytes(b1, sizeof(b1), g->bound_bytes));
		strbuf_addch(sb, '\n');
		shown++;
	}
}

void render_flight_text(const struct run_summary *s, struct strbuf *sb)
{
	const struct run_kinds *k = s->kinds;
	char b[KIND_COUNT][32];
	if (!k || !k->oom)
		return;
	strbuf_addstr(sb, "\nThe last seconds before the end (flight recorder):\n  ");
	render_add_clean(sb, k->flight);
	strbuf_addch(sb, '\n');
	if (!k->nfp)
		return;
	strbuf_addf(sb, "  %-8s %-14s %11s %13s %11s %13s\n", "pid", "role", "anonymous", "copy-on-write",
	            "file", "shared-memory");
	for (size_t i = 0; i < k->nfp; i++) {
		const struct flight_proc *f = &k->fp[i];
		for (int j = 0; j < KIND_GPU; j++)
			if (f->last[j] < 0)
				strcpy(b[j], "-");
			else
				fmt_bytes(b[j], sizeof(b[j]), f->last[j]);
		if (f->pid)
			strbuf_addf(sb, "  %-8d ", f->pid);
		else
			strbuf_addf(sb, "  %-8s ", "cgroup");
		struct strbuf role = STRBUF_INIT;
		render_add_clean(&role, f->role);
		strbuf_addf(sb, "%-14s %11s %13s %11s %13s", strbuf_str(&role), f->pid ? b[KIND_ANONYMOUS] : "-",
		            f->pid ? b[KIND_COW] : "-", b[KIND_FILE], b[KIND_SHMEM]);
		strbuf_release(&role);
		double d = f->first[KIND_ANONYMOUS] >= 0 && f->last[KIND_ANONYMOUS] >= 0 && f->pid ?
		           f->last[KIND_ANONYMOUS] - f->first[KIND_ANONYMOUS] : 0;
		if (fabs(d) >= 1024 * 1024)
			strbuf_addf(sb, "  (anonymous %s)", render_signed_bytes(b[0], sizeof(b[0]), d));
		strbuf_addch(sb, '\n');
	}
}

static void num_member(struct strbuf *sb, const char *name, double v, bool first)
{
	strbuf_addstr(sb, first ? "" : ", ");
	strbuf_add_json_str(sb, name);
	strbuf_addstr(sb, ": ");
	report_add_json_num(sb, v);
}

static void str_member(struct strbuf *sb, const char *name, const char *v, bool first)
{
	strbuf_addstr(sb, first ? "" : ", ");
	strbuf_add_json_str(sb, name);
	strbuf_addstr(sb, ": ");
	report_add_json_str_or_null(sb, v);
}

void render_kinds_json(const struct run_summary *s, struct strbuf *sb)
{
	const struct run_kinds *k = s->kinds;
	strbuf_addstr(sb, ",\n  \"growth_kinds\": [");
	for (size_t i = 0; k && i < k->n; i++) {
		const struct growth_kind *g = &k->k[i];
		bool fit = g->a.points >= 2;
		strbuf_addstr(sb, i ? ",\n    {" : "\n    {");
		str_member(sb, "kind", mem_kind_name(g->kind), true);
		strbuf_addstr(sb, ", \"process\": ");
		if (g->pid)
			strbuf_addf(sb, "%d", g->pid);
		else
			strbuf_addstr(sb, "null");
		str_member(sb, "name", g->name, false);
		str_member(sb, "role", g->role, false);
		str_member(sb, "verdict", verdict_name(g->a.verdict), false);
		num_member(sb, "growth_bytes_per_step", fit ? g->a.slope : NAN, false);
		num_member(sb, "bytes", g->bytes, false);
		num_member(sb, "first_bytes", g->first_bytes, false);
		num_member(sb, "bound_bytes", g->kind == KIND_COW ? g->bound_bytes : NAN, false);
		strbuf_addch(sb, '}');
	}
	strbuf_addstr(sb, k && k->n ? "\n  ]" : "]");

	strbuf_addstr(sb, ",\n  \"diagnosis\": ");
	if (k && k->has_diagnosis) {
		strbuf_addch(sb, '{');
		str_member(sb, "kind", mem_kind_name(k->diagnosis_kind), true);
		str_member(sb, "text", k->diagnosis, false);
		str_member(sb, "verdict_judged", verdict_name(s->verdict_judged), false);
		strbuf_addf(sb, ", \"not_a_leak\": %s", k->overrides_verdict ? "true" : "false");
		if (k->diagnosis_kind == KIND_COW) {
			num_member(sb, "workers", k->cow_workers, false);
			num_member(sb, "copied_bytes", k->cow_bytes, false);
			num_member(sb, "bound_bytes", k->cow_bound_bytes, false);
			strbuf_addf(sb, ", \"rising\": %s", k->cow_rising ? "true" : "false");
			num_member(sb, "flat_since_step", k->cow_flat_since_x, false);
		}
		strbuf_addch(sb, '}');
	} else {
		strbuf_addstr(sb, "null");
	}

	strbuf_addstr(sb, ",\n  \"flight_recorder\": ");
	if (!k || !k->oom) {
		strbuf_addstr(sb, "null");
		return;
	}
	strbuf_addch(sb, '{');
	str_member(sb, "cause", k->oom_cause, true);
	num_member(sb, "end_t", k->end_t, false);
	num_member(sb, "end_step", k->end_step >= 0 ? (double)k->end_step : NAN, false);
	num_member(sb, "window_seconds", k->end_t - k->window_t, false);
	num_member(sb, "window_steps", (double)k->window_steps, false);
	str_member(sb, "paragraph", k->flight, false);
	strbuf_addstr(sb, ", \"processes\": [");
	for (size_t i = 0; i < k->nfp; i++) {
		const struct flight_proc *f = &k->fp[i];
		strbuf_addstr(sb, i ? ",\n      {" : "\n      {");
		strbuf_addstr(sb, "\"process\": ");
		if (f->pid)
			strbuf_addf(sb, "%d", f->pid);
		else
			strbuf_addstr(sb, "null");
		str_member(sb, "name", f->name, false);
		str_member(sb, "role", f->role, false);
		strbuf_addstr(sb, ", \"kinds\": {");
		for (int j = 0; j < KIND_COUNT; j++) {
			strbuf_addstr(sb, j ? ", " : "");
			strbuf_add_json_str(sb, mem_kind_name((enum mem_kind)j));
			strbuf_addstr(sb, ": {");
			num_member(sb, "first_bytes", f->first[j] >= 0 ? f->first[j] : NAN, true);
			num_member(sb, "last_bytes", f->last[j] >= 0 ? f->last[j] : NAN, false);
			strbuf_addch(sb, '}');
		}
		strbuf_addstr(sb, "}}");
	}
	strbuf_addstr(sb, k->nfp ? "\n  ]}" : "]}");
}
