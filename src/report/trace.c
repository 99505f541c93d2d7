/*
 * report/trace.c — the rendering of a traced run's allocation sites (judged
 * in judge/sites.c): the text sections and the JSON value (see trace.h).
 */
#include "report/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/render.h"
#include "util/jsonw.h"
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

/* "" for NULL: a name not known is an empty string. */
static const char *text(const char *s)
{
	return s ? s : "";
}

void trace_report_json(const struct trace_report *r, struct json_writer *jw)
{
	jw_object_intmax(jw, "mean_bytes", r->mean_bytes);
	jw_object_string(jw, "x_unit", r->x_unit);
	jw_object_intmax(jw, "growing_sites", (intmax_t)r->ngrowing);
	jw_object_intmax(jw, "undecided_sites", (intmax_t)r->nundecided);
	jw_newline(jw);
	jw_object_array(jw, "sites", true);
	for (size_t i = 0; i < r->nsites; i++) {
		const struct trace_site_report *s = &r->sites[i];
		const struct trace_frame *b = s->nframes ? &s->frames[s->blame] : NULL;
		jw_array_object(jw, false);
		jw_object_intmax(jw, "site", s->site);
		jw_object_string(jw, "kind", s->kind == 'a' ? "mmap" : "heap");
		jw_object_string(jw, "library", b ? text(b->library) : "");
		jw_object_string(jw, "function", b ? text(b->function) : "");
		jw_object_string(jw, "source", b ? render_json_known(b->source) : NULL);
		jw_object_double(jw, "growth_bytes_per_step", s->growth);
		jw_object_array(jw, "growth_interval_bytes_per_step", false);
		jw_array_double(jw, s->growth_low);
		jw_array_double(jw, s->growth_high);
		jw_end(jw);
		jw_object_bool(jw, "growing", s->growing);
		jw_object_string(jw, "state", site_state_name(s->state));
		jw_object_string(jw, "reason", s->reason);
		jw_object_double(jw, "live_bytes", s->live);
		jw_object_intmax(jw, "sampled_allocations", s->allocs);
		jw_object_intmax(jw, "sampled_frees", s->frees);
		jw_break(jw);
		jw_object_array(jw, "frames", false);
		for (size_t j = 0; j < s->nframes; j++) {
			jw_array_object(jw, false);
			jw_object_string(jw, "function", text(s->frames[j].function));
			jw_object_string(jw, "library", text(s->frames[j].library));
			jw_object_string(jw, "source", render_json_known(s->frames[j].source));
			jw_end(jw);
		}
		jw_end(jw);
		jw_break(jw);
		if (!s->npython) {
			jw_object_null(jw, "python_stack");
		} else {
			jw_object_array(jw, "python_stack", false);
			for (size_t j = 0; j < s->npython; j++) {
				jw_array_object(jw, false);
				jw_object_string(jw, "file", text(s->python[j].file));
				jw_object_intmax(jw, "line", s->python[j].line);
				jw_object_string(jw, "function", text(s->python[j].function));
				jw_end(jw);
			}
			jw_end(jw);
		}
		jw_end(jw);
	}
	jw_end(jw);
	jw_newline(jw);
	jw_object_array(jw, "libraries", true);
	for (size_t i = 0; i < r->nlibs; i++) {
		const struct trace_lib_report *l = &r->libs[i];
		jw_array_object(jw, false);
		jw_object_string(jw, "library", text(l->library));
		jw_object_double(jw, "growth_bytes_per_step", l->growth);
		jw_object_bool(jw, "growing", l->growing);
		jw_object_string(jw, "state", site_state_name(l->state));
		jw_object_string(jw, "reason", l->reason);
		jw_object_double(jw, "live_bytes", l->live);
		jw_end(jw);
	}
	jw_end(jw);
}

void trace_report_write_text(const struct trace_report *r, struct strbuf *sb)
{
	trace_report_text(r, 0, sb);
	if (r->ngrowing && r->ngrowing < r->nsites) {
		strbuf_addstr(sb, "Largest sites that do not grow:\n");
		add_largest_flat(sb, r, 10);
	}
}
