/*
 * plot.c — charts as SVG (see plot.h): scales, nice ticks, downsampling,
 * and the drawing of series, bars, markers, trend lines and legends.
 *
 * Layout of a chart, in CSS pixels: the title on top, then the legend (as
 * many rows as it needs), then the drawing area framed by the axes; tick
 * labels left (and right, for a second axis) and below, axis names beside
 * them. Text widths are estimated (6.5 px a character at 11 px), which is
 * enough to lay out a legend without a browser.
 */
#include "report/plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/jsonw.h"
#include "util/util.h"

#define DEFAULT_WIDTH 900
#define DEFAULT_HEIGHT 340
#define MARGIN_LEFT 78
#define MARGIN_RIGHT 24
#define MARGIN_RIGHT_Y2 70
#define MARGIN_BOTTOM 46
#define TITLE_H 26
#define LEGEND_ROW_H 18
#define CHAR_PX 7.2

const char *plot_color(size_t i)
{
	static const char *const palette[] = {
		"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
		"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
	};
	return palette[i % (sizeof(palette) / sizeof(palette[0]))];
}

/* ---- text -------------------------------------------------------------- */

void plot_add_xml(struct strbuf *sb, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	while (*p) {
		switch (*p) {
		case '&': strbuf_addstr(sb, "&amp;"); p++; continue;
		case '<': strbuf_addstr(sb, "&lt;"); p++; continue;
		case '>': strbuf_addstr(sb, "&gt;"); p++; continue;
		case '"': strbuf_addstr(sb, "&quot;"); p++; continue;
		case '\'': strbuf_addstr(sb, "&#39;"); p++; continue;
		default: break;
		}
		if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f) {
			strbuf_addch(sb, '?');
			p++;
			continue;
		}
		size_t n = utf8_len(p);
		if (!n) {
			strbuf_addstr(sb, "\xef\xbf\xbd");
			p++;
			continue;
		}
		if (n == 3 && p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe) {
			strbuf_addstr(sb, "\xef\xbf\xbd");   /* U+FFFE, U+FFFF: no XML 1.0 character */
			p += n;
			continue;
		}
		strbuf_add(sb, p, n);
		p += n;
	}
}

/* ---- axes -------------------------------------------------------------- */

void plot_axis_fit(struct plot_axis *ax, enum plot_kind kind, double lo, double hi, int target)
{
	static const char *const bytes_units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	memset(ax, 0, sizeof(*ax));
	ax->kind = kind;
	if (!isfinite(lo) || !isfinite(hi)) {
		lo = 0;
		hi = 1;
	}
	if (hi < lo) {
		double t = lo;
		lo = hi;
		hi = t;
	}
	if (target < 2)
		target = 2;
	double m = fmax(fabs(lo), fabs(hi));
	ax->unit = 1;
	ax->unit_name = "";
	if (kind == PLOT_BYTES) {
		int u = 0;
		while (m >= 1024 * ax->unit && u < 4) {
			ax->unit *= 1024;
			u++;
		}
		ax->unit_name = bytes_units[u];
	} else if (kind == PLOT_SECONDS) {
		ax->unit_name = "s";
		if (hi - lo >= 3 * 3600) {
			ax->unit = 3600;
			ax->unit_name = "h";
		} else if (hi - lo >= 5 * 60) {
			ax->unit = 60;
			ax->unit_name = "min";
		}
	} else if (m >= 1e7) {
		ax->unit = 1e6;
		ax->unit_name = "M";
	} else if (m >= 1e4) {
		ax->unit = 1e3;
		ax->unit_name = "k";
	}
	if (hi == lo) {
		/* one value: a range around it, one unit of the axis wide */
		double pad = lo ? fabs(lo) * 0.05 : ax->unit;
		lo -= pad;
		hi += pad;
	}
	double raw = (hi - lo) / ax->unit / target;
	double mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	double nice = f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10;
	ax->step = nice * mag * ax->unit;
	ax->lo = floor(lo / ax->step + 1e-9) * ax->step;
	ax->hi = ceil(hi / ax->step - 1e-9) * ax->step;
	if (ax->hi <= ax->lo)
		ax->hi = ax->lo + ax->step;
	for (size_t k = 0; ax->nticks < PLOT_MAX_TICKS; k++) {
		double v = ax->lo + (double)k * ax->step;
		if (v > ax->hi + ax->step * 1e-6)
			break;
		ax->ticks[ax->nticks++] = fabs(v) < ax->step * 1e-9 ? 0 : v;
	}
}

char *plot_axis_label(const struct plot_axis *ax, double v, char *buf, size_t bufsz)
{
	double step_u = ax->step / ax->unit;
	int decimals = step_u >= 1 ? 0 : (int)ceil(-log10(step_u) - 1e-9);
	if (decimals > 6)
		decimals = 6;
	double x = v / ax->unit;
	if (fabs(x) < step_u * 1e-9)
		x = 0;
	const char *sep = ax->kind == PLOT_NUMBER ? "" : " ";
	if (!ax->unit_name[0])
		sep = "";
	snprintf(buf, bufsz, "%.*f%s%s", decimals, x, sep, ax->unit_name);
	return buf;
}

/* ---- downsampling ------------------------------------------------------ */

size_t plot_downsample(const double *x, const double *y, size_t n, double x0, double x1,
                       size_t columns, double *ox, double *oy)
{
	size_t out = 0;
	if (columns < 1)
		columns = 1;
	double span = x1 - x0;
	long cur = -1;
	size_t lo = 0, hi = 0;
	bool have = false;
	for (size_t i = 0; i <= n; i++) {
		long col = -2;
		if (i < n) {
			if (!isfinite(x[i]) || !isfinite(y[i]))
				continue;
			col = span > 0 ? (long)floor((x[i] - x0) / span * (double)columns) : 0;
			if (col < 0)
				col = 0;
			if (col >= (long)columns)
				col = (long)columns - 1;
		}
		if (have && col != cur) {
			size_t a = lo < hi ? lo : hi, b = lo < hi ? hi : lo;
			ox[out] = x[a];
			oy[out++] = y[a];
			if (b != a) {
				ox[out] = x[b];
				oy[out++] = y[b];
			}
			have = false;
		}
		if (i == n)
			break;
		if (!have) {
			cur = col;
			lo = hi = i;
			have = true;
		} else {
			if (y[i] < y[lo])
				lo = i;
			if (y[i] > y[hi])
				hi = i;
		}
	}
	return out;
}

/* ---- drawing ----------------------------------------------------------- */

struct frame {
	double left, right, top, bottom;   /* the drawing area, px */
	struct plot_axis x, y, y2;
	bool has_y2;
};

static double px_x(const struct frame *f, double x)
{
	return f->left + (x - f->x.lo) / (f->x.hi - f->x.lo) * (f->right - f->left);
}

static double px_y(const struct frame *f, const struct plot_axis *ax, double y)
{
	return f->bottom - (y - ax->lo) / (ax->hi - ax->lo) * (f->bottom - f->top);
}

static void grow(double *lo, double *hi, double v)
{
	if (!isfinite(v))
		return;
	if (!(v >= *lo))
		*lo = v;
	if (!(v <= *hi))
		*hi = v;
}

static double legend_item_px(const char *name)
{
	return 26 + CHAR_PX * (double)strlen(name ? name : "") + 14;
}

/* The legend's entries in order: series, trend, warm-up, extra items. */
enum { LEGEND_SERIES, LEGEND_TREND, LEGEND_BAND, LEGEND_ITEM };
static const char *legend_entry(const struct plot *p, size_t i, int *what, const char **color)
{
	*color = NULL;
	if (i < p->nseries) {
		const struct plot_series *s = &p->series[i];
		*what = LEGEND_SERIES;
		*color = s->color;
		return s->no_legend || s->bars ? NULL : s->name;
	}
	i -= p->nseries;
	if (i == 0) {
		*what = LEGEND_TREND;
		return p->ntrends ? "trend" : NULL;
	}
	if (i == 1) {
		*what = LEGEND_BAND;
		return p->nbands ? "warm-up" : NULL;
	}
	*what = LEGEND_ITEM;
	*color = p->legend[i - 2].color;
	return p->legend[i - 2].name;
}

/* Legend rows needed within width px (draw: append them to sb at left, top). */
static int legend_layout(const struct plot *p, double width, struct strbuf *sb, double left, double top)
{
	double at = 0, y = top - LEGEND_ROW_H;
	int rows = 0;
	if (sb)
		strbuf_addstr(sb, "<g class=\"lp-legend\">");
	for (size_t i = 0; i < p->nseries + 2 + p->nlegend; i++) {
		int what;
		const char *color;
		const char *name = legend_entry(p, i, &what, &color);
		if (!name)
			continue;
		double w = legend_item_px(name);
		if (!rows || at + w > width) {
			rows++;
			y += LEGEND_ROW_H;
			at = 0;
		}
		double x = left + at, ym = y + LEGEND_ROW_H / 2.0;
		at += w;
		if (!sb)
			continue;
		if (what == LEGEND_TREND)
			strbuf_addf(sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" "
			            "stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>", x, ym, x + 20, ym);
		else if (what == LEGEND_BAND)
			strbuf_addf(sb, "<rect x=\"%.1f\" y=\"%.1f\" width=\"20\" height=\"10\" fill=\"#e8e8e8\" "
			            "stroke=\"#bbb\"/>", x, ym - 5);
		else
			strbuf_addf(sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
			            "stroke-width=\"3\"/>", x, ym, x + 20, ym, color ? color : "#000");
		strbuf_addf(sb, "<text x=\"%.1f\" y=\"%.1f\">", x + 26, ym + 4);
		plot_add_xml(sb, name);
		strbuf_addstr(sb, "</text>");
	}
	if (sb)
		strbuf_addstr(sb, "</g>\n");
	return rows;
}

static void add_axes(struct strbuf *sb, const struct plot *p, const struct frame *f, double width, double height)
{
	char label[48];
	strbuf_addstr(sb, "<g class=\"lp-grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">");
	for (size_t i = 0; i < f->y.nticks; i++) {
		double y = px_y(f, &f->y, f->y.ticks[i]);
		strbuf_addf(sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", f->left, y, f->right, y);
	}
	for (size_t i = 0; i < f->x.nticks; i++) {
		double x = px_x(f, f->x.ticks[i]);
		strbuf_addf(sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x, f->top, x, f->bottom);
	}
	strbuf_addstr(sb, "</g>\n<g class=\"lp-axis\" fill=\"#333\">");
	for (size_t i = 0; i < f->y.nticks; i++) {
		double y = px_y(f, &f->y, f->y.ticks[i]);
		strbuf_addf(sb, "<text class=\"lp-ytick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", f->left - 6, y + 4,
		            plot_axis_label(&f->y, f->y.ticks[i], label, sizeof(label)));
	}
	if (f->has_y2)
		for (size_t i = 0; i < f->y2.nticks; i++) {
			double y = px_y(f, &f->y2, f->y2.ticks[i]);
			strbuf_addf(sb, "<text class=\"lp-y2tick\" x=\"%.1f\" y=\"%.1f\">%s</text>", f->right + 6, y + 4,
			            plot_axis_label(&f->y2, f->y2.ticks[i], label, sizeof(label)));
		}
	for (size_t i = 0; i < f->x.nticks; i++) {
		double x = px_x(f, f->x.ticks[i]);
		strbuf_addf(sb, "<text class=\"lp-xtick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>", x, f->bottom + 16,
		            plot_axis_label(&f->x, f->x.ticks[i], label, sizeof(label)));
	}
	if (p->x_label) {
		strbuf_addf(sb, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (f->left + f->right) / 2, height - 8);
		plot_add_xml(sb, p->x_label);
		strbuf_addstr(sb, "</text>");
	}
	if (p->y_label) {
		double cy = (f->top + f->bottom) / 2;
		strbuf_addf(sb, "<text x=\"14\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 14 %.1f)\">",
		            cy, cy);
		plot_add_xml(sb, p->y_label);
		strbuf_addstr(sb, "</text>");
	}
	if (f->has_y2 && p->y2_label) {
		double cy = (f->top + f->bottom) / 2, x = width - 10;
		strbuf_addf(sb, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(90 %.1f %.1f)\">",
		            x, cy, x, cy);
		plot_add_xml(sb, p->y2_label);
		strbuf_addstr(sb, "</text>");
	}
	strbuf_addstr(sb, "</g>\n");
}

static void json_axis(struct json_writer *jw, const char *name, const struct plot_axis *ax, double p0, double p1)
{
	static const char *const kinds[] = { "number", "bytes", "seconds" };
	jw_object_object(jw, name, false);
	jw_object_string(jw, "kind", kinds[ax->kind]);
	jw_object_double(jw, "lo", ax->lo);
	jw_object_double(jw, "hi", ax->hi);
	jw_object_key(jw, "p0");   /* pixels, to a tenth */
	strbuf_addf(jw->sb, "%.1f", p0);
	jw_object_key(jw, "p1");
	strbuf_addf(jw->sb, "%.1f", p1);
	jw_end(jw);
}

static void add_marker(struct strbuf *sb, const struct frame *f, const struct plot_vline *v, size_t nth)
{
	static const char *const kinds[] = { "restart", "end", "quantile" };
	static const char *const colors[] = { "#555", "#d62728", "#333" };
	static const char *const dashes[] = { "5,3", "", "2,3" };
	if (!isfinite(v->x) || v->x < f->x.lo || v->x > f->x.hi)
		return;
	double x = px_x(f, v->x);
	strbuf_addf(sb, "<g class=\"lp-marker\" data-kind=\"%s\"", kinds[v->kind]);
	if (v->cause) {
		strbuf_addstr(sb, " data-cause=\"");
		plot_add_xml(sb, v->cause);
		strbuf_addch(sb, '"');
	}
	strbuf_addstr(sb, ">");
	if (v->title) {
		strbuf_addstr(sb, "<title>");
		plot_add_xml(sb, v->title);
		strbuf_addstr(sb, "</title>");
	}
	strbuf_addf(sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%s\"",
	            x, f->top, x, f->bottom, colors[v->kind], v->kind == PLOT_MARK_END ? "2" : "1.2");
	if (dashes[v->kind][0])
		strbuf_addf(sb, " stroke-dasharray=\"%s\"", dashes[v->kind]);
	strbuf_addstr(sb, "/>");
	if (v->label) {
		/* staggered, so neighbouring labels do not overprint */
		double y = f->top + 12 + (double)(nth % 3) * 12;
		bool left = x > f->right - 90;
		strbuf_addf(sb, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\"%s>", left ? x - 3 : x + 3, y, colors[v->kind],
		            left ? " text-anchor=\"end\"" : "");
		plot_add_xml(sb, v->label);
		strbuf_addstr(sb, "</text>");
	}
	strbuf_addstr(sb, "</g>");
}

/* The data ranges of every series, trend and marker, and from them the
 * frame: margins, legend rows and the fitted axes. Returns the legend rows. */
static int fit_frame(const struct plot *p, double width, double height, struct frame *f)
{
	double xlo = NAN, xhi = NAN, ylo = NAN, yhi = NAN, y2lo = NAN, y2hi = NAN;
	for (size_t i = 0; i < p->nseries; i++) {
		const struct plot_series *s = &p->series[i];
		for (size_t k = 0; k < s->n; k++) {
			if (!isfinite(s->x[k]) || !isfinite(s->y[k]))
				continue;
			double half = s->bars ? s->bar_width / 2 : 0;
			grow(&xlo, &xhi, s->x[k] - half);
			grow(&xlo, &xhi, s->x[k] + half);
			if (s->right_axis) {
				grow(&y2lo, &y2hi, s->y[k]);
				f->has_y2 = true;
			} else {
				grow(&ylo, &yhi, s->y[k]);
			}
			if (s->bars)
				grow(&ylo, &yhi, 0);
		}
	}
	for (size_t i = 0; i < p->ntrends; i++) {
		grow(&xlo, &xhi, p->trends[i].x0);
		grow(&xlo, &xhi, p->trends[i].x1);
	}
	for (size_t i = 0; i < p->nvlines; i++)
		if (p->vlines[i].kind != PLOT_MARK_QUANTILE)
			grow(&xlo, &xhi, p->vlines[i].x);
	if (p->y_from_zero)
		grow(&ylo, &yhi, 0);
	if (isfinite(ylo) && isfinite(yhi) && !p->y_from_zero) {
		double pad = (yhi - ylo) * 0.04;
		/* memory is never negative: no axis below 0 for it */
		ylo = ylo >= 0 && ylo - pad < 0 ? 0 : ylo - pad;
		yhi += pad;
	}
	if (!isfinite(xlo)) {
		xlo = 0;
		xhi = 1;
	}
	if (!isfinite(ylo)) {
		ylo = 0;
		yhi = 1;
	}

	f->left = MARGIN_LEFT;
	f->right = width - (f->has_y2 ? MARGIN_RIGHT_Y2 : MARGIN_RIGHT);
	int rows = legend_layout(p, f->right - f->left, NULL, 0, 0);
	f->top = (p->title ? TITLE_H : 8) + rows * LEGEND_ROW_H + 6;
	f->bottom = height - MARGIN_BOTTOM;
	plot_axis_fit(&f->x, p->x_kind, xlo, xhi, (int)((f->right - f->left) / 110));
	plot_axis_fit(&f->y, p->y_kind, ylo, yhi, (int)((f->bottom - f->top) / 45));
	if (f->has_y2)
		plot_axis_fit(&f->y2, p->y2_kind, y2lo, y2hi, (int)((f->bottom - f->top) / 45));
	return rows;
}

/* The shaded bands (warm-up) behind the series. */
static void add_bands(struct strbuf *sb, const struct plot *p, struct frame *f)
{
	for (size_t i = 0; i < p->nbands; i++) {
		const struct plot_band *b = &p->bands[i];
		double x0 = px_x(f, fmax(b->x0, f->x.lo)), x1 = px_x(f, fmin(b->x1, f->x.hi));
		if (!(x1 > x0))
			continue;
		strbuf_addf(sb, "<g class=\"lp-warmup\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
		            "fill=\"#ececec\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
		            "stroke-dasharray=\"3,3\"/>", x0, f->top, x1 - x0, f->bottom - f->top, x1, f->top, x1, f->bottom);
		if (b->label) {
			strbuf_addf(sb, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#666\" text-anchor=\"end\">", x1 - 3,
			            f->bottom - 6);
			plot_add_xml(sb, b->label);
			strbuf_addstr(sb, "</text>");
		}
		strbuf_addstr(sb, "</g>\n");
	}
}

/* The start of the plot's entry in the chart data: its id and axes, and
 * the array of its series open. */
static void json_head(struct json_writer *jw, const struct plot *p, struct frame *f, const char *id)
{
	jw_object_begin(jw, false);
	jw_object_string(jw, "id", id);
	jw_object_string(jw, "xlabel", p->x_label ? p->x_label : "x");
	json_axis(jw, "x", &f->x, f->left, f->right);
	json_axis(jw, "y", &f->y, f->bottom, f->top);
	if (f->has_y2)
		json_axis(jw, "y2", &f->y2, f->bottom, f->top);
	jw_object_array(jw, "series", false);
}

/* The series, bars first so lines draw over them; each downsampled to
 * the frame's pixel columns when it has many more points, and appended to
 * points_json (when not NULL) as drawn. Counts go to *st. */
static void add_series(struct strbuf *sb, const struct plot *p, struct frame *f, struct json_writer *points_json,
                       struct plot_stats *st)
{
	size_t columns = (size_t)(f->right - f->left);
	size_t cap = 0;
	for (size_t i = 0; i < p->nseries; i++)
		if (p->series[i].n > cap)
			cap = p->series[i].n;
	double *ox = xmalloc((cap ? cap : 1) * sizeof(double)), *oy = xmalloc((cap ? cap : 1) * sizeof(double));
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < p->nseries; i++) {
			const struct plot_series *s = &p->series[i];
			if (s->bars != (pass == 0))
				continue;
			const struct plot_axis *ay = s->right_axis ? &f->y2 : &f->y;
			size_t finite = 0;
			for (size_t k = 0; k < s->n; k++)
				finite += isfinite(s->x[k]) && isfinite(s->y[k]);
			st->points_in += finite;
			size_t m;
			if (!s->bars && finite > 2 * columns) {
				m = plot_downsample(s->x, s->y, s->n, f->x.lo, f->x.hi, columns, ox, oy);
				st->downsampled = true;
			} else {
				m = 0;
				for (size_t k = 0; k < s->n; k++)
					if (isfinite(s->x[k]) && isfinite(s->y[k])) {
						ox[m] = s->x[k];
						oy[m++] = s->y[k];
					}
			}
			st->points_drawn += m;
			if (s->bars) {
				double y0 = px_y(f, ay, 0);
				strbuf_addf(sb, "<g class=\"lp-bars\" data-series=\"%s\" fill=\"%s\">", s->key ? s->key : "",
				            s->color);
				for (size_t k = 0; k < m; k++) {
					double xa = px_x(f, ox[k] - s->bar_width / 2), xb = px_x(f, ox[k] + s->bar_width / 2);
					double yt = px_y(f, ay, oy[k]);
					double w = fmax(xb - xa - 1, 1);
					strbuf_addf(sb, "<rect class=\"lp-bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
					            "height=\"%.1f\"/>", xa + 0.5, fmin(yt, y0), w, fabs(y0 - yt));
				}
				strbuf_addstr(sb, "</g>\n");
			} else if (m) {
				strbuf_addstr(sb, "<path class=\"lp-series\" data-series=\"");
				plot_add_xml(sb, s->key ? s->key : "");
				strbuf_addf(sb, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-linejoin=\"round\" "
				            "d=\"", s->color, s->stroke_px > 0 ? s->stroke_px : 1.5);
				for (size_t k = 0; k < m; k++)
					strbuf_addf(sb, "%s%.1f,%.1f", k ? " L" : "M", px_x(f, ox[k]), px_y(f, ay, oy[k]));
				if (m == 1)   /* a lone point: a dot */
					strbuf_addf(sb, " h0.1\" stroke-linecap=\"round");
				strbuf_addstr(sb, "\"><title>");
				plot_add_xml(sb, s->name);
				strbuf_addstr(sb, "</title></path>\n");
			}
			if (points_json) {
				jw_array_object(points_json, false);
				jw_object_string(points_json, "name", s->name ? s->name : "");
				jw_object_string(points_json, "color", s->color);
				jw_object_bool(points_json, "right", s->right_axis);
				jw_object_bool(points_json, "bars", s->bars);
				jw_object_array(points_json, "x", false);
				for (size_t k = 0; k < m; k++)
					jw_array_double(points_json, ox[k]);
				jw_end(points_json);
				jw_object_array(points_json, "y", false);
				for (size_t k = 0; k < m; k++)
					jw_array_double(points_json, oy[k]);
				jw_end(points_json);
				jw_end(points_json);
			}
		}
	free(ox);
	free(oy);
}

/* The fitted trend lines, dashed, with their labels as tooltips. */
static void add_trends(struct strbuf *sb, const struct plot *p, struct frame *f)
{
	for (size_t i = 0; i < p->ntrends; i++) {
		const struct plot_trend *t = &p->trends[i];
		strbuf_addf(sb, "<line class=\"lp-trend\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" "
		            "stroke-width=\"1.5\" stroke-dasharray=\"6,4\">", px_x(f, t->x0), px_y(f, &f->y, t->y0),
		            px_x(f, t->x1), px_y(f, &f->y, t->y1));
		if (t->label) {
			strbuf_addstr(sb, "<title>");
			plot_add_xml(sb, t->label);
			strbuf_addstr(sb, "</title>");
		}
		strbuf_addstr(sb, "</line>\n");
	}
}

void plot_svg(struct strbuf *sb, const struct plot *p, bool standalone,
              struct strbuf *points_json, struct plot_stats *stats)
{
	double width = p->width_px > 0 ? p->width_px : DEFAULT_WIDTH;
	double height = p->height_px > 0 ? p->height_px : DEFAULT_HEIGHT;
	struct plot_stats st = { 0, 0, false };
	struct frame f;
	memset(&f, 0, sizeof(f));
	const char *id = p->id ? p->id : "plot";

	int rows = fit_frame(p, width, height, &f);

	if (standalone)
		strbuf_addstr(sb, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	strbuf_addf(sb, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" class=\"lp-plot\" data-plot=\"%s\" "
	            "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, "
	            "Arial, sans-serif\" font-size=\"11\">\n", id, width, height, width, height);
	if (p->title) {
		strbuf_addstr(sb, "<title>");
		plot_add_xml(sb, p->title);
		strbuf_addstr(sb, "</title>\n");
	}
	strbuf_addf(sb, "<rect class=\"lp-bg\" x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", width,
	            height);
	if (p->title) {
		strbuf_addf(sb, "<text x=\"%.1f\" y=\"18\" font-size=\"14\" font-weight=\"bold\" fill=\"#222\">", f.left);
		plot_add_xml(sb, p->title);
		strbuf_addstr(sb, "</text>\n");
	}
	legend_layout(p, f.right - f.left, sb, f.left, f.top - 6 - rows * LEGEND_ROW_H);
	strbuf_addf(sb, "<rect class=\"lp-area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fff\" "
	            "stroke=\"#999\"/>\n", f.left, f.top, f.right - f.left, f.bottom - f.top);
	add_axes(sb, p, &f, width, height);
	strbuf_addf(sb, "<clipPath id=\"%s-clip\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>"
	            "</clipPath>\n<g clip-path=\"url(#%s-clip)\">\n", id, f.left, f.top, f.right - f.left,
	            f.bottom - f.top, id);

	add_bands(sb, p, &f);

	struct json_writer jw, *pj = NULL;
	if (points_json) {
		jw_init_tight(&jw, points_json);
		pj = &jw;
		json_head(pj, p, &f, id);
	}
	add_series(sb, p, &f, pj, &st);
	if (pj) {
		jw_end(pj);   /* the series */
		jw_end(pj);
	}

	add_trends(sb, p, &f);
	strbuf_addstr(sb, "</g>\n");
	/* markers outside the clip, so their labels show whole */
	for (size_t i = 0; i < p->nvlines; i++)
		add_marker(sb, &f, &p->vlines[i], i);
	strbuf_addstr(sb, "</svg>\n");
	if (stats)
		*stats = st;
}
