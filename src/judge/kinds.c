/*
 * judge/kinds.c — growth kinds of a stored run: the kind rows the sampler
 * stored (store's kind_samples: per process anonymous, copy-on-write,
 * file-backed, shared memory and GPU bytes; pid 0 the job cgroup's page
 * cache and shmem) made into series on the run's own x and judged with
 * analyze_series(), the diagnosis that names the kind driving the verdict,
 * and the OOM flight recorder. The method, and why copy-on-write and page
 * cache are not leaks: docs/internals/growth-kinds.md.
 *
 * A kind row is stored only when one of its values moved by 64 KiB, or 5 s
 * after the last: between rows a value holds. A process is taken to be
 * alive from its first row to KIND_ALIVE_S after its last.
 *
 * Units: bytes, seconds since the run began, x in steps or seconds.
 */
#include "judge/kinds.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define KIND_ALIVE_S 6.0            /* a row is repeated at least every 5 s */
#define MAX_GRID 2000               /* points of a kind's series */
#define FLIGHT_WINDOW_S 10.0        /* the flight recorder's last seconds */
#define MIB (1024.0 * 1024.0)
#define SHOWN_MIN_BYTES MIB         /* a series is listed from this size */
#define SHM_SETTLE_S 0.5            /* unmapped shmem counts when it lasts this long */
#define COW_FLAT_SHARE 0.10         /* copy-on-write that stopped after this share
                                     * of the run's x is named in a flat run */

static const char *const kind_names[KIND_COUNT] = {
	"anonymous", "copy-on-write", "file-cache", "shared-memory", "gpu",
};

const char *mem_kind_name(enum mem_kind k)
{
	return k < KIND_COUNT ? kind_names[k] : k == KIND_PROCESSES ? "processes" : "?";
}

/* pid 0's rows: the job's cgroup, or (no cgroup) the machine's /dev/shm */
static bool machine_shm(const char *name)
{
	return !strcmp(name, "/dev/shm");
}

/* One process of the rows: its rows' indices in time order. */
struct kproc {
	int pid, ppid;
	char name[32];
	char role[48];
	bool worker;                /* a forked child sharing its parent's pages */
	double first_t, last_t;
	size_t *rows, nrows, cap;
};

static double row_value(const struct kind_row *r, enum mem_kind k)
{
	switch (k) {
	case KIND_ANONYMOUS: return (double)r->anon;
	case KIND_COW: return (double)r->cow;
	case KIND_FILE: return (double)r->file;
	case KIND_SHMEM: return (double)r->shmem;
	default: return (double)r->gpu;
	}
}

/* The value of kind k of p at time t: its last row at or before t; NAN
 * before its first row or after it was last alive. *cursor walks p's rows
 * forward (t must not decrease between calls). */
static double held(const struct kind_row *rows, const struct kproc *p, enum mem_kind k, double t,
                   size_t *cursor)
{
	if (t < p->first_t || t > p->last_t + KIND_ALIVE_S)
		return NAN;
	while (*cursor + 1 < p->nrows && rows[p->rows[*cursor + 1]].t <= t)
		(*cursor)++;
	return row_value(&rows[p->rows[*cursor]], k);
}

static struct kproc *find_proc(struct kproc *ps, size_t n, int pid)
{
	for (size_t i = 0; i < n; i++)
		if (ps[i].pid == pid)
			return &ps[i];
	return NULL;
}

/* Group the rows by process and name the roles: the job's first process
 * (whose parent is not in the job) is main, forked children that share
 * its pages are workers numbered by when they appeared. */
static struct kproc *group(const struct kind_row *rows, size_t n, size_t *np)
{
	struct kproc *ps = NULL;
	size_t nps = 0, cap = 0;
	for (size_t i = 0; i < n; i++) {
		struct kproc *p = find_proc(ps, nps, rows[i].pid);
		if (!p) {
			if (nps == cap) {
				cap = cap ? 2 * cap : 16;
				ps = xrealloc(ps, cap * sizeof(*ps));
			}
			p = &ps[nps++];
			memset(p, 0, sizeof(*p));
			p->pid = rows[i].pid;
			p->first_t = rows[i].t;
		}
		if (p->nrows == p->cap) {
			p->cap = p->cap ? 2 * p->cap : 64;
			p->rows = xrealloc(p->rows, p->cap * sizeof(size_t));
		}
		p->rows[p->nrows++] = i;
		p->last_t = rows[i].t;
		p->ppid = rows[i].ppid;
		memcpy(p->name, rows[i].name, sizeof(p->name));
		if (rows[i].cow_base)
			p->worker = true;
	}
	bool have_main = false;
	int workers = 0;
	for (size_t i = 0; i < nps; i++) {
		struct kproc *p = &ps[i];
		if (p->pid == 0)
			snprintf(p->role, sizeof(p->role), "%s", machine_shm(p->name) ? "/dev/shm" : "cgroup");
		else if (p->worker)
			snprintf(p->role, sizeof(p->role), "worker %d", ++workers);
		else if (!have_main && !find_proc(ps, nps, p->ppid)) {
			snprintf(p->role, sizeof(p->role), "main");
			have_main = true;
		} else
			snprintf(p->role, sizeof(p->role), "%s", p->name);
	}
	*np = nps;
	return ps;
}

/* Points of the grid: the run's steps (at most MAX_GRID of them, evenly
 * taken), or time bins. x and t hold *ng values; the caller frees them. */
static void make_grid(const double *step_x, const double *step_t, size_t nsteps, double bin_s,
                      double t0, double t1, double **gx, double **gt, size_t *ng)
{
	size_t n = 0;
	if (nsteps) {
		size_t every = nsteps > MAX_GRID ? (nsteps + MAX_GRID - 1) / MAX_GRID : 1;
		*gx = xmalloc((nsteps / every + 2) * sizeof(double));
		*gt = xmalloc((nsteps / every + 2) * sizeof(double));
		for (size_t i = 0; i < nsteps; i += every) {
			(*gx)[n] = step_x[i];
			(*gt)[n++] = step_t[i];
		}
		if ((nsteps - 1) % every) {
			(*gx)[n] = step_x[nsteps - 1];
			(*gt)[n++] = step_t[nsteps - 1];
		}
	} else {
		if (!(bin_s > 0))
			bin_s = 1;
		if ((t1 - t0) / bin_s > MAX_GRID)
			bin_s = (t1 - t0) / MAX_GRID;
		size_t cap = (size_t)((t1 - t0) / bin_s) + 2;
		*gx = xmalloc(cap * sizeof(double));
		*gt = xmalloc(cap * sizeof(double));
		for (double t = t0; t <= t1 && n < cap; t += bin_s) {
			(*gx)[n] = t;
			(*gt)[n++] = t;
		}
	}
	*ng = n;
}

static int by_growth(const void *a, const void *b)
{
	const struct growth_kind *x = a, *y = b;
	int lx = x->a.verdict == VERDICT_LEAK, ly = y->a.verdict == VERDICT_LEAK;
	if (lx != ly)
		return ly - lx;
	double gx = isfinite(x->a.slope) ? x->a.slope : 0, gy = isfinite(y->a.slope) ? y->a.slope : 0;
	if (gx != gy)
		return gx < gy ? 1 : -1;
	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static const char *x_word(const struct analyze_opts *o)
{
	return o->x_unit && !strcmp(o->x_unit, "s") ? "second" : "step";
}

/* "pid 4242 (worker 1)", "the job's cgroup" */
static void who(char *buf, size_t sz, const struct growth_kind *g)
{
	if (g->pid == 0 && machine_shm(g->name))
		snprintf(buf, sz, "the machine's /dev/shm (the job has no cgroup of its own)");
	else if (g->pid == 0)
		snprintf(buf, sz, "the job's cgroup");
	else if (g->pid < 0)
		snprintf(buf, sz, "the process tree");
	else
		snprintf(buf, sz, "pid %d (%s)", g->pid, g->role);
}

static bool leak_kind(enum mem_kind k)
{
	return k == KIND_ANONYMOUS || k == KIND_SHMEM || k == KIND_GPU;
}

/* Copy-on-write of the workers, summed on the grid. */
static void judge_cow(struct run_kinds *out, const struct kind_row *rows, const struct kproc *ps,
                      size_t nps, const double *gx, const double *gt, size_t ng)
{
	out->cow_flat_since_x = NAN;
	if (!ng)
		return;
	double *total = xcalloc(ng, sizeof(double));
	for (size_t i = 0; i < nps; i++) {
		if (!ps[i].worker)
			continue;
		size_t cur = 0;
		double last = 0, bound = 0;
		for (size_t j = 0; j < ng; j++) {
			double v = held(rows, &ps[i], KIND_COW, gt[j], &cur);
			if (isfinite(v)) {
				total[j] += v;
				last = v;
			}
		}
		for (size_t r = 0; r < ps[i].nrows; r++)
			if ((double)rows[ps[i].rows[r]].cow_base > bound)
				bound = (double)rows[ps[i].rows[r]].cow_base;
		if (last > 0 || bound > 0) {
			out->cow_workers++;
			out->cow_bound_bytes += bound;
		}
	}
	double last = total[ng - 1];
	out->cow_bytes = last;
	double tol = fmax(MIB, 0.05 * last);
	/* rising: it rose over the last 40% of the run, seen rise by two reads
	 * or more of a worker there. A worker's copies are re-read every second
	 * or two on the sampler's CPU budget; on a busy machine a read can come
	 * many seconds late, and its one jump is copying done at some time
	 * since the read before (a DataLoader's first epoch, read during the
	 * third), not copying that goes on. */
	size_t at60 = ng * 3 / 5;
	double rose = 0;
	for (size_t i = 0; ng >= 5 && i < nps; i++) {
		if (!ps[i].worker)
			continue;
		size_t rises = 0;
		double from = NAN, to = NAN;
		for (size_t r = 0; r < ps[i].nrows; r++) {
			const struct kind_row *row = &rows[ps[i].rows[r]];
			if (row->t <= gt[at60]) {
				from = to = (double)row->cow;
				continue;
			}
			if (!isfinite(from))
				from = 0;
			if (isfinite(to) && (double)row->cow > to)
				rises++;
			to = (double)row->cow;
		}
		if (rises >= 2 && to > from)
			rose += to - from;
	}
	out->cow_rising = rose > tol;
	if (!out->cow_rising)
		for (size_t j = 0; j < ng; j++)
			if (total[j] >= last - tol) {
				out->cow_flat_since_x = gx[j];
				break;
			}
	free(total);
}


/* The run's memory grew and was judged a leak, or was judged but left
 * unclear (not for want of points): what a diagnosis that explains all of
 * the growth as not a leak may turn into no-leak. */
static bool growth_judged(const struct analysis *run)
{
	return run->verdict == VERDICT_LEAK || (run->verdict == VERDICT_INCONCLUSIVE && run->window_x > 0 &&
	                                        run->slope > 0);
}
/* Growth of a kind that is the job's own to blame: not the machine's
 * /dev/shm (a job without a cgroup of its own), which every process on the
 * machine writes to; a busy machine's other jobs made it grow under jobs
 * that kept nothing there. */
static bool blamable(const struct growth_kind *g)
{
	return leak_kind(g->kind) && g->a.verdict == VERDICT_LEAK && !(g->pid == 0 && machine_shm(g->name));
}

static void diagnose(struct run_kinds *out, const struct analysis *run, const struct analyze_opts *o,
                     double x_first, double x_last)
{
	char b1[32], b2[32], b3[32], w[80];
	const char *xw = x_word(o);

	/* a process's own memory that grows: a leak, wherever it is */
	const struct growth_kind *culprit = NULL;
	for (size_t i = 0; i < out->n; i++)
		if (blamable(&out->k[i]) && (!culprit || out->k[i].a.slope > culprit->a.slope))
			culprit = &out->k[i];
	if (culprit) {
		out->has_diagnosis = true;
		out->diagnosis_leak = true;
		out->diagnosis_kind = culprit->kind;
		who(w, sizeof(w), culprit);
		int n = snprintf(out->diagnosis, sizeof(out->diagnosis), "leak \xe2\x80\x94 %s memory of %s grows %s per %s",
		                 culprit->kind == KIND_ANONYMOUS ? "anonymous" :
		                 culprit->kind == KIND_SHMEM ? "shared" : "GPU",
		                 w, fmt_bytes(b1, sizeof(b1), culprit->a.slope), xw);
		if (culprit->pid == 0 && culprit->kind == KIND_SHMEM)
			n += snprintf(out->diagnosis + n, sizeof(out->diagnosis) - (size_t)n,
			              " (files in /dev/shm or tmpfs, shared memory segments: memory no process"
			              " needs to map to hold)");
		const struct growth_kind *main_anon = NULL, *also = NULL;
		for (size_t i = 0; i < out->n; i++) {
			const struct growth_kind *g = &out->k[i];
			if (g->kind == KIND_ANONYMOUS && !strcmp(g->role, "main"))
				main_anon = g;
			if (g != culprit && blamable(g) && !also)
				also = g;
		}
		if (also) {
			who(w, sizeof(w), also);
			n += snprintf(out->diagnosis + n, sizeof(out->diagnosis) - (size_t)n, "; %s grows too (%s per %s)",
			              w, fmt_bytes(b1, sizeof(b1), also->a.slope), xw);
		}
		bool main_grows = main_anon && main_anon->a.verdict == VERDICT_LEAK;
		if (out->procs_piling)
			n += snprintf(out->diagnosis + n, sizeof(out->diagnosis) - (size_t)n,
			              "; processes pile up too (%.0f alive at the end, from %.0f)", out->procs_last,
			              out->procs_first);
		if (culprit->pid > 0 && strcmp(culprit->role, "main") && main_anon && !main_grows) {
			snprintf(out->diagnosis + n, sizeof(out->diagnosis) - (size_t)n, "; the parent is flat");
		} else if (!also && !strcmp(culprit->role, "main") && out->cow_workers) {
			snprintf(out->diagnosis + n, sizeof(out->diagnosis) - (size_t)n, "; the workers are flat");
		}
		return;
	}

	/* processes that pile up, each flat: a leak of processes */
	if (out->procs_piling) {
		const struct growth_kind *main_anon = NULL;
		for (size_t i = 0; i < out->n; i++)
			if (out->k[i].kind == KIND_ANONYMOUS && !strcmp(out->k[i].role, "main"))
				main_anon = &out->k[i];
		out->has_diagnosis = true;
		out->diagnosis_leak = true;
		out->diagnosis_kind = KIND_PROCESSES;
		int n;
		if (out->procs_per_x < 1)
			n = snprintf(out->diagnosis, sizeof(out->diagnosis),
			             "processes \xe2\x80\x94 +1 every %.3g %ss, %.0f alive at the end (from %.0f)",
			             1 / out->procs_per_x, xw, out->procs_last, out->procs_first);
		else
			n = snprintf(out->diagnosis, sizeof(out->diagnosis),
			             "processes \xe2\x80\x94 +%.3g per %s, %.0f alive at the end (from %.0f)",
			             out->procs_per_x, xw, out->procs_last, out->procs_first);
		if (out->procs_each_bytes > 0)
			n += snprintf(out->diagnosis + n, sizeof(out->diagnosis) - (size_t)n, ", ~%s each",
			              fmt_bytes(b1, sizeof(b1), out->procs_each_bytes));
		n += snprintf(out->diagnosis + n, sizeof(out->diagnosis) - (size_t)n,
		              "; processes started and never ended");
		if (main_anon && main_anon->a.verdict != VERDICT_LEAK)
			snprintf(out->diagnosis + n, sizeof(out->diagnosis) - (size_t)n, "; the main process is flat");
		return;
	}

	/* copy-on-write of forked workers: bounded by what they shared */
	bool cow_named = out->cow_bytes >= fmax(o->min_growth_bytes, MIB) &&
	                 (run->verdict == VERDICT_LEAK || out->cow_rising ||
	                  (isfinite(out->cow_flat_since_x) && x_last > x_first &&
	                   out->cow_flat_since_x - x_first >= COW_FLAT_SHARE * (x_last - x_first)));
	if (cow_named) {
		out->has_diagnosis = true;
		out->diagnosis_kind = KIND_COW;
		fmt_bytes(b1, sizeof(b1), out->cow_bytes);
		fmt_bytes(b2, sizeof(b2), out->cow_bound_bytes);
		if (out->cow_rising) {
			snprintf(out->diagnosis, sizeof(out->diagnosis),
			         "copy-on-write \xe2\x80\x94 %d forked worker%s privately copied %s of the parent's pages"
			         " so far, still rising; bounded by the parent's size \xc3\x97 workers: at most %s (%s to go),"
			         " not a leak without end",
			         out->cow_workers, out->cow_workers == 1 ? "" : "s", b1, b2,
			         fmt_bytes(b3, sizeof(b3), fmax(0, out->cow_bound_bytes - out->cow_bytes)));
			/* levels off at its bound: not a leak where that is under the limit */
			double level = run->last_bytes + fmax(0, out->cow_bound_bytes - out->cow_bytes);
			out->overrides_verdict = growth_judged(run) && (o->limit_bytes <= 0 || level < o->limit_bytes);
		} else {
			snprintf(out->diagnosis, sizeof(out->diagnosis),
			         "copy-on-write \xe2\x80\x94 %d forked worker%s privately copied %s of the parent's pages;"
			         " bounded by the parent's size (at most %s), flat since %s %.0f",
			         out->cow_workers, out->cow_workers == 1 ? "" : "s", b1, b2, xw, out->cow_flat_since_x);
			out->overrides_verdict = growth_judged(run);
		}
		return;
	}

	/* file-backed pages: the kernel drops them when it needs the room */
	const struct growth_kind *file = NULL;
	for (size_t i = 0; i < out->n; i++)
		if (out->k[i].kind == KIND_FILE && out->k[i].a.verdict == VERDICT_LEAK &&
		    (!file || out->k[i].a.slope > file->a.slope))
			file = &out->k[i];
	/* a process that maps the file says more than the cgroup's page cache */
	for (size_t i = 0; file && file->pid == 0 && i < out->n; i++)
		if (out->k[i].kind == KIND_FILE && out->k[i].pid && out->k[i].a.verdict == VERDICT_LEAK &&
		    out->k[i].a.slope >= 0.5 * file->a.slope)
			file = &out->k[i];
	if (file) {
		out->has_diagnosis = true;
		out->diagnosis_kind = KIND_FILE;
		fmt_bytes(b1, sizeof(b1), file->bytes - file->first_bytes);
		fmt_bytes(b2, sizeof(b2), file->a.slope);
		if (file->pid == 0)
			snprintf(out->diagnosis, sizeof(out->diagnosis),
			         "file-cache \xe2\x80\x94 the job's page cache grew %s (%s per %s): files it read,"
			         " clean pages the kernel drops when it needs the room; not a leak", b1, b2, xw);
		else {
			who(w, sizeof(w), file);
			snprintf(out->diagnosis, sizeof(out->diagnosis),
			         "file-cache \xe2\x80\x94 file-backed pages mapped by %s grew %s (%s per %s): a memory-mapped"
			         " file being read, pages the kernel drops when it needs the room; not a leak",
			         w, b1, b2, xw);
		}
		out->overrides_verdict = growth_judged(run);
	}
}

static const char *cause_words(enum end_cause c)
{
	switch (c) {
	case CAUSE_OOM_KILL: return "the kernel's OOM killer";
	case CAUSE_BUDGET_KILL: return "leakproof, enforcing the memory budget";
	case CAUSE_CUDA_OOM: return "the GPU running out of memory";
	default: return "a failed host memory allocation";
	}
}

static const char *kind_words(enum mem_kind k)
{
	return k == KIND_COW ? "copy-on-write" : k == KIND_FILE ? "file-backed" :
	       k == KIND_SHMEM ? "shared" : k == KIND_GPU ? "GPU" : "anonymous";
}

static void flight_recorder(struct run_kinds *out, const struct kind_row *rows, const struct kproc *ps,
                            size_t nps, const double *step_t, size_t nsteps, const struct segment_row *segs,
                            size_t nsegs, double run_started_at, const char *top_site, const char *xw)
{
	const struct segment_row *g = NULL;
	for (size_t i = nsegs; i-- > 0; )
		if (segs[i].ended_at > 0 && cause_is_oom(segs[i].cause)) {
			g = &segs[i];
			break;
		}
	if (!g)
		return;
	out->oom = true;
	out->oom_cause = g->cause;
	out->end_t = g->ended_at - run_started_at;
	out->end_step = g->has_step ? g->end_step : -1;
	out->window_t = fmax(0, out->end_t - FLIGHT_WINDOW_S);
	for (size_t i = 0; i < nsteps; i++)
		if (step_t[i] >= out->window_t && step_t[i] <= out->end_t)
			out->window_steps++;

	out->fp = xcalloc(nps ? nps : 1, sizeof(*out->fp));
	const struct flight_proc *best_p = NULL;
	enum mem_kind best_k = KIND_ANONYMOUS;
	double best_d = 0;
	for (size_t i = 0; i < nps; i++) {
		const struct kproc *p = &ps[i];
		if (p->first_t > out->end_t || p->last_t + KIND_ALIVE_S < out->window_t)
			continue;
		struct flight_proc *f = &out->fp[out->nfp++];
		f->pid = p->pid;
		memcpy(f->name, p->name, sizeof(f->name));
		memcpy(f->role, p->role, sizeof(f->role));
		for (int k = 0; k < KIND_COUNT; k++) {
			size_t cur = 0;
			double a = held(rows, p, (enum mem_kind)k, fmax(out->window_t, p->first_t), &cur);
			double b = held(rows, p, (enum mem_kind)k, fmin(out->end_t, p->last_t), &cur);
			f->first[k] = isfinite(a) ? a : -1;
			f->last[k] = isfinite(b) ? b : -1;
			double d = f->first[k] >= 0 && f->last[k] >= 0 ? f->last[k] - f->first[k] : 0;
			if (p->pid == 0 && k == KIND_ANONYMOUS)
				continue;       /* the cgroup's anon is the processes' sum */
			if (d > best_d) {
				best_d = d;
				best_p = f;
				best_k = (enum mem_kind)k;
			}
		}
	}

	char b1[32], b2[32], b3[32], b4[32];
	int n = snprintf(out->flight, sizeof(out->flight), "The job was ended at %s by %s (%s)",
	                 fmt_duration(b1, sizeof(b1), out->end_t), cause_words(g->cause), cause_name(g->cause));
	if (out->end_step >= 0)
		n += snprintf(out->flight + n, sizeof(out->flight) - (size_t)n, ", after step %lld",
		              (long long)out->end_step);
	double span = out->end_t - out->window_t;
	if (best_p && best_d >= MIB) {
		n += snprintf(out->flight + n, sizeof(out->flight) - (size_t)n,
		              ". In its last %s, %s memory of %s%d (%s, %s) grew from %s to %s (+%s",
		              fmt_duration(b1, sizeof(b1), span), kind_words(best_k),
		              best_p->pid ? "pid " : "the job's cgroup", best_p->pid, best_p->role, best_p->name,
		              fmt_bytes(b2, sizeof(b2), best_p->first[best_k]),
		              fmt_bytes(b3, sizeof(b3), best_p->last[best_k]),
		              fmt_bytes(b4, sizeof(b4), best_d));
		if (out->window_steps > 1)
			n += snprintf(out->flight + n, sizeof(out->flight) - (size_t)n, ", %s per %s",
			              fmt_bytes(b1, sizeof(b1), best_d / (double)out->window_steps), xw);
		n += snprintf(out->flight + n, sizeof(out->flight) - (size_t)n, ")");
		/* the others, in words (at most three) */
		int others = 0;
		for (size_t i = 0; i < out->nfp; i++) {
			const struct flight_proc *f = &out->fp[i];
			for (int k = 0; k < KIND_COUNT; k++) {
				if ((f == best_p && k == (int)best_k) || (f->pid == 0 && k == KIND_ANONYMOUS) ||
				    f->first[k] < 0 || f->last[k] - f->first[k] < MIB)
					continue;
				if (others++ < 3) {
					char who_buf[64];
					if (f->pid)
						snprintf(who_buf, sizeof(who_buf), "pid %d (%s)", f->pid, f->role);
					else
						snprintf(who_buf, sizeof(who_buf), "the job's cgroup");
					n += snprintf(out->flight + n, sizeof(out->flight) - (size_t)n, "%s %s of %s +%s",
					              others == 1 ? "; also" : ",", kind_words((enum mem_kind)k), who_buf,
					              fmt_bytes(b1, sizeof(b1), f->last[k] - f->first[k]));
				}
			}
		}
		if (!others && out->nfp > 1)
			n += snprintf(out->flight + n, sizeof(out->flight) - (size_t)n, "; the rest was flat");
	} else {
		n += snprintf(out->flight + n, sizeof(out->flight) - (size_t)n,
		              ". In its last %s no kind of memory of any process grew by a MiB or more"
		              " (a sudden allocation, or memory outside the job)", fmt_duration(b1, sizeof(b1), span));
	}
	if (top_site && *top_site)
		n += snprintf(out->flight + n, sizeof(out->flight) - (size_t)n, ". The fastest growing site: %s",
		              top_site);
	if (n > 0 && (size_t)n < sizeof(out->flight) - 1)
		snprintf(out->flight + n, sizeof(out->flight) - (size_t)n, ".");
}

int run_kinds_load(struct store *st, int64_t run_id, const double *step_x, const double *step_t,
                   size_t nsteps, double bin_seconds, double run_started_at,
                   const struct analyze_opts *opts,
                   const struct analysis *run, const struct segment_row *segments,
                   size_t nsegments, const char *top_site, struct run_kinds *out)
{
	memset(out, 0, sizeof(*out));
	out->cow_flat_since_x = NAN;
	out->end_step = -1;
	struct kind_row *rows = NULL;
	size_t nrows = 0;
	if (store_load_kind_samples(st, run_id, &rows, &nrows) < 0)
		return -1;
	if (!nrows) {
		free(rows);
		return 0;
	}
	size_t nps = 0;
	struct kproc *ps = group(rows, nrows, &nps);
	double *gx = NULL, *gt = NULL;
	size_t ng = 0;
	make_grid(step_x, step_t, nsteps, bin_seconds, rows[0].t, rows[nrows - 1].t, &gx, &gt, &ng);
	double *x = xmalloc((ng ? ng : 1) * sizeof(double)), *y = xmalloc((ng ? ng : 1) * sizeof(double));

	size_t cap = 0;
	for (size_t i = 0; i < nps; i++) {
		for (int k = 0; k < KIND_COUNT; k++) {
			const struct kproc *p = &ps[i];
			if ((p->pid == 0 && k != KIND_FILE && k != KIND_SHMEM) || (k == KIND_COW && !p->worker) ||
			    (p->pid == 0 && k == KIND_FILE && machine_shm(p->name)))
				continue;
			size_t cur = 0, n = 0;
			double peak = 0, first = NAN, last = 0;
			for (size_t j = 0; j < ng; j++) {
				double v = held(rows, p, (enum mem_kind)k, gt[j], &cur);
				if (!isfinite(v))
					continue;
				if (!isfinite(first))
					first = v;
				x[n] = gx[j];
				y[n++] = v;
				peak = fmax(peak, v);
				last = v;
			}
			if (!n)
				continue;
			struct growth_kind g;
			memset(&g, 0, sizeof(g));
			analyze_series(x, y, n, opts, &g.a);
			if (peak < SHOWN_MIN_BYTES && g.a.verdict != VERDICT_LEAK)
				continue;
			g.kind = (enum mem_kind)k;
			g.pid = p->pid;
			g.ppid = p->ppid;
			memcpy(g.name, p->name, sizeof(g.name));
			memcpy(g.role, p->role, sizeof(g.role));
			g.bytes = last;
			g.first_bytes = first;
			if (k == KIND_COW)
				for (size_t r = 0; r < p->nrows; r++)
					g.bound_bytes = fmax(g.bound_bytes, (double)rows[p->rows[r]].cow_base);
			if (out->n == cap) {
				cap = cap ? 2 * cap : 16;
				out->k = xrealloc(out->k, cap * sizeof(*out->k));
			}
			out->k[out->n++] = g;
		}
	}
	if (out->n)
		qsort(out->k, out->n, sizeof(*out->k), by_growth);

	judge_cow(out, rows, ps, nps, gx, gt, ng);
	if (ng) {
		out->x_first = gx[0];
		out->x_last = gx[ng - 1];
		out->diagnosed = true;
		diagnose(out, run, opts, gx[0], gx[ng - 1]);
	}
	flight_recorder(out, rows, ps, nps, step_t, nsteps, segments, nsegments, run_started_at, top_site,
	                x_word(opts));

	free(x);
	free(y);
	free(gx);
	free(gt);
	out->rows = rows;           /* kept for run_kinds_totals() */
	out->nrows = nrows;
	out->procs = ps;
	out->nprocs = nps;
	return 0;
}

void run_kinds_release(struct run_kinds *k)
{
	if (!k)
		return;
	free(k->k);
	free(k->fp);
	for (size_t i = 0; i < k->nprocs; i++)
		free(k->procs[i].rows);
	free(k->procs);
	free(k->rows);
	memset(k, 0, sizeof(*k));
}

unsigned run_kinds_totals(const struct run_kinds *k, const double *t, size_t n, double *out[KIND_COUNT])
{
	unsigned mask = 0;
	for (int j = 0; j < KIND_COUNT; j++)
		for (size_t i = 0; out[j] && i < n; i++)
			out[j][i] = NAN;
	if (!k || !k->nrows)
		return 0;
	size_t *cur = xcalloc(k->nprocs * KIND_COUNT, sizeof(size_t));
	bool cg_dev_shm = run_kinds_shm_is_machine_wide(k);
	for (size_t i = 0; i < n; i++) {
		double sum[KIND_COUNT], cg[KIND_COUNT];
		bool alive = false, cg_alive = false;
		for (int j = 0; j < KIND_COUNT; j++)
			sum[j] = cg[j] = 0;
		for (size_t p = 0; p < k->nprocs; p++) {
			const struct kproc *q = &k->procs[p];
			for (int j = 0; j < KIND_COUNT; j++) {
				size_t *c = &cur[p * KIND_COUNT + (size_t)j];
				if (i && t[i] < t[i - 1])
					*c = 0;             /* held() walks forward only */
				double v = held(k->rows, q, (enum mem_kind)j, t[i], c);
				if (!isfinite(v))
					continue;
				if (q->pid == 0) {
					cg[j] = v;
					cg_alive = true;
				} else {
					sum[j] += v;
					alive = true;
				}
			}
		}
		if (cg_alive && cg_dev_shm) {
			/* no cgroup: the machine's /dev/shm, mapped or not */
			sum[KIND_SHMEM] = fmax(sum[KIND_SHMEM], cg[KIND_SHMEM]);
		} else if (cg_alive) {       /* the cgroup's page cache and shmem */
			sum[KIND_FILE] = cg[KIND_FILE];
			sum[KIND_SHMEM] = cg[KIND_SHMEM];
		}
		if (!alive && !cg_alive)
			continue;
		for (int j = 0; j < KIND_COUNT; j++) {
			if (!alive && j != KIND_FILE && j != KIND_SHMEM)
				continue;
			if (out[j])
				out[j][i] = sum[j];
			if (sum[j] > 0)
				mask |= 1u << j;
		}
	}
	free(cur);
	return mask;
}

void run_kinds_flight_append(struct run_kinds *k, const char *sentence)
{
	size_t len = strlen(k->flight);
	if (!sentence || !*sentence || len + 2 >= sizeof(k->flight))
		return;
	snprintf(k->flight + len, sizeof(k->flight) - len, "%s%s", len ? " " : "", sentence);
}

/* out[i]: the most (want_max) or the least of v over the points within
 * half of t[i] either side (t in time order), in one pass: a deque q of
 * indices whose values are monotone, so that 200,000 steps of one second
 * are not 200,000 windows of 40,000 points each (a report of 4 minutes). */
static void window_extreme(const double *t, const double *v, size_t n, double half, bool want_max, double *out,
                           size_t *q)
{
	size_t head = 0, tail = 0, hi = 0;   /* q[head..tail): the window's candidates */
	for (size_t i = 0; i < n; i++) {
		for (; hi < n && (hi <= i || t[hi] <= t[i] + half); hi++) {
			while (tail > head && (want_max ? v[q[tail - 1]] <= v[hi] : v[q[tail - 1]] >= v[hi]))
				tail--;
			q[tail++] = hi;
		}
		while (head < tail && q[head] < i && t[q[head]] < t[i] - half)
			head++;
		out[i] = v[q[head]];
	}
}

double run_kinds_unmapped_shm(const struct run_kinds *k, const double *t, size_t n, double *out)
{
	double top = 0;
	for (size_t i = 0; i < n; i++)
		out[i] = 0;
	if (!k || !k->nrows || !n)
		return 0;
	const struct kproc *whole = find_proc(k->procs, k->nprocs, 0);
	if (!whole)
		return 0;
	/* Each process's mapped shmem is its last rollup's, the cgroup's is
	 * read apart from it: shared memory a process maps and frees (an
	 * anonymous shared mmap, 8 MiB of temporaries a step) would show here
	 * until its next rollup. So a process counts the most it mapped within
	 * SHM_SETTLE_S either side, and what is left must last that long (the
	 * least over the same window): what nobody maps stays, and passes; a
	 * figure that grows lags by SHM_SETTLE_S. */
	double *all = xmalloc(n * sizeof(double)), *mapped = xcalloc(n, sizeof(double));
	double *v = xmalloc(n * sizeof(double)), *w = xmalloc(n * sizeof(double));
	size_t *q = xmalloc(n * sizeof(size_t));
	size_t cur = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && t[i] < t[i - 1])
			cur = 0;
		all[i] = held(k->rows, whole, KIND_SHMEM, t[i], &cur);
	}
	for (size_t p = 0; p < k->nprocs; p++) {
		if (k->procs[p].pid == 0)
			continue;
		cur = 0;
		for (size_t i = 0; i < n; i++) {
			if (i && t[i] < t[i - 1])
				cur = 0;
			double x = held(k->rows, &k->procs[p], KIND_SHMEM, t[i], &cur);
			v[i] = isfinite(x) ? x : 0;
		}
		window_extreme(t, v, n, SHM_SETTLE_S, true, w, q);
		for (size_t i = 0; i < n; i++)
			mapped[i] += fmax(0, w[i]);
	}
	for (size_t i = 0; i < n; i++)
		v[i] = isfinite(all[i]) && all[i] > mapped[i] ? all[i] - mapped[i] : 0;
	window_extreme(t, v, n, SHM_SETTLE_S, false, out, q);
	for (size_t i = 0; i < n; i++)
		top = fmax(top, out[i]);
	free(all);
	free(mapped);
	free(v);
	free(w);
	free(q);
	return top;
}

const struct growth_kind *run_kinds_machine_shm_growth(const struct run_kinds *k)
{
	for (size_t i = 0; k && i < k->n; i++)
		if (k->k[i].pid == 0 && k->k[i].kind == KIND_SHMEM && machine_shm(k->k[i].name) &&
		    k->k[i].a.verdict == VERDICT_LEAK)
			return &k->k[i];
	return NULL;
}

bool run_kinds_shm_is_machine_wide(const struct run_kinds *k)
{
	const struct kproc *whole = k ? find_proc(k->procs, k->nprocs, 0) : NULL;
	return whole && machine_shm(whole->name);
}

#define PROCS_MIN_ADDED 2           /* processes piling up: at least this many more */
#define PROCS_MIN_RISES 3           /* ... added at this many points or more */

void run_kinds_processes(struct run_kinds *k, const double *x, const double *t, const double *count,
                         size_t n, const struct analyze_opts *opts)
{
	if (!k || n < 2)
		return;
	if (!k->diagnosed) {
		k->x_first = x[0];
		k->x_last = x[n - 1];
		k->diagnosed = true;
	}
	double *y = xmalloc(n * sizeof(double));
	for (size_t i = 0; i < n; i++)
		y[i] = count[i] * MIB;          /* a process weighs a MiB: the effect floor is one */
	struct growth_kind g;
	memset(&g, 0, sizeof(g));
	analyze_series(x, y, n, opts, &g.a);
	free(y);
	/* alive when the judged window began (after warm-up, or at a bend), and at the end */
	double first = count[0];
	for (size_t i = 0; i < n; i++)
		if (!isfinite(g.a.window_from_x) || x[i] >= g.a.window_from_x) {
			first = count[i];
			break;
		}
	double last = count[n - 1];
	if (g.a.verdict != VERDICT_LEAK || !(g.a.slope > 0) || last - first < PROCS_MIN_ADDED)
		return;
	/* piling up is repeated: rises at PROCS_MIN_RISES points or more, the
	 * first and the last a quarter of the window apart at least (workers
	 * started together in the middle of a run are one rise, not a pile) */
	size_t rises = 0;
	double x_rise0 = NAN, x_rise1 = NAN;
	for (size_t i = 1; i < n; i++)
		if (count[i] > count[i - 1] && (!isfinite(g.a.window_from_x) || x[i] >= g.a.window_from_x)) {
			rises++;
			if (!isfinite(x_rise0))
				x_rise0 = x[i];
			x_rise1 = x[i];
		}
	if (rises < PROCS_MIN_RISES || !(x_rise1 - x_rise0 >= 0.25 * (x[n - 1] - x[0])))
		return;
	/* the newcomers: processes first seen after the first point, alive at the end */
	double each = 0;
	int nnew = 0;
	for (size_t p = 0; p < k->nprocs; p++) {
		const struct kproc *q = &k->procs[p];
		if (q->pid <= 0 || q->worker || q->first_t <= t[0])
			continue;
		size_t cur = 0;
		double v = held(k->rows, q, KIND_ANONYMOUS, t[n - 1], &cur);
		if (isfinite(v)) {
			each += v;
			nnew++;
		}
	}
	k->procs_piling = true;
	k->procs_first = first;
	k->procs_last = last;
	k->procs_per_x = g.a.slope / MIB;
	k->procs_each_bytes = nnew ? each / nnew : 0;
	/* listed like a kind: its growth is the memory the processes add */
	g.kind = KIND_PROCESSES;
	g.pid = -1;
	snprintf(g.name, sizeof(g.name), "processes");
	snprintf(g.role, sizeof(g.role), "the tree");
	double scale = k->procs_each_bytes > 0 ? k->procs_each_bytes / MIB : 1;
	g.a.slope *= scale;
	g.a.slope_low *= scale;
	g.a.slope_high *= scale;
	g.bytes = last * k->procs_each_bytes;
	g.first_bytes = first * k->procs_each_bytes;
	k->k = xrealloc(k->k, (k->n + 1) * sizeof(*k->k));
	k->k[k->n++] = g;
	qsort(k->k, k->n, sizeof(*k->k), by_growth);
}

void run_kinds_rediagnose(struct run_kinds *k, const struct analysis *run, const struct analyze_opts *opts)
{
	if (!k || !k->diagnosed)
		return;
	k->has_diagnosis = false;
	k->diagnosis_leak = false;
	k->overrides_verdict = false;
	k->diagnosis[0] = '\0';
	diagnose(k, run, opts, k->x_first, k->x_last);
}

size_t run_kinds_readings(const struct run_kinds *k, double t0, double t1)
{
	size_t n = 0;
	double last = NAN;
	for (size_t i = 0; k && i < k->nrows; i++)
		if (k->rows[i].t >= t0 && k->rows[i].t <= t1 && k->rows[i].t != last) {
			last = k->rows[i].t;
			n++;
		}
	return n;
}
