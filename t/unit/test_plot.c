/*
 * test_plot.c — the charting underneath the html and svg reports: nice
 * ticks and their labels, downsampling that keeps the extremes, XML text
 * that stays well-formed whatever a job named itself, and the allocation
 * sites table the html page shows for a traced run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/plot.h"
#include "report/report.h"
#include "util/util.h"
#include "tap.h"

#define MiB (1024.0 * 1024.0)

/* 1, 2 or 5 times a power of ten. */
static int is_nice(double v)
{
	double m = v / pow(10, floor(log10(v)));
	return fabs(m - 1) < 1e-9 || fabs(m - 2) < 1e-9 || fabs(m - 5) < 1e-9 || fabs(m - 10) < 1e-9;
}

static void test_bytes_axis(void)
{
	struct plot_axis ax;
	char b[48];
	plot_axis_fit(&ax, PLOT_BYTES, 71.3 * MiB, 97.9 * MiB, 6);
	CHECK_STR(ax.unit_name, "MiB");
	CHECK(is_nice(ax.step / ax.unit));
	CHECK(ax.lo <= 71.3 * MiB && ax.hi >= 97.9 * MiB);
	CHECK(ax.nticks >= 3 && ax.nticks <= 12);
	CHECK_STR(plot_axis_label(&ax, ax.ticks[0], b, sizeof(b)), "70 MiB");
	CHECK_STR(plot_axis_label(&ax, ax.ticks[1], b, sizeof(b)), "75 MiB");

	plot_axis_fit(&ax, PLOT_BYTES, 0, 1.5 * 1024 * MiB, 6);
	CHECK_STR(ax.unit_name, "GiB");
	CHECK_STR(plot_axis_label(&ax, ax.ticks[1], b, sizeof(b)), "0.2 GiB");

	/* a small, signed range: the per-step change */
	plot_axis_fit(&ax, PLOT_BYTES, -7.4 * MiB, 7.6 * MiB, 8);
	CHECK_STR(plot_axis_label(&ax, ax.ticks[0], b, sizeof(b)), "-8 MiB");
	int zero = 0;
	for (size_t i = 0; i < ax.nticks; i++)
		zero += !strcmp(plot_axis_label(&ax, ax.ticks[i], b, sizeof(b)), "0 MiB");
	CHECK_EQ_INT(zero, 1);   /* no "-0 MiB" */

	plot_axis_fit(&ax, PLOT_BYTES, 300, 900, 6);
	CHECK_STR(ax.unit_name, "B");
	CHECK_STR(plot_axis_label(&ax, 500, b, sizeof(b)), "500 B");

	/* one value: still a range, with ticks */
	plot_axis_fit(&ax, PLOT_BYTES, 64 * MiB, 64 * MiB, 6);
	CHECK(ax.hi > ax.lo && ax.nticks >= 2);
}

static void test_other_axes(void)
{
	struct plot_axis ax;
	char b[48];
	plot_axis_fit(&ax, PLOT_NUMBER, 1, 100000, 8);
	CHECK_STR(ax.unit_name, "k");
	CHECK(is_nice(ax.step));
	CHECK_STR(plot_axis_label(&ax, 20000, b, sizeof(b)), "20k");

	plot_axis_fit(&ax, PLOT_NUMBER, 0, 0.93, 5);
	CHECK_STR(plot_axis_label(&ax, ax.ticks[1], b, sizeof(b)), "0.2");

	plot_axis_fit(&ax, PLOT_SECONDS, 0, 42, 6);
	CHECK_STR(plot_axis_label(&ax, ax.ticks[1], b, sizeof(b)), "5 s");

	plot_axis_fit(&ax, PLOT_SECONDS, 0, 3 * 3600, 6);
	CHECK_STR(ax.unit_name, "h");
	plot_axis_fit(&ax, PLOT_SECONDS, 0, 1200, 6);
	CHECK_STR(plot_axis_label(&ax, 300, b, sizeof(b)), "5 min");
}

static void test_downsample_keeps_extremes(void)
{
	size_t n = 1000000;
	double *x = xmalloc(n * sizeof(double)), *y = xmalloc(n * sizeof(double));
	double *ox = xmalloc(n * sizeof(double)), *oy = xmalloc(n * sizeof(double));
	for (size_t i = 0; i < n; i++) {
		x[i] = (double)i;
		y[i] = (double)(i % 100);
	}
	y[123457] = 1e9;     /* one spike */
	y[765433] = -1e9;    /* one dip */
	x[5] = NAN;          /* skipped */
	size_t m = plot_downsample(x, y, n, 0, (double)n, 800, ox, oy);
	CHECK(m <= 1600 && m >= 800);
	double hi = -INFINITY, lo = INFINITY;
	for (size_t i = 0; i < m; i++) {
		hi = fmax(hi, oy[i]);
		lo = fmin(lo, oy[i]);
		if (i)
			CHECK(ox[i] > ox[i - 1]);   /* still in order */
	}
	CHECK(hi == 1e9 && lo == -1e9);
	free(x);
	free(y);
	free(ox);
	free(oy);
}

static void test_xml_text(void)
{
	struct strbuf sb = STRBUF_INIT;
	plot_add_xml(&sb, "a<b>&\"c'\x01\n\xff\xe2\x80\x94");
	CHECK_STR(strbuf_str(&sb), "a&lt;b&gt;&amp;&quot;c&#39;?\n\xef\xbf\xbd\xe2\x80\x94");
	strbuf_release(&sb);
}

static void test_svg_series_and_markers(void)
{
	double x[3] = { 1, 2, 3 }, y[3] = { 10 * MiB, 11 * MiB, 12 * MiB };
	struct plot_series s = { .name = "PSS <judged>", .key = "pss", .color = "#1f77b4", .x = x, .y = y, .n = 3 };
	struct plot_vline v = { .x = 2, .kind = PLOT_MARK_END, .label = "oom-kill", .cause = "oom-kill" };
	struct plot p = { .id = "t", .title = "t", .x_kind = PLOT_NUMBER, .y_kind = PLOT_BYTES,
	                  .series = &s, .nseries = 1, .vlines = &v, .nvlines = 1 };
	struct strbuf sb = STRBUF_INIT, js = STRBUF_INIT;
	struct plot_stats st;
	plot_svg(&sb, &p, true, &js, &st);
	const char *svg = strbuf_str(&sb);
	CHECK(!strncmp(svg, "<?xml", 5));
	CHECK(strstr(svg, "class=\"lp-series\" data-series=\"pss\""));
	CHECK(strstr(svg, "data-cause=\"oom-kill\""));
	CHECK(strstr(svg, "PSS &lt;judged&gt;"));
	CHECK(!strstr(svg, "<judged>"));
	CHECK_EQ_INT(st.points_in, 3);
	CHECK(!st.downsampled);
	CHECK(strstr(strbuf_str(&js), "\"series\":[{\"name\":\"PSS <judged>\""));
	strbuf_release(&sb);
	strbuf_release(&js);
}

static void test_alloc_sites(void)
{
	struct alloc_site rows[2] = {
		{ "np.concatenate <lambda>", "libnumpy.so", 2.0 * MiB, 300 * MiB },
		{ "malloc", "", 1024, 4096 },
	};
	struct strbuf sb = STRBUF_INIT;
	report_html_add_alloc_sites(&sb, rows, 0);
	CHECK_EQ_INT(sb.len, 0);
	report_html_add_alloc_sites(&sb, rows, 2);
	const char *h = strbuf_str(&sb);
	CHECK(strstr(h, "Top growing allocation sites"));
	CHECK(strstr(h, "np.concatenate &lt;lambda&gt;"));
	CHECK(strstr(h, "+2.00 MiB"));
	CHECK(strstr(h, "300 MiB"));
	int n = 0;
	for (const char *p = h; (p = strstr(p, "class=\"lp-site\"")); p++)
		n++;
	CHECK_EQ_INT(n, 2);
	strbuf_release(&sb);
}

TEST_MAIN("plot", TEST(test_bytes_axis), TEST(test_other_axes), TEST(test_downsample_keeps_extremes),
          TEST(test_xml_text), TEST(test_svg_series_and_markers), TEST(test_alloc_sites))
