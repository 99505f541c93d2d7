/*
 * ls.c — `leakproof ls`: the runs in the store, newest first, one line
 * each, with the verdict recorded when the run ended (`leakproof report RUN`
 * judges again and says why).
 */
static const char usage_head[] =
"usage: leakproof ls [options]\n"
"\n"
"List the runs in the store, newest first: id, start time, duration, how the\n"
"job ended, steps, peak memory (under the run's measure), verdict, where it\n"
"ran (the host, then its SLURM job: JOB, JOB_TASK for an array task, .STEP\n"
"for an srun step, and rN for rank N of a job of several), command. The\n"
"verdict is the one stored when the run ended; a star marks one that another\n"
"version of leakproof's judgment wrote (`leakproof report ID` judges again).\n";

static const char usage_tail[] =
"exit status: 0; 1 when the store does not exist or cannot be read; 124 for\n"
"a usage error.\n";

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd/cmd.h"
#include "judge/summary.h"
#include "platform/placement.h"
#include "report/report.h"
#include "store/store.h"
#include "util/jsonw.h"
#include "util/util.h"

static const struct option_spec options[] = {
	OPT_VALUE('f', "format", "F", "text (default) or json (an array of objects)"),
	CMD_OPT_STORE,
	OPT_HELP(),
	OPT_END(),
};

const struct cmd_usage ls_usage = { "ls", usage_head, options, usage_tail, false };

/* ls's options are --format and --store alone (ctx: a struct listing_args). */
static int take_option(void *ctx, int c, const struct options_parse *p)
{
	return cmd_listing_option("ls", ctx, c, p->value);
}

#define COMMAND_MAX_CHARS 60

static double run_duration(const struct run_row *r)
{
	double end = r->ended_at > 0 ? r->ended_at : wall_seconds();
	return end > r->started_at ? end - r->started_at : 0;
}

/* The STATUS column: "exit 0", "SIGKILL", "running", ... */
static void short_status(char *buf, size_t sz, const struct run_row *r)
{
	if (r->ended_at <= 0 || r->status == RUN_RUNNING)
		snprintf(buf, sz, "running");
	else if (r->status == RUN_FAILED_TO_START)
		snprintf(buf, sz, "no start");
	else if (r->status == RUN_INTERRUPTED)
		snprintf(buf, sz, "interrupted");
	else if (r->status == RUN_DETACHED || r->status == RUN_ENDED)
		snprintf(buf, sz, "%s", run_status_name(r->status));   /* attached: its status is not known */
	else if (r->exit_signal)
		snprintf(buf, sz, "signal %d", r->exit_signal);
	else
		snprintf(buf, sz, "exit %d", r->exit_code);
	if (r->lost[0] && strlen(buf) + 10 < sz)
		strcat(buf, ", partial");   /* rows were lost: see `leakproof report` */
}

/* The HOST column: "vm", "vm 12", "vm 10_3", "vm 12.0 r1" (cut to fit). */
static void short_host(char *buf, size_t sz, const struct run_row *r)
{
	const struct placement *p = &r->place;
	char job[80] = "", rank[16] = "";
	if (p->slurm_array_job_id[0])
		snprintf(job, sizeof(job), " %s_%s", p->slurm_array_job_id, p->slurm_array_task_id);
	else if (p->slurm_job_id[0])
		snprintf(job, sizeof(job), " %s", p->slurm_job_id);
	if (job[0] && p->slurm_step_id[0])
		snprintf(job + strlen(job), sizeof(job) - strlen(job), ".%s", p->slurm_step_id);
	if (p->rank >= 0)
		snprintf(rank, sizeof(rank), " r%d", p->rank);
	snprintf(buf, sz, "%.24s%s%s", r->hostname[0] ? r->hostname : "?", job, rank);
	for (char *c = buf; *c; c++)   /* the store is shared: no terminal controls */
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
}

static void list_text(struct strbuf *sb, const struct run_row *rows, size_t n)
{
	int sw = 11;   /* the STATUS column: wider for "exit 0, partial" */
	int hw = 4;    /* HOST */
	int64_t starred = 0;   /* a run whose verdict another judgment wrote */
	for (size_t i = 0; i < n; i++) {
		char status[32], host[128];
		short_status(status, sizeof(status), &rows[i]);
		if ((int)strlen(status) > sw)
			sw = (int)strlen(status);
		short_host(host, sizeof(host), &rows[i]);
		if ((int)strlen(host) > hw)
			hw = (int)strlen(host);
	}
	strbuf_addf(sb, "%5s  %-16s  %-12s  %-*s  %7s  %-9s  %-13s  %-*s  %s\n", "ID", "STARTED",
	            "DURATION", sw, "STATUS", "STEPS", "PEAK", "VERDICT", hw, "HOST", "COMMAND");
	for (size_t i = 0; i < n; i++) {
		const struct run_row *r = &rows[i];
		char started[32] = "?", dur[48], status[32], peak[32] = "-", host[128], verdict[32];
		struct tm tm;
		/* a damaged store's time stays "?": no cast of what time_t cannot hold */
		if (r->started_at >= 0 && r->started_at < 253402300800.0) {   /* before the year 10000 */
			time_t t = (time_t)r->started_at;
			if (localtime_r(&t, &tm))
				strftime(started, sizeof(started), "%Y-%m-%d %H:%M", &tm);
		}
		fmt_duration(dur, sizeof(dur), run_duration(r));
		short_status(status, sizeof(status), r);
		if (r->peak_bytes)
			fmt_bytes(peak, sizeof(peak), (double)r->peak_bytes);

		char **argv;
		size_t argc;
		run_command_parse(r->command_json, &argv, &argc);
		short_host(host, sizeof(host), r);
		/* a verdict another version of the judgment wrote: starred */
		bool other = report_other_judge(r->verdict, r->judge_version);
		snprintf(verdict, sizeof(verdict), "%s%s", r->verdict[0] ? r->verdict : "-", other ? "*" : "");
		if (other && (!starred || r->id < starred))
			starred = r->id;
		strbuf_addf(sb, "%5lld  %-16s  %-12s  %-*s  %7lld  %-9s  %-13s  ", (long long)r->id, started,
		            dur, sw, status, (long long)r->steps, peak, verdict);
		strbuf_addf(sb, "%-*s  ", hw, host);
		report_add_command_line(sb, argv, argc, COMMAND_MAX_CHARS);
		strbuf_addch(sb, '\n');
		run_argv_free(argv, argc);
	}
	if (starred)
		report_add_other_judge_note(sb, "the run", starred);
}

/* The runs as `report --format json` writes its "run" (report_json_run()). */
static void list_json(struct strbuf *sb, const struct run_row *rows, size_t n)
{
	struct json_writer jw;
	jw_init(&jw, sb);
	jw_array_begin(&jw, true);
	for (size_t i = 0; i < n; i++) {
		jw_array_object(&jw, false);
		report_json_run(&jw, &rows[i], NULL);
		jw_end(&jw);
	}
	jw_end(&jw);
	strbuf_addch(sb, '\n');
}

int cmd_ls(int argc, char **argv)
{
	struct listing_args l = { 0 };
	int status = cmd_options_read(NULL, &ls_usage, argc, argv, take_option, &l);
	if (status >= 0)
		return status;

	const char *path = store_default_path(l.store_opt);
	struct store *st = store_open_readonly(path);
	if (!st)
		return 1;
	struct run_row *rows;
	size_t n;
	if (store_list_runs(st, &rows, &n) < 0) {
		store_close(st);
		return 1;
	}
	store_close(st);

	struct strbuf sb = STRBUF_INIT;
	if (l.json)
		list_json(&sb, rows, n);
	else if (n)
		list_text(&sb, rows, n);
	else
		fprintf(stderr, "leakproof: no runs in store '%s' yet\n", path);
	run_rows_free(rows, n);

	status = 0;
	if ((sb.len && fwrite(sb.buf, 1, sb.len, stdout) != sb.len) || fflush(stdout) != 0) {
		error_errno("cannot write standard output");
		status = 1;
	}
	strbuf_release(&sb);
	return status;
}
