/*
 * top.c — `leakproof top`: a live full-screen view (ncurses) of the runs in
 * the store: those running and those ended lately, one line each with its
 * memory, recent trend, growth and verdict so far, and time to its limit;
 * Enter opens one run (its processes, its growing allocation sites). With
 * no terminal, or --once, one snapshot as text or JSON.
 *
 * It only reads the store (store/live.h and the summary every report
 * uses), so the jobs pay nothing for it. Costs and choices:
 * docs/internals/top.md. Units: bytes, seconds.
 */
static const char usage_head[] =
"usage: leakproof top [options]\n"
"\n"
"Watch the runs in the store, live: those running and those that ended in\n"
"the last 10 minutes. Per run: id, memory now (under the run's measure) and\n"
"its recent course, growth per step so far with the verdict so far, time to\n"
"the memory limit at that rate, GPU memory, steps per second, restarts, how\n"
"it last ended, host and command. Sorted by time to the limit.\n"
"\n"
"keys: Up/Down select, Enter a run's processes and allocation sites (Esc\n"
"back), / filter by command text, s or > sort by the next column, < the\n"
"previous, r reverse, q or Ctrl-C quit.\n";

static const char usage_tail[] =
"exit status: 0; 1 when the store does not exist or cannot be read; 124 for\n"
"a usage error.\n";

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "platform/proc.h"
#include "judge/sites.h"
#include "judge/summary.h"
#include "report/report.h"
#include "store/live.h"
#include "store/store.h"
#include "util/jsonw.h"
#include "util/util.h"

enum { OPT_ONCE = 256 };

static const struct option_spec options[] = {
	OPT_VALUE('d', "delay", "SECONDS", "refresh every SECONDS (default 1; 0.1 to 3600)"),
	OPT_FLAG(OPT_ONCE, "once", "print one snapshot and exit (also when standard\n"
	                           "output is not a terminal)"),
	OPT_VALUE('f', "format", "F", "with --once: text (default) or json (an array of\n"
	                              "objects, one per run)"),
	CMD_OPT_STORE,
	OPT_HELP(),
	OPT_END(),
};

const struct cmd_usage top_usage = { "top", usage_head, options, usage_tail, false };

#define usage_error(...) cmd_usage_error("top", __VA_ARGS__)

#define RECENT_S 600.0          /* ended runs stay listed this long */
#define POINT_S 5.0             /* one sparkline point: the last sample of 5 s */
#define MAX_POINTS 120          /* points kept per run: 10 minutes */
#define TAIL_ROWS 5000          /* samples read per run and refresh, at most */
#define JUDGE_EVERY_S 5.0       /* a running run is judged again this often... */
#define JUDGE_COST_FACTOR 20    /* ...or 20 times what judging it took, if more */
#define LOST_AFTER_S 15.0       /* no sample for this long and its job gone: lost */
#define TOP_SITES 5             /* allocation sites kept per run */
#define LIST_SPARK 8            /* sparkline width in the list */
#define JUDGE_BUDGET_S 0.2      /* judging runs first seen ended, per refresh */
#define SETTLE_S 30.0           /* an ended run is read on this long after its end */

/* ---- what is known of one run ------------------------------------------ */

struct site_line {
	char label[128];
	double growth;              /* bytes per x unit */
	double live;
	bool growing;
	const char *state;          /* site_state_name(): static */
};

/* The judgment so far (the end-of-run summary's), kept between refreshes. */
struct judgment {
	bool valid;
	char verdict[16];           /* verdict_name() */
	char reason[256];
	const char *x_unit;         /* "step" or "s" (static) */
	double growth, growth_low, growth_high;   /* bytes per x unit */
	double steps_per_second;
	double projected_seconds;   /* <0: none */
	double limit_bytes;         /* 0: none */
	char limit_source[16];
	double peak_bytes;
	size_t steps;
	struct site_line sites[TOP_SITES];
	size_t nsites;
	bool traced;
};

struct run_state {
	int64_t id;
	bool seen;                  /* listed at the last refresh */
	struct run_row run;
	char *command;              /* argv as a shell reads it */
	char *short_command;        /* the same with directories of argv[0..1] cut */
	char **argv;
	size_t argc;
	double last_t;              /* newest sample read; -1 none */
	struct mem_sample last;     /* that sample */
	bool has_last;
	double points[MAX_POINTS];  /* the measure, one per POINT_S, oldest first */
	double point_t[MAX_POINTS];
	size_t npoints;
	int restarts;
	char last_cause[32];        /* "" none yet */
	const char *state;          /* "running", "ended", "lost" */
	int64_t judged_ns;          /* mono_ns of the judgment; 0 never */
	int64_t judge_cost_ns;
	bool judged_final;          /* judged after the run ended */
	bool read_final;            /* read whole after it ended: never read again */
	int64_t end_seen_ns;        /* mono_ns when first read ended; 0 not yet */
	bool segment_open;          /* its last segment has no end yet */
	struct judgment j;
	double to_limit;            /* seconds at the current rate; <0 none */
};

enum sort_key { SORT_LIMIT, SORT_MEM, SORT_GROWTH, SORT_RATE, SORT_ID, SORT_COMMAND, SORT_COUNT };
static const char *const sort_names[SORT_COUNT] = {
	"to-limit", "memory", "growth", "steps/s", "id", "command",
};

struct top {
	struct store *st;
	const char *path;
	char host[256];
	struct run_state **runs;    /* every run listed, newest first */
	size_t nruns, cap;
	struct run_state **shown;   /* filtered and sorted */
	size_t nshown;
	enum sort_key sort;
	bool reverse;
	char filter[128];
	bool utf8;
	bool judge_all;             /* --once: every run judged before the snapshot */
	bool file_store;            /* a file (not a server): watched for replacement */
	bool have_ino;
	dev_t dev;                  /* the store file's, when opened */
	ino_t ino;
};

static void run_state_free(struct run_state *r)
{
	if (!r)
		return;
	run_row_release(&r->run);
	free(r->command);
	free(r->short_command);
	run_argv_free(r->argv, r->argc);
	free(r);
}

static struct run_state *find_run(struct top *t, int64_t id)
{
	for (size_t i = 0; i < t->nruns; i++)
		if (t->runs[i]->id == id)
			return t->runs[i];
	return NULL;
}

static const char *base_name(const char *s)
{
	const char *slash = strrchr(s, '/');
	return slash && slash[1] ? slash + 1 : s;
}

static void set_command(struct run_state *r)
{
	run_argv_free(r->argv, r->argc);
	free(r->command);
	free(r->short_command);
	run_command_parse(r->run.command_json, &r->argv, &r->argc);
	struct strbuf sb = STRBUF_INIT;
	report_add_command_line(&sb, r->argv, r->argc, 0);
	r->command = strbuf_detach(&sb, NULL);
	/* Short: "python3 train.py --lr 0.1" for "/usr/bin/python3 /home/.../train.py ...". */
	char **shortv = xcalloc(r->argc + 1, sizeof(char *));
	for (size_t i = 0; i < r->argc; i++)
		shortv[i] = i < 2 ? (char *)base_name(r->argv[i]) : r->argv[i];
	report_add_command_line(&sb, shortv, r->argc, 0);
	free(shortv);
	r->short_command = strbuf_detach(&sb, NULL);
}

/* Fold samples (oldest first) into the run's points: the last sample of
 * each POINT_S slot. */
static void add_points(struct run_state *r, const struct mem_sample *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double v = mem_sample_value(&s[i], r->run.measure);
		if (v < 0)
			continue;
		double slot = floor(s[i].t / POINT_S);
		if (r->npoints && floor(r->point_t[r->npoints - 1] / POINT_S) == slot) {
			r->points[r->npoints - 1] = v;
			r->point_t[r->npoints - 1] = s[i].t;
			continue;
		}
		if (r->npoints == MAX_POINTS) {
			memmove(r->points, r->points + 1, (MAX_POINTS - 1) * sizeof(double));
			memmove(r->point_t, r->point_t + 1, (MAX_POINTS - 1) * sizeof(double));
			r->npoints--;
		}
		r->points[r->npoints] = v;
		r->point_t[r->npoints++] = s[i].t;
	}
}

static void site_label(const struct trace_site_report *s, char *buf, size_t sz)
{
	if (s->npython) {
		snprintf(buf, sz, "%s (%s:%d)", s->python[0].function, base_name(s->python[0].file), s->python[0].line);
		return;
	}
	if (s->blame < s->nframes) {
		const struct trace_frame *f = &s->frames[s->blame];
		snprintf(buf, sz, "%s (%s)", f->function[0] ? f->function : "?", f->library);
		return;
	}
	snprintf(buf, sz, "site %lld", (long long)s->site);
}

/* Judge the run as its end-of-run summary would, now. */
static int judge(struct top *t, struct run_state *r)
{
	struct run_summary s;
	int64_t t0 = mono_ns();
	int rc = run_summary_load(t->st, r->id, -1, &s);
	if (rc)
		return rc < 0 ? -1 : 0;
	struct judgment *j = &r->j;
	memset(j, 0, sizeof(*j));
	j->valid = true;
	snprintf(j->verdict, sizeof(j->verdict), "%s", verdict_name(s.a.verdict));
	snprintf(j->reason, sizeof(j->reason), "%s", s.reason);
	j->x_unit = !strcmp(s.x_unit, "s") ? "s" : "step";
	j->growth = s.a.slope;
	j->growth_low = s.a.slope_low;
	j->growth_high = s.a.slope_high;
	j->steps_per_second = s.steps_per_second;
	j->projected_seconds = s.projected_seconds;
	j->limit_bytes = s.limit_bytes;
	snprintf(j->limit_source, sizeof(j->limit_source), "%s", s.limit_source);
	j->peak_bytes = (double)s.peak_bytes;
	j->steps = s.steps;
	if (s.trace) {
		j->traced = true;
		for (size_t i = 0; i < s.trace->nsites && j->nsites < TOP_SITES; i++) {
			const struct trace_site_report *site = &s.trace->sites[i];
			struct site_line *l = &j->sites[j->nsites++];
			site_label(site, l->label, sizeof(l->label));
			l->growth = site->growth;
			l->live = site->live;
			l->growing = site->growing;
			l->state = site_state_name(site->state);
		}
	}
	run_summary_release(&s);
	r->judged_ns = mono_ns();
	r->judge_cost_ns = r->judged_ns - t0;
	/* final with all the run wrote; or one a reader calls interrupted,
	 * whose supervisor writes no more */
	r->judged_final = r->read_final || (r->run.ended_at > 0 && r->segment_open);
	return 0;
}

static bool due_for_judgment(const struct run_state *r, int64_t now)
{
	if (!r->judged_ns)
		return true;
	if (r->judged_final)
		return false;
	if (r->read_final)
		return true;            /* once more, with all it wrote */
	int64_t every = (int64_t)(JUDGE_EVERY_S * 1e9);
	if (r->judge_cost_ns * JUDGE_COST_FACTOR > every)
		every = r->judge_cost_ns * JUDGE_COST_FACTOR;
	return now - r->judged_ns >= every;
}

/* Time to the limit at the judged rate, from the memory now. */
static double time_to_limit(const struct run_state *r)
{
	const struct judgment *j = &r->j;
	if (!j->valid || r->run.ended_at > 0 || j->projected_seconds < 0 || !(j->growth > 0) || !r->has_last)
		return -1;
	double per_second = !strcmp(j->x_unit, "s") ? j->growth : j->growth * j->steps_per_second;
	double now = mem_sample_value(&r->last, r->run.measure);
	if (!(per_second > 0) || now < 0 || j->limit_bytes <= 0)
		return -1;
	return now >= j->limit_bytes ? 0 : (j->limit_bytes - now) / per_second;
}

static bool job_gone(const struct top *t, const struct run_state *r, const struct segment_row *seg)
{
	if (strcmp(r->run.hostname, t->host) || !seg || seg->pid <= 0)
		return false;
	struct proc_stat ps;
	/* A zombie is gone too: with its supervisor dead, nobody may reap it. */
	return read_proc_stat(NULL, seg->pid, &ps) < 0 || ps.state == 'Z' || ps.state == 'X';
}

/* Whether r may be judged now: a running run when due; one first seen
 * ended while this refresh's judging budget lasts (judge_until_ns; 0: no
 * budget), so that the first screen of a store with many runs ended lately
 * comes at once and their judgments over the next refreshes. */
static bool may_judge(const struct run_state *r, int64_t now_ns, int64_t judge_until_ns)
{
	if (!due_for_judgment(r, now_ns))
		return false;
	return r->judged_ns || r->run.ended_at <= 0 || !judge_until_ns || mono_ns() < judge_until_ns;
}

/* Read one run again, its row given (row: taken): new samples, segments;
 * judge when due. */
static int refresh_run(struct top *t, struct run_state *r, struct run_row *row, int64_t now_ns, double now,
                       int64_t judge_until_ns)
{
	run_row_release(&r->run);
	r->run = *row;
	memset(row, 0, sizeof(*row));
	row->id = r->run.id;        /* still found by id (reload()'s bsearch) */
	if (!r->command)
		set_command(r);

	struct mem_sample *tail;
	size_t n;
	if (store_live_tail(t->st, r->id, r->last_t, TAIL_ROWS, &tail, &n) < 0)
		return -1;
	if (n) {
		add_points(r, tail, n);
		r->last = tail[n - 1];
		r->last_t = tail[n - 1].t;
		r->has_last = true;
	}
	free(tail);

	struct segment_row *segs;
	size_t nsegs;
	if (store_load_segments(t->st, r->id, &segs, &nsegs) < 0)
		return -1;
	r->restarts = nsegs > 1 ? (int)nsegs - 1 : 0;
	r->last_cause[0] = '\0';
	for (size_t i = nsegs; i-- > 0;) {
		if (segs[i].ended_at > 0) {
			snprintf(r->last_cause, sizeof(r->last_cause), "%s", segs[i].cause[0] ? segs[i].cause : "exit");
			break;
		}
	}
	/* the end of the run is written before that of its last segment */
	r->segment_open = nsegs && segs[nsegs - 1].ended_at <= 0;
	double last_at = r->run.started_at + (r->has_last ? r->last_t : 0);
	if (r->run.ended_at > 0)
		r->state = "ended";
	else if (now - last_at > LOST_AFTER_S && job_gone(t, r, nsegs ? &segs[nsegs - 1] : NULL))
		r->state = "lost";
	else
		r->state = "running";
	segment_rows_free(segs, nsegs);

	/* An ended run's rows change no more: read once after its end and
	 * that of its last segment (the supervisor flushes its samples before
	 * it ends the run, then closes the segment). A run a reader calls
	 * interrupted (its supervisor gone) keeps its segment open: read on.
	 * And for SETTLE_S after the end: a supervisor whose PostgreSQL store
	 * was away writes the end it queued before the samples it buffered. */
	if (r->run.ended_at > 0 && !r->end_seen_ns)
		r->end_seen_ns = now_ns;
	r->read_final = r->run.ended_at > 0 && !r->segment_open &&
	                (now - r->run.ended_at >= SETTLE_S || now_ns - r->end_seen_ns >= (int64_t)(SETTLE_S * 1e9));
	if (may_judge(r, now_ns, judge_until_ns) && judge(t, r) < 0)
		return -1;
	r->to_limit = time_to_limit(r);
	return 0;
}

static bool lost_long_ago(const struct run_state *r, double now)
{
	return !strcmp(r->state, "lost") && now - (r->run.started_at + r->last_t) > RECENT_S;
}

static int compare_row_ids(const void *a, const void *b)
{
	int64_t x = ((const struct run_row *)a)->id, y = ((const struct run_row *)b)->id;
	return (x > y) - (x < y);
}

static void drop_runs(struct top *t)
{
	for (size_t i = 0; i < t->nruns; i++)
		run_state_free(t->runs[i]);
	free(t->runs);
	t->runs = NULL;
	t->nruns = 0;
}

/* The store file's identity now; false when it is gone. */
static bool store_file_id(const struct top *t, dev_t *dev, ino_t *ino)
{
	struct stat sb;
	if (stat(t->path, &sb) < 0)
		return false;
	*dev = sb.st_dev;
	*ino = sb.st_ino;
	return true;
}

/*
 * A store file deleted, or replaced by another at its path (a new inode):
 * what top holds open is the old one, which nobody writes any more. Close
 * it, forget its runs, and open what is at the path now. 0 (also when
 * nothing is there yet: the list is empty until it is), or -1.
 */
static int follow_store_file(struct top *t)
{
	if (!t->file_store)
		return 0;
	dev_t dev;
	ino_t ino;
	bool exists = store_file_id(t, &dev, &ino);
	if (t->st && exists && t->have_ino && dev == t->dev && ino == t->ino)
		return 0;
	if (t->st && exists && !t->have_ino)
		return 0;
	if (t->st) {
		store_close(t->st);
		t->st = NULL;
		drop_runs(t);
	}
	if (!exists)
		return 0;
	t->st = store_open_readonly(t->path);
	if (!t->st)
		return -1;
	t->have_ino = store_file_id(t, &t->dev, &t->ino);
	return 0;
}

/*
 * Read the store again: the list of runs (ids and ends) in one statement,
 * the rows of those not yet read whole after their end in one more, then
 * their new samples and segments. An ended run read once is kept as it is.
 * 0, or -1 after a message.
 */
static int reload(struct top *t)
{
	if (follow_store_file(t) < 0)
		return -1;
	if (!t->st)
		return 0;
	double now = wall_seconds();
	int64_t now_ns = mono_ns();
	int64_t judge_until_ns = t->judge_all ? 0 : now_ns + (int64_t)(JUDGE_BUDGET_S * 1e9);
	struct live_run *list;
	size_t nlist;
	if (store_live_runs(t->st, now - RECENT_S, &list, &nlist) < 0)
		return -1;
	int64_t *need = xcalloc(nlist ? nlist : 1, sizeof(*need));
	size_t nneed = 0;
	for (size_t i = 0; i < nlist; i++) {
		struct run_state *r = find_run(t, list[i].id);
		if (!r || !r->read_final)
			need[nneed++] = list[i].id;
	}
	struct run_row *rows = NULL;
	size_t nrows = 0;
	if (nneed && store_get_runs(t->st, need, nneed, &rows, &nrows) < 0) {
		free(need);
		free(list);
		return -1;
	}
	free(need);
	if (nrows)
		qsort(rows, nrows, sizeof(*rows), compare_row_ids);

	for (size_t i = 0; i < t->nruns; i++)
		t->runs[i]->seen = false;
	struct run_state **next = xcalloc(nlist ? nlist : 1, sizeof(*next));
	size_t nnext = 0;
	int status = 0;
	for (size_t i = 0; i < nlist; i++) {
		struct run_state *r = find_run(t, list[i].id);
		if (r && r->read_final) {
			r->seen = true;
			if (may_judge(r, now_ns, judge_until_ns) && judge(t, r) < 0)
				status = -1;
			next[nnext++] = r;
			continue;
		}
		struct run_row key = { .id = list[i].id };
		struct run_row *row = nrows ? bsearch(&key, rows, nrows, sizeof(*rows), compare_row_ids) : NULL;
		if (!r) {
			r = xcalloc(1, sizeof(*r));
			r->id = list[i].id;
			r->last_t = -1;
			r->state = "running";
		}
		r->seen = true;
		int rc = status || !row ? 1 : refresh_run(t, r, row, now_ns, now, judge_until_ns);
		if (rc < 0)
			status = -1;
		if (rc || lost_long_ago(r, now)) {
			if (!find_run(t, r->id))
				run_state_free(r);
			else
				r->seen = false;
			continue;
		}
		next[nnext++] = r;
	}
	for (size_t i = 0; i < t->nruns; i++)
		if (!t->runs[i]->seen)
			run_state_free(t->runs[i]);
	free(t->runs);
	run_rows_free(rows, nrows);
	free(list);
	t->runs = next;
	t->nruns = nnext;
	return status;
}

/* ---- order and filter -------------------------------------------------- */

static enum sort_key sort_by;
static bool sort_reverse;

/* Values that sort last whatever the direction are NAN. */
static double sort_value(const struct run_state *r)
{
	switch (sort_by) {
	case SORT_LIMIT: return r->to_limit >= 0 ? r->to_limit : NAN;
	case SORT_MEM: return r->has_last ? -mem_sample_value(&r->last, r->run.measure) : NAN;
	case SORT_GROWTH: return r->j.valid && isfinite(r->j.growth) ? -r->j.growth : NAN;
	case SORT_RATE: return r->j.valid && r->j.steps_per_second > 0 ? -r->j.steps_per_second : NAN;
	case SORT_ID: return -(double)r->id;
	default: return 0;
	}
}

static int compare_runs(const void *pa, const void *pb)
{
	const struct run_state *a = *(const struct run_state *const *)pa;
	const struct run_state *b = *(const struct run_state *const *)pb;
	int c = 0;
	if (sort_by == SORT_COMMAND) {
		c = strcmp(a->short_command, b->short_command);
	} else {
		double va = sort_value(a), vb = sort_value(b);
		if (isnan(va) != isnan(vb))
			return isnan(va) ? 1 : -1;
		c = va < vb ? -1 : va > vb ? 1 : 0;
	}
	if (sort_reverse)
		c = -c;
	if (!c)   /* running before ended, then newest first */
		c = (a->run.ended_at > 0) - (b->run.ended_at > 0);
	return c ? c : (a->id < b->id) - (a->id > b->id);
}

static void order(struct top *t)
{
	free(t->shown);
	t->shown = xcalloc(t->nruns ? t->nruns : 1, sizeof(*t->shown));
	t->nshown = 0;
	for (size_t i = 0; i < t->nruns; i++)
		if (!t->filter[0] || strcasestr(t->runs[i]->command, t->filter))
			t->shown[t->nshown++] = t->runs[i];
	sort_by = t->sort;
	sort_reverse = t->reverse;
	qsort(t->shown, t->nshown, sizeof(*t->shown), compare_runs);
}

/* ---- cells ------------------------------------------------------------- */

/* "384M", "1.2G", "64K", "512B": at most 5 columns. */
static void fmt_size(char *buf, size_t sz, double bytes)
{
	static const char units[] = "BKMGTP";
	double a = fabs(bytes);
	int u = 0;
	while (a >= 1000 && u < 5) {
		a /= 1024;
		u++;
	}
	const char *sign = bytes < 0 ? "-" : "";
	if (u && a < 10)
		snprintf(buf, sz, "%s%.1f%c", sign, a, units[u]);
	else
		snprintf(buf, sz, "%s%.0f%c", sign, a, units[u]);
}

/* "45s", "12m", "3h05", "2.5d". */
static void fmt_eta(char *buf, size_t sz, double s)
{
	if (s < 0 || !isfinite(s))
		snprintf(buf, sz, "-");
	else if (s < 100)
		snprintf(buf, sz, "%.0fs", s);
	else if (s < 6000)
		snprintf(buf, sz, "%.0fm", s / 60);
	else if (s < 86400)
		snprintf(buf, sz, "%dh%02d", (int)(s / 3600), (int)fmod(s / 60, 60));
	else if (s < 100 * 86400)
		snprintf(buf, sz, "%.1fd", s / 86400);
	else
		snprintf(buf, sz, ">99d");
}

static void fmt_growth(char *buf, size_t sz, const struct judgment *j)
{
	if (!j->valid || !isfinite(j->growth)) {
		snprintf(buf, sz, "-");
		return;
	}
	char num[16];
	fmt_size(num, sizeof(num), j->growth);
	snprintf(buf, sz, "%s%s%s", j->growth > 0 ? "+" : "", num, !strcmp(j->x_unit, "s") ? "/s" : "");
}

/* The last width points as block characters (ASCII when the terminal is
 * not UTF-8), scaled between their minimum and maximum; a range under 1%
 * of the maximum is drawn flat. */
static void add_sparkline(struct strbuf *sb, const struct run_state *r, size_t width, bool utf8)
{
	static const char *const blocks[] = { "\u2581", "\u2582", "\u2583", "\u2584",
	                                      "\u2585", "\u2586", "\u2587", "\u2588" };
	static const char ascii[] = "_.-:=+*#";
	size_t n = r->npoints < width ? r->npoints : width;
	const double *p = r->points + r->npoints - n;
	double lo = INFINITY, hi = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		lo = fmin(lo, p[i]);
		hi = fmax(hi, p[i]);
	}
	for (size_t i = n; i < width; i++)
		strbuf_addch(sb, ' ');
	for (size_t i = 0; i < n; i++) {
		int level = hi - lo > 0.01 * hi ? (int)((p[i] - lo) / (hi - lo) * 7.0 + 0.5) : 0;
		if (utf8)
			strbuf_addstr(sb, blocks[level]);
		else
			strbuf_addch(sb, ascii[level]);
	}
}

enum column { C_ID, C_STATE, C_MEM, C_SPARK, C_GROWTH, C_VERDICT, C_LIMIT, C_GPU, C_RATE,
              C_RESTARTS, C_END, C_HOST, C_COMMAND, C_COUNT };
static const struct {
	const char *title;
	int width;
	bool left;
} columns[C_COUNT] = {
	[C_ID] = { "ID", 4, false },
	[C_STATE] = { "STATE", 7, true },
	[C_MEM] = { "MEM", 5, false },
	[C_SPARK] = { "RECENT", LIST_SPARK, true },
	[C_GROWTH] = { "GROWTH", 7, false },
	[C_VERDICT] = { "VERDICT", 7, true },
	[C_LIMIT] = { "LIMIT", 5, false },
	[C_GPU] = { "GPU", 5, false },
	[C_RATE] = { "STEP/S", 6, false },
	[C_RESTARTS] = { "RST", 3, false },
	[C_END] = { "END", 7, true },
	[C_HOST] = { "HOST", 10, true },
	[C_COMMAND] = { "COMMAND", 0, true },
};
/* Dropped first when the terminal is narrow. */
static const enum column drop_order[] = { C_HOST, C_STATE, C_RESTARTS, C_GPU, C_END, C_RATE, C_SPARK,
                                          C_LIMIT, C_VERDICT, C_GROWTH };
#define COMMAND_MIN 16

/* Which columns to show in width (0: all, commands uncut). Columns with
 * nothing to say for any run (GPU, restarts, other hosts) are left out. */
static void choose_columns(const struct top *t, int width, bool show[C_COUNT])
{
	bool gpu = false, restarts = false, hosts = false;
	for (size_t i = 0; i < t->nshown; i++) {
		const struct run_state *r = t->shown[i];
		gpu |= r->has_last && r->last.has_gpu;
		restarts |= r->restarts > 0;
		hosts |= strcmp(r->run.hostname, t->host) != 0;
	}
	for (int c = 0; c < C_COUNT; c++)
		show[c] = true;
	show[C_GPU] = gpu || width == 0;
	show[C_RESTARTS] = restarts || width == 0;
	show[C_HOST] = hosts || width == 0;
	if (!width)
		return;
	for (size_t d = 0; d < sizeof(drop_order) / sizeof(drop_order[0]); d++) {
		int used = 0;
		for (int c = 0; c < C_COMMAND; c++)
			if (show[c])
				used += columns[c].width + 1;
		if (width - used >= COMMAND_MIN)
			break;
		show[drop_order[d]] = false;
	}
}

/* Display columns of a UTF-8 string (one per code point). */
static size_t text_width(const char *s, size_t len)
{
	size_t w = 0;
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			w++;
	return w;
}

/* Append s in width columns (0: as it is), padded or cut. */
static void add_cell(struct strbuf *sb, const char *s, int width, bool left)
{
	size_t len = strlen(s), w = text_width(s, len);
	if (width <= 0) {
		strbuf_add(sb, s, len);
		return;
	}
	if (w > (size_t)width) {
		size_t cols = 0, i = 0;
		while (i < len && cols < (size_t)width - 1) {
			i++;
			while (i < len && ((unsigned char)s[i] & 0xc0) == 0x80)
				i++;
			cols++;
		}
		strbuf_add(sb, s, i);
		strbuf_addch(sb, '~');
		return;
	}
	if (!left)
		for (size_t k = w; k < (size_t)width; k++)
			strbuf_addch(sb, ' ');
	strbuf_add(sb, s, len);
	if (left)
		for (size_t k = w; k < (size_t)width; k++)
			strbuf_addch(sb, ' ');
}

static const char *short_verdict(const struct judgment *j)
{
	if (!j->valid)
		return "-";
	return !strcmp(j->verdict, "inconclusive") ? "unsure" : j->verdict;
}

/* One line of the table (header when r is NULL), in width columns (0: no cut). */
static void add_line(struct strbuf *sb, const struct top *t, const struct run_state *r, const bool show[C_COUNT],
                     int width)
{
	size_t start = sb->len;
	int used = 0;
	for (int c = 0; c < C_COUNT; c++) {
		if (!show[c])
			continue;
		char buf[64] = "-";
		const char *text = buf;
		if (!r) {
			text = columns[c].title;
		} else {
			switch (c) {
			case C_ID: snprintf(buf, sizeof(buf), "%lld", (long long)r->id); break;
			case C_STATE: text = r->state; break;
			case C_MEM:
				if (r->has_last)
					fmt_size(buf, sizeof(buf), mem_sample_value(&r->last, r->run.measure));
				break;
			case C_SPARK: {
				struct strbuf sp = STRBUF_INIT;
				add_sparkline(&sp, r, LIST_SPARK, t->utf8);
				add_cell(sb, strbuf_str(&sp), columns[c].width, true);
				strbuf_release(&sp);
				strbuf_addch(sb, ' ');
				used += columns[c].width + 1;
				continue;
			}
			case C_GROWTH: fmt_growth(buf, sizeof(buf), &r->j); break;
			case C_VERDICT: text = short_verdict(&r->j); break;
			case C_LIMIT: fmt_eta(buf, sizeof(buf), r->to_limit); break;
			case C_GPU:
				if (r->has_last && r->last.has_gpu)
					fmt_size(buf, sizeof(buf), (double)r->last.gpu);
				break;
			case C_RATE:
				if (r->j.valid && r->j.steps_per_second > 0)
					snprintf(buf, sizeof(buf), r->j.steps_per_second < 100 ? "%.1f" : "%.0f",
					         r->j.steps_per_second);
				break;
			case C_RESTARTS: snprintf(buf, sizeof(buf), "%d", r->restarts); break;
			case C_END: text = r->last_cause[0] ? r->last_cause : "-"; break;
			case C_HOST: text = r->run.hostname[0] ? r->run.hostname : "-"; break;
			case C_COMMAND: text = width ? r->short_command : r->command; break;
			}
		}
		if (c == C_COMMAND) {
			add_cell(sb, text, width ? (width - used > 1 ? width - used : 1) : 0, true);
			break;
		}
		add_cell(sb, text, columns[c].width, columns[c].left);
		strbuf_addch(sb, ' ');
		used += columns[c].width + 1;
	}
	if (!width)   /* no trailing blanks in text output */
		while (sb->len > start && sb->buf[sb->len - 1] == ' ')
			sb->buf[--sb->len] = '\0';
}

/* ---- snapshot: text and json ------------------------------------------- */

/* One run: the object `ls` writes (report_json_run()), with the judgment
 * so far in place of the stored one, then what only the live view knows. */
static void add_json_run(struct json_writer *jw, const struct run_state *r)
{
	const struct judgment *j = &r->j;
	double mem = r->has_last ? mem_sample_value(&r->last, r->run.measure) : NAN;
	double peak = fmax((double)r->run.peak_bytes, j->valid ? j->peak_bytes : 0);   /* as judged, or seen since */
	for (size_t i = 0; i < r->npoints; i++)
		peak = fmax(peak, r->points[i]);
	struct run_json_now now = {
		.verdict = j->valid ? j->verdict : NULL,
		.growth_bytes_per_step = j->valid ? j->growth : NAN,
		.steps = j->valid ? (int64_t)j->steps : r->run.steps,
		.peak_bytes = peak,
	};

	jw_array_object(jw, false);
	report_json_run(jw, &r->run, &now);
	jw_break(jw);
	jw_object_string(jw, "command_line", r->command);
	jw_object_string(jw, "state", r->state);
	jw_object_double(jw, "memory_bytes", mem >= 0 ? mem : NAN);
	jw_object_array(jw, "recent_bytes", false);
	for (size_t i = 0; i < r->npoints; i++)
		jw_array_double(jw, r->points[i]);
	jw_end(jw);
	jw_object_double(jw, "recent_point_seconds", POINT_S);
	jw_break(jw);
	jw_object_double(jw, "gpu_bytes", r->has_last && r->last.has_gpu ? (double)r->last.gpu : NAN);
	jw_object_array(jw, "growth_interval_bytes_per_step", false);
	jw_array_double(jw, j->valid ? j->growth_low : NAN);
	jw_array_double(jw, j->valid ? j->growth_high : NAN);
	jw_end(jw);
	jw_object_string(jw, "x_unit", j->valid ? j->x_unit : NULL);
	jw_break(jw);
	jw_object_string(jw, "reason", j->valid && j->reason[0] ? j->reason : NULL);
	jw_break(jw);
	jw_object_double(jw, "projected_seconds_to_limit", r->to_limit >= 0 ? r->to_limit : NAN);
	jw_object_double(jw, "limit_bytes", j->valid && j->limit_bytes > 0 ? j->limit_bytes : NAN);
	jw_object_string(jw, "limit_source", j->valid && j->limit_source[0] ? j->limit_source : NULL);
	jw_object_double(jw, "steps_per_second", j->valid && j->steps_per_second > 0 ? j->steps_per_second : NAN);
	jw_object_intmax(jw, "restarts", r->restarts);
	jw_object_string(jw, "last_end_cause", r->last_cause[0] ? r->last_cause : NULL);
	jw_end(jw);
}

static int snapshot(struct top *t, bool json)
{
	struct strbuf sb = STRBUF_INIT;
	if (json) {
		struct json_writer jw;
		jw_init(&jw, &sb);
		jw_array_begin(&jw, true);
		for (size_t i = 0; i < t->nshown; i++)
			add_json_run(&jw, t->shown[i]);
		jw_end(&jw);
		strbuf_addch(&sb, '\n');
	} else if (t->nshown) {
		bool show[C_COUNT];
		choose_columns(t, 0, show);
		add_line(&sb, t, NULL, show, 0);
		strbuf_addch(&sb, '\n');
		for (size_t i = 0; i < t->nshown; i++) {
			add_line(&sb, t, t->shown[i], show, 0);
			strbuf_addch(&sb, '\n');
		}
	} else {
		fprintf(stderr, "leakproof: no run running or ended in the last %.0f minutes in store '%s'\n",
		        RECENT_S / 60, t->path);
	}
	int status = 0;
	if ((sb.len && fwrite(sb.buf, 1, sb.len, stdout) != sb.len) || fflush(stdout) != 0) {
		error_errno("cannot write standard output");
		status = 1;
	}
	strbuf_release(&sb);
	return status;
}

/* ---- the screen -------------------------------------------------------- */

static volatile sig_atomic_t quit_signal;

static void on_quit(int sig)
{
	quit_signal = sig;
}

struct screen {
	int64_t selected;           /* run id under the cursor; 0 none */
	int64_t detail;             /* run id shown whole; 0: the list */
	bool editing;               /* typing a filter */
	char edit[128];
	size_t first;               /* first row shown when the list scrolls */
	char message[128];          /* one line at the bottom, until the next key */
};

static void put_line(int y, const char *s, attr_t attr)
{
	if (y >= LINES)
		return;
	attron(attr);
	mvaddstr(y, 0, s);
	if (attr & A_REVERSE) {
		int cy, cx;
		getyx(stdscr, cy, cx);
		if (cy == y)
			for (int x = cx; x < COLS; x++)
				addch(' ');
	}
	attroff(attr);
}

/* s cut to the screen's width. */
static void put_text(int y, const char *s, attr_t attr)
{
	struct strbuf sb = STRBUF_INIT;
	add_cell(&sb, s, COLS > 1 ? COLS - 1 : 1, true);
	put_line(y, strbuf_str(&sb), attr);
	strbuf_release(&sb);
}

static void draw_list(struct top *t, struct screen *sc)
{
	char head[256];
	size_t running = 0;
	for (size_t i = 0; i < t->nruns; i++)
		running += !strcmp(t->runs[i]->state, "running");
	snprintf(head, sizeof(head), "leakproof top: %zu running, %zu ended lately   sort: %s%s%s%s", running,
	         t->nruns - running, sort_names[t->sort], t->reverse ? " (reversed)" : "",
	         t->filter[0] ? "   filter: " : "", t->filter);
	put_text(0, head, A_BOLD);

	bool show[C_COUNT];
	choose_columns(t, COLS, show);
	struct strbuf sb = STRBUF_INIT;
	add_line(&sb, t, NULL, show, COLS - 1);
	put_line(1, strbuf_str(&sb), A_REVERSE);

	size_t sel = 0;
	bool found = false;
	for (size_t i = 0; i < t->nshown; i++)
		if (t->shown[i]->id == sc->selected) {
			sel = i;
			found = true;
		}
	if (!found && t->nshown)
		sc->selected = t->shown[0]->id;
	size_t rows = LINES > 3 ? (size_t)LINES - 3 : 1;
	if (sel < sc->first)
		sc->first = sel;
	if (sel >= sc->first + rows)
		sc->first = sel - rows + 1;
	if (sc->first >= t->nshown)
		sc->first = 0;
	for (size_t i = sc->first; i < t->nshown && i - sc->first < rows; i++) {
		const struct run_state *r = t->shown[i];
		strbuf_reset(&sb);
		add_line(&sb, t, r, show, COLS - 1);
		attr_t attr = r->id == sc->selected ? A_REVERSE : strcmp(r->state, "running") ? A_DIM : A_NORMAL;
		if (r->j.valid && !strcmp(r->j.verdict, "leak") && r->id != sc->selected)
			attr |= A_BOLD;
		put_line(2 + (int)(i - sc->first), strbuf_str(&sb), attr);
	}
	if (!t->nshown)
		put_text(2, t->filter[0] ? "no run matches the filter" : "no run running or ended in the last 10 minutes",
		         A_NORMAL);
	strbuf_release(&sb);
}

static void draw_detail(struct top *t, struct screen *sc)
{
	const struct run_state *r = find_run(t, sc->detail);
	if (!r) {
		put_text(0, "the run is gone from the list (Esc: back)", A_BOLD);
		return;
	}
	const struct judgment *j = &r->j;
	char buf[512], a[32], b[32], c[32];
	int y = 0;
	snprintf(buf, sizeof(buf), "run %lld: %s on %s, measure %s", (long long)r->id, r->state,
	         r->run.hostname[0] ? r->run.hostname : "?", measure_name(r->run.measure));
	put_text(y++, buf, A_BOLD);
	put_text(y++, r->command, A_NORMAL);
	y++;
	fmt_bytes(a, sizeof(a), r->has_last ? mem_sample_value(&r->last, r->run.measure) : 0);
	double peak = j->valid ? j->peak_bytes : 0;   /* as judged, or seen since */
	for (size_t i = 0; i < r->npoints; i++)
		peak = fmax(peak, r->points[i]);
	fmt_bytes(b, sizeof(b), peak);
	if (j->valid && j->limit_bytes > 0)
		fmt_bytes(c, sizeof(c), j->limit_bytes);
	else
		snprintf(c, sizeof(c), "none known");
	snprintf(buf, sizeof(buf), "memory %s now, peak %s, limit %s%s%s%s", a, b, c,
	         j->valid && j->limit_source[0] ? " (" : "", j->valid ? j->limit_source : "",
	         j->valid && j->limit_source[0] ? ")" : "");
	put_text(y++, buf, A_NORMAL);
	if (j->valid) {
		fmt_bytes(a, sizeof(a), j->growth);
		fmt_eta(b, sizeof(b), r->to_limit);
		snprintf(buf, sizeof(buf), "growth %s per %s so far: %s; to the limit: %s", a, j->x_unit, j->verdict, b);
		put_text(y++, buf, A_NORMAL);
		put_text(y++, j->reason, A_NORMAL);
		snprintf(buf, sizeof(buf), "%zu steps (%.1f/s), %d restart%s, last end: %s", j->steps,
		         j->steps_per_second, r->restarts, r->restarts == 1 ? "" : "s",
		         r->last_cause[0] ? r->last_cause : "none yet");
		put_text(y++, buf, A_NORMAL);
	}
	struct strbuf sb = STRBUF_INIT;
	int spark = COLS - 12 > MAX_POINTS ? MAX_POINTS : COLS - 12;
	if (spark > 0) {
		strbuf_addstr(&sb, "recent    ");
		add_sparkline(&sb, r, (size_t)spark, t->utf8);
		put_line(y++, strbuf_str(&sb), A_NORMAL);
	}
	y++;

	struct proc_row *procs = NULL;
	size_t nprocs = 0;
	if (t->st && store_live_procs(t->st, r->id, &procs, &nprocs) < 0)
		snprintf(sc->message, sizeof(sc->message), "cannot read the run's processes");
	if (nprocs) {
		snprintf(buf, sizeof(buf), "processes at %.1f s:", procs[0].t);
		put_text(y++, buf, A_BOLD);
		snprintf(buf, sizeof(buf), "%7s %7s %6s %6s %6s %6s %6s  %s", "PID", "PPID", "RSS", "PSS", "USS",
		         "SWAP", "GPU", "NAME");
		put_text(y++, buf, A_REVERSE);
	} else {
		put_text(y++, "no per-process samples yet", A_NORMAL);
	}
	int room = LINES - y - 2 - (j->nsites ? (int)j->nsites + 2 : 0);
	for (size_t i = 0; i < nprocs && y < LINES - 1 && (int)i < (room > 1 ? room : 1); i++) {
		char v[5][16];
		fmt_size(v[0], sizeof(v[0]), (double)procs[i].rss);
		fmt_size(v[1], sizeof(v[1]), (double)procs[i].pss);
		fmt_size(v[2], sizeof(v[2]), (double)procs[i].uss);
		fmt_size(v[3], sizeof(v[3]), (double)procs[i].swap);
		fmt_size(v[4], sizeof(v[4]), (double)procs[i].gpu);
		snprintf(buf, sizeof(buf), "%7d %7d %6s %6s %6s %6s %6s  %s", procs[i].pid, procs[i].ppid, v[0], v[1],
		         v[2], v[3], v[4], procs[i].name);
		put_text(y++, buf, A_NORMAL);
	}
	free(procs);
	if (j->nsites && y < LINES - 2) {
		y++;
		put_text(y++, "allocation sites growing the most:", A_BOLD);
		for (size_t i = 0; i < j->nsites && y < LINES - 1; i++) {
			fmt_size(a, sizeof(a), j->sites[i].growth);
			fmt_size(b, sizeof(b), j->sites[i].live);
			snprintf(buf, sizeof(buf), "%7s/%s %7s live  %s%s%s%s", a, j->x_unit, b, j->sites[i].label,
			         j->sites[i].growing ? "" : " (", j->sites[i].growing ? "" : j->sites[i].state,
			         j->sites[i].growing ? "" : ")");
			put_text(y++, buf, A_NORMAL);
		}
	} else if (!j->traced && y < LINES - 2) {
		put_text(++y, "allocation sites: not traced (leakproof run --trace)", A_DIM);
	}
	strbuf_release(&sb);
}

static void draw(struct top *t, struct screen *sc)
{
	erase();
	if (sc->detail)
		draw_detail(t, sc);
	else
		draw_list(t, sc);
	char foot[192];
	if (sc->editing)
		snprintf(foot, sizeof(foot), "filter: %s", sc->edit);
	else if (sc->message[0])
		snprintf(foot, sizeof(foot), "%s", sc->message);
	else if (sc->detail)
		snprintf(foot, sizeof(foot), "Esc back  q quit");
	else
		snprintf(foot, sizeof(foot), "q quit  Up/Down select  Enter detail  / filter  s < sort  r reverse");
	put_text(LINES - 1, foot, sc->editing ? A_BOLD : A_DIM);
	if (sc->editing) {
		curs_set(1);
		move(LINES - 1, (int)text_width(foot, strlen(foot)) < COLS ? (int)text_width(foot, strlen(foot)) : COLS - 1);
	} else {
		curs_set(0);
	}
	refresh();
}

static void move_selection(struct top *t, struct screen *sc, int delta)
{
	for (size_t i = 0; i < t->nshown; i++) {
		if (t->shown[i]->id != sc->selected)
			continue;
		long k = (long)i + delta;
		if (k < 0)
			k = 0;
		if (k >= (long)t->nshown)
			k = (long)t->nshown - 1;
		sc->selected = t->shown[k]->id;
		return;
	}
}

/* Handle one key. Returns false to quit. */
static bool on_key(struct top *t, struct screen *sc, int ch)
{
	sc->message[0] = '\0';
	if (sc->editing) {
		size_t len = strlen(sc->edit);
		if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
			snprintf(t->filter, sizeof(t->filter), "%s", sc->edit);
			sc->editing = false;
		} else if (ch == 27) {
			sc->editing = false;
		} else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
			while (len > 0 && ((unsigned char)sc->edit[len - 1] & 0xc0) == 0x80)
				len--;
			if (len)
				sc->edit[len - 1] = '\0';
			else
				sc->edit[0] = '\0';
		} else if (ch >= 0x20 && ch < 0x100 && ch != 0x7f && len + 1 < sizeof(sc->edit)) {
			sc->edit[len] = (char)ch;
			sc->edit[len + 1] = '\0';
		}
		order(t);
		return true;
	}
	switch (ch) {
	case 'q': case 'Q': case 3:   /* Ctrl-C, should it arrive as a key */
		return false;
	case 27: case KEY_LEFT: case KEY_BACKSPACE: case 127: case 'h':
		sc->detail = 0;
		break;
	case '\n': case '\r': case KEY_ENTER: case KEY_RIGHT:
		if (!sc->detail && sc->selected)
			sc->detail = sc->selected;
		break;
	case KEY_UP: case 'k': move_selection(t, sc, -1); break;
	case KEY_DOWN: case 'j': move_selection(t, sc, 1); break;
	case KEY_PPAGE: move_selection(t, sc, -(LINES - 3)); break;
	case KEY_NPAGE: move_selection(t, sc, LINES - 3); break;
	case KEY_HOME: move_selection(t, sc, -(int)t->nshown); break;
	case KEY_END: move_selection(t, sc, (int)t->nshown); break;
	case '/':
		sc->detail = 0;
		sc->editing = true;
		snprintf(sc->edit, sizeof(sc->edit), "%s", t->filter);
		break;
	case 's': case '>': case '.': t->sort = (t->sort + 1) % SORT_COUNT; break;
	case '<': case ',': t->sort = (t->sort + SORT_COUNT - 1) % SORT_COUNT; break;
	case 'r': t->reverse = !t->reverse; break;
	case KEY_RESIZE: break;
	default:
		break;
	}
	order(t);
	return true;
}

/*
 * While the screen is ncurses', what the store's layers say on standard
 * error (a PostgreSQL store "unreachable", then "reachable again") goes
 * to a pipe, its last line to the footer: written to the terminal it
 * landed over the table, where ncurses, which does not know, redrew only
 * the cells it changed, so an ended run's row kept pieces of it (digits of
 * a server's address in MEM, the likely cause of 7.7 MiB shown as 716M).
 * Both ends non-blocking: a message the pipe has no room for is lost,
 * never waited on.
 */
struct captured_stderr {
	int saved;                  /* the real standard error; -1 none */
	int rd;
};

static void capture_stderr(struct captured_stderr *c)
{
	int p[2];
	c->saved = -1;
	c->rd = -1;
	fflush(stderr);
	if (pipe(p) < 0)
		return;
	c->saved = dup(STDERR_FILENO);
	if (c->saved < 0 || dup2(p[1], STDERR_FILENO) < 0) {
		if (c->saved >= 0)
			close(c->saved);
		c->saved = -1;
		close(p[0]);
		close(p[1]);
		return;
	}
	close(p[1]);
	c->rd = p[0];
	fcntl(c->rd, F_SETFL, fcntl(c->rd, F_GETFL) | O_NONBLOCK);
	fcntl(STDERR_FILENO, F_SETFL, fcntl(STDERR_FILENO, F_GETFL) | O_NONBLOCK);
	fcntl(c->rd, F_SETFD, FD_CLOEXEC);
	fcntl(c->saved, F_SETFD, FD_CLOEXEC);
}

/* What was said since the last call: its last line into msg. Whether
 * anything was. */
static bool read_captured(struct captured_stderr *c, char *msg, size_t sz)
{
	if (c->rd < 0)
		return false;
	fflush(stderr);
	char buf[4096];
	bool any = false;
	ssize_t n;
	while ((n = read(c->rd, buf, sizeof(buf) - 1)) > 0) {
		any = true;
		buf[n] = '\0';
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			buf[--n] = '\0';
		char *line = strrchr(buf, '\n');
		line = line ? line + 1 : buf;
		if (!strncmp(line, "leakproof: ", 11))
			line += 11;
		if (*line)
			snprintf(msg, sz, "%.*s", (int)(sz - 1), line);
	}
	return any;
}

static void release_stderr(struct captured_stderr *c)
{
	if (c->saved < 0)
		return;
	fflush(stderr);
	dup2(c->saved, STDERR_FILENO);
	close(c->saved);
	close(c->rd);
	c->saved = c->rd = -1;
}

static int interactive(struct top *t, double delay)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_quit;
	sigemptyset(&sa.sa_mask);   /* no SA_RESTART: a signal ends the wait for a key */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	struct captured_stderr cap;
	capture_stderr(&cap);
	SCREEN *scr = newterm(NULL, stdout, stdin);
	if (!scr) {
		release_stderr(&cap);
		error("cannot use the terminal (TERM=%s); try 'leakproof top --once'",
		      getenv("TERM") ? getenv("TERM") : "");
		return 1;
	}
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);

	struct screen sc;
	memset(&sc, 0, sizeof(sc));
	int64_t period = (int64_t)(delay * 1e9);
	int64_t next = mono_ns();
	for (;;) {
		if (quit_signal)
			break;
		int64_t now = mono_ns();
		if (now >= next) {
			if (reload(t) < 0) {
				/* Say so and go on: a store being migrated or
				 * copied reads again at the next refresh. The
				 * store's own message went to the pipe. */
				snprintf(sc.message, sizeof(sc.message), "cannot read the store; trying again");
			}
			char said[sizeof(sc.message)];
			if (read_captured(&cap, said, sizeof(said)) && !sc.message[0])
				snprintf(sc.message, sizeof(sc.message), "%s", said);
			order(t);
			next = now + period;
		}
		draw(t, &sc);
		int64_t wait_ms = (next - mono_ns()) / 1000000;
		timeout(wait_ms < 1 ? 1 : wait_ms > 1000 ? 1000 : (int)wait_ms);
		int ch = getch();
		if (ch == ERR)
			continue;
		if (!on_key(t, &sc, ch))
			break;
	}
	endwin();
	delscreen(scr);
	release_stderr(&cap);
	return 0;
}

int cmd_top(int argc, char **argv)
{
	const char *store_opt = NULL, *format = NULL;
	bool once = false, json = false;
	double delay = 1.0;
	struct options_parse p;
	int c, usage_status;

	cmd_options_init(&p, &top_usage, argc, argv);
	while ((c = cmd_option_next(&p, &top_usage, &usage_status)) > 0) {
		switch (c) {
		case 'd': {
			char *end;
			errno = 0;
			delay = strtod(p.value, &end);
			if (errno || end == p.value || *end || !(delay >= 0.1 && delay <= 3600))
				return usage_error("--delay '%s' is not a number of seconds from 0.1 to 3600", p.value);
			break;
		}
		case OPT_ONCE:
			once = true;
			break;
		case 'f':
			format = p.value;
			if (cmd_parse_text_or_json("top", p.value, &json) != 0)
				return LP_EXIT_USAGE;
			break;
		case 's':
			store_opt = p.value;
			break;
		}
	}
	if (c < 0)
		return usage_status;
	if (p.noperands)
		return usage_error("unexpected argument '%s'", p.operands[0]);
	bool tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
	if (format && !once && tty)
		return usage_error("--format goes with --once (or output that is not a terminal)");

	struct top t;
	memset(&t, 0, sizeof(t));
	t.path = store_default_path(store_opt);
	t.st = store_open_readonly(t.path);
	if (!t.st)
		return 1;
	t.file_store = !strstr(t.path, "://") && strncmp(t.path, "postgres", 8);
	t.have_ino = t.file_store && store_file_id(&t, &t.dev, &t.ino);
	t.judge_all = once || !tty;
	if (gethostname(t.host, sizeof(t.host) - 1) < 0)
		t.host[0] = '\0';
	setlocale(LC_CTYPE, "");   /* not LC_NUMERIC: JSON numbers keep their point */
	t.utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");

	int status;
	if (once || !tty) {
		status = reload(&t) < 0 ? 1 : 0;
		order(&t);
		if (!status)
			status = snapshot(&t, json);
	} else {
		status = interactive(&t, delay);
	}
	drop_runs(&t);
	free(t.shown);
	if (t.st)
		store_close(t.st);
	return status;
}
