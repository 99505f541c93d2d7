/*
 * ls.c — `leakproof ls`: the runs in the store, newest first, one line
 * each, with the verdict recorded when the run ended (`leakproof report RUN`
 * judges again and says why).
 */
static const char usage[] =
"usage: leakproof ls [options]\n"
"\n"
"List the runs in the store, newest first: id, start time, duration, how the\n"
"job ended, steps, peak memory (under the run's measure), verdict, where it\n"
"ran (the host, then its SLURM job: JOB, JOB_TASK for an array task, .STEP\n"
"for an srun step, and rN for rank N of a job of several), command.\n"
"\n"
"options:\n"
"  -f, --format F         text (default) or json (an array of objects)\n"
"  -s, --store PATH       the store (default $LEAKPROOF_STORE, else\n"
"                         ./.leakproof/leakproof.db)\n"
"  -h, --help             this help\n"
"\n"
"exit status: 0; 1 when the store does not exist or cannot be read; 124 for\n"
"a usage error.\n";

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd/cmd.h"
#include "model/summary.h"
#include "platform/placement.h"
#include "report/report.h"
#include "store/store.h"
#include "util/util.h"

#define COMMAND_MAX_CHARS 60

#define usage_error(...) cmd_usage_error("ls", __VA_ARGS__)

static double run_duration(const struct run_row *r)
{
	double end = r->ended_at > 0 ? r->ended_at : wall_seconds();
	return end > r->started_at ? end - r->started_at : 0;
}

/* The STATUS column: "exit 0", "SIGKILL", "running", ... */
static void short_status(char *buf, size_t sz, const struct run_row *r)
{
	if (r->ended_at <= 0 || !strcmp(r->status, "running"))
		snprintf(buf, sz, "running");
	else if (!strcmp(r->status, "failed-to-start"))
		snprintf(buf, sz, "no start");
	else if (!strcmp(r->status, "interrupted"))
		snprintf(buf, sz, "interrupted");
	else if (!strcmp(r->status, "detached") || !strcmp(r->status, "ended"))
		snprintf(buf, sz, "%s", r->status);   /* attached: its status is not known */
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
	for (size_t i = 0; i < n; i++) {
		char status[32], host[128];
		short_status(status, sizeof(status), &rows[i]);
		if ((int)strlen(status) > sw)
			sw = (int)strlen(status);
		short_host(host, sizeof(host), &rows[i]);
		if ((int)strlen(host) > hw)
			hw = (int)strlen(host);
	}
	strbuf_addf(sb, "%5s  %-16s  %-12s  %-*s  %7s  %-9s  %-12s  %-*s  %s\n", "ID", "STARTED",
	            "DURATION", sw, "STATUS", "STEPS", "PEAK", "VERDICT", hw, "HOST", "COMMAND");
	for (size_t i = 0; i < n; i++) {
		const struct run_row *r = &rows[i];
		char started[32] = "?", dur[48], status[32], peak[32] = "-", host[128];
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
		strbuf_addf(sb, "%5lld  %-16s  %-12s  %-*s  %7lld  %-9s  %-12s  ", (long long)r->id, started,
		            dur, sw, status, (long long)r->steps, peak, r->verdict[0] ? r->verdict : "-");
		strbuf_addf(sb, "%-*s  ", hw, host);
		report_add_command_line(sb, argv, argc, COMMAND_MAX_CHARS);
		strbuf_addch(sb, '\n');
		run_argv_free(argv, argc);
	}
}

/* ", "placement": {...}" as in `report --format json`. */
static void add_placement_json(struct strbuf *sb, const struct placement *p)
{
	static const char *const keys[] = { "slurm_job_id", "slurm_array_job_id", "slurm_array_task_id",
	                                    "slurm_step_id", "gpus", "launcher", "job_key" };
	const char *vals[] = { p->slurm_job_id, p->slurm_array_job_id, p->slurm_array_task_id, p->slurm_step_id,
	                       p->gpus, p->launcher, p->job_key };
	strbuf_addstr(sb, ",\n   \"placement\": {");
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		strbuf_addf(sb, "%s\"%s\": ", k ? ", " : "", keys[k]);
		report_add_json_str_or_null(sb, vals[k]);
	}
	strbuf_addstr(sb, ", \"allocation_bytes\": ");
	report_add_json_num(sb, p->alloc_mem_bytes ? (double)p->alloc_mem_bytes : NAN);
	strbuf_addstr(sb, ", \"rank\": ");
	report_add_json_num(sb, p->rank >= 0 ? p->rank : NAN);
	strbuf_addstr(sb, ", \"local_rank\": ");
	report_add_json_num(sb, p->local_rank >= 0 ? p->local_rank : NAN);
	strbuf_addstr(sb, ", \"world_size\": ");
	report_add_json_num(sb, p->world_size > 0 ? p->world_size : NAN);
	strbuf_addstr(sb, ", \"node_id\": ");
	report_add_json_num(sb, p->node_id >= 0 ? p->node_id : NAN);
	strbuf_addch(sb, '}');
}

static void list_json(struct strbuf *sb, const struct run_row *rows, size_t n)
{
	strbuf_addch(sb, '[');
	for (size_t i = 0; i < n; i++) {
		const struct run_row *r = &rows[i];
		bool ended = r->ended_at > 0;
		char **argv;
		size_t argc;

		strbuf_addf(sb, "%s\n  {\"id\": %lld, \"command\": [", i ? "," : "", (long long)r->id);
		run_command_parse(r->command_json, &argv, &argc);
		for (size_t a = 0; a < argc; a++) {
			if (a)
				strbuf_addstr(sb, ", ");
			strbuf_add_json_str(sb, argv[a]);
		}
		run_argv_free(argv, argc);
		strbuf_addstr(sb, "], \"cwd\": ");
		strbuf_add_json_str(sb, r->cwd);
		strbuf_addstr(sb, ", \"hostname\": ");
		strbuf_add_json_str(sb, r->hostname);
		if (r->has_place && placement_known(&r->place))
			add_placement_json(sb, &r->place);
		strbuf_addstr(sb, ",\n   \"started_at\": ");
		report_add_json_num(sb, r->started_at);
		strbuf_addstr(sb, ", \"ended_at\": ");
		report_add_json_num(sb, ended ? r->ended_at : NAN);
		strbuf_addstr(sb, ", \"duration_seconds\": ");
		report_add_json_num(sb, run_duration(r));
		strbuf_addstr(sb, ", \"status\": ");
		strbuf_add_json_str(sb, r->status);
		if (r->lost[0]) {   /* partial: what the store lost */
			strbuf_addstr(sb, ", \"lost\": ");
			strbuf_add_json_str(sb, r->lost);
		}
		strbuf_addstr(sb, ", \"exit_code\": ");
		report_add_json_num(sb, ended && !r->exit_signal ? r->exit_code : NAN);
		strbuf_addstr(sb, ", \"exit_signal\": ");
		report_add_json_num(sb, ended && r->exit_signal ? r->exit_signal : NAN);
		strbuf_addstr(sb, ",\n   \"measure\": ");
		strbuf_add_json_str(sb, measure_name(r->measure));
		strbuf_addf(sb, ", \"steps\": %lld, \"peak_bytes\": ", (long long)r->steps);
		report_add_json_num(sb, (double)r->peak_bytes);
		strbuf_addstr(sb, ", \"verdict\": ");
		if (r->verdict[0])
			strbuf_add_json_str(sb, r->verdict);
		else
			strbuf_addstr(sb, "null");
		strbuf_addstr(sb, ", \"growth_bytes_per_step\": ");
		report_add_json_num(sb, r->verdict[0] ? r->growth_bytes_per_step : NAN);
		strbuf_addch(sb, '}');
	}
	strbuf_addstr(sb, n ? "\n]\n" : "]\n");
}

int cmd_ls(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "store", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *store_opt = NULL;
	bool json = false;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":f:s:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "json"))
				json = true;
			else if (!strcmp(optarg, "text"))
				json = false;
			else
				return usage_error("unknown --format '%s' (use text or json)", optarg);
			break;
		case 's':
			store_opt = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);

	const char *path = store_default_path(store_opt);
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
	if (json)
		list_json(&sb, rows, n);
	else if (n)
		list_text(&sb, rows, n);
	else
		fprintf(stderr, "leakproof: no runs in store '%s' yet\n", path);
	run_rows_free(rows, n);

	int status = 0;
	if ((sb.len && fwrite(sb.buf, 1, sb.len, stdout) != sb.len) || fflush(stdout) != 0) {
		error_errno("cannot write standard output");
		status = 1;
	}
	strbuf_release(&sb);
	return status;
}
