/*
 * plot.h — line charts and histograms drawn as SVG from C, for the html and
 * svg reports (html.c, svg.c). No JavaScript is needed to see a chart; the
 * html report adds hover on top, from the points each chart drew.
 *
 * A chart is described by a struct plot (series, vertical markers, trend
 * lines) and appended to a strbuf as one <svg> element. Axes get "nice"
 * ticks (1-2-5 steps) in the unit of their kind: bytes in B/KiB/MiB/GiB
 * (powers of 1024), seconds in s/min/h, plain numbers otherwise. Long
 * series are downsampled for drawing (the lowest and highest point of each
 * pixel column, in order), so a million points draw as a few thousand and
 * every spike stays visible.
 *
 * Elements carry classes a reader (or a test) can count: lp-series (one
 * <path> per series, data-series="KEY"), lp-bar (histogram bars), lp-trend,
 * lp-warmup, lp-marker (data-kind="restart" or "end", data-cause), and the
 * drawing area lp-area.
 *
 * Units: x and y in the units of their axis kind (bytes, seconds, steps);
 * sizes on the page in CSS pixels.
 */
#ifndef LP_REPORT_PLOT_H
#define LP_REPORT_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "util/util.h"

enum plot_kind { PLOT_NUMBER = 0, PLOT_BYTES, PLOT_SECONDS };

struct plot_series {
	const char *name;          /* legend text */
	const char *key;           /* data-series attribute: "pss", "loss", "trial-3" */
	const char *color;         /* a CSS color such as "#1f77b4" */
	const double *x, *y;       /* n points, x ascending; non-finite points skipped */
	size_t n;
	double stroke_px;          /* line width; 0: 1.5 */
	bool right_axis;           /* against the right axis (plot.y2_kind) */
	bool bars;                 /* a histogram: x the bin centres, y the counts,
	                            * bar_width wide (x units) */
	double bar_width;
	bool no_legend;            /* leave it out of the legend (many series) */
};

enum plot_mark { PLOT_MARK_RESTART, PLOT_MARK_END, PLOT_MARK_QUANTILE };

/* A vertical line across the chart at x, labelled at its top. */
struct plot_vline {
	double x;
	enum plot_mark kind;
	const char *label;         /* short text drawn by the line; may be NULL */
	const char *title;         /* longer text shown on hover; may be NULL */
	const char *cause;         /* PLOT_MARK_END: the cause, as data-cause */
};

/* A straight line from (x0, y0) to (x1, y1) on the left axis: the trend. */
struct plot_trend {
	double x0, y0, x1, y1;
	const char *label;
};

/* A shaded band over x in [x0, x1]: the warm-up. */
struct plot_band {
	double x0, x1;
	const char *label;
};

/* A legend entry of its own (a color for a group of series). */
struct plot_legend_item {
	const char *name;
	const char *color;
};

struct plot {
	const char *id;            /* unique in the page: ids of clip paths, data-plot */
	const char *title;         /* may be NULL */
	const char *x_label, *y_label, *y2_label;   /* y2_label: when a series is on the right */
	enum plot_kind x_kind, y_kind, y2_kind;
	int width_px, height_px;   /* 0: 900 x 340 */
	bool y_from_zero;          /* the left axis starts at 0 (or below, for negatives) */
	const struct plot_series *series;
	size_t nseries;
	const struct plot_vline *vlines;
	size_t nvlines;
	const struct plot_trend *trends;
	size_t ntrends;
	const struct plot_band *bands;
	size_t nbands;
	const struct plot_legend_item *legend;   /* after the series' own entries */
	size_t nlegend;
};

/* What plot_svg() did, for the page to say so. */
struct plot_stats {
	size_t points_in;          /* finite points given, over all series */
	size_t points_drawn;       /* points in the paths */
	bool downsampled;          /* some series had more points than columns */
};

/*
 * Append plot p as one <svg> element to sb. standalone: a file of its own
 * (XML declaration, xmlns, a white background). points_json, when not NULL,
 * receives a JSON object with the drawn points and the scales, for hover
 * (see html.c). stats may be NULL.
 */
void plot_svg(struct strbuf *sb, const struct plot *p, bool standalone,
              struct strbuf *points_json, struct plot_stats *stats /* out */);

/*
 * An axis of kind over [lo, hi] with "nice" ticks: about target of them on
 * a 1-2-5 step in the axis unit (MiB for a range of tens of MiB...); lo and
 * hi are widened to multiples of the step.
 */
#define PLOT_MAX_TICKS 24
struct plot_axis {
	enum plot_kind kind;
	double lo, hi;             /* the range shown */
	double step;               /* between ticks, in the kind's base unit */
	double unit;               /* of the labels: 1024^k bytes, 60 s, 1000... */
	const char *unit_name;     /* "MiB", "min", "k", "" */
	double ticks[PLOT_MAX_TICKS];
	size_t nticks;
};
void plot_axis_fit(struct plot_axis *ax /* out */, enum plot_kind kind, double lo, double hi, int target);
/* The label of value v on ax: "64 MiB", "1.5 GiB", "30 s", "2 min",
 * "20k", "0.25". Returns buf. */
char *plot_axis_label(const struct plot_axis *ax, double v, char *buf, size_t bufsz);

/*
 * Downsample (x[i], y[i]), x ascending, for a drawing columns wide over
 * [x0, x1]: per column the lowest and the highest point, in their order
 * (one point when they are the same). Non-finite points are skipped. ox and
 * oy must hold n values. Returns how many points were written: at most
 * 2 * columns when x is ascending.
 */
size_t plot_downsample(const double *x, const double *y, size_t n, double x0, double x1,
                       size_t columns, double *ox /* out */, double *oy /* out */);

/* Append s as XML/HTML text or attribute value: & < > " ' escaped, control
 * characters but newline and tab as '?', invalid UTF-8 as U+FFFD. */
void plot_add_xml(struct strbuf *sb, const char *s);

/* A color of the palette (10 colors, cycling). */
const char *plot_color(size_t i);

#endif
