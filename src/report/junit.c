/*
 * junit.c — the verdicts as JUnit XML, for CI systems (GitLab, Jenkins,
 * GitHub's test reporters): one <testsuite> with one <testcase> per run, or
 * per trial attempt of a sweep. A testcase fails when its verdict is leak
 * (the message: the verdict sentence and the growth with its 95% interval)
 * or when its run failed (the message: how it ended); an inconclusive or
 * flat run passes, its verdict in <system-out>. A trial with no run yet is
 * skipped.
 *
 * The diagnosis (judge/kinds.h) goes into the failure's message and into
 * the testcase's <properties> (leakproof.diagnosis, .diagnosis_kind,
 * .verdict_judged, .end); the flight recorder's paragraph after an
 * out-of-memory end and the census's growing types with their holders go
 * into the failure's text (into <system-out> when the case passes).
 *
 * Every text from the job (command lines, file names, holders) is escaped
 * for XML, control characters shown as '?'. Times in seconds.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "judge/kinds.h"
#include "report/plot.h"
#include "report/render.h"
#include "judge/sweep.h"

/* Whether the run ended in failure: not "exited 0", and not still running. */
static bool run_failed(const struct run_summary *s, char *outcome, size_t outsz)
{
	report_fmt_outcome(outcome, outsz, &s->run);
	/* an attached job (`leakproof attach`): its exit status is unknown, or
	 * it went on; failed only when the evidence says the OOM killer ended it */
	if (s->run.status == RUN_ENDED || s->run.status == RUN_DETACHED) {
		if (!s->nsegments || s->segments[s->nsegments - 1].cause != CAUSE_OOM_KILL)
			return false;
		snprintf(outcome, outsz, "ended by the OOM killer");
		return true;
	}
	return strcmp(outcome, "exited 0") && strcmp(outcome, "running");
}

/* "leak: memory grows ...; growth +1.90 MiB/step (95% interval 1.80–2.00
 * MiB/step)", "killed by signal 9 (SIGKILL)"; empty when the run passes. */
static void failure_message(struct strbuf *sb, const struct run_summary *s, const enum trial_status *trial_status)
{
	char outcome[96], b[32];
	bool leak = s->a.verdict == VERDICT_LEAK;
	if (leak) {
		strbuf_addf(sb, "leak: %s", s->reason);
		if (render_have_slope(s)) {
			strbuf_addf(sb, "; growth %s%s", render_signed_bytes(b, sizeof(b), s->a.slope), render_x_suffix(s));
			if (isfinite(s->a.slope_low) && isfinite(s->a.slope_high)) {
				strbuf_addstr(sb, " (95% interval ");
				render_range(sb, s->a.slope_low, s->a.slope_high);
				strbuf_addf(sb, "%s)", render_x_suffix(s));
			}
		}
	}
	if (leak && s->kinds && s->kinds->has_diagnosis) {
		strbuf_addstr(sb, "; diagnosis: ");
		strbuf_addstr(sb, s->kinds->diagnosis);
	}
	if (run_failed(s, outcome, sizeof(outcome)))
		strbuf_addf(sb, "%s%s", leak ? "; " : "", outcome);
	else if (trial_status && (*trial_status == TRIAL_OOM || *trial_status == TRIAL_FAILED))
		strbuf_addf(sb, "%strial %s", leak ? "; " : "", trial_status_name(*trial_status));
}

/* What a reader of a failure wants beside its message: the flight
 * recorder's paragraph after an out-of-memory end, the growing types of
 * the census with their holders. Plain lines. */
static void failure_details(struct strbuf *sb, const struct run_summary *s)
{
	if (s->kinds && s->kinds->oom) {
		strbuf_addstr(sb, "\nThe last seconds before the end: ");
		strbuf_addstr(sb, s->kinds->flight);
	}
	if (s->census && s->census->ngrowing) {
		strbuf_addch(sb, '\n');
		census_report_plain(s->census, sb);
	}
}

/* The diagnosis as testcase properties, for tools that show them. */
static void add_properties(struct strbuf *sb, const struct run_summary *s)
{
	const struct run_kinds *k = s->kinds;
	if (!k || (!k->has_diagnosis && !k->oom))
		return;
	strbuf_addstr(sb, "      <properties>\n");
	if (k->has_diagnosis) {
		strbuf_addf(sb, "        <property name=\"leakproof.diagnosis_kind\" value=\"%s\"/>\n",
		            mem_kind_name(k->diagnosis_kind));
		strbuf_addstr(sb, "        <property name=\"leakproof.diagnosis\" value=\"");
		plot_add_xml(sb, k->diagnosis);
		strbuf_addstr(sb, "\"/>\n");
		strbuf_addf(sb, "        <property name=\"leakproof.verdict_judged\" value=\"%s\"/>\n",
		            verdict_name(s->verdict_judged));
	}
	if (k->oom) {
		strbuf_addstr(sb, "        <property name=\"leakproof.end\" value=\"");
		plot_add_xml(sb, cause_name(k->oom_cause));
		strbuf_addstr(sb, "\"/>\n");
	}
	strbuf_addstr(sb, "      </properties>\n");
}

/* One <testcase> for the run of s; name is its label ("run 7", "trial 3"),
 * trial_status its trial's (NULL: a run of its own). Returns 1 when it
 * failed. */
static int add_testcase(struct strbuf *sb, const char *classname, const char *name,
                        const struct run_summary *s, const enum trial_status *trial_status)
{
	struct strbuf cmd = STRBUF_INIT, msg = STRBUF_INIT;
	report_add_command_line(&cmd, s->argv, s->argc, 0);
	failure_message(&msg, s, trial_status);

	strbuf_addstr(sb, "    <testcase classname=\"");
	plot_add_xml(sb, classname);
	strbuf_addstr(sb, "\" name=\"");
	plot_add_xml(sb, name);
	strbuf_addstr(sb, ": ");
	plot_add_xml(sb, strbuf_str(&cmd));
	strbuf_addf(sb, "\" time=\"%.3f\">\n", s->duration_s);
	add_properties(sb, s);
	struct strbuf details = STRBUF_INIT;
	failure_details(&details, s);
	if (msg.len) {
		strbuf_addf(sb, "      <failure type=\"%s\" message=\"",
		            s->a.verdict == VERDICT_LEAK ? "leak" : "failed");
		plot_add_xml(sb, strbuf_str(&msg));
		strbuf_addstr(sb, "\">");
		plot_add_xml(sb, strbuf_str(&msg));
		plot_add_xml(sb, strbuf_str(&details));
		strbuf_addstr(sb, "</failure>\n");
	}
	strbuf_addf(sb, "      <system-out>leakproof run %lld: %s \xe2\x80\x94 ", (long long)s->run.id,
	            verdict_name(s->a.verdict));
	plot_add_xml(sb, s->reason);
	if (s->kinds && s->kinds->has_diagnosis) {
		strbuf_addstr(sb, "\ndiagnosis: ");
		plot_add_xml(sb, s->kinds->diagnosis);
	}
	if (!msg.len)
		plot_add_xml(sb, strbuf_str(&details));
	strbuf_addstr(sb, "</system-out>\n    </testcase>\n");
	strbuf_release(&details);
	int failed = msg.len > 0;
	strbuf_release(&cmd);
	strbuf_release(&msg);
	return failed;
}

/* The document: one <testsuite> named name, around the testcases in body. */
static void add_suite(struct strbuf *sb, const char *name, size_t tests, int failures, size_t skipped,
                      double seconds, const struct strbuf *body)
{
	strbuf_addstr(sb, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"");
	plot_add_xml(sb, name);
	strbuf_addf(sb, "\" tests=\"%zu\" failures=\"%d\" errors=\"0\" skipped=\"%zu\" time=\"%.3f\">\n", tests,
	            failures, skipped, seconds);
	if (body->len)         /* no testcase: an empty, NULL buffer */
		strbuf_add(sb, body->buf, body->len);
	strbuf_addstr(sb, "  </testsuite>\n</testsuites>\n");
}

void report_write_junit(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb)
{
	(void)x;
	char name[64];
	struct strbuf body = STRBUF_INIT;
	snprintf(name, sizeof(name), "run %lld", (long long)s->run.id);
	int failures = add_testcase(&body, "leakproof.run", name, s, NULL);
	char suite[80];
	snprintf(suite, sizeof(suite), "leakproof run %lld", (long long)s->run.id);
	add_suite(sb, suite, 1, failures, 0, s->duration_s, &body);
	strbuf_release(&body);
}

int sweep_write_junit(struct store *st, int64_t sweep_id, struct strbuf *sb)
{
	struct sweep_model m;
	if (sweep_model_open(st, sweep_id, &m) < 0)
		return -1;
	int rc = 0;
	struct strbuf body = STRBUF_INIT;
	int failures = 0;
	size_t skipped = 0;
	double seconds = 0;
	char classname[64];
	snprintf(classname, sizeof(classname), "leakproof.sweep%lld", (long long)m.sw.id);
	for (size_t i = 0; i < m.ntrials && rc == 0; i++) {
		const struct trial_row *t = &m.trials[i];
		char name[64];
		snprintf(name, sizeof(name), t->attempt ? "trial %lld.%lld" : "trial %lld", (long long)t->idx + 1,
		         (long long)t->attempt);
		struct run_summary s;
		int lrc = t->run_id ? run_summary_load(st, t->run_id, -1, &s) : 1;
		if (lrc < 0) {
			rc = -1;
			break;
		}
		if (lrc > 0) {
			strbuf_addf(&body, "    <testcase classname=\"%s\" name=\"%s\" time=\"0\">\n"
			            "      <skipped message=\"no run\"/>\n    </testcase>\n", classname, name);
			skipped++;
			continue;
		}
		failures += add_testcase(&body, classname, name, &s, &t->status);
		seconds += s.duration_s;
		run_summary_release(&s);
	}
	if (rc == 0) {
		char suite[80];
		snprintf(suite, sizeof(suite), "leakproof sweep %lld", (long long)m.sw.id);
		add_suite(sb, suite, m.ntrials, failures, skipped, seconds, &body);
	}
	strbuf_release(&body);
	sweep_model_release(&m);
	return rc;
}
