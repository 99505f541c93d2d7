/*
 * report/trace.c — the rendering of a traced run's allocation sites (judged
 * in model/sites.c): the text sections and the JSON value (see trace.h).
 */
#include "report/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/render.h"
#include "util/util.h"

/* ---- rendering ----------------------------------------------------------- */

static void add_rate(struct strbuf *sb, double v, const char *unit)
{
	char b[32];
	strbuf_addf(sb, "%s/%s", isfinite(v) ? render_signed_bytes(b, sizeof(b), v) : "?", unit);
}

/* The innermost Python frame that is not in the standard library or a
 * site-package, else the innermost. */
static const struct trace_pyframe *user_frame(const struct trace_site_report *s)
{
	for (size_t i = 0; i < s->npython; i++)
		if (!strstr(s->python[i].file, "/lib/python3") && !strstr(s->python[i].file, "-packages/"))
			return &s->python[i];
	return s->npython ? &s->python[0] : NULL;
}

static void add_site_text(struct strbuf *sb, const struct trace_site_report *s, const char *unit)
{
	char live[32];
	fmt_bytes(live, sizeof(live), s->live);
	strbuf_addstr(sb, "  ");
	size_t at = sb->len;
	add_rate(sb, s->growth, unit);
	while (sb->len < at + 16)
		strbuf_addch(sb, ' ');
	strbuf_addf(sb, "live %-10s", live);
	if (s->nframes) {
		const struct trace_frame *f = &s->frames[s->blame];
		strbuf_addf(sb, " %s  %s", f->library, f->function[0] ? f->function : "?");
		if (f->source[0])
			strbuf_addf(sb, " (%s)", f->source);
		/* one caller more, for context */
		if (s->blame + 1 < s->nframes && s->frames[s->blame + 1].function[0])
			strbuf_addf(sb, " \xe2\x80\xa6 %s", s->frames[s->blame + 1].function);
	}
	if (s->kind == 'a')
		strbuf_addstr(sb, " [mmap]");
	strbuf_addch(sb, '\n');
	const struct trace_pyframe *py = user_frame(s);
	if (py)
		strbuf_addf(sb, "%18scalled from %s:%d in %s\n", "", py->file, py->line, py->function);
	if (s->state == SITE_UNDECIDED)
		strbuf_addf(sb, "%18sundecided: %s\n", "", s->reason);
}

/* The n largest sites by live bytes that are not growing (flat or
 * undecided; an undecided one says why). */
static void add_largest_flat(struct strbuf *sb, const struct trace_report *r, size_t n)
{
	const struct trace_site_report **v = xcalloc(r->nsites + 1, sizeof(*v));
	size_t k = 0;
	for (size_t i = 0; i < r->nsites; i++)
		if (!r->sites[i].growing)
			v[k++] = &r->sites[i];
	for (size_t i = 0; i < n && i < k; i++) {
		size_t best = i;
		for (size_t j = i + 1; j < k; j++)
			if (v[j]->live > v[best]->live)
				best = j;
		const struct trace_site_report *t = v[i];
		v[i] = v[best];
		v[best] = t;
		add_site_text(sb, v[i], r->x_unit);
	}
	free(v);
}

void trace_report_text(const struct trace_report *r, size_t max_sites, struct strbuf *sb)
{
	const char *unit = r->x_unit;
	char mean[32];
	fmt_bytes(mean, sizeof(mean), (double)r->mean_bytes);
	strbuf_addf(sb, "Allocation sites (one sampled every %s allocated, on average): %zu of %zu growing",
	            mean, r->ngrowing, r->nsites);
	if (r->nundecided)
		strbuf_addf(sb, ", %zu undecided", r->nundecided);
	strbuf_addch(sb, '\n');
	size_t shown = 0;
	for (size_t i = 0; i < r->nsites && r->sites[i].growing; i++) {
		if (max_sites && shown == max_sites)
			break;
		add_site_text(sb, &r->sites[i], unit);
		shown++;
	}
	if (!r->ngrowing && r->nundecided) {
		strbuf_addstr(sb, "  no site is judged growing, but some could not be judged; the largest:\n");
		add_largest_flat(sb, r, 3);
	} else if (!r->ngrowing) {
		strbuf_addstr(sb, "  no site grows across the run; the largest:\n");
		add_largest_flat(sb, r, 3);
	} else if (shown < r->ngrowing) {
		strbuf_addf(sb, "  ... and %zu more (leakproof report RUN --trace)\n", r->ngrowing - shown);
	}
	if (r->nlibs) {
		strbuf_addstr(sb, "By library:");
		for (size_t i = 0; i < r->nlibs && i < 5; i++) {
			strbuf_addf(sb, "%s %s ", i ? "," : "", r->libs[i].library);
			add_rate(sb, r->libs[i].growth, unit);
			if (!r->libs[i].growing)
				strbuf_addf(sb, " (%s)", site_state_name(r->libs[i].state));
		}
		strbuf_addch(sb, '\n');
	}
}

void trace_report_json(const struct trace_report *r, struct strbuf *sb)
{
	strbuf_addf(sb, "{\"mean_bytes\": %lld, \"x_unit\": ", (long long)r->mean_bytes);
	strbuf_add_json_str(sb, r->x_unit);
	strbuf_addf(sb, ", \"growing_sites\": %zu, \"undecided_sites\": %zu,\n    \"sites\": [", r->ngrowing,
	            r->nundecided);
	for (size_t i = 0; i < r->nsites; i++) {
		const struct trace_site_report *s = &r->sites[i];
		const struct trace_frame *b = s->nframes ? &s->frames[s->blame] : NULL;
		strbuf_addstr(sb, i ? ",\n      {" : "\n      {");
		strbuf_addf(sb, "\"site\": %lld, \"kind\": \"%s\", \"library\": ", (long long)s->site,
		            s->kind == 'a' ? "mmap" : "heap");
		strbuf_add_json_str(sb, b ? b->library : "");
		strbuf_addstr(sb, ", \"function\": ");
		strbuf_add_json_str(sb, b ? b->function : "");
		strbuf_addstr(sb, ", \"source\": ");
		report_add_json_str_or_null(sb, b ? b->source : NULL);
		strbuf_addstr(sb, ", \"growth_bytes_per_step\": ");
		report_add_json_num(sb, s->growth);
		strbuf_addstr(sb, ", \"growth_interval_bytes_per_step\": [");
		report_add_json_num(sb, s->growth_low);
		strbuf_addstr(sb, ", ");
		report_add_json_num(sb, s->growth_high);
		strbuf_addf(sb, "], \"growing\": %s, \"state\": \"%s\", \"reason\": ", s->growing ? "true" : "false",
		            site_state_name(s->state));
		strbuf_add_json_str(sb, s->reason);
		strbuf_addstr(sb, ", \"live_bytes\": ");
		report_add_json_num(sb, s->live);
		strbuf_addf(sb, ", \"sampled_allocations\": %lld, \"sampled_frees\": %lld",
		            (long long)s->allocs, (long long)s->frees);
		strbuf_addstr(sb, ",\n       \"frames\": [");
		for (size_t j = 0; j < s->nframes; j++) {
			strbuf_addstr(sb, j ? ", {\"function\": " : "{\"function\": ");
			strbuf_add_json_str(sb, s->frames[j].function);
			strbuf_addstr(sb, ", \"library\": ");
			strbuf_add_json_str(sb, s->frames[j].library);
			strbuf_addstr(sb, ", \"source\": ");
			report_add_json_str_or_null(sb, s->frames[j].source);
			strbuf_addch(sb, '}');
		}
		strbuf_addstr(sb, "],\n       \"python_stack\": ");
		if (!s->npython) {
			strbuf_addstr(sb, "null");
		} else {
			strbuf_addch(sb, '[');
			for (size_t j = 0; j < s->npython; j++) {
				strbuf_addstr(sb, j ? ", {\"file\": " : "{\"file\": ");
				strbuf_add_json_str(sb, s->python[j].file);
				strbuf_addf(sb, ", \"line\": %d, \"function\": ", s->python[j].line);
				strbuf_add_json_str(sb, s->python[j].function);
				strbuf_addch(sb, '}');
			}
			strbuf_addch(sb, ']');
		}
		strbuf_addch(sb, '}');
	}
	strbuf_addstr(sb, r->nsites ? "\n    ],\n    \"libraries\": [" : "],\n    \"libraries\": [");
	for (size_t i = 0; i < r->nlibs; i++) {
		const struct trace_lib_report *l = &r->libs[i];
		strbuf_addstr(sb, i ? ",\n      {\"library\": " : "\n      {\"library\": ");
		strbuf_add_json_str(sb, l->library);
		strbuf_addstr(sb, ", \"growth_bytes_per_step\": ");
		report_add_json_num(sb, l->growth);
		strbuf_addf(sb, ", \"growing\": %s, \"state\": \"%s\", \"reason\": ", l->growing ? "true" : "false",
		            site_state_name(l->state));
		strbuf_add_json_str(sb, l->reason);
		strbuf_addstr(sb, ", \"live_bytes\": ");
		report_add_json_num(sb, l->live);
		strbuf_addch(sb, '}');
	}
	strbuf_addstr(sb, r->nlibs ? "\n    ]}" : "]}");
}

void trace_report_write_text(const struct trace_report *r, struct strbuf *sb)
{
	trace_report_text(r, 0, sb);
	if (r->ngrowing && r->ngrowing < r->nsites) {
		strbuf_addstr(sb, "Largest sites that do not grow:\n");
		add_largest_flat(sb, r, 10);
	}
}
