/*
 * report/wording.c — the words and numbers every renderer says the same
 * way (render.h, and the pieces report.h shares with `leakproof ls`): the
 * command line, durations, outcomes, signed sizes, counts, the projection,
 * ranges, names from the job as each format escapes them, JSON values (null
 * for what is not known, a member that is an object or null). Calls no
 * renderer: renderers call it.
 *
 * Units: bytes, seconds. Functions that take buf return it.
 */
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/placement.h"
#include "report/render.h"
#include "util/jsonw.h"
#include "util/util.h"

static bool shell_safe(const char *s)
{
	if (!*s)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (!isalnum(*p) && !strchr("_@%+=:,./-", *p) && *p < 0x80)
			return false;
	return true;
}

void report_add_command_line(struct strbuf *sb, char *const *argv, size_t argc, size_t max_chars)
{
	size_t start = sb->len;
	for (size_t i = 0; i < argc; i++) {
		if (i)
			strbuf_addch(sb, ' ');
		if (shell_safe(argv[i])) {
			strbuf_addstr(sb, argv[i]);
			continue;
		}
		strbuf_addch(sb, '\'');
		for (const char *p = argv[i]; *p; p++) {
			if (*p == '\'')
				strbuf_addstr(sb, "'\\''");
			else if ((unsigned char)*p < 0x20 || *p == 0x7f)
				strbuf_addch(sb, '?');   /* no control characters on a terminal */
			else
				strbuf_addch(sb, *p);
		}
		strbuf_addch(sb, '\'');
		if (max_chars && sb->len - start > max_chars)
			break;
	}
	if (max_chars && sb->len - start > max_chars) {
		size_t cut = start + (max_chars > 3 ? max_chars - 3 : 0);
		/* Do not cut a UTF-8 sequence in half. */
		while (cut > start && ((unsigned char)sb->buf[cut] & 0xc0) == 0x80)
			cut--;
		sb->len = cut;
		sb->buf[cut] = '\0';
		strbuf_addstr(sb, "...");
	}
}

/* ---- wording --------------------------------------------------------- */

static const char *signal_abbrev(int sig)
{
	static const struct { int sig; const char *name; } names[] = {
		{ 1, "SIGHUP" }, { 2, "SIGINT" }, { 3, "SIGQUIT" }, { 4, "SIGILL" }, { 5, "SIGTRAP" },
		{ 6, "SIGABRT" }, { 7, "SIGBUS" }, { 8, "SIGFPE" }, { 9, "SIGKILL" }, { 10, "SIGUSR1" },
		{ 11, "SIGSEGV" }, { 12, "SIGUSR2" }, { 13, "SIGPIPE" }, { 14, "SIGALRM" },
		{ 15, "SIGTERM" }, { 24, "SIGXCPU" }, { 25, "SIGXFSZ" },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].sig == sig)
			return names[i].name;
	return NULL;
}

bool report_other_judge(const char *verdict, int judge_version)
{
	return verdict && verdict[0] && judge_version != JUDGE_VERSION;
}

void report_add_other_judge_note(struct strbuf *sb, const char *whose, int64_t run_id)
{
	strbuf_addf(sb, "* written when %s ended by another version of the judgment than this leakproof's (%d);"
	            " `leakproof report %lld` judges it again\n", whose, JUDGE_VERSION, (long long)run_id);
}

char *report_fmt_outcome(char *buf, size_t bufsz, const struct run_row *r)
{
	const char *abbrev;
	if (r->ended_at <= 0 || r->status == RUN_RUNNING)
		snprintf(buf, bufsz, "running");
	else if (r->status == RUN_FAILED_TO_START)
		snprintf(buf, bufsz, "failed to start (exit %d)", r->exit_code);
	else if (r->status == RUN_INTERRUPTED)
		snprintf(buf, bufsz, "interrupted");
	else if (r->status == RUN_DETACHED)   /* leakproof attach, told to stop */
		snprintf(buf, bufsz, "detached (leakproof stopped watching; the job went on)");
	else if (r->status == RUN_ENDED)      /* leakproof attach: not its parent */
		snprintf(buf, bufsz, "ended, exit status unknown");
	else if (r->exit_signal && (abbrev = signal_abbrev(r->exit_signal)))
		snprintf(buf, bufsz, "killed by signal %d (%s)", r->exit_signal, abbrev);
	else if (r->exit_signal)
		snprintf(buf, bufsz, "killed by signal %d", r->exit_signal);
	else
		snprintf(buf, bufsz, "exited %d", r->exit_code);
	return buf;
}

const char *render_x_word(const struct run_summary *s)
{
	return strcmp(s->x_unit, "s") ? "step" : "second";
}

const char *render_x_suffix(const struct run_summary *s)
{
	return strcmp(s->x_unit, "s") ? "/step" : "/s";
}

char *render_x_at(char *buf, size_t bufsz, const struct run_summary *s, double x)
{
	if (!strcmp(s->x_unit, "s"))
		return fmt_duration(buf, bufsz, x);
	snprintf(buf, bufsz, "step %.0f", x);
	return buf;
}

char *render_signed_bytes(char *buf, size_t bufsz, double bytes)
{
	char tmp[32];
	fmt_bytes(tmp, sizeof(tmp), bytes);
	snprintf(buf, bufsz, "%s%s", bytes > 0 ? "+" : "", tmp);
	return buf;
}

char *render_count(char *buf, size_t bufsz, double v)
{
	if (!isfinite(v) || v < 0 || v > 1e18) {
		snprintf(buf, bufsz, "?");
		return buf;
	}
	/* Three significant digits: 11,234 -> 11,200. */
	double mag = v >= 1000 ? pow(10, floor(log10(v)) - 2) : 1;
	unsigned long long n = (unsigned long long)(llround(v / mag) * mag);
	char digits[32], out[48];
	int len = snprintf(digits, sizeof(digits), "%llu", n), o = 0;
	for (int i = 0; i < len; i++) {
		if (i && (len - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = digits[i];
	}
	out[o] = '\0';
	snprintf(buf, bufsz, "%s", out);
	return buf;
}

char *render_approx_duration(char *buf, size_t bufsz, double s)
{
	if (!isfinite(s) || s < 0)
		snprintf(buf, bufsz, "?");
	else if (s < 90)
		snprintf(buf, bufsz, "~%.0f s", s);
	else if (s < 90 * 60)
		snprintf(buf, bufsz, "~%.0f min", s / 60);
	else if (s < 48 * 3600)
		snprintf(buf, bufsz, "~%.0f h", s / 3600);
	else
		snprintf(buf, bufsz, "~%.0f days", s / 86400);
	return buf;
}

bool render_has_ends(const struct run_summary *s)
{
	return s->nsegments > 1 ||
	       (s->nsegments == 1 && s->segments[0].cause != CAUSE_NONE && s->segments[0].cause != CAUSE_EXIT);
}

void render_outcome_line(struct strbuf *sb, const struct run_summary *s)
{
	char outcome[96], dur[48];
	report_fmt_outcome(outcome, sizeof(outcome), &s->run);
	fmt_duration(dur, sizeof(dur), s->duration_s);
	if (!strcmp(outcome, "running"))
		strbuf_addf(sb, "running for %s", dur);
	else
		strbuf_addf(sb, "%s after %s", outcome, dur);
	if (s->steps)
		strbuf_addf(sb, ", %zu step%s (%s)", s->steps, s->steps == 1 ? "" : "s",
		            step_source_name(s->run.step_source));
	else
		strbuf_addstr(sb, ", no steps (judged over time)");
	if (s->nsegments > 1)
		strbuf_addf(sb, ", %zu restart%s", s->nsegments - 1, s->nsegments == 2 ? "" : "s");
	if (s->run.lost && s->run.lost[0])
		strbuf_addf(sb, "; PARTIAL: %s", s->run.lost);
}

int render_have_slope(const struct run_summary *s)
{
	/* window_x is 0 when there were too few points to judge. */
	return s->a.points >= 2 && s->a.window_x > 0 && isfinite(s->a.slope);
}

int render_projection(struct strbuf *sb, const struct run_summary *s)
{
	char count[48], approx[48];
	if (s->a.verdict != VERDICT_LEAK || !(s->a.projected_to_limit >= 0) ||
	    !isfinite(s->a.projected_to_limit) || s->limit_bytes <= 0)
		return 0;
	if (!strcmp(s->x_unit, "s")) {
		strbuf_addf(sb, "in %s", render_approx_duration(approx, sizeof(approx), s->a.projected_to_limit));
		return 1;
	}
	strbuf_addf(sb, "in about %s steps", render_count(count, sizeof(count), s->a.projected_to_limit));
	if (s->projected_seconds >= 0)
		strbuf_addf(sb, " (%s)", render_approx_duration(approx, sizeof(approx), s->projected_seconds));
	return 1;
}

double render_top_proc_bytes(const struct run_summary *s)
{
	switch (s->measure) {
	case MEASURE_RSS: return (double)s->top_proc.rss;
	case MEASURE_USS: return (double)s->top_proc.uss;
	case MEASURE_GPU: return (double)s->top_proc.gpu;
	default: return (double)s->top_proc.pss;
	}
}

char *render_change_label(char *buf, size_t bufsz, const struct run_summary *s)
{
	if (strcmp(s->x_unit, "s"))
		snprintf(buf, bufsz, "per-step change");
	else if (s->bin_seconds == RUN_SUMMARY_MIN_BIN_SECONDS)
		snprintf(buf, bufsz, "change per second");
	else
		snprintf(buf, bufsz, "change per %.3g s", s->bin_seconds);
	return buf;
}

void render_add_clean(struct strbuf *sb, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
		strbuf_addch(sb, *p < 0x20 || *p == 0x7f ? '?' : *p);
}

void render_add_clean_between(struct strbuf *sb, const char *before, const char *s, const char *after)
{
	strbuf_addstr(sb, before);
	render_add_clean(sb, s);
	strbuf_addstr(sb, after);
}

void render_add_md_cell(struct strbuf *sb, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '|')
			strbuf_addstr(sb, "\\|");
		else if (*p == '<' && (isalpha(p[1]) || p[1] == '/' || p[1] == '!' || p[1] == '?'))
			strbuf_addstr(sb, "&lt;");
		else if (*p < 0x20 || *p == 0x7f)
			strbuf_addch(sb, ' ');
		else
			strbuf_addch(sb, *p);
	}
}

void render_add_md_code(struct strbuf *sb, const char *s, bool in_table)
{
	strbuf_addch(sb, '`');
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '`')
			strbuf_addch(sb, '\'');
		else if (*p == '|' && in_table)
			strbuf_addstr(sb, "\\|");
		else if (*p < 0x20 || *p == 0x7f)
			strbuf_addch(sb, ' ');
		else
			strbuf_addch(sb, *p);
	}
	strbuf_addch(sb, '`');
}

/* "-3", "+1.5", "2e-05": a number as a spreadsheet reads it, safe to leave
 * unguarded in CSV. */
static bool plain_number(const char *s)
{
	const char *p = s;
	if (*p == '+' || *p == '-')
		p++;
	size_t digits = 0;
	while (isdigit((unsigned char)*p))
		p++, digits++;
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++)
			digits++;
	if (!digits)
		return false;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return false;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return !*p;
}

void render_add_csv_field(struct strbuf *sb, const char *s)
{
	s = s ? s : "";
	bool guard = strchr("=+-@\t\r", *s) && *s && !plain_number(s);
	bool quote = strpbrk(s, ",\"\n\r") != NULL;
	if (quote)
		strbuf_addch(sb, '"');
	if (guard)
		strbuf_addch(sb, '\'');
	for (const char *p = s; *p; p++) {
		if (*p == '"')
			strbuf_addch(sb, '"');
		strbuf_addch(sb, *p);
	}
	if (quote)
		strbuf_addch(sb, '"');
}

void render_range(struct strbuf *sb, double low, double high)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double big = fmax(fabs(low), fabs(high)), div = 1;
	int u = 0;
	while (big >= 1024 && u < 4) {
		big /= 1024;
		div *= 1024;
		u++;
	}
	int prec = u == 0 ? 0 : big < 10 ? 2 : big < 100 ? 1 : 0;
	/* Enough digits that a narrow interval does not read "516–516". */
	for (char lo[32], hi[32]; prec < 3; prec++) {
		snprintf(lo, sizeof(lo), "%.*f", prec, low / div);
		snprintf(hi, sizeof(hi), "%.*f", prec, high / div);
		if (strcmp(lo, hi) || low == high)
			break;
	}
	strbuf_addf(sb, "%.*f\xe2\x80\x93%.*f %s", prec, low / div, prec, high / div, units[u]);
}

bool report_add_placement(struct strbuf *sb, const struct run_row *r)
{
	const struct placement *p = &r->place;
	render_add_clean(sb, r->hostname[0] ? r->hostname : "?");
	if (!r->has_place || !placement_known(p))
		return false;
	if (p->slurm_job_id[0]) {
		render_add_clean_between(sb, " \xc2\xb7 SLURM job ", p->slurm_job_id, "");
		if (p->slurm_array_job_id[0]) {
			render_add_clean_between(sb, " (array ", p->slurm_array_job_id, "_");
			render_add_clean_between(sb, "", p->slurm_array_task_id, ")");
		}
		if (p->slurm_step_id[0])
			render_add_clean_between(sb, ", step ", p->slurm_step_id, "");
	}
	if (p->alloc_mem_bytes) {
		char b[32];
		strbuf_addf(sb, " \xc2\xb7 allocation %s", fmt_bytes(b, sizeof(b), (double)p->alloc_mem_bytes));
	}
	if (p->gpus[0])
		render_add_clean_between(sb, " \xc2\xb7 GPUs ", p->gpus, "");
	if (p->rank >= 0) {
		strbuf_addf(sb, " \xc2\xb7 rank %d of %d", p->rank, p->world_size);
		if (p->node_id >= 0)
			strbuf_addf(sb, " (node %d)", p->node_id);
	}
	return true;
}

const char *render_json_known(const char *s)
{
	return s && *s ? s : NULL;
}

bool render_json_object_or_null(struct json_writer *jw, const char *key, bool have)
{
	if (have)
		jw_object_object(jw, key, false);
	else
		jw_object_null(jw, key);
	return have;
}
