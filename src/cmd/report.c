/*
 * report.c — `leakproof report`: show one stored run, judged again from
 * its stored samples, as text, Markdown, CSV, JSON, an HTML page with
 * charts, one SVG chart or JUnit XML (src/report/). In phases: the
 * options, what to show, their checks, the rendering into a buffer (the
 * model in src/judge/, the renderers in src/report/), the output.
 */
static const char usage_head[] =
"usage: leakproof report [RUN | sweep:ID] [options]\n"
"       leakproof report --job KEY|RUN [options]\n"
"\n"
"Show a stored run: its verdict (leak, no-leak or inconclusive) and the\n"
"evidence, judged again from the samples in the store. RUN is a run id\n"
"from `leakproof ls`; the latest run when it is left out (or, when that run\n"
"was a sweep's trial, the sweep; when it was one rank of a job of several,\n"
"the job). sweep:ID (or sID) shows the table of a\n"
"sweep: one row per trial with its per-step memory change, rate, peak,\n"
"verdict, status and metric.\n"
"\n"
"A job of several ranks (`srun leakproof run -- ...`, or leakproof run under\n"
"torchrun) is one run per rank sharing a job key: --job shows a\n"
"row per rank (node, host, run, peak, growth, verdict) and which rank's\n"
"memory grows.\n";

static const char usage_tail[] =
"exit status: 0; 1 when the store or the run does not exist or cannot be\n"
"read, or the report cannot be written; 124 for a usage error.\n";

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "judge/job.h"
#include "judge/sites.h"
#include "judge/summary.h"
#include "report/report.h"
#include "report/trace.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "util/util.h"

enum { OPT_BY = 256 };

static const struct option_spec options[] = {
	OPT_VALUE('f', "format", "F", "text (default: the end-of-run summary), md (Markdown\n"
	                              "tables for bug reports), csv (one row per step:\n"
	                              "step,epoch,t,rss,pss,uss,swap,cgroup,gpu), json,\n"
	                              "html (one self-contained page with charts, to open\n"
	                              "in a browser), svg (one chart: memory over steps)\n"
	                              "or junit (JUnit XML for CI: one testcase per run or\n"
	                              "trial, failed on a leak or when the run failed)"),
	OPT_VALUE('m', "measure", "M", "judge by another measure than the run's: pss, rss,\n"
	                               "uss, cgroup or gpu"),
	CMD_OPT_STORE,
	OPT_VALUE('o', "output", "FILE", "write there instead of stdout"),
	OPT_FLAG('t', "trace", "a traced run's allocation sites (leakproof run\n"
	                       "--trace): every growing site with its library,\n"
	                       "function and Python line, then the largest flat ones"),
	OPT_VALUE(OPT_BY, "by", "DIMS", "sweeps: one row per combination of these\n"
	                                "comma-separated dimensions (e.g. OMP_NUM_THREADS,lr);\n"
	                                "`host` groups by the host each trial ran on"),
	OPT_VALUE('j', "job", "KEY|RUN", "the job of several ranks with this key (as `ls\n"
	                                 "--format json` shows it, e.g. slurm:12.0), or the\n"
	                                 "job run RUN is a rank of"),
	OPT_HELP(),
	OPT_END(),
};

const struct cmd_usage report_usage = { "report", usage_head, options, usage_tail, false };

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

/* What the command line asks for. */
struct report_opts {
	enum report_format fmt;
	int measure;                 /* -1: the run's own */
	const char *store_opt, *output, *run_arg, *by;
	int64_t run_id;              /* 0: the latest */
	int64_t sweep_id;            /* -1: not a sweep; 0: the latest sweep */
	const char *job;             /* --job: a key or a run id; "" the latest run's job */
	bool trace;
};

static int take_option(void *ctx, int c, const struct options_parse *p)
{
	struct report_opts *o = ctx;
	switch (c) {
	case 'f':
		if (report_format_parse(p->value, &o->fmt) < 0)
			return usage_error("unknown --format '%s' (use text, md, csv, json, junit, html or svg)",
			                   p->value);
		break;
	case 'm': {
		enum measure m;
		if (measure_parse(p->value, &m) < 0)
			return usage_error("unknown --measure '%s' (use pss, rss, uss, cgroup or gpu)", p->value);
		o->measure = (int)m;
		break;
	}
	case 's':
		o->store_opt = p->value;
		break;
	case 'o':
		o->output = p->value;
		break;
	case OPT_BY:
		o->by = p->value;
		break;
	case 't':
		o->trace = true;
		break;
	case 'j':
		o->job = p->value;
		break;
	}
	return 0;
}

/* Phase 1: the options. Returns -1 when they are good, else the exit
 * status (0 after --help, 124 after a usage error). */
static int parse_options(int argc, char **argv, struct report_opts *o)
{
	*o = (struct report_opts){ .fmt = REPORT_TEXT, .measure = -1, .sweep_id = -1 };
	struct options_parse p;
	int status = cmd_options_read(&p, &report_usage, argc, argv, take_option, o);
	if (status >= 0)
		return status;
	if (p.noperands) {
		const char *arg = o->run_arg = p.operands[0];
		const char *sw = !strncmp(arg, "sweep:", 6) ? arg + 6 : arg[0] == 's' ? arg + 1 : NULL;
		if (sw) {
			if (parse_run_id(sw, &o->sweep_id) < 0)
				return usage_error("invalid sweep '%s': expected sweep:ID such as sweep:3", arg);
		} else if (parse_run_id(arg, &o->run_id) < 0)
			return usage_error("invalid run '%s': expected a run id such as 7 (see `leakproof ls`)", arg);
	}
	if (p.noperands > 1)
		return usage_error("unexpected argument '%s'", p.operands[1]);
	if (o->job && o->run_arg)
		return usage_error("%s", "--job names the job: give it a run id or a key, not both");
	return -1;
}

/* Phase 2: what to show. No run named and the latest run was a sweep's
 * trial: its sweep; one rank of a job of several: the job. */
static void resolve_latest(struct store *st, struct report_opts *o)
{
	if (o->sweep_id >= 0 || o->run_arg || o->job)
		return;
	struct run_row latest;
	if (store_get_run(st, 0, &latest) == 0) {
		int64_t of = store_sweep_of_run(st, latest.id);
		if (of > 0)
			o->sweep_id = of;
		else if (latest.has_place && latest.place.job_key[0] && !o->trace &&
		         (o->fmt == REPORT_TEXT || o->fmt == REPORT_MD || o->fmt == REPORT_CSV || o->fmt == REPORT_JSON))
			o->job = "";   /* (the html page, svg and junit show the run) */
		run_row_release(&latest);
	}
}

/* Phase 3: the options that only make sense for a run or a sweep. 0, or
 * the usage error's exit status. */
static int check_options(const struct report_opts *o)
{
	if (o->sweep_id < 0 && o->by)
		return usage_error("%s", "--by is for sweeps");
	if (o->job && (o->trace || o->by || o->fmt == REPORT_HTML || o->fmt == REPORT_SVG || o->fmt == REPORT_JUNIT))
		return usage_error("%s", "--job is for the text, md, csv and json tables, without --by or --trace");
	if (o->by && o->fmt == REPORT_JUNIT)
		return usage_error("%s", "--by is for the text, md, csv and json tables");
	if (o->by && (o->fmt == REPORT_HTML || o->fmt == REPORT_SVG))
		return usage_error("%s", "--by is for the text, md, csv and json tables; the html page shows every "
		                   "trial and sorts by any column");
	if (o->trace && (o->sweep_id >= 0 || (o->fmt != REPORT_TEXT && o->fmt != REPORT_JSON)))
		return usage_error("%s", "--trace is for a run, as text or json");
	return 0;
}

/* The html page's extras: the run's client metrics (loss...) and, for a
 * traced run, its growing allocation sites, largest growth first. The
 * caller frees x->metrics and x->sites. */
static void html_extras(struct store *st, const struct run_summary *s, struct report_extras *x)
{
	struct metric_row *metrics = NULL;
	size_t nmetrics = 0;
	*x = (struct report_extras){ 0 };
	if (store_load_metrics(st, s->run.id, &metrics, &nmetrics) == 0) {
		x->metrics = metrics;
		x->nmetrics = nmetrics;
	}
	if (s->trace && s->trace->ngrowing) {
		struct alloc_site *sites = xcalloc(s->trace->ngrowing, sizeof(*sites));
		for (size_t i = 0; i < s->trace->ngrowing; i++) {
			const struct trace_site_report *t = &s->trace->sites[i];
			const struct trace_frame *f = t->nframes ? &t->frames[t->blame] : NULL;
			sites[i].label = f && f->function[0] ? f->function : "?";
			sites[i].library = f ? f->library : "";
			sites[i].growth_bytes_per_step = t->growth;
			sites[i].live_bytes = t->live;
		}
		x->sites = sites;
		x->nsites = s->trace->ngrowing;
	}
}

/* Phase 4 (a run): load, judge and render it into sb. 0, or 1 after a
 * message. */
static int render_run(struct store *st, const char *path, const struct report_opts *o, struct strbuf *sb)
{
	struct run_summary sum;
	int rc = run_summary_load(st, o->run_id, o->measure, &sum);
	if (rc) {
		if (rc > 0 && o->run_id)
			error("no run %lld in store '%s'", (long long)o->run_id, path);
		else if (rc > 0)
			error("no runs in store '%s' yet", path);
		return 1;
	}
	int status = 0;
	if (o->trace && !sum.trace) {
		error("run %lld was not traced (run the job with `leakproof run --trace`)", (long long)sum.run.id);
		status = 1;
	} else if (o->trace && o->fmt == REPORT_TEXT) {
		trace_report_write_text(sum.trace, sb);
	} else if (o->fmt == REPORT_HTML) {
		struct report_extras x;
		html_extras(st, &sum, &x);
		report_render(&sum, o->fmt, &x, sb);
		free((void *)x.sites);
		free((void *)x.metrics);
	} else {
		report_render(&sum, o->fmt, NULL, sb);
	}
	run_summary_release(&sum);
	return status;
}

/* Phase 4 (a job of several ranks): its table into sb. 0, or 1 after a
 * message. */
static int render_job(struct store *st, const struct report_opts *o, struct strbuf *sb)
{
	struct job_model m;
	int rc = job_model_load(st, o->job, o->measure, &m);
	if (rc == 0)
		rc = job_report_render(&m, o->fmt, sb) < 0 ? 1 : 0;
	job_model_release(&m);
	return rc ? 1 : 0;
}

/* Phase 5: sb to the output file, or stdout. 0, or 1 after a message. */
static int write_output(const struct strbuf *sb, const char *output)
{
	FILE *out = stdout;
	if (output && !(out = fopen(output, "w"))) {
		error_errno("cannot write '%s'", output);
		return 1;
	}
	int status = 0;
	if (report_flush(sb, out) < 0) {
		error_errno("cannot write '%s'", output ? output : "standard output");
		status = 1;
	}
	if (output && fclose(out) != 0 && !status) {
		error_errno("cannot write '%s'", output);
		status = 1;
	}
	return status;
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o;
	int rc = parse_options(argc, argv, &o);
	if (rc >= 0)
		return rc;

	const char *path = store_default_path(o.store_opt);
	struct store *st = store_open_readonly(path);
	if (!st)
		return 1;
	resolve_latest(st, &o);
	if ((rc = check_options(&o))) {
		store_close(st);
		return rc;
	}

	struct strbuf sb = STRBUF_INIT;
	int status = o.sweep_id >= 0 ? (sweep_report_render(st, o.sweep_id, o.fmt, o.by, &sb) < 0 ? 1 : 0) :
	             o.job ? render_job(st, &o, &sb) : render_run(st, path, &o, &sb);
	store_close(st);
	if (status == 0)
		status = write_output(&sb, o.output);
	strbuf_release(&sb);
	return status;
}
