/*
 * judge.c — `leakproof judge`: the leak judgment of a series read on stdin,
 * the same judgment a run's summary makes (core/analyze.h, with the default
 * options), for measurements taken outside `leakproof run` — the pytest
 * plugin (python/leakproof/pytest_plugin.py) calls a function as steps in
 * its own process and hands its memory series to this command.
 *
 * Input: one point per line, "X BYTES" (X the step, BYTES the memory
 * measured after it) or "BYTES" alone (X is then the line's rank, 1, 2, ...);
 * blank lines and lines starting with '#' are skipped. Units: bytes, x in
 * steps. Output: text (the verdict, growth per step with its 95% interval,
 * the per-step change table) or one JSON object.
 */
static const char usage_head[] =
"usage: leakproof judge [options] < SERIES\n"
"\n"
"Judge a memory series read on stdin as a run's summary judges its steps:\n"
"warm-up skipped, Theil-Sen growth per step with its 95% interval,\n"
"Mann-Kendall significance, a floor that must rise, growth that must not\n"
"slow down. One point per line: 'STEP BYTES', or 'BYTES' alone (steps are\n"
"then 1, 2, 3, ...); blank lines and '#' comments are skipped.\n";

static const char usage_tail[] =
"exit status: 0 no leak; 1 leak; 2 inconclusive (too few points, or\n"
"growth not clear either way); 124 for a usage error or malformed input.\n";

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "core/analyze.h"
#include "util/jsonw.h"
#include "util/util.h"

enum { OPT_MIN_GROWTH = 256 };

static const struct option_spec options[] = {
	OPT_VALUE('f', "format", "F", "text (default) or json"),
	OPT_VALUE(OPT_MIN_GROWTH, "min-growth", "SIZE", "growth over the judged window that matters\n"
	                                                "(default 1M)"),
	OPT_HELP(),
	OPT_END(),
};

const struct cmd_usage judge_usage = { "judge", usage_head, options, usage_tail, false };

#define usage_error(...) cmd_usage_error("judge", __VA_ARGS__)

/* What the command line asks for. */
struct judge_args {
	bool json;
	struct analyze_opts opts;
};

static int take_option(void *ctx, int c, const struct options_parse *p)
{
	struct judge_args *a = ctx;
	switch (c) {
	case 'f':
		return cmd_parse_text_or_json("judge", p->value, &a->json);
	case OPT_MIN_GROWTH: {
		uint64_t v;
		if (parse_size(p->value, 0, &v) < 0)
			return LP_EXIT_USAGE;
		a->opts.min_growth_bytes = (double)v;
		return 0;
	}
	default:
		return 0;
	}
}

/* Caps on what stdin may make us hold: 10 million points (160 MB of
 * doubles) and lines of 4 KiB. */
#define MAX_POINTS 10000000
#define MAX_LINE_BYTES 4096

struct series {
	double *x, *y;
	size_t n, cap;
};

static void series_add(struct series *s, double x, double y)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->x = xrealloc(s->x, s->cap * sizeof(double));
		s->y = xrealloc(s->y, s->cap * sizeof(double));
	}
	s->x[s->n] = x;
	s->y[s->n++] = y;
}

/* Parse the whole of one number; false when line holds anything else. */
static bool parse_number(const char *p, const char **end, double *out)
{
	char *e;
	errno = 0;
	*out = strtod(p, &e);
	if (e == p || errno == ERANGE)
		return false;
	*end = e;
	return true;
}

/* Read stdin into s. 0, or -1 with the bad line's number in *bad_line (a
 * line that is not one or two numbers, too long, or past MAX_POINTS). */
static int read_series(FILE *in, struct series *s, size_t *bad_line)
{
	char *line = NULL;
	size_t cap = 0, lineno = 0, rank = 0;
	int rc = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, in)) >= 0) {
		lineno++;
		if (len > MAX_LINE_BYTES || s->n >= MAX_POINTS) {
			rc = -1;
			break;
		}
		const char *p = line + strspn(line, " \t\r\n");
		if (!*p || *p == '#')
			continue;
		double a, b;
		const char *e;
		if (!parse_number(p, &e, &a)) {
			rc = -1;
			break;
		}
		p = e + strspn(e, " \t,");
		rank++;
		if (*p && *p != '\r' && *p != '\n') {
			if (!parse_number(p, &e, &b)) {
				rc = -1;
				break;
			}
			series_add(s, a, b);
		} else {
			series_add(s, (double)rank, a);
			e = p;
		}
		if (e[strspn(e, " \t\r\n")]) {
			rc = -1;
			break;
		}
	}
	free(line);
	if (rc)
		*bad_line = lineno;
	return rc;
}

/* A number in %.17g (the digits judge has always printed), or null. */
static void add_num(struct json_writer *jw, const char *name, double v)
{
	jw_object_key(jw, name);
	if (isfinite(v))
		strbuf_addf(jw->sb, "%.17g", v);
	else
		strbuf_addstr(jw->sb, "null");
}

static void write_json(struct strbuf *sb, const struct analysis *a)
{
	static const char *const qname[5] = { "min", "q1", "median", "q3", "max" };
	struct json_writer jw;
	jw_init_tight(&jw, sb);
	jw_object_begin(&jw, false);
	jw_object_string(&jw, "verdict", verdict_name(a->verdict));
	jw_object_string(&jw, "reason", a->reason);
	jw_object_intmax(&jw, "points", (intmax_t)a->points);
	jw_object_intmax(&jw, "warmup_points", (intmax_t)a->warmup_points);
	add_num(&jw, "warmup_end_x", a->warmup_points ? a->warmup_end_x : NAN);
	add_num(&jw, "growth_bytes_per_step", a->slope);
	add_num(&jw, "growth_low", a->slope_low);
	add_num(&jw, "growth_high", a->slope_high);
	add_num(&jw, "mk_z", a->mk_z);
	add_num(&jw, "mk_p", a->mk_p);
	add_num(&jw, "baseline_bytes", a->baseline_bytes);
	add_num(&jw, "floor_growth_bytes", a->floor_growth_bytes);
	add_num(&jw, "peak_bytes", a->peak_bytes);
	add_num(&jw, "last_bytes", a->last_bytes);
	add_num(&jw, "window_steps", a->window_x);
	add_num(&jw, "window_from", a->points ? a->window_from_x : NAN);
	add_num(&jw, "threshold_bytes", a->threshold_bytes);
	jw_object_object(&jw, "per_step_change", false);
	for (int i = 0; i < 5; i++)
		add_num(&jw, qname[i], a->q[i]);
	jw_end(&jw);
	jw_end(&jw);
	strbuf_addch(sb, '\n');
}

/* "+1.90 MiB" / "-3.10 MiB" / "0 B". */
static char *signed_bytes(char *buf, size_t sz, double v)
{
	if (sz < 2)
		return buf;
	buf[0] = v > 0 ? '+' : v < 0 ? '-' : '\0';
	fmt_bytes(buf + (buf[0] != '\0'), sz - 1, fabs(v));
	return buf;
}

static void write_text(struct strbuf *sb, const struct analysis *a)
{
	static const char *const heads[5] = { "Min", "Q1", "Median", "Q3", "Max" };
	char b1[32], b2[32], b3[32];
	strbuf_addf(sb, "verdict   %s \xe2\x80\x94 %s\n", verdict_name(a->verdict), a->reason);
	strbuf_addf(sb, "points    %zu", a->points);
	if (a->warmup_points)
		strbuf_addf(sb, ", warm-up %zu (judged from step %.0f)", a->warmup_points, a->warmup_end_x);
	else
		strbuf_addstr(sb, ", warm-up none");
	if (a->rate_late > a->rate_early)
		strbuf_addf(sb, ", judged from step %.0f, where the growth bends upward", a->window_from_x);
	strbuf_addch(sb, '\n');
	if (isfinite(a->slope)) {
		strbuf_addf(sb, "growth    %s/step", signed_bytes(b1, sizeof(b1), a->slope));
		if (isfinite(a->slope_low) && isfinite(a->slope_high))
			strbuf_addf(sb, " (95%% interval %s to %s)", signed_bytes(b1, sizeof(b1), a->slope_low),
			            signed_bytes(b2, sizeof(b2), a->slope_high));
		strbuf_addch(sb, '\n');
	}
	if (a->points)
		strbuf_addf(sb, "memory    %s at the start of the window, %s last, %s peak\n",
		            fmt_bytes(b1, sizeof(b1), a->baseline_bytes), fmt_bytes(b2, sizeof(b2), a->last_bytes),
		            fmt_bytes(b3, sizeof(b3), a->peak_bytes));
	for (int i = 0; i < 5; i++)
		if (!isfinite(a->q[i]))
			return;
	strbuf_addf(sb, "%-18s", "per-step change");
	for (int i = 0; i < 5; i++)
		strbuf_addf(sb, "%-11s", heads[i]);
	while (sb->len && sb->buf[sb->len - 1] == ' ')
		sb->buf[--sb->len] = '\0';
	strbuf_addf(sb, "\n%-18s", "");
	for (int i = 0; i < 5; i++)
		strbuf_addf(sb, "%-11s", signed_bytes(b1, sizeof(b1), a->q[i]));
	while (sb->len && sb->buf[sb->len - 1] == ' ')
		sb->buf[--sb->len] = '\0';
	strbuf_addch(sb, '\n');
}

int cmd_judge(int argc, char **argv)
{
	struct judge_args args = { 0 };
	analyze_opts_init(&args.opts);
	struct options_parse p;
	int status = cmd_options_read(&p, &judge_usage, argc, argv, take_option, &args);
	if (status >= 0)
		return status;
	if (p.noperands)
		return usage_error("unexpected argument '%s'; the series is read on stdin", p.operands[0]);

	struct series s = { 0 };
	size_t bad_line = 0;
	if (read_series(stdin, &s, &bad_line) != 0) {
		free(s.x);
		free(s.y);
		error("judge: line %zu of the input is not 'STEP BYTES' or 'BYTES', is over %d bytes, "
		      "or is past %d points", bad_line, MAX_LINE_BYTES, MAX_POINTS);
		return LP_EXIT_USAGE;
	}
	struct analysis a;
	analyze_series(s.x, s.y, s.n, &args.opts, &a);
	free(s.x);
	free(s.y);

	struct strbuf sb = STRBUF_INIT;
	if (args.json)
		write_json(&sb, &a);
	else
		write_text(&sb, &a);
	bool ok = fwrite(sb.buf, 1, sb.len, stdout) == sb.len && fflush(stdout) == 0;
	strbuf_release(&sb);
	if (!ok) {
		error_errno("judge: cannot write the judgment");
		return LP_EXIT_FAILURE;
	}
	return a.verdict == VERDICT_NO_LEAK ? 0 : a.verdict == VERDICT_LEAK ? 1 : 2;
}
