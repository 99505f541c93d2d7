/*
 * judge/summary.c — from a stored run to its summary: which series is
 * judged, the judgment (core/analyze), the rates, peak, limit and
 * projection, and the allocation sites of a traced run (judge/sites.c).
 * The renderers in src/report/ only read what this builds.
 *
 * The series: when the run marked steps, memory under the measure at each
 * step (x = the step number, or the step's ordinal when the numbers do not
 * increase); otherwise memory over time, the samples binned into 1-second
 * bins (finer for runs under 100 s, wider when that would give more than
 * MAX_BINS), each bin's median, x in seconds.
 *
 * Units: bytes, seconds; x in steps or seconds as s->x_unit says.
 */
#include "judge/summary.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge/census.h"
#include "judge/kinds.h"
#include "judge/sites.h"
#include "util/json.h"
#include "util/stats.h"
#include "util/util.h"

#define MAX_BINS 2000
#define SHORT_RUN_BINS 100
#define KINDS_MIN_READINGS 5   /* a leak's kinds read fewer times than this: unknown */
#define SHM_COUNTED_BYTES (1024.0 * 1024.0)  /* unmapped shmem joins the measure from this */
#define GPU_COUNTED_BYTES (1024.0 * 1024.0)  /* and GPU memory (NVML), from this */
#define RELEASE_MIN_BYTES (1024.0 * 1024.0)  /* a drop at the end smaller than this is kept */

/* ---- the command ----------------------------------------------------- */

void run_command_parse(const char *json, char ***argv_out, size_t *argc_out)
{
	struct jval v;
	const char *err;
	size_t err_at;
	char **argv;

	bool parsed = json && jval_parse(json, &v, &err, &err_at) == 0;
	if (parsed && v.type == J_ARR) {
		size_t n = 0;
		argv = xcalloc(v.n + 1, sizeof(*argv));
		for (size_t i = 0; i < v.n; i++)
			if (v.items[i].type == J_STR) {
				argv[n++] = v.items[i].s;
				v.items[i].s = NULL;
			}
		if (n == v.n) {
			jval_release(&v);
			*argv_out = argv;
			*argc_out = n;
			return;
		}
		run_argv_free(argv, n);
	}
	if (parsed)
		jval_release(&v);
	/* not an array of strings: the text itself */
	argv = xcalloc(2, sizeof(*argv));
	argv[0] = xstrdup(json ? json : "");
	*argv_out = argv;
	*argc_out = 1;
}

void run_argv_free(char **argv, size_t argc)
{
	if (!argv)
		return;
	for (size_t i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
}

/* ---- the summary ------------------------------------------------------- */

/*
 * Memory over time: samples (sorted by t) into bins of *bin_s seconds, the
 * median of each. A bin is 1 s; a run shorter than SHORT_RUN_BINS seconds
 * gets SHORT_RUN_BINS bins (but none narrower than the median sampling
 * interval), so that a ten-second job can be judged too; a long run gets
 * wider bins so that there are at most MAX_BINS. x and y must hold n
 * values; returns how many bins.
 */
/* The bin of a sample dt seconds after the first: 0 to MAX_BINS. A damaged
 * store's times (out of order, infinite) land in the first or last bin,
 * never in a cast of what a long cannot hold. */
static long bin_of(double dt, double bin_s)
{
	double b = floor(dt / bin_s);
	return b >= 0 ? (b < MAX_BINS ? (long)b : MAX_BINS) : 0;
}

static size_t bin_samples(const struct mem_sample *sm, size_t n, enum measure m,
                          double *x, double *y, double *bin_s)
{
	double t_first = NAN, t_last = NAN, prev = NAN;
	double *gaps = xmalloc((n ? n : 1) * sizeof(double));
	size_t ngaps = 0;
	for (size_t i = 0; i < n; i++)
		if (mem_sample_value(&sm[i], m) >= 0) {
			if (isnan(t_first))
				t_first = sm[i].t;
			else
				gaps[ngaps++] = sm[i].t - prev;
			t_last = prev = sm[i].t;
		}
	double gap = ngaps ? median_of(gaps, ngaps) : 0;
	free(gaps);
	*bin_s = RUN_SUMMARY_MIN_BIN_SECONDS;
	if (isnan(t_first))
		return 0;
	double span = t_last - t_first;
	if (span < SHORT_RUN_BINS * RUN_SUMMARY_MIN_BIN_SECONDS)
		*bin_s = fmax(span / SHORT_RUN_BINS, gap);
	if (span / MAX_BINS > *bin_s)
		*bin_s = span / MAX_BINS * (1 + 1e-9);
	if (!(*bin_s > 0))
		*bin_s = RUN_SUMMARY_MIN_BIN_SECONDS;

	double *vals = xmalloc(n * sizeof(double)), *ts = xmalloc(n * sizeof(double));
	size_t nbins = 0, k = 0;
	long cur = -1;
	for (size_t i = 0; i <= n; i++) {
		double v = i < n ? mem_sample_value(&sm[i], m) : -1;
		if (i < n && v < 0)
			continue;   /* before its bin: its time may lie outside [t_first, t_last] */
		long bin = i < n ? bin_of(sm[i].t - t_first, *bin_s) : -2;
		if (bin != cur && k) {
			sort_doubles(vals, k);
			x[nbins] = median_sorted(ts, k);   /* ts is sorted: samples are */
			y[nbins] = median_sorted(vals, k);
			nbins++;
			k = 0;
		}
		if (i == n)
			break;
		cur = bin;
		vals[k] = v;
		ts[k] = sm[i].t;
		k++;
	}
	free(vals);
	free(ts);
	return nbins;
}

/*
 * Memory a job frees as it ends is not what it held while it ran: a Python
 * job's last list goes when its function returns or its interpreter shuts
 * down, and the ticks in between read it half gone (a job keeping 20 MiB
 * a second for 4 s ended with bins 58 MiB lower, and its rising floor was
 * not seen). Steps do not say where the work ended either: a mark's memory
 * is read when the supervisor reads the mark, and on a busy machine the
 * last marks were read after the interpreter had freed a 61 MiB list (the
 * last step at 29 MiB turned a late leak into "no significant growth").
 * The points of the last tenth of the run that lie below the last point
 * before it (by 1 MiB and 5 %) are left out of the judgment, from the end
 * back. So are the last marks read together (t, the times they were read,
 * closer than half the usual step apart), however many, when all
 * lie below the point before them: a supervisor held up for a dozen steps
 * read them at once after the job had freed its memory (a leak of 2 MiB a
 * step, 60 steps between restarts, judged "no significant growth"). t is
 * NULL for a series of time bins. Returns the points kept.
 */
static size_t trim_release_at_end(const double *x, const double *y, const double *t, size_t n)
{
	if (n < 10)
		return n;
	/* the marks read in one go at the end */
	if (t) {
		double *gaps = xmalloc((n - 1) * sizeof(double));
		for (size_t i = 1; i < n; i++)
			gaps[i - 1] = t[i] - t[i - 1];
		double together = 0.5 * median_of(gaps, n - 1);
		free(gaps);
		size_t first = n - 1;
		while (first > n / 2 && t[first] - t[first - 1] <= together)
			first--;
		double tol = fmax(RELEASE_MIN_BYTES, 0.05 * y[first - 1]);
		bool below = first < n - 1;
		for (size_t i = first; below && i < n; i++)
			below = y[i] < y[first - 1] - tol;
		if (below)
			n = first;
	}
	double cut = x[n - 1] - 0.1 * (x[n - 1] - x[0]);
	size_t before = n - 1;
	while (before > 0 && x[before] >= cut)
		before--;
	double tol = fmax(RELEASE_MIN_BYTES, 0.05 * y[before]);
	size_t keep = n;
	while (keep > before + 1 && y[keep - 1] < y[before] - tol)
		keep--;
	return keep;
}

static void compose_reason(struct run_summary *s)
{
	if (s->a.points == 0)
		snprintf(s->reason, sizeof(s->reason), "no %s memory was recorded for this run",
		         measure_name(s->measure));
	else if (s->a.reason[0])
		snprintf(s->reason, sizeof(s->reason), "%s", s->a.reason);
	else if (s->a.verdict == VERDICT_LEAK)
		snprintf(s->reason, sizeof(s->reason), "memory grows");
	else if (s->a.verdict == VERDICT_NO_LEAK)
		snprintf(s->reason, sizeof(s->reason), "flat after warm-up");
	else
		snprintf(s->reason, sizeof(s->reason), "not enough data to judge");
}

/* The fastest growing site of a traced run in a few words, for the
 * flight recorder ("" when none grows). */
static void trace_top_site_words(const struct trace_report *tr, char *buf, size_t sz)
{
	buf[0] = '\0';
	if (!tr || !tr->nsites || !tr->sites[0].growing)
		return;
	const struct trace_site_report *r = &tr->sites[0];
	char g[32];
	fmt_bytes(g, sizeof(g), r->growth);
	if (r->npython)
		snprintf(buf, sz, "%s (%s:%d), +%s per %s", r->python[0].function, r->python[0].file,
		         r->python[0].line, g, tr->x_unit);
	else if (r->blame < r->nframes)
		snprintf(buf, sz, "%s%s%s in %s, +%s per %s",
		         r->frames[r->blame].function[0] ? r->frames[r->blame].function : "?",
		         r->frames[r->blame].source[0] ? " at " : "", r->frames[r->blame].source,
		         r->frames[r->blame].library, g, tr->x_unit);
}

/* Processes alive at each of the n times t (sorted or not): the last
 * sample at or before it, the first one before any. */
static void processes_at(const struct run_summary *s, const double *t, size_t n, double *out)
{
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && t[i] < t[i - 1])
			j = 0;
		while (j + 1 < s->nsamples && s->samples[j + 1].t <= t[i])
			j++;
		out[i] = s->nsamples ? s->samples[j].nprocs : 0;
	}
}

/*
 * One judgment of all the memory the job makes the machine hold. Shared
 * memory no process maps (files left in /dev/shm or a tmpfs, segments
 * nobody attached) is in no process's PSS, RSS or USS: when the job held
 * a MiB or more of it, it is added to the series (the measure becomes
 * "pss+shm") and the run judged again, so that the verdict and the
 * diagnosis speak of the same memory. Then processes that pile up in the
 * tree (judge/kinds.c) are judged, and the diagnosis made again.
 * x, xt, y: the judged series (n points), y changed in place.
 */
/* The job's GPU memory at each time of xt (the last sample at or before
 * it that read NVML; 0 before any) into g; the most it held. */
static double gpu_at(const struct run_summary *s, const double *xt, size_t n, double *g)
{
	double most = 0, last = 0;
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		for (; j < s->nsamples && s->samples[j].t <= xt[i]; j++)
			if (s->samples[j].has_gpu)
				last = (double)s->samples[j].gpu;
		g[i] = last;
		most = fmax(most, last);
	}
	return most;
}

static void judge_all_memory(struct run_summary *s, struct run_kinds *k, const double *x, const double *xt,
                             double *y, size_t n, const struct analyze_opts *opts, bool measure_asked)
{
	if (!n)
		return;
	bool again = false;
	if (s->measure == MEASURE_PSS || s->measure == MEASURE_RSS || s->measure == MEASURE_USS) {
		double *u = xmalloc(n * sizeof(double));
		/* the machine's /dev/shm (no cgroup of the job's own) is every
		 * process's: not counted as the job's */
		bool shm = !run_kinds_shm_is_machine_wide(k) && run_kinds_unmapped_shm(k, xt, n, u) >= SHM_COUNTED_BYTES;
		/* GPU memory is memory the job holds too (device memory, which a
		 * host measure does not see): in the one judgment unless the
		 * host measure alone was asked for */
		double *g = xmalloc(n * sizeof(double));
		bool gpu = !measure_asked && gpu_at(s, xt, n, g) >= GPU_COUNTED_BYTES;
		if (shm || gpu) {
			for (size_t i = 0; i < n; i++) {
				y[i] += (shm ? u[i] : 0) + (gpu ? g[i] : 0);
				if (y[i] > (double)s->peak_bytes)
					s->peak_bytes = (uint64_t)y[i];
			}
			s->measure_shm = shm;
			s->measure_gpu = gpu;
			analyze_series(x, y, n, opts, &s->a);
			s->verdict_judged = s->a.verdict;
			if (s->a.warmup_points && isfinite(s->a.warmup_end_x))
				s->warmup_steps = s->a.warmup_end_x;
			s->projected_seconds = -1;
			if (s->a.projected_to_limit >= 0 && isfinite(s->a.projected_to_limit)) {
				if (!strcmp(s->x_unit, "s"))
					s->projected_seconds = s->a.projected_to_limit;
				else if (s->steps_per_second > 0)
					s->projected_seconds = s->a.projected_to_limit / s->steps_per_second;
			}
			again = true;
		}
		free(u);
		free(g);
	}
	double *c = xmalloc(n * sizeof(double));
	processes_at(s, xt, n, c);
	run_kinds_processes(k, x, xt, c, n, opts);
	free(c);
	if (again || k->procs_piling)
		run_kinds_rediagnose(k, &s->a, opts);

	/* Growth too fast for its kinds to be read: not called a leak blind */
	if (s->a.verdict == VERDICT_LEAK && !k->has_diagnosis && k->nrows) {
		size_t from = 0;
		while (from + 1 < n && isfinite(s->a.window_from_x) && x[from] < s->a.window_from_x)
			from++;
		size_t seen = run_kinds_readings(k, xt[from], xt[n - 1]);
		if (seen < KINDS_MIN_READINGS) {
			char g[32], d[32];
			s->a.verdict = VERDICT_INCONCLUSIVE;
			s->kinds_unread = true;
			snprintf(s->a.reason, sizeof(s->a.reason),
			         "memory grew %s per %s, but over %s only, too fast for its kinds to be read"
			         " (%zu reading%s): a leak cannot be told from page cache or copy-on-write",
			         fmt_bytes(g, sizeof(g), s->a.slope), strcmp(s->x_unit, "s") ? "step" : "second",
			         fmt_duration(d, sizeof(d), xt[n - 1] - xt[from]), seen, seen == 1 ? "" : "s");
		}
	}
}

const char *run_summary_measure_label(const struct run_summary *s)
{
	static const char *const with[4][MEASURE_COUNT] = {
		{ [MEASURE_PSS] = "pss", [MEASURE_RSS] = "rss", [MEASURE_USS] = "uss" },
		{ [MEASURE_PSS] = "pss+shm", [MEASURE_RSS] = "rss+shm", [MEASURE_USS] = "uss+shm" },
		{ [MEASURE_PSS] = "pss+gpu", [MEASURE_RSS] = "rss+gpu", [MEASURE_USS] = "uss+gpu" },
		{ [MEASURE_PSS] = "pss+shm+gpu", [MEASURE_RSS] = "rss+shm+gpu", [MEASURE_USS] = "uss+shm+gpu" },
	};
	int also = (s->measure_shm ? 1 : 0) + (s->measure_gpu ? 2 : 0);
	if (also && s->measure < MEASURE_COUNT && with[also][s->measure])
		return with[also][s->measure];
	return measure_name(s->measure);
}

static double median_step_rate(const struct step_rec *st, size_t n)
{
	if (n < 2)
		return 0;
	double *d = xmalloc((n - 1) * sizeof(double));
	for (size_t i = 1; i < n; i++)
		d[i - 1] = st[i].mem.t - st[i - 1].mem.t;
	double med = median_of(d, n - 1);
	free(d);
	if (med > 0)
		return 1.0 / med;
	/* Most steps share a timestamp (faster than the clock we kept). */
	double span = st[n - 1].mem.t - st[0].mem.t;
	return span > 0 ? (double)(n - 1) / span : 0;
}

/* Steps [*first, *end) of the segment that marked the most, when the run
 * has more than one; s->judged_seq says which (-1: the whole run). */
static void judged_segment(struct run_summary *s, size_t *first, size_t *end)
{
	s->judged_seq = -1;
	if (s->nsegments < 2)
		return;
	size_t best = 0, best_first = 0, best_end = 0, i = 0;
	for (size_t k = 0; k < s->nsegments; k++) {
		/* segment k holds the steps before segment k+1 started */
		double next = k + 1 < s->nsegments ? s->segments[k + 1].started_at - s->run.started_at : INFINITY;
		size_t from = i;
		while (i < s->steps && s->step_recs[i].mem.t < next)
			i++;
		if (i - from > best) {
			best = i - from;
			best_first = from;
			best_end = i;
			s->judged_seq = s->segments[k].seq;
		}
	}
	if (best) {
		*first = best_first;
		*end = best_end;
	}
}

int run_summary_load(struct store *st, int64_t run_id, int measure_override,
                     struct run_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->x_unit = "step";
	s->limit_source = "";
	s->projected_seconds = -1;
	s->judged_seq = -1;
	int rc = store_get_run(st, run_id, &s->run);
	if (rc)
		return rc;
	int64_t id = s->run.id;
	s->measure = measure_override >= 0 && measure_override < MEASURE_COUNT ?
	             (enum measure)measure_override : s->run.measure;
	run_command_parse(s->run.command_json, &s->argv, &s->argc);

	if (store_load_steps(st, id, &s->step_recs, &s->steps) < 0 ||
	    store_load_samples(st, id, &s->samples, &s->nsamples) < 0 ||
	    store_load_results(st, id, &s->results, &s->nresults) < 0 ||
	    store_load_events(st, id, &s->events, &s->nevents) < 0 ||
	    store_load_segments(st, id, &s->segments, &s->nsegments) < 0) {
		run_summary_release(s);
		return -1;
	}
	/* The source is written at the end of the run: a run whose supervisor
	 * was killed has steps but no source. Steps come from --step-regex when
	 * the run had one, else from the channel. */
	if (s->steps && s->run.step_source == STEP_SOURCE_NONE)
		s->run.step_source = s->run.step_regex && *s->run.step_regex ? STEP_SOURCE_REGEX : STEP_SOURCE_CHANNEL;
	struct proc_row *top = NULL;
	size_t ntop = 0;
	if (store_top_procs(st, id, &top, &ntop, 1) == 0 && ntop == 1) {
		s->top_proc = top[0];
		s->has_top_proc = 1;
	}
	free(top);

	/* Where each segment's memory started: after a restart, afresh. */
	s->segment_start_bytes = xmalloc((s->nsegments ? s->nsegments : 1) * sizeof(double));
	for (size_t k = 0, i = 0; k < s->nsegments; k++) {
		double from = s->segments[k].started_at - s->run.started_at;
		while (i < s->nsamples && s->samples[i].t < from)
			i++;
		s->segment_start_bytes[k] = i < s->nsamples ? mem_sample_value(&s->samples[i], s->measure) : -1;
	}

	/* The series. */
	size_t cap = s->steps > s->nsamples ? s->steps : s->nsamples;
	double *x = s->judged_x = xmalloc((cap ? cap : 1) * sizeof(double));
	double *y = s->judged_y = xmalloc((cap ? cap : 1) * sizeof(double));
	double *xt = s->judged_t = xmalloc((cap ? cap : 1) * sizeof(double));   /* each x's time */
	size_t n = 0;
	if (s->steps) {
		/* With restarts, memory starts afresh in each process: judge the
		 * process that marked the most steps, on its own. */
		size_t first = 0, end = s->steps;
		judged_segment(s, &first, &end);
		bool increasing = true;
		for (size_t i = first + 1; i < end; i++)
			if (s->step_recs[i].step <= s->step_recs[i - 1].step)
				increasing = false;
		s->judged_rec = xmalloc((cap ? cap : 1) * sizeof(size_t));
		for (size_t i = first; i < end; i++) {
			double v = mem_sample_value(&s->step_recs[i].mem, s->measure);
			if (v < 0)
				continue;
			x[n] = increasing ? (double)s->step_recs[i].step : (double)(i - first + 1);
			xt[n] = s->step_recs[i].mem.t;
			s->judged_rec[n] = i;
			y[n++] = v;
		}
		n = trim_release_at_end(x, y, xt, n);
		s->steps_per_second = median_step_rate(s->step_recs, s->steps);
	} else {
		s->x_unit = "s";
		n = bin_samples(s->samples, s->nsamples, s->measure, x, y, &s->bin_seconds);
		n = trim_release_at_end(x, y, NULL, n);
		for (size_t i = 0; i < n; i++)
			xt[i] = x[i];
	}
	s->judged_n = n;

	/* The limit a projection aims at. */
	if (s->run.limit_bytes) {
		s->limit_bytes = (double)s->run.limit_bytes;
		s->limit_source = s->run.limit_source[0] ? s->run.limit_source : "limit";
	} else if (s->run.mem_total_bytes) {
		s->limit_bytes = (double)s->run.mem_total_bytes;
		s->limit_source = "machine";
	}

	struct analyze_opts opts;
	analyze_opts_init(&opts);
	opts.limit_bytes = s->limit_bytes;
	opts.x_unit = s->x_unit;
	analyze_series(x, y, n, &opts, &s->a);
	s->verdict_judged = s->a.verdict;

	if (s->a.warmup_points && isfinite(s->a.warmup_end_x))
		s->warmup_steps = s->a.warmup_end_x;
	if (s->a.projected_to_limit >= 0 && isfinite(s->a.projected_to_limit)) {
		if (!strcmp(s->x_unit, "s"))
			s->projected_seconds = s->a.projected_to_limit;
		else if (s->steps_per_second > 0)
			s->projected_seconds = s->a.projected_to_limit / s->steps_per_second;
	}

	/* Peak over everything measured. */
	double peak = 0;
	for (size_t i = 0; i < s->nsamples; i++) {
		peak = fmax(peak, mem_sample_value(&s->samples[i], s->measure));
		if (s->samples[i].nprocs > s->max_processes)
			s->max_processes = s->samples[i].nprocs;
	}
	for (size_t i = 0; i < s->steps; i++)
		peak = fmax(peak, mem_sample_value(&s->step_recs[i].mem, s->measure));
	s->peak_bytes = (uint64_t)peak;

	if (s->run.ended_at > 0)
		s->duration_s = s->run.ended_at - s->run.started_at;
	else if (s->nsamples)
		s->duration_s = s->samples[s->nsamples - 1].t;
	if (s->duration_s < 0)
		s->duration_s = 0;

	struct trace_report tr;
	double until = s->steps ? s->step_recs[s->steps - 1].mem.t : 0;
	int tr_rc = trace_report_load(st, id, strcmp(s->x_unit, "s") != 0, until, &s->a, &tr);
	if (tr_rc < 0)
		goto fail;
	if (tr_rc == 0) {
		s->trace = xmalloc(sizeof(*s->trace));
		*s->trace = tr;
	}

	struct census_report cr;
	int cr_rc = census_report_load(st, id, s->steps, s->duration_s, &cr);
	struct gpu_report gr;
	int gr_rc = cr_rc < 0 ? -1 : gpu_report_load(st, id, s->step_recs, s->steps, &gr);
	if (cr_rc == 0) {
		s->census = xmalloc(sizeof(*s->census));
		*s->census = cr;
	}
	if (gr_rc == 0) {
		s->gpu = xmalloc(sizeof(*s->gpu));
		*s->gpu = gr;
	}
	if (cr_rc < 0 || gr_rc < 0)
		goto fail;

	/* What kind of memory grows, and where; the flight recorder. The
	 * kinds are judged on the verdict's own x (its steps; seconds
	 * otherwise). */
	s->kinds = xcalloc(1, sizeof(*s->kinds));
	bool by_step = strcmp(s->x_unit, "s") != 0;
	char top_site[160] = "";
	trace_top_site_words(s->trace, top_site, sizeof(top_site));
	int k_rc = run_kinds_load(st, id, x, xt, by_step ? n : 0, s->bin_seconds, s->run.started_at, &opts, &s->a,
	                          s->segments, s->nsegments, top_site, s->kinds);
	if (k_rc < 0)
		goto fail;
	struct run_kinds *k = s->kinds;
	judge_all_memory(s, k, x, xt, y, n, &opts, measure_override >= 0);
	compose_reason(s);
	if (k->oom && s->census) {
		/* the flight recorder says what Python objects grew at the end */
		char words[640];
		if (census_report_window(st, id, k->window_t, k->end_t, s->census) < 0)
			goto fail;
		run_kinds_flight_append(k, census_flight_words(s->census, by_step ? "step" : "second", words,
		                                               sizeof(words)));
	}
	if (k->has_diagnosis && k->diagnosis_kind == KIND_COW && k->cow_rising) {
		/* copy-on-write levels off at its bound: project to that, not on */
		k->cow_level_bytes = s->a.last_bytes + fmax(0, k->cow_bound_bytes - k->cow_bytes);
		if (s->limit_bytes <= 0 || k->cow_level_bytes < s->limit_bytes) {
			s->a.projected_to_limit = -1;
			s->projected_seconds = -1;
		}
	}
	if (k->overrides_verdict) {
		s->a.verdict = VERDICT_NO_LEAK;
		if (k->diagnosis_kind == KIND_COW && k->cow_rising) {
			char g[32];
			snprintf(s->reason, sizeof(s->reason), "memory grows, but as copy-on-write of forked workers,"
			         " which levels off at %s, under the limit: not a leak (see the diagnosis)",
			         fmt_bytes(g, sizeof(g), k->cow_level_bytes));
		} else {
			snprintf(s->reason, sizeof(s->reason), "memory grew, but as %s that is not a leak (see the diagnosis)",
			         mem_kind_name(s->kinds->diagnosis_kind));
		}
	}
	const struct growth_kind *machine_shm = run_kinds_machine_shm_growth(k);
	if (machine_shm && s->a.verdict != VERDICT_LEAK) {
		/* shown, not judged: the job may have left it, or any other process */
		char g[32];
		size_t len = strlen(s->reason);
		snprintf(s->reason + len, sizeof(s->reason) - len,
		         "; the machine's /dev/shm grew %s per %s meanwhile, not counted: without a cgroup of the"
		         " job's own, its files cannot be told from other processes'", fmt_bytes(g, sizeof(g),
		         machine_shm->a.slope), strcmp(s->x_unit, "s") ? "step" : "second");
	}
	if (k->diagnosis_leak && s->a.verdict != VERDICT_LEAK) {
		/* one judgment: a headline that cannot see the leak says so */
		size_t len = strlen(s->reason);
		snprintf(s->reason + len, sizeof(s->reason) - len,
		         "; but the diagnosis below, which judges each kind of memory on its own, finds a leak"
		         " (measure %s)", run_summary_measure_label(s));
	}
	return 0;

fail:   /* a store that cannot be read: nothing half-loaded is kept */
	run_summary_release(s);
	return -1;
}

void run_summary_release(struct run_summary *s)
{
	if (!s)
		return;
	run_row_release(&s->run);
	run_argv_free(s->argv, s->argc);
	free(s->step_recs);
	free(s->samples);
	free(s->results);
	event_rows_free(s->events, s->nevents);
	segment_rows_free(s->segments, s->nsegments);
	free(s->segment_start_bytes);
	free(s->judged_x);
	free(s->judged_y);
	free(s->judged_t);
	free(s->judged_rec);
	if (s->trace) {
		trace_report_release(s->trace);
		free(s->trace);
	}
	if (s->census) {
		census_report_release(s->census);
		free(s->census);
	}
	free(s->gpu);
	if (s->kinds) {
		run_kinds_release(s->kinds);
		free(s->kinds);
	}
	memset(s, 0, sizeof(*s));
}
