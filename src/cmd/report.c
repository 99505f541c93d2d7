/*
 * report.c — `leakproof report`: show one stored run, judged again from
 * its stored samples, as text, Markdown, CSV or JSON (src/report/).
 */
static const char usage[] =
"usage: leakproof report [RUN | sweep:ID] [options]\n"
"\n"
"Show a stored run: its verdict (leak, no-leak or inconclusive) and the\n"
"evidence, judged again from the samples in the store. RUN is a run id\n"
"from `leakproof ls`; the latest run when it is left out (or, when that run\n"
"was a sweep's trial, the sweep). sweep:ID (or sID) shows the table of a\n"
"sweep: one row per trial with its per-step memory change, rate, peak,\n"
"verdict, status and metric.\n"
"\n"
"options:\n"
"  -f, --format F         text (default: the end-of-run summary), md (Markdown\n"
"                         tables for bug reports), csv (one row per step:\n"
"                         step,epoch,t,rss,pss,uss,swap,cgroup,gpu) or json\n"
"  -m, --measure M        judge by another measure than the run's: pss, rss,\n"
"                         uss, cgroup or gpu\n"
"  -s, --store PATH       the store (default $LEAKPROOF_STORE, else\n"
"                         ./.leakproof/leakproof.db)\n"
"  -o, --output FILE      write there instead of stdout\n"
"      --by DIMS          sweeps: one row per combination of these\n"
"                         comma-separated dimensions (e.g. OMP_NUM_THREADS,lr)\n"
"  -h, --help             this help\n"
"\n"
"exit status: 0; 1 when the store or the run does not exist or cannot be\n"
"read, or the report cannot be written; 124 for a usage error.\n";

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "report/report.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "util/util.h"

#define usage_error(...) cmd_usage_error("report", __VA_ARGS__)

/* A run id: a positive integer, or "latest" (0). -1 when it is neither. */
static int parse_run_id(const char *s, int64_t *out)
{
	if (!strcmp(s, "latest")) {
		*out = 0;
		return 0;
	}
	long long v;
	if (cmd_parse_int(s, 1, INT64_MAX, &v) < 0)
		return -1;
	*out = v;
	return 0;
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "measure", required_argument, NULL, 'm' },
		{ "store", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "by", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum report_format fmt = REPORT_TEXT;
	int measure = -1;
	const char *store_opt = NULL, *output = NULL, *run_arg = NULL, *by = NULL;
	int64_t run_id = 0, sweep_id = -1;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":f:m:s:o:b:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (report_format_parse(optarg, &fmt) < 0)
				return usage_error("unknown --format '%s' (use text, md, csv or json)", optarg);
			break;
		case 'm': {
			enum measure m;
			if (measure_parse(optarg, &m) < 0)
				return usage_error("unknown --measure '%s' (use pss, rss, uss, cgroup or gpu)", optarg);
			measure = (int)m;
			break;
		}
		case 's':
			store_opt = optarg;
			break;
		case 'o':
			output = optarg;
			break;
		case 'b':
			by = optarg;
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
	if (optind < argc) {
		run_arg = argv[optind++];
		const char *sw = !strncmp(run_arg, "sweep:", 6) ? run_arg + 6 : run_arg[0] == 's' ? run_arg + 1 : NULL;
		if (sw) {
			if (parse_run_id(sw, &sweep_id) < 0)
				return usage_error("invalid sweep '%s': expected sweep:ID such as sweep:3", run_arg);
		} else if (parse_run_id(run_arg, &run_id) < 0)
			return usage_error("invalid run '%s': expected a run id such as 7 (see `leakproof ls`)", run_arg);
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);

	const char *path = store_default_path(store_opt);
	struct store *st = store_open_readonly(path);
	if (!st)
		return 1;

	/* the latest run, when it was a sweep's trial, means its sweep */
	if (sweep_id < 0 && !run_arg) {
		struct run_row latest;
		if (store_get_run(st, 0, &latest) == 0) {
			int64_t of = store_sweep_of_run(st, latest.id);
			if (of > 0)
				sweep_id = of;
			run_row_release(&latest);
		}
	}
	if (sweep_id < 0 && by) {
		store_close(st);
		return usage_error("%s", "--by is for sweeps");
	}
	if (sweep_id >= 0) {
		FILE *out = stdout;
		if (output && !(out = fopen(output, "w"))) {
			error_errno("cannot write '%s'", output);
			store_close(st);
			return 1;
		}
		int status = sweep_report_write(st, sweep_id, fmt, by, out) < 0 ? 1 : 0;
		if (output && fclose(out) != 0 && !status) {
			error_errno("cannot write '%s'", output);
			status = 1;
		}
		store_close(st);
		return status;
	}

	struct run_summary sum;
	int rc = run_summary_load(st, run_id, measure, &sum);
	if (rc) {
		if (rc > 0 && run_id)
			error("no run %lld in store '%s'", (long long)run_id, path);
		else if (rc > 0)
			error("no runs in store '%s' yet", path);
		store_close(st);
		return 1;
	}

	FILE *out = stdout;
	if (output && !(out = fopen(output, "w"))) {
		error_errno("cannot write '%s'", output);
		run_summary_release(&sum);
		store_close(st);
		return 1;
	}
	int status = 0;
	if (report_write(&sum, fmt, out) < 0) {
		error_errno("cannot write '%s'", output ? output : "standard output");
		status = 1;
	}
	if (output && fclose(out) != 0 && !status) {
		error_errno("cannot write '%s'", output);
		status = 1;
	}
	run_summary_release(&sum);
	store_close(st);
	return status;
}
