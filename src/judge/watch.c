/*
 * judge/watch.c — the runs of a store watched while they go on (watch.h):
 * the list read at each refresh, each run's new samples folded into its
 * recent points, its segments, its state, and its judgment made again when
 * due. The model behind `leakproof top`; cmd/top.c draws it.
 *
 * It only reads the store (store/live.h and the summary every report
 * uses), so the jobs pay nothing for it. Costs and choices:
 * docs/internals/top.md. Units: bytes, seconds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "judge/watch.h"
#include "judge/sites.h"
#include "judge/summary.h"
#include "platform/proc.h"
#include "store/live.h"
#include "util/util.h"

#define TAIL_ROWS 5000          /* samples read per run and refresh, at most */
#define JUDGE_EVERY_S 5.0       /* a running run is judged again this often... */
#define JUDGE_COST_FACTOR 20    /* ...or 20 times what judging it took, if more */
#define GONE_AFTER_S 15.0       /* no sample for this long and its job gone: interrupted */
#define JUDGE_BUDGET_S 0.2      /* judging runs first seen ended, per refresh */
#define SETTLE_S 30.0           /* an ended run is read on this long after its end */

const char *watched_state_name(enum watched_state s)
{
	switch (s) {
	case WATCHED_ENDED: return "ended";
	case WATCHED_INTERRUPTED: return "interrupted";
	default: return "running";
	}
}

static void watched_run_free(struct watched_run *r)
{
	if (!r)
		return;
	run_row_release(&r->run);
	run_argv_free(r->argv, r->argc);
	free(r);
}

struct watched_run *watch_find(const struct watch *w, int64_t run_id)
{
	for (size_t i = 0; i < w->nruns; i++)
		if (w->runs[i]->id == run_id)
			return w->runs[i];
	return NULL;
}

static const char *base_name(const char *s)
{
	const char *slash = strrchr(s, '/');
	return slash && slash[1] ? slash + 1 : s;
}

/* ---- a run's numbers ----------------------------------------------------- */

double watched_run_memory_bytes(const struct watched_run *r)
{
	return r->has_last ? mem_sample_value(&r->last, r->run.measure) : -1;
}

double watched_run_peak_bytes(const struct watched_run *r)
{
	double peak = r->j.valid ? r->j.peak_bytes : 0;   /* as judged, or seen since */
	for (size_t i = 0; i < r->nrecent; i++)
		peak = fmax(peak, r->recent_bytes[i]);
	return peak;
}

double watched_run_seconds_to_limit(const struct watched_run *r)
{
	const struct watch_judgment *j = &r->j;
	if (!j->valid || r->run.ended_at > 0 || j->projected_seconds < 0 || !(j->growth_bytes_per_x > 0) ||
	    !r->has_last)
		return -1;
	double per_second = !strcmp(j->x_unit, "s") ? j->growth_bytes_per_x
	                                            : j->growth_bytes_per_x * j->steps_per_second;
	double now = watched_run_memory_bytes(r);
	if (!(per_second > 0) || now < 0 || j->limit_bytes <= 0)
		return -1;
	return now >= j->limit_bytes ? 0 : (j->limit_bytes - now) / per_second;
}

/* Fold samples (oldest first) into the run's recent points: the last
 * sample of each WATCH_POINT_SECONDS slot. */
static void add_points(struct watched_run *r, const struct mem_sample *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double v = mem_sample_value(&s[i], r->run.measure);
		if (v < 0)
			continue;
		double slot = floor(s[i].t / WATCH_POINT_SECONDS);
		if (r->nrecent && floor(r->recent_t[r->nrecent - 1] / WATCH_POINT_SECONDS) == slot) {
			r->recent_bytes[r->nrecent - 1] = v;
			r->recent_t[r->nrecent - 1] = s[i].t;
			continue;
		}
		if (r->nrecent == WATCH_POINTS) {
			memmove(r->recent_bytes, r->recent_bytes + 1, (WATCH_POINTS - 1) * sizeof(double));
			memmove(r->recent_t, r->recent_t + 1, (WATCH_POINTS - 1) * sizeof(double));
			r->nrecent--;
		}
		r->recent_bytes[r->nrecent] = v;
		r->recent_t[r->nrecent++] = s[i].t;
	}
}

/* ---- the judgment and its cadence ---------------------------------------- */

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
static int judge(struct watch *w, struct watched_run *r)
{
	struct run_summary s;
	int64_t t0 = w->mono_ns();
	int rc = run_summary_load(w->st, r->id, -1, &s);
	if (rc)
		return rc < 0 ? -1 : 0;
	struct watch_judgment *j = &r->j;
	memset(j, 0, sizeof(*j));
	j->valid = true;
	snprintf(j->verdict, sizeof(j->verdict), "%s", verdict_name(s.a.verdict));
	snprintf(j->reason, sizeof(j->reason), "%s", s.reason);
	j->x_unit = !strcmp(s.x_unit, "s") ? "s" : "step";
	j->growth_bytes_per_x = s.a.slope;
	j->growth_low_bytes_per_x = s.a.slope_low;
	j->growth_high_bytes_per_x = s.a.slope_high;
	j->steps_per_second = s.steps_per_second;
	j->projected_seconds = s.projected_seconds;
	j->limit_bytes = s.limit_bytes;
	snprintf(j->limit_source, sizeof(j->limit_source), "%s", s.limit_source);
	j->peak_bytes = (double)s.peak_bytes;
	j->steps = s.steps;
	if (s.trace) {
		j->traced = true;
		for (size_t i = 0; i < s.trace->nsites && j->nsites < WATCH_SITES; i++) {
			const struct trace_site_report *site = &s.trace->sites[i];
			struct watch_site *l = &j->sites[j->nsites++];
			site_label(site, l->label, sizeof(l->label));
			l->growth_bytes_per_x = site->growth;
			l->live_bytes = site->live;
			l->growing = site->growing;
			l->state = site_state_name(site->state);
		}
	}
	run_summary_release(&s);
	r->judged_mono_ns = w->mono_ns();
	r->judge_cost_ns = r->judged_mono_ns - t0;
	/* final with all the run wrote; or one a reader calls interrupted,
	 * whose supervisor writes no more */
	r->judged_final = r->read_final || (r->run.ended_at > 0 && r->segment_open);
	return 0;
}

static bool due_for_judgment(const struct watched_run *r, int64_t now_ns)
{
	if (!r->judged_mono_ns)
		return true;
	if (r->judged_final)
		return false;
	if (r->read_final)
		return true;            /* once more, with all it wrote */
	int64_t every = (int64_t)(JUDGE_EVERY_S * 1e9);
	if (r->judge_cost_ns * JUDGE_COST_FACTOR > every)
		every = r->judge_cost_ns * JUDGE_COST_FACTOR;
	return now_ns - r->judged_mono_ns >= every;
}

/* Whether r may be judged now: a running run when due; one first seen
 * ended while this refresh's judging budget lasts (judge_until_ns; 0: no
 * budget), so that the first screen of a store with many runs ended lately
 * comes at once and their judgments over the next refreshes. */
static bool may_judge(const struct watch *w, const struct watched_run *r, int64_t now_ns, int64_t judge_until_ns)
{
	if (!due_for_judgment(r, now_ns))
		return false;
	return r->judged_mono_ns || r->run.ended_at <= 0 || !judge_until_ns || w->mono_ns() < judge_until_ns;
}

/* ---- reading the store ---------------------------------------------------- */

static bool job_gone(const struct watch *w, const struct watched_run *r, const struct segment_row *seg)
{
	if (strcmp(r->run.hostname, w->host) || !seg || seg->pid <= 0)
		return false;
	struct proc_stat ps;
	/* A zombie is gone too: with its supervisor dead, nobody may reap it. */
	return read_proc_stat(NULL, seg->pid, &ps) < 0 || ps.state == 'Z' || ps.state == 'X';
}

/* Read one run again, its row given (row: taken): new samples, segments;
 * judge when due. */
static int refresh_run(struct watch *w, struct watched_run *r, struct run_row *row, int64_t now_ns, double now,
                       int64_t judge_until_ns)
{
	run_row_release(&r->run);
	r->run = *row;
	memset(row, 0, sizeof(*row));
	row->id = r->run.id;        /* still found by id (watch_refresh()'s bsearch) */
	if (!r->argv)
		run_command_parse(r->run.command_json, &r->argv, &r->argc);

	struct mem_sample *tail;
	size_t n;
	if (store_live_tail(w->st, r->id, r->last_t, TAIL_ROWS, &tail, &n) < 0)
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
	if (store_load_segments(w->st, r->id, &segs, &nsegs) < 0)
		return -1;
	r->restarts = nsegs > 1 ? (int)nsegs - 1 : 0;
	r->last_cause[0] = '\0';
	for (size_t i = nsegs; i-- > 0;) {
		if (segs[i].ended_at > 0) {
			snprintf(r->last_cause, sizeof(r->last_cause), "%s", cause_name(segs[i].cause != CAUSE_NONE ? segs[i].cause : CAUSE_EXIT));
			break;
		}
	}
	/* the end of the run is written before that of its last segment */
	r->segment_open = nsegs && segs[nsegs - 1].ended_at <= 0;
	double last_at = r->run.started_at + (r->has_last ? r->last_t : 0);
	if (r->run.ended_at > 0)
		r->state = WATCHED_ENDED;
	else if (now - last_at > GONE_AFTER_S && job_gone(w, r, nsegs ? &segs[nsegs - 1] : NULL))
		r->state = WATCHED_INTERRUPTED;
	else
		r->state = WATCHED_RUNNING;
	segment_rows_free(segs, nsegs);

	/* An ended run's rows change no more: read once after its end and
	 * that of its last segment (the supervisor flushes its samples before
	 * it ends the run, then closes the segment). A run a reader calls
	 * interrupted (its supervisor gone) keeps its segment open: read on.
	 * And for SETTLE_S after the end: a supervisor whose PostgreSQL store
	 * was away writes the end it queued before the samples it buffered. */
	if (r->run.ended_at > 0 && !r->end_seen_mono_ns)
		r->end_seen_mono_ns = now_ns;
	r->read_final = r->run.ended_at > 0 && !r->segment_open &&
	                (now - r->run.ended_at >= SETTLE_S ||
	                 now_ns - r->end_seen_mono_ns >= (int64_t)(SETTLE_S * 1e9));
	if (may_judge(w, r, now_ns, judge_until_ns) && judge(w, r) < 0)
		return -1;
	r->seconds_to_limit = watched_run_seconds_to_limit(r);
	return 0;
}

static bool interrupted_long_ago(const struct watched_run *r, double now)
{
	return r->state == WATCHED_INTERRUPTED && now - (r->run.started_at + r->last_t) > WATCH_RECENT_SECONDS;
}

static int compare_row_ids(const void *a, const void *b)
{
	int64_t x = ((const struct run_row *)a)->id, y = ((const struct run_row *)b)->id;
	return (x > y) - (x < y);
}

static void drop_runs(struct watch *w)
{
	for (size_t i = 0; i < w->nruns; i++)
		watched_run_free(w->runs[i]);
	free(w->runs);
	w->runs = NULL;
	w->nruns = 0;
}

/* The store file's identity now; false when it is gone. */
static bool store_file_id(const struct watch *w, dev_t *dev, ino_t *ino)
{
	struct stat sb;
	if (stat(w->path, &sb) < 0)
		return false;
	*dev = sb.st_dev;
	*ino = sb.st_ino;
	return true;
}

/*
 * A store file deleted, or replaced by another at its path (a new inode):
 * what is held open is the old one, which nobody writes any more. Close
 * it, forget its runs, and open what is at the path now. 0 (also when
 * nothing is there yet: the list is empty until it is), or -1.
 */
static int follow_store_file(struct watch *w)
{
	if (!w->file_store)
		return 0;
	dev_t dev;
	ino_t ino;
	bool exists = store_file_id(w, &dev, &ino);
	if (w->st && exists && w->have_ino && dev == w->dev && ino == w->ino)
		return 0;
	if (w->st && exists && !w->have_ino)
		return 0;
	if (w->st) {
		store_close(w->st);
		w->st = NULL;
		drop_runs(w);
	}
	if (!exists)
		return 0;
	w->st = store_open_readonly(w->path);
	if (!w->st)
		return -1;
	w->have_ino = store_file_id(w, &w->dev, &w->ino);
	return 0;
}

int watch_init(struct watch *w, const char *path, bool judge_all)
{
	memset(w, 0, sizeof(*w));
	w->path = path;
	w->judge_all = judge_all;
	w->wall_seconds = wall_seconds;
	w->mono_ns = mono_ns;
	w->st = store_open_readonly(path);
	if (!w->st)
		return -1;
	w->file_store = !strstr(path, "://") && strncmp(path, "postgres", 8);
	w->have_ino = w->file_store && store_file_id(w, &w->dev, &w->ino);
	if (gethostname(w->host, sizeof(w->host) - 1) < 0)
		w->host[0] = '\0';
	return 0;
}

void watch_release(struct watch *w)
{
	drop_runs(w);
	if (w->st)
		store_close(w->st);
	w->st = NULL;
}

/*
 * The list of runs (ids and ends) in one statement, the rows of those not
 * yet read whole after their end in one more, then their new samples and
 * segments. An ended run read once is kept as it is.
 */
int watch_refresh(struct watch *w)
{
	if (follow_store_file(w) < 0)
		return -1;
	if (!w->st)
		return 0;
	double now = w->wall_seconds();
	int64_t now_ns = w->mono_ns();
	int64_t judge_until_ns = w->judge_all ? 0 : now_ns + (int64_t)(JUDGE_BUDGET_S * 1e9);
	struct live_run *list;
	size_t nlist;
	if (store_live_runs(w->st, now - WATCH_RECENT_SECONDS, &list, &nlist) < 0)
		return -1;
	int64_t *need = xcalloc(nlist ? nlist : 1, sizeof(*need));
	size_t nneed = 0;
	for (size_t i = 0; i < nlist; i++) {
		struct watched_run *r = watch_find(w, list[i].id);
		if (!r || !r->read_final)
			need[nneed++] = list[i].id;
	}
	struct run_row *rows = NULL;
	size_t nrows = 0;
	if (nneed && store_get_runs(w->st, need, nneed, &rows, &nrows) < 0) {
		free(need);
		free(list);
		return -1;
	}
	free(need);
	if (nrows)
		qsort(rows, nrows, sizeof(*rows), compare_row_ids);

	for (size_t i = 0; i < w->nruns; i++)
		w->runs[i]->seen = false;
	struct watched_run **next = xcalloc(nlist ? nlist : 1, sizeof(*next));
	size_t nnext = 0;
	int status = 0;
	for (size_t i = 0; i < nlist; i++) {
		struct watched_run *r = watch_find(w, list[i].id);
		if (r && r->read_final) {
			r->seen = true;
			if (may_judge(w, r, now_ns, judge_until_ns) && judge(w, r) < 0)
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
			r->state = WATCHED_RUNNING;
		}
		r->seen = true;
		int rc = status || !row ? 1 : refresh_run(w, r, row, now_ns, now, judge_until_ns);
		if (rc < 0)
			status = -1;
		if (rc || interrupted_long_ago(r, now)) {
			if (!watch_find(w, r->id))
				watched_run_free(r);
			else
				r->seen = false;
			continue;
		}
		next[nnext++] = r;
	}
	for (size_t i = 0; i < w->nruns; i++)
		if (!w->runs[i]->seen)
			watched_run_free(w->runs[i]);
	free(w->runs);
	run_rows_free(rows, nrows);
	free(list);
	w->runs = next;
	w->nruns = nnext;
	return status;
}

int watch_processes(struct watch *w, int64_t run_id, struct proc_row **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	return w->st ? store_live_procs(w->st, run_id, out, n) : 0;
}
