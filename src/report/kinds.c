/*
 * report/kinds.c — the growth kinds of a run, its diagnosis and the OOM
 * flight recorder (judge/kinds.h), as text lines, JSON members, Markdown
 * and HTML tables, for every format's writer. Field names of the JSON are
 * part of its contract (docs/internals/growth-kinds.md). Sizes in bytes;
 * growth per unit of the run's x. Text from the job (process names) is
 * escaped for the format it goes into.
 */
#include <math.h>
#include <string.h>

#include "judge/kinds.h"
#include "report/plot.h"
#include "report/render.h"
#include "util/jsonw.h"

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
	if (k->has_diagnosis)
		render_add_clean_between(sb, "  diagnosis ", k->diagnosis, "\n");
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

/* One flight-recorder cell: a size, or "-" when the kind was not measured. */
static const char *flight_cell(char *buf, size_t sz, const struct flight_proc *f, int kind)
{
	if (f->last[kind] < 0 || (!f->pid && (kind == KIND_ANONYMOUS || kind == KIND_COW)))
		snprintf(buf, sz, "-");
	else
		fmt_bytes(buf, sz, f->last[kind]);
	return buf;
}

void render_flight_text(const struct run_summary *s, struct strbuf *sb)
{
	const struct run_kinds *k = s->kinds;
	char b[KIND_COUNT][32];
	if (!k || !k->oom)
		return;
	render_add_clean_between(sb, "\nThe last seconds before the end (flight recorder):\n  ", k->flight, "\n");
	if (!k->nfp)
		return;
	strbuf_addf(sb, "  %-8s %-14s %11s %13s %11s %13s\n", "pid", "role", "anonymous", "copy-on-write",
	            "file", "shared-memory");
	for (size_t i = 0; i < k->nfp; i++) {
		const struct flight_proc *f = &k->fp[i];
		for (int j = 0; j < KIND_GPU; j++)
			flight_cell(b[j], sizeof(b[j]), f, j);
		if (f->pid)
			strbuf_addf(sb, "  %-8d ", f->pid);
		else
			strbuf_addf(sb, "  %-8s ", "cgroup");
		struct strbuf role = STRBUF_INIT;
		render_add_clean(&role, f->role);
		strbuf_addf(sb, "%-14s %11s %13s %11s %13s", strbuf_str(&role), b[KIND_ANONYMOUS], b[KIND_COW],
		            b[KIND_FILE], b[KIND_SHMEM]);
		strbuf_release(&role);
		double d = f->first[KIND_ANONYMOUS] >= 0 && f->last[KIND_ANONYMOUS] >= 0 && f->pid ?
		           f->last[KIND_ANONYMOUS] - f->first[KIND_ANONYMOUS] : 0;
		if (fabs(d) >= 1024 * 1024)
			strbuf_addf(sb, "  (anonymous %s)", render_signed_bytes(b[0], sizeof(b[0]), d));
		strbuf_addch(sb, '\n');
	}
}

static void add_diagnosis(struct json_writer *jw, const struct run_summary *s)
{
	const struct run_kinds *k = s->kinds;
	if (!render_json_object_or_null(jw, "diagnosis", k && k->has_diagnosis))
		return;
	jw_object_string(jw, "kind", render_json_known(mem_kind_name(k->diagnosis_kind)));
	jw_object_string(jw, "text", render_json_known(k->diagnosis));
	jw_object_string(jw, "verdict_judged", render_json_known(verdict_name(s->verdict_judged)));
	jw_object_bool(jw, "not_a_leak", k->overrides_verdict);
	if (k->diagnosis_kind == KIND_COW) {
		jw_object_double(jw, "workers", k->cow_workers);
		jw_object_double(jw, "copied_bytes", k->cow_bytes);
		jw_object_double(jw, "bound_bytes", k->cow_bound_bytes);
		jw_object_bool(jw, "rising", k->cow_rising);
		jw_object_double(jw, "flat_since_step", k->cow_flat_since_x);
	}
	jw_end(jw);
}

/* The census over the window (judge/census.h census_report_window()). */
static void add_window_census(struct json_writer *jw, const struct census_report *c)
{
	char words[256];
	if (!render_json_object_or_null(jw, "census", c && c->has_window))
		return;
	jw_object_double(jw, "from_t", c->window_from_t);
	jw_object_double(jw, "to_t", c->window_to_t);
	jw_object_array(jw, "grew", true);
	for (size_t i = 0; i < c->nrecent; i++) {
		const struct census_change *ch = &c->recent[i];
		jw_array_object(jw, false);
		jw_object_string(jw, "type", render_json_known(ch->type));
		jw_object_string(jw, "words", render_json_known(census_type_words(words, sizeof(words), ch->type)));
		jw_object_double(jw, "from_count", (double)ch->from);
		jw_object_double(jw, "count", (double)ch->to);
		jw_object_double(jw, "from_bytes", ch->bytes_from >= 0 ? (double)ch->bytes_from : NAN);
		jw_object_double(jw, "bytes", ch->bytes_to >= 0 ? (double)ch->bytes_to : NAN);
		jw_object_string(jw, "holder", render_json_known(ch->holder));
		jw_end(jw);
	}
	jw_end(jw);
	jw_end(jw);
}

static void add_flight_recorder(struct json_writer *jw, const struct run_summary *s)
{
	const struct run_kinds *k = s->kinds;
	if (!render_json_object_or_null(jw, "flight_recorder", k && k->oom))
		return;
	jw_object_string(jw, "cause", render_json_known(cause_name(k->oom_cause)));
	jw_object_double(jw, "end_t", k->end_t);
	jw_object_double(jw, "end_step", k->end_step >= 0 ? (double)k->end_step : NAN);
	jw_object_double(jw, "window_seconds", k->end_t - k->window_t);
	jw_object_double(jw, "window_steps", (double)k->window_steps);
	jw_object_string(jw, "paragraph", render_json_known(k->flight));
	jw_object_array(jw, "processes", true);
	for (size_t i = 0; i < k->nfp; i++) {
		const struct flight_proc *f = &k->fp[i];
		jw_array_object(jw, false);
		jw_object_double(jw, "process", f->pid ? f->pid : NAN);
		jw_object_string(jw, "name", render_json_known(f->name));
		jw_object_string(jw, "role", render_json_known(f->role));
		jw_object_object(jw, "kinds", false);
		for (int j = 0; j < KIND_COUNT; j++) {
			jw_object_object(jw, mem_kind_name((enum mem_kind)j), false);
			jw_object_double(jw, "first_bytes", f->first[j] >= 0 ? f->first[j] : NAN);
			jw_object_double(jw, "last_bytes", f->last[j] >= 0 ? f->last[j] : NAN);
			jw_end(jw);
		}
		jw_end(jw);
		jw_end(jw);
	}
	jw_end(jw);
	add_window_census(jw, s->census);
	jw_end(jw);
}

void render_kinds_json(const struct run_summary *s, struct json_writer *jw)
{
	const struct run_kinds *k = s->kinds;
	jw_object_array(jw, "growth_kinds", true);
	for (size_t i = 0; k && i < k->n; i++) {
		const struct growth_kind *g = &k->k[i];
		bool fit = g->a.points >= 2;
		jw_array_object(jw, false);
		jw_object_string(jw, "kind", render_json_known(mem_kind_name(g->kind)));
		jw_object_double(jw, "process", g->pid > 0 ? g->pid : NAN);
		jw_object_string(jw, "name", render_json_known(g->name));
		jw_object_string(jw, "role", render_json_known(g->role));
		jw_object_string(jw, "verdict", render_json_known(verdict_name(g->a.verdict)));
		jw_object_double(jw, "growth_bytes_per_step", fit ? g->a.slope : NAN);
		jw_object_double(jw, "bytes", g->bytes);
		jw_object_double(jw, "first_bytes", g->first_bytes);
		jw_object_double(jw, "bound_bytes", g->kind == KIND_COW ? g->bound_bytes : NAN);
		if (g->kind == KIND_PROCESSES) {
			jw_object_double(jw, "alive", k->procs_last);
			jw_object_double(jw, "alive_first", k->procs_first);
			jw_object_double(jw, "processes_per_step", k->procs_per_x);
			jw_object_double(jw, "bytes_each", k->procs_each_bytes);
		}
		jw_end(jw);
	}
	jw_end(jw);
	add_diagnosis(jw, s);
	add_flight_recorder(jw, s);
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
