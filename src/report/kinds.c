/*
 * report/kinds.c — the growth kinds of a run, its diagnosis and the OOM
 * flight recorder (model/kinds.h), as text lines, JSON members, Markdown
 * and HTML tables, for every format's writer. Field names of the JSON are
 * part of its contract (docs/internals/growth-kinds.md). Sizes in bytes;
 * growth per unit of the run's x. Text from the job (process names) is
 * escaped for the format it goes into.
 */
#include <math.h>
#include <string.h>

#include "model/kinds.h"
#include "report/plot.h"
#include "report/render.h"

#define KINDS_SHOWN 6           /* lines of growth kinds in the text report */

static const char *short_kind(enum mem_kind k)
{
	return mem_kind_name(k);
}

bool render_kind_shown(const struct run_summary *s, const struct growth_kind *g)
{
	const struct run_kinds *k = s->kinds;
	return g->a.verdict == VERDICT_LEAK ||
	       (g->kind == KIND_COW && k && k->has_diagnosis && k->diagnosis_kind == KIND_COW);
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
		if (!render_kind_shown(s, g))
			continue;
		strbuf_addf(sb, "  %-9s %-13s ", shown ? "" : "by kind", short_kind(g->kind));
		if (g->kind == KIND_PROCESSES) {
			/* processes that pile up: how many, how fast, how big */
			if (k->procs_per_x < 1)
				strbuf_addf(sb, "+1 every %.3g %ss", 1 / k->procs_per_x, s->steps ? "step" : "second");
			else
				strbuf_addf(sb, "+%.3g%s", k->procs_per_x, render_x_suffix(s));
			strbuf_addf(sb, ", %.0f alive", k->procs_last);
			if (k->procs_each_bytes > 0)
				strbuf_addf(sb, ", ~%s each", fmt_bytes(b2, sizeof(b2), k->procs_each_bytes));
			strbuf_addf(sb, " (%s%s)\n", render_signed_bytes(b1, sizeof(b1), g->a.slope), render_x_suffix(s));
			shown++;
			continue;
		}
		if (g->pid == 0 && !strcmp(g->role, "/dev/shm"))
			strbuf_addstr(sb, "the machine's (");
		else if (g->pid)
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
		if (g->pid > 0)
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
		if (g->kind == KIND_PROCESSES) {
			num_member(sb, "alive", k->procs_last, false);
			num_member(sb, "alive_first", k->procs_first, false);
			num_member(sb, "processes_per_step", k->procs_per_x, false);
			num_member(sb, "bytes_each", k->procs_each_bytes, false);
		}
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
	strbuf_addstr(sb, k->nfp ? "\n  ]" : "]");
	/* the census over the window (model/census.h census_report_window()) */
	const struct census_report *c = s->census;
	strbuf_addstr(sb, ", \"census\": ");
	if (!c || !c->has_window) {
		strbuf_addstr(sb, "null}");
		return;
	}
	char words[256];
	strbuf_addch(sb, '{');
	num_member(sb, "from_t", c->window_from_t, true);
	num_member(sb, "to_t", c->window_to_t, false);
	strbuf_addstr(sb, ", \"grew\": [");
	for (size_t i = 0; i < c->nrecent; i++) {
		const struct census_change *ch = &c->recent[i];
		strbuf_addstr(sb, i ? ",\n      {" : "\n      {");
		str_member(sb, "type", ch->type, true);
		str_member(sb, "words", census_type_words(words, sizeof(words), ch->type), false);
		num_member(sb, "from_count", (double)ch->from, false);
		num_member(sb, "count", (double)ch->to, false);
		num_member(sb, "from_bytes", ch->bytes_from >= 0 ? (double)ch->bytes_from : NAN, false);
		num_member(sb, "bytes", ch->bytes_to >= 0 ? (double)ch->bytes_to : NAN, false);
		str_member(sb, "holder", ch->holder, false);
		strbuf_addch(sb, '}');
	}
	strbuf_addstr(sb, c->nrecent ? "\n  ]}}" : "]}}");
}

/* ---- Markdown and HTML ---------------------------------------------------- */

/* "4242", "cgroup" or "tree" (processes that pile up), into buf */
static const char *process_words(char *buf, size_t sz, int pid)
{
	if (pid > 0)
		snprintf(buf, sz, "%d", pid);
	else
		snprintf(buf, sz, pid ? "tree" : "cgroup");
	return buf;
}

void render_kinds_md(const struct run_summary *s, struct strbuf *sb)
{
	const struct run_kinds *k = s->kinds;
	char b1[32], b2[32], b3[32], pid[24];
	size_t shown = 0;
	for (size_t i = 0; k && i < k->n && shown < KINDS_SHOWN; i++) {
		const struct growth_kind *g = &k->k[i];
		if (!render_kind_shown(s, g))
			continue;
		if (!shown++)
			strbuf_addf(sb, "\nGrowth kinds:\n\n| Kind | Process | Role | Growth%s | Now | Bound |\n"
			            "|---|---:|---|---:|---:|---:|\n", render_x_suffix(s));
		strbuf_addf(sb, "| %s | %s | ", mem_kind_name(g->kind), process_words(pid, sizeof(pid), g->pid));
		render_add_md_cell(sb, g->role);
		strbuf_addf(sb, " | %s | %s | %s |\n", render_signed_bytes(b1, sizeof(b1), g->a.slope),
		            fmt_bytes(b2, sizeof(b2), g->bytes),
		            g->kind == KIND_COW && g->bound_bytes > 0 ? fmt_bytes(b3, sizeof(b3), g->bound_bytes) :
		            "\xe2\x80\x93");
	}
}

/* One flight-recorder cell: a size, or "-" when the kind was not measured. */
static const char *flight_cell(char *buf, size_t sz, const struct flight_proc *f, int kind)
{
	if (f->last[kind] < 0 || (!f->pid && (kind == KIND_ANONYMOUS || kind == KIND_COW)))
		snprintf(buf, sz, "-");
	else
		fmt_bytes(buf, sz, f->last[kind]);
	return buf;
}

void render_flight_md(const struct run_summary *s, struct strbuf *sb)
{
	const struct run_kinds *k = s->kinds;
	char b[KIND_COUNT][32], pid[24];
	if (!k || !k->oom)
		return;
	strbuf_addstr(sb, "\n**The last seconds before the end:** ");
	render_add_md_cell(sb, k->flight);
	strbuf_addch(sb, '\n');
	if (!k->nfp)
		return;
	strbuf_addstr(sb, "\n| Process | Role | anonymous | copy-on-write | file-cache | shared-memory |\n"
	              "|---:|---|---:|---:|---:|---:|\n");
	for (size_t i = 0; i < k->nfp; i++) {
		const struct flight_proc *f = &k->fp[i];
		strbuf_addf(sb, "| %s | ", process_words(pid, sizeof(pid), f->pid));
		render_add_md_cell(sb, f->role);
		for (int j = 0; j < KIND_GPU; j++)
			strbuf_addf(sb, " | %s", flight_cell(b[j], sizeof(b[j]), f, j));
		strbuf_addstr(sb, " |\n");
	}
}

void render_kinds_html(const struct run_summary *s, struct strbuf *sb)
{
	const struct run_kinds *k = s->kinds;
	char b[32], pid[24];
	if (!k || !k->n)
		return;
	strbuf_addf(sb, "<section id=\"growth-kinds\"><h2>Growth kinds, per process</h2>\n"
	            "<table class=\"lp-sortable\">\n<thead><tr><th data-key=\"kind\">kind</th>"
	            "<th data-key=\"process\" data-type=\"num\">process</th><th data-key=\"role\">role</th>"
	            "<th data-key=\"verdict\">verdict</th><th data-key=\"growth\" data-type=\"num\">growth%s</th>"
	            "<th data-key=\"now\" data-type=\"num\">now</th><th data-key=\"first\" data-type=\"num\">first</th>"
	            "<th data-key=\"bound\" data-type=\"num\">bound</th></tr></thead>\n<tbody>\n",
	            render_x_suffix(s));
	for (size_t i = 0; i < k->n; i++) {
		const struct growth_kind *g = &k->k[i];
		bool fit = g->a.points >= 2 && isfinite(g->a.slope);
		strbuf_addf(sb, "<tr class=\"lp-kind\" data-kind=\"%s\"><td>%s</td><td class=\"n\" data-v=\"%d\">%s</td><td>",
		            mem_kind_name(g->kind), mem_kind_name(g->kind), g->pid,
		            process_words(pid, sizeof(pid), g->pid));
		plot_add_xml(sb, g->role);
		strbuf_addf(sb, "</td><td>%s</td>", verdict_name(g->a.verdict));
		if (fit)
			strbuf_addf(sb, "<td class=\"n\" data-v=\"%.17g\">%s</td>", g->a.slope,
			            render_signed_bytes(b, sizeof(b), g->a.slope));
		else
			strbuf_addstr(sb, "<td class=\"n\" data-v=\"\">-</td>");
		strbuf_addf(sb, "<td class=\"n\" data-v=\"%.17g\">%s</td>", g->bytes, fmt_bytes(b, sizeof(b), g->bytes));
		strbuf_addf(sb, "<td class=\"n\" data-v=\"%.17g\">%s</td>", g->first_bytes,
		            fmt_bytes(b, sizeof(b), g->first_bytes));
		if (g->kind == KIND_COW && g->bound_bytes > 0)
			strbuf_addf(sb, "<td class=\"n\" data-v=\"%.17g\">%s</td></tr>\n", g->bound_bytes,
			            fmt_bytes(b, sizeof(b), g->bound_bytes));
		else
			strbuf_addstr(sb, "<td class=\"n\" data-v=\"\">-</td></tr>\n");
	}
	strbuf_addstr(sb, "</tbody></table>\n<p class=\"note\">Every process's kinds of a MiB or more, or growing, "
	              "judged like the verdict; the diagnosis names the one that drives it.</p>\n</section>\n");
}

void render_flight_html(const struct run_summary *s, struct strbuf *sb)
{
	const struct run_kinds *k = s->kinds;
	char b[32], pid[24];
	if (!k || !k->oom || !k->nfp)
		return;
	strbuf_addstr(sb, "<section id=\"flight\"><h2>The last seconds before the end</h2>\n<table id=\"flight-processes\">\n"
	              "<thead><tr><th>process</th><th>role</th><th>name</th>");
	for (int j = 0; j < KIND_GPU; j++)
		strbuf_addf(sb, "<th>%s</th>", mem_kind_name((enum mem_kind)j));
	strbuf_addstr(sb, "<th>anonymous in the window</th></tr></thead>\n<tbody>\n");
	for (size_t i = 0; i < k->nfp; i++) {
		const struct flight_proc *f = &k->fp[i];
		strbuf_addf(sb, "<tr><td class=\"n\">%s</td><td>", process_words(pid, sizeof(pid), f->pid));
		plot_add_xml(sb, f->role);
		strbuf_addstr(sb, "</td><td>");
		plot_add_xml(sb, f->name);
		strbuf_addstr(sb, "</td>");
		for (int j = 0; j < KIND_GPU; j++)
			strbuf_addf(sb, "<td class=\"n\">%s</td>", flight_cell(b, sizeof(b), f, j));
		double d = f->pid && f->first[KIND_ANONYMOUS] >= 0 && f->last[KIND_ANONYMOUS] >= 0 ?
		           f->last[KIND_ANONYMOUS] - f->first[KIND_ANONYMOUS] : NAN;
		strbuf_addf(sb, "<td class=\"n\">%s</td></tr>\n",
		            isfinite(d) ? render_signed_bytes(b, sizeof(b), d) : "-");
	}
	strbuf_addstr(sb, "</tbody></table>\n</section>\n");
}
