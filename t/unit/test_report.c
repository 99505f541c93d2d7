/*
 * test_report.c — reports made from a store with known series: a leak of
 * 2 MiB per step, a flat series, a leak over time with no steps, a run
 * still going with nothing measured. The JSON is parsed (it must be valid,
 * with no NaN or Infinity) and its fields checked; text, Markdown and CSV
 * are checked for what a reader relies on; and `leakproof report` / `ls`
 * are run for their exit statuses and messages.
 */
#include <ctype.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "report/render.h"
#include "report/report.h"
#include "store/store.h"
#include "util/json.h"
#include "util/util.h"
#include "tap.h"

#define MiB (1024.0 * 1024.0)

static char tmpdir[64];
static char store_path[128];
static int64_t id_leak, id_flat, id_time, id_running, id_hostile;

/* ---- a small JSON checker ----------------------------------------------- */

static const char *json_value(const char *p);

static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

static const char *json_string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	while (*p && *p != '"') {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)p[i]))
						return NULL;
				p += 4;
			} else if (!strchr("\"\\/bfnrt", *p) || !*p) {
				return NULL;
			}
		}
		p++;
	}
	return *p == '"' ? p + 1 : NULL;
}

static const char *json_number(const char *p)
{
	const char *start = p;
	if (*p == '-')
		p++;
	if (!isdigit((unsigned char)*p))
		return NULL;
	if (*p == '0' && isdigit((unsigned char)p[1]))
		return NULL;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return p > start ? p : NULL;
}

static const char *json_value(const char *p)
{
	p = ws(p);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		bool obj = *p == '{';
		p = ws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (obj) {
				if (!(p = json_string(ws(p))))
					return NULL;
				p = ws(p);
				if (*p++ != ':')
					return NULL;
			}
			if (!(p = json_value(p)))
				return NULL;
			p = ws(p);
			if (*p == ',') {
				p++;
				continue;
			}
			return *p == close ? p + 1 : NULL;
		}
	}
	if (*p == '"')
		return json_string(p);
	if (!strncmp(p, "true", 4))
		return p + 4;
	if (!strncmp(p, "false", 5))
		return p + 5;
	if (!strncmp(p, "null", 4))
		return p + 4;
	return json_number(p);
}

static bool json_valid(const char *s)
{
	const char *end = json_value(s);
	return end && *ws(end) == '\0';
}

/* The text after `"key": `, or NULL: the member of the report's own object
 * (one a line, two spaces in) where it has one, so that "verdict" is the
 * report's and not its run's; else the first occurrence. */
static const char *json_field(const char *json, const char *key)
{
	char pat[96];
	snprintf(pat, sizeof(pat), "\n  \"%s\": ", key);
	const char *p = strstr(json, pat);
	if (p)
		return p + strlen(pat);
	p = strstr(json, pat + 3);   /* without the new line and indent */
	return p ? p + strlen(pat + 3) : NULL;
}

static double json_num(const char *json, const char *key)
{
	const char *p = json_field(json, key);
	if (!p || !strncmp(p, "null", 4))
		return NAN;
	return strtod(p, NULL);
}

static bool json_is_null(const char *json, const char *key)
{
	const char *p = json_field(json, key);
	return p && !strncmp(p, "null", 4);
}

static bool json_str_is(const char *json, const char *key, const char *want)
{
	const char *p = json_field(json, key);
	size_t n = strlen(want);
	return p && p[0] == '"' && !strncmp(p + 1, want, n) && p[n + 1] == '"';
}

/* ---- fixtures -------------------------------------------------------------- */

/* Deterministic noise in [-1, 1). */
static double noise(unsigned i)
{
	unsigned x = i * 2654435761u;
	x ^= x >> 13;
	x *= 0x5bd1e995u;
	x ^= x >> 15;
	return (double)(x % 2001) / 1000.0 - 1.0;
}

static struct mem_sample sample_at(double t, double pss)
{
	struct mem_sample s = {
		.t = t, .nprocs = 2, .rss = (uint64_t)(pss * 1.2), .pss = (uint64_t)pss,
		.uss = (uint64_t)(pss * 0.9), .swap = 0, .pss_exact = true,
	};
	return s;
}

static int64_t begin(struct store *st, const char *cmd, uint64_t limit, const char *limit_source)
{
	struct run_begin rb = {
		.started_at = 1700000000.0, .command_json = cmd, .cwd = "/home/u/proj", .hostname = "h",
		.measure = MEASURE_PSS, .interval_ns = 100000000, .limit_bytes = limit,
		.limit_source = limit_source, .mem_total_bytes = 16ULL << 30, .cgroup_mode = "none",
	};
	return store_run_begin(st, &rb);
}

static void end(struct store *st, int64_t id, double duration, int64_t steps, enum step_source src)
{
	struct run_end re = {
		.ended_at = 1700000000.0 + duration, .exit_code = 0, .status = RUN_DONE,
		.step_source = src, .steps = steps, .bad_lines = 3, .long_lines = 1,
	};
	store_run_end(st, id, &re);
}

static void build_store(void)
{
	struct store *st = store_open(store_path);
	if (!st) {
		fprintf(stderr, "cannot build the store\n");
		exit(1);
	}

	/* 1: 2 MiB per step after a steep 10-step warm-up, 10 steps/s,
	 * with samples between steps. */
	id_leak = begin(st, "[\"python3\", \"train.py\", \"--name\", \"it's\"]", 8ULL << 30, "max-mem");
	for (int i = 1; i <= 200; i++) {
		double t = i * 0.1;
		double y = 100 * MiB + (i < 10 ? i * 8 * MiB : 80 * MiB + (i - 10) * 2 * MiB) + noise((unsigned)i) * 64 * 1024;
		struct step_rec r = { .step = i, .epoch = i / 100, .mem = sample_at(t, y) };
		store_add_step(st, id_leak, &r);
		struct mem_sample s = sample_at(t - 0.05, y - MiB);
		store_add_sample(st, id_leak, &s);
	}
	store_add_proc_sample(st, id_leak, 10, 1234, 1, "python3", 600 << 20, 500 << 20, 400 << 20, 0, 0);
	store_add_result(st, id_leak, "accuracy", 0.91);
	store_add_result(st, id_leak, "loss", 0.125);
	store_add_event(st, id_leak, 5.0, "mark", "eval \"start\"\n");
	store_add_event(st, id_leak, 6.0, "warning", "bad byte \xff here");
	end(st, id_leak, 20.5, 200, STEP_SOURCE_CHANNEL);

	/* 2: flat at 500 MiB with noise. */
	id_flat = begin(st, "[\"./flat\"]", 0, NULL);
	for (int i = 1; i <= 300; i++) {
		struct step_rec r = { .step = i, .epoch = -1,
		                      .mem = sample_at(i * 0.5, 500 * MiB + noise((unsigned)i + 7) * MiB) };
		store_add_step(st, id_flat, &r);
	}
	end(st, id_flat, 150, 300, STEP_SOURCE_REGEX);

	/* 3: no steps; 100 KiB/s over 300 s sampled at 10 Hz. */
	id_time = begin(st, "[\"server\"]", 1ULL << 30, "cgroup");
	for (int i = 0; i < 3000; i++) {
		double t = i * 0.1;
		struct mem_sample s = sample_at(t, 200 * MiB + t * 100 * 1024 + noise((unsigned)i) * 32 * 1024);
		store_add_sample(st, id_time, &s);
	}
	end(st, id_time, 300, 0, STEP_SOURCE_NONE);

	/* 4: still running, nothing measured yet. */
	id_running = begin(st, "not json", 0, NULL);

	/* 5: a hostile job, and its supervisor killed (no end: steps, no
	 * source written). */
	id_hostile = begin(st, "[\"sh\", \"-c\", \"a|b <script>x</script>\"]", 0, NULL);
	for (int i = 1; i <= 30; i++) {
		struct step_rec r = { .step = i, .epoch = -1, .mem = sample_at(i * 0.1, 100 * MiB) };
		store_add_step(st, id_hostile, &r);
	}
	store_add_proc_sample(st, id_hostile, 1, 99, 1, "<img src=x>|", 1 << 20, 1 << 20, 1 << 20, 0, 0);
	store_add_result(st, id_hostile, "r|<b>", 1.0);
	store_close(st);
}

static char *render(int64_t id, int measure, enum report_format fmt, struct run_summary *keep)
{
	struct store *st = store_open_readonly(store_path);
	struct run_summary s;
	char *buf = NULL;
	size_t len = 0;
	if (!st)
		return NULL;
	if (run_summary_load(st, id, measure, &s) == 0) {
		FILE *f = open_memstream(&buf, &len);
		if (report_write(&s, fmt, f) < 0)
			fprintf(stderr, "report_write failed\n");
		fclose(f);
		if (keep)
			*keep = s;
		else
			run_summary_release(&s);
	}
	store_close(st);
	return buf;
}

static bool no_nan_inf(const char *s)
{
	for (const char *p = s; *p; p++)
		if (!strncasecmp(p, "nan", 3) || !strncasecmp(p, "inf", 3))
			return false;
	return true;
}

/* ---- tests ----------------------------------------------------------------- */

static void test_format_parse(void)
{
	enum report_format f;
	CHECK_EQ_INT(report_format_parse("json", &f), 0);
	CHECK_EQ_INT(f, REPORT_JSON);
	CHECK_EQ_INT(report_format_parse("markdown", &f), 0);
	CHECK_EQ_INT(f, REPORT_MD);
	CHECK_EQ_INT(report_format_parse("csv", &f), 0);
	CHECK_EQ_INT(f, REPORT_CSV);
	CHECK_EQ_INT(report_format_parse("html", &f), 0);
	CHECK_EQ_INT(f, REPORT_HTML);
	CHECK_EQ_INT(report_format_parse("junit", &f), 0);
	CHECK_EQ_INT(f, REPORT_JUNIT);
	CHECK_EQ_INT(report_format_parse("pdf", &f), -1);
}

static void test_json_leak(void)
{
	struct run_summary s;
	char *j = render(id_leak, -1, REPORT_JSON, &s);
	CHECK(j != NULL);
	if (!j)
		return;
	CHECK(json_valid(j));
	CHECK(no_nan_inf(j));
	CHECK(json_str_is(j, "verdict", "leak"));
	CHECK(json_str_is(j, "measure", "pss"));
	CHECK(json_str_is(j, "x_unit", "step"));
	CHECK_NEAR(json_num(j, "growth_bytes_per_step"), 2 * MiB, 0.05 * MiB);
	const char *iv = json_field(j, "growth_interval_bytes_per_step");
	double lo = 0, hi = 0;
	CHECK(iv && sscanf(iv, "[%lf, %lf]", &lo, &hi) == 2);
	CHECK(lo <= 2 * MiB + 0.05 * MiB && hi >= 2 * MiB - 0.05 * MiB && lo <= hi);
	CHECK_EQ_INT(json_num(j, "steps"), 200);
	CHECK_NEAR(json_num(j, "steps_per_second"), 10, 0.01);
	CHECK(json_num(j, "warmup_steps") >= 5 && json_num(j, "warmup_steps") <= 100);
	/* Peak: the highest step (samples sit 1 MiB lower). */
	CHECK_NEAR(json_num(j, "peak_bytes"), 100 * MiB + 80 * MiB + 190 * 2 * MiB, 0.1 * MiB);
	CHECK_NEAR(json_num(j, "limit_bytes"), 8.0 * 1024 * MiB, 1);
	CHECK(json_str_is(j, "limit_source", "max-mem"));
	double proj = json_num(j, "projected_steps_to_limit");
	CHECK_NEAR(proj, (8.0 * 1024 * MiB - s.a.last_bytes) / s.a.slope, 1);
	CHECK_NEAR(json_num(j, "projected_seconds_to_limit"), proj / 10, proj / 1000);
	CHECK(json_num(j, "mann_kendall_p") < 0.001);
	CHECK_NEAR(json_num(j, "duration_seconds"), 20.5, 1e-6);
	CHECK_EQ_INT(json_num(j, "channel_bad_lines"), 3);
	CHECK_EQ_INT(json_num(j, "channel_long_lines"), 1);
	const char *q = json_field(j, "step_change_quantiles_bytes");
	double qs[5];
	CHECK(q && sscanf(q, "[%lf, %lf, %lf, %lf, %lf]", &qs[0], &qs[1], &qs[2], &qs[3], &qs[4]) == 5);
	CHECK_NEAR(qs[2], 2 * MiB, 0.1 * MiB);
	CHECK(qs[0] <= qs[1] && qs[1] <= qs[2] && qs[2] <= qs[3] && qs[3] <= qs[4]);
	CHECK(strstr(j, "\"results\": {\"accuracy\": 0.91, \"loss\": 0.125}") != NULL);
	CHECK(strstr(j, "\"command\": [\"python3\", \"train.py\", \"--name\", \"it's\"]") != NULL);
	CHECK(strstr(j, "\"detail\": \"eval \\\"start\\\"\\n\"") != NULL);
	CHECK(strstr(j, "bad byte \\ufffd here") != NULL);   /* invalid UTF-8 made valid */
	CHECK_EQ_INT(json_num(j, "exit_code"), 0);
	CHECK(json_is_null(j, "exit_signal"));
	CHECK(json_str_is(j, "status", "done"));
	CHECK(json_str_is(j, "step_source", "channel"));
	CHECK(strstr(j, "\"top_process\": {\"pid\": 1234") != NULL);
	CHECK(strstr(j, "\"kind\": \"mark\"") != NULL);
	run_summary_release(&s);
	free(j);
}

static void test_json_flat(void)
{
	char *j = render(id_flat, -1, REPORT_JSON, NULL);
	CHECK(j != NULL);
	if (!j)
		return;
	CHECK(json_valid(j));
	CHECK(no_nan_inf(j));
	CHECK(json_str_is(j, "verdict", "no-leak"));
	CHECK(json_is_null(j, "projected_steps_to_limit"));
	CHECK(fabs(json_num(j, "growth_bytes_per_step")) < 0.05 * MiB);
	CHECK_NEAR(json_num(j, "steps_per_second"), 2, 0.01);
	/* No limit recorded: the machine's memory. */
	CHECK(json_str_is(j, "limit_source", "machine"));
	CHECK_NEAR(json_num(j, "limit_bytes"), 16.0 * 1024 * MiB, 1);
	CHECK(json_str_is(j, "step_source", "regex"));
	CHECK(json_is_null(j, "top_process"));
	CHECK(strstr(j, "\"results\": {}") != NULL);
	free(j);
}

static void test_json_over_time(void)
{
	char *j = render(id_time, -1, REPORT_JSON, NULL);
	CHECK(j != NULL);
	if (!j)
		return;
	CHECK(json_valid(j));
	CHECK(no_nan_inf(j));
	CHECK(json_str_is(j, "x_unit", "s"));
	CHECK(json_str_is(j, "verdict", "leak"));
	CHECK_NEAR(json_num(j, "bin_seconds"), 1, 1e-9);
	CHECK_EQ_INT(json_num(j, "points"), 300);
	CHECK_NEAR(json_num(j, "growth_bytes_per_step"), 100 * 1024, 3 * 1024);
	CHECK_EQ_INT(json_num(j, "steps"), 0);
	CHECK(json_is_null(j, "steps_per_second"));
	CHECK(json_str_is(j, "limit_source", "cgroup"));
	/* x is seconds: the projection is in seconds too. */
	CHECK_NEAR(json_num(j, "projected_steps_to_limit"), json_num(j, "projected_seconds_to_limit"), 1e-6);
	free(j);
}

static void test_json_running_empty(void)
{
	char *j = render(id_running, -1, REPORT_JSON, NULL);
	CHECK(j != NULL);
	if (!j)
		return;
	CHECK(json_valid(j));
	CHECK(no_nan_inf(j));
	CHECK(json_str_is(j, "verdict", "inconclusive"));
	CHECK(json_str_is(j, "status", "running"));
	CHECK(json_is_null(j, "exit_code"));
	CHECK(json_is_null(j, "ended_at"));
	CHECK(json_is_null(j, "growth_bytes_per_step"));
	CHECK(json_is_null(j, "mann_kendall_p"));
	CHECK(strstr(j, "\"command\": [\"not json\"]") != NULL);   /* shown as it is */
	CHECK(strstr(j, "no pss memory was recorded") != NULL);
	free(j);

	/* Judged by a measure that was never sampled. */
	j = render(id_leak, MEASURE_GPU, REPORT_JSON, NULL);
	CHECK(j && json_valid(j) && no_nan_inf(j));
	CHECK(j && json_str_is(j, "measure", "gpu"));
	CHECK(j && json_str_is(j, "verdict", "inconclusive"));
	CHECK(j && strstr(j, "no gpu memory was recorded") != NULL);
	free(j);
}

static void test_text(void)
{
	char *t = render(id_leak, -1, REPORT_TEXT, NULL);
	CHECK(t != NULL);
	if (!t)
		return;
	char want[64];
	snprintf(want, sizeof(want), "leakproof: run %lld: python3 train.py --name 'it'\\''s' ", (long long)id_leak);
	CHECK(!strncmp(t, want, strlen(want)));
	CHECK(strstr(t, "exited 0 after 20.5 s, 200 steps (channel)") != NULL);
	CHECK(strstr(t, "  verdict   leak \xe2\x80\x94 memory grows") != NULL);
	CHECK(strstr(t, "  growth    +2.00 MiB/step (95% interval ") != NULL);
	CHECK(strstr(t, "measure pss") != NULL);
	CHECK(strstr(t, "  warm-up   ended at step ") != NULL);
	CHECK(strstr(t, "rate  10 steps/s (median)") != NULL);
	CHECK(strstr(t, "at this rate reaches 8.00 GiB (--max-mem) in about ") != NULL);
	CHECK(strstr(t, "  per-step change   min") != NULL);
	CHECK(strstr(t, "  channel   3 malformed lines ignored, 1 too long") != NULL);
	CHECK(strstr(t, "results   accuracy=0.91 loss=0.125") != NULL);
	CHECK(strstr(t, "  most memory: pid 1234 (python3) 500 MiB") != NULL);
	free(t);

	t = render(id_flat, -1, REPORT_TEXT, NULL);
	CHECK(t && strstr(t, "  verdict   no-leak \xe2\x80\x94 ") != NULL);
	CHECK(t && strstr(t, "at this rate") == NULL);   /* no projection when flat */
	CHECK(t && strstr(t, "the peak is") != NULL);
	free(t);

	t = render(id_time, -1, REPORT_TEXT, NULL);
	CHECK(t && strstr(t, "no steps (judged over time)") != NULL);
	CHECK(t && strstr(t, "per second") != NULL);
	CHECK(t && strstr(t, "KiB/s (95% interval") != NULL);
	CHECK(t && strstr(t, "per step") == NULL);
	CHECK(t && strstr(t, "change per second") != NULL);
	free(t);

	t = render(id_running, -1, REPORT_TEXT, NULL);
	CHECK(t && strstr(t, "running for") != NULL);
	CHECK(t && strstr(t, "inconclusive") != NULL);
	free(t);
}

static void test_markdown(void)
{
	char *m = render(id_leak, -1, REPORT_MD, NULL);
	CHECK(m != NULL);
	if (!m)
		return;
	CHECK(strstr(m, "| Min | Q1 | Median | Q3 | Max | steps/s |") != NULL);
	CHECK(strstr(m, "|---:|---:|---:|---:|---:|---:|") != NULL);
	CHECK(strstr(m, "| Verdict | **leak**") != NULL);
	CHECK(strstr(m, "| 10 |\n") != NULL);   /* steps/s closes the row */
	CHECK(strstr(m, "`python3 train.py --name 'it'\\''s'`") != NULL);
	/* a run without growth kinds or census: nothing of them */
	CHECK(strstr(m, "Growth kinds") == NULL && strstr(m, "Census") == NULL);
	free(m);
}

/* Text from the job cannot split a Markdown cell or open raw HTML. */
static void test_markdown_escapes(void)
{
	char *m = render(id_hostile, -1, REPORT_MD, NULL);
	CHECK(m != NULL);
	if (!m)
		return;
	/* '<' opens HTML only outside code: the command and the result name
	 * are code spans, the process name is text */
	CHECK(strstr(m, "<img") == NULL);
	CHECK(strstr(m, "`sh -c 'a|b <script>x</script>'`") != NULL);
	CHECK(strstr(m, "(&lt;img src=x>\\|)") != NULL);
	CHECK(strstr(m, "| Result `r\\|<b>` |") != NULL);
	/* every table row still has its two cells */
	for (const char *l = m; (l = strstr(l, "\n| ")); l++) {
		int bars = 0;
		for (const char *p = l + 1; *p && *p != '\n'; p++)
			bars += *p == '|' && p[-1] != '\\';
		CHECK(bars == 3 || bars == 7);
	}
	/* the supervisor was killed: the steps still name their source */
	CHECK(strstr(m, "30 steps (channel)") != NULL);
	free(m);

	struct strbuf sb = STRBUF_INIT;
	render_add_md_cell(&sb, "p < 0.001 | <a href=x> </b> <!-- x");
	CHECK_STR(strbuf_str(&sb), "p < 0.001 \\| &lt;a href=x> &lt;/b> &lt;!-- x");
	strbuf_reset(&sb);
	render_add_md_code(&sb, "a`b|c", true);
	CHECK_STR(strbuf_str(&sb), "`a'b\\|c`");
	strbuf_reset(&sb);
	render_add_md_code(&sb, "a`b|c", false);
	CHECK_STR(strbuf_str(&sb), "`a'b|c`");
	strbuf_release(&sb);
}

/* CSV cells that a spreadsheet would run as a formula get an apostrophe;
 * numbers, even signed, are left alone. */
static void test_csv_field(void)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "adam", "adam" }, { "-3", "-3" }, { "+1.5", "+1.5" }, { "-2e-05", "-2e-05" },
		{ "=1+1", "'=1+1" }, { "+cmd", "'+cmd" }, { "-x", "'-x" }, { "@SUM(A1)", "'@SUM(A1)" },
		{ "\tx", "'\tx" }, { "\rx", "\"'\rx\"" }, { "=HYPERLINK(\"a\",1)", "\"'=HYPERLINK(\"\"a\"\",1)\"" },
		{ "a,b", "\"a,b\"" }, { "-", "'-" }, { "", "" }, { "-inf", "'-inf" },
	};
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		strbuf_reset(&sb);
		render_add_csv_field(&sb, cases[i].in);
		CHECK_STR(strbuf_str(&sb), cases[i].out);
	}
	strbuf_release(&sb);
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* JUnit XML: a leak is a failed testcase with the verdict and the growth,
 * a flat run passes; the command's quote is escaped. (t/e2e parses it.) */
static void test_junit(void)
{
	char *leak = render(id_leak, -1, REPORT_JUNIT, NULL);
	char *flat = render(id_flat, -1, REPORT_JUNIT, NULL);
	CHECK(leak != NULL && flat != NULL);
	if (!leak || !flat)
		goto out;
	CHECK(!strncmp(leak, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n", 52));
	CHECK(strstr(leak, "tests=\"1\" failures=\"1\"") != NULL);
	CHECK(strstr(leak, "<failure type=\"leak\" message=\"leak: ") != NULL);
	CHECK(strstr(leak, "growth +2.00 MiB/step (95% interval ") != NULL);
	CHECK(strstr(leak, "&#39;") != NULL);          /* it's, in the command line */
	CHECK(strstr(leak, "it's") == NULL);
	CHECK(strstr(flat, "failures=\"0\"") != NULL);
	CHECK(strstr(flat, "<failure") == NULL);
	CHECK(strstr(flat, "<system-out>leakproof run") != NULL);
	CHECK(strstr(flat, "</testsuite>\n</testsuites>\n") != NULL);
	CHECK(strstr(leak, "<properties>") == NULL && strstr(leak, "diagnosis") == NULL);   /* no kinds */
out:
	free(leak);
	free(flat);
}

static void test_csv(void)
{
	char *c = render(id_leak, -1, REPORT_CSV, NULL);
	CHECK(c != NULL);
	if (!c)
		return;
	CHECK(!strncmp(c, "step,epoch,t,rss,pss,uss,swap,cgroup,gpu\n", 41));
	CHECK_EQ_INT(count_lines(c), 201);
	CHECK(strstr(c, "\n1,0,0.100000,") != NULL);
	CHECK(strstr(c, "\n200,2,20.000000,") != NULL);
	/* cgroup and gpu not measured: empty fields. */
	CHECK(strstr(c, ",0,,\n") != NULL);
	free(c);

	c = render(id_flat, -1, REPORT_CSV, NULL);
	CHECK(c && strstr(c, "\n1,,0.500000,") != NULL);   /* epoch unknown */
	free(c);

	/* No steps: one row per sample, step and epoch empty. */
	c = render(id_time, -1, REPORT_CSV, NULL);
	CHECK(c && count_lines(c) == 3001);
	CHECK(c && strstr(c, "\n,,0.000000,") != NULL);
	free(c);
}

static void test_command_parsing(void)
{
	char **argv;
	size_t argc;
	run_command_parse("[\"a b\", \"\\u00e9\\ud83d\\ude00\", \"x\\\\y\", \"\"]", &argv, &argc);
	CHECK_EQ_INT(argc, 4);
	if (argc == 4) {
		CHECK_STR(argv[0], "a b");
		CHECK_STR(argv[1], "\xc3\xa9\xf0\x9f\x98\x80");
		CHECK_STR(argv[2], "x\\y");
		CHECK_STR(argv[3], "");
		CHECK(argv[4] == NULL);
	}
	struct strbuf sb = STRBUF_INIT;
	report_add_command_line(&sb, argv, argc, 0);
	CHECK_STR(strbuf_str(&sb), "'a b' \xc3\xa9\xf0\x9f\x98\x80 'x\\y' ''");
	run_argv_free(argv, argc);

	run_command_parse("[]", &argv, &argc);
	CHECK_EQ_INT(argc, 0);
	run_argv_free(argv, argc);
	run_command_parse("[\"unterminated", &argv, &argc);
	CHECK_EQ_INT(argc, 1);
	CHECK_STR(argv[0], "[\"unterminated");
	run_argv_free(argv, argc);

	/* Long commands are cut, with "...". */
	char *long_argv[] = { (char *)"python3", (char *)"a-very-long-script-name-that-goes-on-and-on.py", NULL };
	strbuf_reset(&sb);
	report_add_command_line(&sb, long_argv, 2, 20);
	CHECK_STR(strbuf_str(&sb), "python3 a-very-lo...");

	strbuf_reset(&sb);
	strbuf_add_json_str(&sb, "ok \x01 \xc3\xa9 \xc3 \"q\"");
	CHECK_STR(strbuf_str(&sb), "\"ok \\u0001 \xc3\xa9 \\ufffd \\\"q\\\"\"");
	strbuf_reset(&sb);
	json_add_number(&sb, NAN);
	strbuf_addch(&sb, ' ');
	json_add_number(&sb, INFINITY);
	strbuf_addch(&sb, ' ');
	json_add_number(&sb, 0.1);
	strbuf_addch(&sb, ' ');
	json_add_number(&sb, -0.0);
	strbuf_addch(&sb, ' ');
	json_add_number(&sb, 1700000000.25);
	CHECK_STR(strbuf_str(&sb), "null null 0.1 0 1700000000.25");
	strbuf_release(&sb);

	char buf[64];
	CHECK_STR(fmt_duration(buf, sizeof(buf), 42.14), "42.1 s");
	CHECK_STR(fmt_duration(buf, sizeof(buf), 725), "12 min 5 s");
	CHECK_STR(fmt_duration(buf, sizeof(buf), 3 * 3600 + 120), "3 h 2 min");
}

/* ---- the commands ---------------------------------------------------------- */

static int run_cmd(int (*fn)(int, char **), const char *a0, const char *a1, const char *a2,
                   const char *a3, const char *a4, const char *a5, const char **err)
{
	char *argv[] = { (char *)a0, (char *)a1, (char *)a2, (char *)a3, (char *)a4, (char *)a5, NULL };
	int argc = 0;
	while (argv[argc])
		argc++;
	capture_begin();
	int rc = fn(argc, argv);
	*err = capture_end();
	return rc;
}

static void test_cmd_report(void)
{
	const char *err;
	char out[160], idarg[32];
	snprintf(out, sizeof(out), "%s/out.json", tmpdir);

	CHECK_EQ_INT(run_cmd(cmd_report, "report", "--bogus", NULL, NULL, NULL, NULL, &err), LP_EXIT_USAGE);
	CHECK(strstr(err, "unknown option '--bogus'") && strstr(err, "Try 'leakproof report --help'"));
	CHECK_EQ_INT(run_cmd(cmd_report, "report", "--format", "xml", NULL, NULL, NULL, &err), LP_EXIT_USAGE);
	CHECK_EQ_INT(run_cmd(cmd_report, "report", "seven", NULL, NULL, NULL, NULL, &err), LP_EXIT_USAGE);
	CHECK_EQ_INT(run_cmd(cmd_report, "report", "--measure", "vms", NULL, NULL, NULL, &err), LP_EXIT_USAGE);
	CHECK_EQ_INT(run_cmd(cmd_report, "report", "-s", store_path, "1", "2", NULL, &err), LP_EXIT_USAGE);

	CHECK_EQ_INT(run_cmd(cmd_report, "report", "42", "--store", store_path, NULL, NULL, &err), 1);
	char want[256];
	snprintf(want, sizeof(want), "leakproof: no run 42 in store '%s'\n", store_path);
	CHECK_STR(err, want);

	char missing[160];
	snprintf(missing, sizeof(missing), "%s/none/x.db", tmpdir);
	CHECK_EQ_INT(run_cmd(cmd_report, "report", "--store", missing, NULL, NULL, NULL, &err), 1);
	CHECK(strstr(err, "cannot open store '") && strstr(err, "No such file"));
	CHECK(access(missing, F_OK) != 0);   /* reading does not create a store */

	snprintf(idarg, sizeof(idarg), "%lld", (long long)id_leak);
	/* The store from the environment. */
	setenv("LEAKPROOF_STORE", store_path, 1);
	CHECK_EQ_INT(run_cmd(cmd_report, "report", idarg, "-f", "json", "-o", out, &err), 0);
	unsetenv("LEAKPROOF_STORE");
	CHECK_STR(err, "");
	static char buf[65536];
	CHECK(read_file_buf(out, buf, sizeof(buf)) > 0);
	CHECK(json_valid(buf));
	CHECK(json_str_is(buf, "verdict", "leak"));

	/* --help goes to stdout, and exits 0. */
	fflush(stdout);
	int saved = dup(1), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 1);
	close(fd);
	int rc = run_cmd(cmd_report, "report", "--help", NULL, NULL, NULL, NULL, &err);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	CHECK_EQ_INT(rc, 0);
	CHECK(read_file_buf(out, buf, sizeof(buf)) > 0 && !strncmp(buf, "usage: leakproof report", 23));
}

static void test_cmd_ls(void)
{
	const char *err;
	char out[160];
	snprintf(out, sizeof(out), "%s/ls.json", tmpdir);

	CHECK_EQ_INT(run_cmd(cmd_ls, "ls", "--format", "yaml", NULL, NULL, NULL, &err), LP_EXIT_USAGE);
	CHECK(strstr(err, "unknown --format 'yaml'") && strstr(err, "Try 'leakproof ls --help'"));
	CHECK_EQ_INT(run_cmd(cmd_ls, "ls", "extra", NULL, NULL, NULL, NULL, &err), LP_EXIT_USAGE);

	/* stdout into a file for the listing. */
	fflush(stdout);
	int saved = dup(1), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 1);
	close(fd);
	int rc_json = run_cmd(cmd_ls, "ls", "--store", store_path, "--format", "json", NULL, &err);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	CHECK_EQ_INT(rc_json, 0);
	static char buf[16384];
	CHECK(read_file_buf(out, buf, sizeof(buf)) > 0);
	CHECK(json_valid(buf));
	CHECK(no_nan_inf(buf));
	/* Newest first. */
	char first[32];
	snprintf(first, sizeof(first), "[\n  {\"id\": %lld,", (long long)id_hostile);
	CHECK(!strncmp(buf, first, strlen(first)));
	CHECK(strstr(buf, "\"status\": \"running\"") != NULL);

	fflush(stdout);
	saved = dup(1);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 1);
	close(fd);
	int rc_text = run_cmd(cmd_ls, "ls", "-s", store_path, NULL, NULL, NULL, &err);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	CHECK_EQ_INT(rc_text, 0);
	CHECK(read_file_buf(out, buf, sizeof(buf)) > 0);
	CHECK(strstr(buf, "VERDICT") != NULL);
	CHECK(strstr(buf, "python3 train.py --name 'it'\\''s'") != NULL);
	CHECK(strstr(buf, "exit 0") != NULL);
	CHECK_EQ_INT(count_lines(buf), 6);

	char missing[160];
	snprintf(missing, sizeof(missing), "%s/none.db", tmpdir);
	CHECK_EQ_INT(run_cmd(cmd_ls, "ls", "--store", missing, NULL, NULL, NULL, &err), 1);
	CHECK(strstr(err, "cannot open store") != NULL);
}

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
}

/* Runs before main(): the store every test reads. */
__attribute__((constructor)) static void setup(void)
{
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/lp-test-report-XXXXXX", base && *base && strlen(base) < 40 ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(cleanup);
	snprintf(store_path, sizeof(store_path), "%s/store.db", tmpdir);
	unsetenv("LEAKPROOF_STORE");
	build_store();
}

TEST_MAIN("report",
	TEST(test_format_parse),
	TEST(test_json_leak),
	TEST(test_json_flat),
	TEST(test_json_over_time),
	TEST(test_json_running_empty),
	TEST(test_text),
	TEST(test_markdown), TEST(test_markdown_escapes), TEST(test_csv_field),
	TEST(test_csv),
	TEST(test_junit),
	TEST(test_command_parsing),
	TEST(test_cmd_report),
	TEST(test_cmd_ls))
