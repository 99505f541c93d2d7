/*
 * report.c — `leakproof report`: show one stored run, judged again from
 * its stored samples, as text, Markdown, CSV, JSON, an HTML page with
 * charts or one SVG chart (src/report/).
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
"                         step,epoch,t,rss,pss,uss,swap,cgroup,gpu), json,\n"
"                         html (one self-contained page with charts, to open\n"
"                         in a browser) or svg (one chart: memory over steps)\n"
"  -m, --measure M        judge by another measure than the run's: pss, rss,\n"
"                         uss, cgroup or gpu\n"
"  -s, --store PATH       the store (default $LEAKPROOF_STORE, else\n"
"                         ./.leakproof/leakproof.db)\n"
"  -o, --output FILE      write there instead of stdout\n"
"  -t, --trace            a traced run's allocation sites (leakproof run\n"
"                         --trace): every growing site with its library,\n"
"                         function and Python line, then the largest flat ones\n"
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
#include "report/trace.h"
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

/* The html page of a run, with its client metrics (loss...) drawn too. */
static int write_html(struct store *st, const struct run_summary *s, FILE *out)
{
	struct report_extras extras = { 0 };
	struct metric_row *metrics = NULL;
	size_t nmetrics = 0;
	if (store_load_metrics(st, s->run.id, &metrics, &nmetrics) == 0) {
		extras.metrics = metrics;
		extras.nmetrics = nmetrics;
	}
	/* a traced run: its growing allocation sites, largest growth first */
	struct alloc_site *sites = NULL;
	if (s->trace && s->trace->ngrowing) {
		sites = xcalloc(s->trace->ngrowing, sizeof(*sites));
		for (size_t i = 0; i < s->trace->ngrowing; i++) {
			const struct trace_site_report *t = &s->trace->sites[i];
			const struct trace_frame *f = t->nframes ? &t->frames[t->blame] : NULL;
			sites[i].label = f && f->function[0] ? f->function : "?";
			sites[i].library = f ? f->library : "";
			sites[i].growth_bytes_per_step = t->growth;
			sites[i].live_bytes = t->live;
		}
		extras.sites = sites;
		extras.nsites = s->trace->ngrowing;
	}
	int rc = report_write_html(s, &extras, out);
	free(sites);
	free(metrics);
	return rc;
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "measure", required_argument, NULL, 'm' },
		{ "store", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "by", required_argument, NULL, 'b' },
		{ "trace", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum report_format fmt = REPORT_TEXT;
	int measure = -1;
	const char *store_opt = NULL, *output = NULL, *run_arg = NULL, *by = NULL;
	int64_t run_id = 0, sweep_id = -1;
	bool trace = false;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":f:m:s:o:b:th", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (report_format_parse(optarg, &fmt) < 0)
				return usage_error("unknown --format '%s' (use text, md, csv, json, html or svg)", optarg);
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
		case 't':
			trace = true;
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
	if (by && (fmt == REPORT_HTML || fmt == REPORT_SVG)) {
		store_close(st);
		return usage_error("%s", "--by is for the text, md, csv and json tables; the html page shows every "
		                   "trial and sorts by any column");
	}
	if (trace && (sweep_id >= 0 || (fmt != REPORT_TEXT && fmt != REPORT_JSON))) {
		store_close(st);
		return usage_error("%s", "--trace is for a run, as text or json");
	}
	if (sweep_id >= 0) {
		FILE *out = stdout;
		if (output && !(out = fopen(output, "w"))) {
			error_errno("cannot write '%s'", output);
			store_close(st);
			return 1;
		}
		int rc = fmt == REPORT_HTML ? sweep_report_write_html(st, sweep_id, out) :
		         fmt == REPORT_SVG ? sweep_report_write_svg(st, sweep_id, out) :
		         sweep_report_write(st, sweep_id, fmt, by, out);
		int status = rc < 0 ? 1 : 0;
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
	if (trace && !sum.trace) {
		error("run %lld was not traced (run the job with `leakproof run --trace`)", (long long)sum.run.id);
		status = 1;
	} else if (trace && fmt == REPORT_TEXT) {
		if (trace_report_write_text(sum.trace, out) < 0) {
			error_errno("cannot write '%s'", output ? output : "standard output");
			status = 1;
		}
	} else if (fmt == REPORT_HTML ? write_html(st, &sum, out) < 0 : report_write(&sum, fmt, out) < 0) {
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
