/*
 * report/census.c — the rendering of the object census and of the GPU
 * memory split (judged in judge/census.c): text sections, JSON values,
 * Markdown and HTML tables (see census.h). Sizes in bytes, growth per
 * unit of x_unit. Type names and holders come from the job: escaped for
 * the format they go into.
 */
#include "report/census.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/plot.h"
#include "report/render.h"
#include "util/jsonw.h"
#include "util/util.h"

#define CENSUS_TYPES_SHOWN 5

static bool per_step(const char *x_unit)
{
	return strcmp(x_unit, "s") != 0;
}

/* "40 object censuses every 5.2 s; 52 ms each, 1% of the run (0.4 ms a step)" */
static void cost_words(const struct census_report *r, struct strbuf *sb)
{
	char b1[32];
	strbuf_addf(sb, "%zu object census%s", r->censuses, r->censuses == 1 ? "" : "es");
	if (isfinite(r->interval_median_s))
		strbuf_addf(sb, " every %s", fmt_duration(b1, sizeof(b1), r->interval_median_s));
	if (isfinite(r->cost_mean_s))
		strbuf_addf(sb, "; %.3g ms each", r->cost_mean_s * 1e3);
	if (isfinite(r->cost_fraction))
		strbuf_addf(sb, ", %.2g%% of the run", r->cost_fraction * 100);
	if (isfinite(r->cost_per_step_s))
		strbuf_addf(sb, " (%.3g ms a step)", r->cost_per_step_s * 1e3);
}

void census_report_text(const struct census_report *r, struct strbuf *sb)
{
	char b2[32], words[256];
	const char *unit = per_step(r->x_unit) ? "step" : "s";
	strbuf_addstr(sb, "  census    ");
	cost_words(r, sb);
	strbuf_addch(sb, '\n');
	if (!r->ngrowing) {
		strbuf_addf(sb, "            no type or container grows (%zu judged)\n", r->types);
		return;
	}
	/* the answer first: what holds the fastest-growing kept object */
	for (size_t i = 0; i < r->ngrowing; i++) {
		const struct census_type *c = &r->growing[i];
		if (!c->holder)
			continue;
		strbuf_addstr(sb, "  held by   ");
		render_add_clean(sb, c->holder);
		strbuf_addf(sb, ": +%.3g ", c->growth);
		render_add_clean(sb, census_type_words(words, sizeof(words), c->type));
		strbuf_addf(sb, " per %s, %lld now\n", unit, (long long)c->last_count);
		break;
	}
	for (size_t i = 0; i < r->ngrowing && i < CENSUS_TYPES_SHOWN; i++) {
		const struct census_type *c = &r->growing[i];
		census_type_words(words, sizeof(words), c->type);
		strbuf_addstr(sb, i ? "            " : "  growing   ");
		if (c->holder) {
			render_add_clean(sb, c->holder);
			strbuf_addstr(sb, " holds ");
		}
		strbuf_addf(sb, "+%.3g ", c->growth);
		render_add_clean(sb, words);
		strbuf_addf(sb, " per %s", unit);
		if (isfinite(c->bytes_growth))
			strbuf_addf(sb, " (%s/%s)", render_signed_bytes(b2, sizeof(b2), c->bytes_growth), unit);
		strbuf_addf(sb, ", %lld now", (long long)c->last_count);
		if (!c->holder)
			strbuf_addstr(sb, "; no named holder found");
		strbuf_addch(sb, '\n');
	}
	if (r->ngrowing > CENSUS_TYPES_SHOWN)
		strbuf_addf(sb, "            (and %zu more types)\n", r->ngrowing - CENSUS_TYPES_SHOWN);
}

void census_report_md(const struct census_report *r, struct strbuf *sb)
{
	char b[32], words[256], num[32];
	const char *unit = per_step(r->x_unit) ? "step" : "s";
	struct strbuf cost = STRBUF_INIT;
	cost_words(r, &cost);
	strbuf_addstr(sb, "\nCensus of live Python objects: ");
	render_add_md_cell(sb, strbuf_str(&cost));
	strbuf_release(&cost);
	if (!r->ngrowing) {
		strbuf_addf(sb, "; no type or container grows (%zu judged).\n", r->types);
		return;
	}
	strbuf_addf(sb, ".\n\n| Type | Holder | Growth/%s | Bytes/%s | Now |\n|---|---|---:|---:|---:|\n", unit, unit);
	for (size_t i = 0; i < r->ngrowing && i < CENSUS_TYPES_SHOWN; i++) {
		const struct census_type *c = &r->growing[i];
		strbuf_addstr(sb, "| ");
		render_add_md_cell(sb, census_type_words(words, sizeof(words), c->type));
		strbuf_addstr(sb, " | ");
		render_add_md_cell(sb, c->holder ? c->holder : "\xe2\x80\x93");
		snprintf(num, sizeof(num), "+%.3g", c->growth);
		strbuf_addf(sb, " | %s | %s | %lld |\n", num,
		            isfinite(c->bytes_growth) ? render_signed_bytes(b, sizeof(b), c->bytes_growth) : "\xe2\x80\x93",
		            (long long)c->last_count);
	}
	if (r->ngrowing > CENSUS_TYPES_SHOWN)
		strbuf_addf(sb, "\n(and %zu more types)\n", r->ngrowing - CENSUS_TYPES_SHOWN);
}

void census_report_html(const struct census_report *r, struct strbuf *sb)
{
	char b[32], words[256];
	const char *unit = per_step(r->x_unit) ? "step" : "s";
	struct strbuf cost = STRBUF_INIT;
	cost_words(r, &cost);
	strbuf_addstr(sb, "<section id=\"census\"><h2>Who holds it: the census of live Python objects</h2>\n"
	              "<p class=\"note\">");
	plot_add_xml(sb, strbuf_str(&cost));
	strbuf_release(&cost);
	strbuf_addstr(sb, ".</p>\n");
	if (!r->ngrowing) {
		strbuf_addf(sb, "<p>No type grows (%zu judged).</p>\n</section>\n", r->types);
		return;
	}
	strbuf_addf(sb, "<table class=\"lp-sortable\" id=\"census-growing\">\n<thead><tr><th data-key=\"type\">type</th>"
	            "<th data-key=\"holder\">holder</th><th data-key=\"growth\" data-type=\"num\">objects/%s</th>"
	            "<th data-key=\"bytes\" data-type=\"num\">bytes/%s</th><th data-key=\"count\" data-type=\"num\">now</th>"
	            "</tr></thead>\n<tbody>\n", unit, unit);
	for (size_t i = 0; i < r->ngrowing; i++) {
		const struct census_type *c = &r->growing[i];
		strbuf_addstr(sb, "<tr class=\"lp-census\"><td title=\"");
		plot_add_xml(sb, c->type);
		strbuf_addstr(sb, "\">");
		plot_add_xml(sb, census_type_words(words, sizeof(words), c->type));
		strbuf_addstr(sb, "</td><td>");
		plot_add_xml(sb, c->holder ? c->holder : "-");
		strbuf_addf(sb, "</td><td class=\"n\" data-v=\"%.17g\">+%.3g</td>", c->growth, c->growth);
		if (isfinite(c->bytes_growth))
			strbuf_addf(sb, "<td class=\"n\" data-v=\"%.17g\">%s</td>", c->bytes_growth,
			            render_signed_bytes(b, sizeof(b), c->bytes_growth));
		else
			strbuf_addstr(sb, "<td class=\"n\" data-v=\"\">-</td>");
		strbuf_addf(sb, "<td class=\"n\" data-v=\"%lld\">%lld</td></tr>\n", (long long)c->last_count,
		            (long long)c->last_count);
	}
	strbuf_addstr(sb, "</tbody></table>\n</section>\n");
}

void census_report_plain(const struct census_report *r, struct strbuf *sb)
{
	char b[32], words[256];
	const char *unit = per_step(r->x_unit) ? "step" : "s";
	for (size_t i = 0; i < r->ngrowing && i < CENSUS_TYPES_SHOWN; i++) {
		const struct census_type *c = &r->growing[i];
		strbuf_addstr(sb, "census: ");
		if (c->holder) {
			render_add_clean(sb, c->holder);
			strbuf_addstr(sb, " holds ");
		}
		strbuf_addf(sb, "+%.3g ", c->growth);
		render_add_clean(sb, census_type_words(words, sizeof(words), c->type));
		strbuf_addf(sb, " per %s", unit);
		if (isfinite(c->bytes_growth))
			strbuf_addf(sb, " (%s/%s)", render_signed_bytes(b, sizeof(b), c->bytes_growth), unit);
		strbuf_addch(sb, '\n');
	}
}

void census_report_json(const struct census_report *r, struct json_writer *jw)
{
	bool steps = per_step(r->x_unit);
	char words[256];
	jw_object_string(jw, "x_unit", r->x_unit);
	jw_object_double(jw, "censuses", (double)r->censuses);
	jw_object_double(jw, "types_judged", (double)r->types);
	jw_object_double(jw, "objects", r->objects_last);
	jw_object_double(jw, "interval_seconds", r->interval_median_s);
	jw_object_object(jw, "cost", false);
	jw_object_double(jw, "total_seconds", r->cost_total_s);
	jw_object_double(jw, "mean_seconds", r->cost_mean_s);
	jw_object_double(jw, "max_seconds", r->cost_max_s);
	jw_object_double(jw, "per_step_seconds", r->cost_per_step_s);
	jw_object_double(jw, "fraction_of_run", r->cost_fraction);
	jw_end(jw);
	jw_object_array(jw, "growing", true);
	for (size_t i = 0; i < r->ngrowing; i++) {
		const struct census_type *c = &r->growing[i];
		jw_array_object(jw, false);
		jw_object_string(jw, "type", c->type);
		jw_object_bool(jw, "container", census_type_is_held(c->type));
		jw_object_string(jw, "words", census_type_words(words, sizeof(words), c->type));
		jw_object_double(jw, "growth_per_step", steps ? c->growth : NAN);
		jw_object_double(jw, "growth_per_second", steps ? NAN : c->growth);
		jw_object_array(jw, "growth_interval", false);
		jw_array_double(jw, c->a.slope_low);
		jw_array_double(jw, c->a.slope_high);
		jw_end(jw);
		jw_object_double(jw, "bytes_per_step", steps ? c->bytes_growth : NAN);
		jw_object_double(jw, "bytes_per_second", steps ? NAN : c->bytes_growth);
		jw_object_double(jw, "count", (double)c->last_count);
		jw_object_double(jw, "bytes", c->last_bytes >= 0 ? (double)c->last_bytes : NAN);
		jw_object_double(jw, "mann_kendall_p", c->a.mk_p);
		jw_object_string(jw, "holder", c->holder);
		jw_end(jw);
	}
	jw_end(jw);
}

static const char *series_meaning(const struct gpu_series *g)
{
	if (!strcmp(g->name, "allocated"))
		return "tensors (PyTorch allocated)";
	if (!strcmp(g->name, "cached"))
		return "the caching allocator's unused part (reserved minus allocated)";
	return "outside PyTorch's allocator (NVML minus reserved: NCCL, cuBLAS workspaces, other libraries)";
}

void gpu_report_text(const struct gpu_report *g, struct strbuf *sb)
{
	char b[32];
	const char *unit = per_step(g->x_unit) ? "step" : "s";
	const struct gpu_series *all[3] = { &g->allocated, &g->cached, &g->other };
	strbuf_addstr(sb, "  gpu      ");
	bool first = true;
	for (int i = 0; i < 3; i++) {
		const struct gpu_series *s = all[i];
		if (!s->present)
			continue;
		strbuf_addf(sb, "%s %s ", first ? "" : ",", s->name);
		if (s->a.points >= 2 && isfinite(s->a.slope))
			strbuf_addf(sb, "%s/%s", render_signed_bytes(b, sizeof(b), s->a.slope), unit);
		else
			strbuf_addstr(sb, "?");
		strbuf_addf(sb, " (%s)", verdict_name(s->a.verdict));
		first = false;
	}
	if (isfinite(g->alloc_retries) && g->alloc_retries > 0)
		strbuf_addf(sb, ", %.0f allocation retr%s", g->alloc_retries, g->alloc_retries == 1 ? "y" : "ies");
	if (isfinite(g->ooms) && g->ooms > 0)
		strbuf_addf(sb, ", %.0f out-of-memory error%s", g->ooms, g->ooms == 1 ? "" : "s");
	strbuf_addch(sb, '\n');
	if (g->diagnosis[0])
		render_add_clean_between(sb, "            ", g->diagnosis, "\n");
}

void gpu_report_json(const struct gpu_report *g, struct json_writer *jw)
{
	const struct gpu_series *all[3] = { &g->allocated, &g->cached, &g->other };
	bool steps = per_step(g->x_unit);
	jw_object_string(jw, "x_unit", g->x_unit);
	jw_object_double(jw, "points", (double)g->points);
	jw_object_array(jw, "series", true);
	for (int i = 0; i < 3; i++) {
		const struct gpu_series *s = all[i];
		bool fit = s->present && s->a.points >= 2;
		jw_array_object(jw, false);
		jw_object_string(jw, "name", s->name);
		jw_object_string(jw, "meaning", series_meaning(s));
		jw_object_string(jw, "verdict", s->present ? verdict_name(s->a.verdict) : NULL);
		jw_object_double(jw, "growth_bytes_per_step", fit && steps ? s->a.slope : NAN);
		jw_object_double(jw, "growth_bytes_per_second", fit && !steps ? s->a.slope : NAN);
		jw_object_double(jw, "last_bytes", s->present ? s->last_bytes : NAN);
		jw_end(jw);
	}
	jw_end(jw);
	jw_object_double(jw, "inactive_split_bytes", g->inactive_split_bytes);
	jw_object_double(jw, "alloc_retries", g->alloc_retries);
	jw_object_double(jw, "ooms", g->ooms);
	jw_object_string(jw, "diagnosis", g->diagnosis[0] ? g->diagnosis : NULL);
}
