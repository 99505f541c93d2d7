/*
 * census_wake.c — waking the object census of a Python job when its memory
 * turns to growth (docs/internals/census.md, "When it runs"). Part of the
 * supervisor (supervise-int.h).
 *
 * Without --census, a Python job gets the census's startup hook dormant: a
 * handler for SIGURG (whose default action is to ignore it), costing
 * nothing. Here the supervisor keeps the job's memory, sampled on its tick,
 * in a ring that halves its resolution when full (so it spans the whole
 * run), judges it as the verdict would (core/analyze.c), and when the
 * verdict turns to leak sends SIGURG, once, to each process of the job
 * but the forked children that still share their parent's pages.
 * With --census the hook says its pid instead (`census 0 * hook=PID`): at
 * the end, no census and no hook means Python skipped the hook. Times in
 * seconds since the run began, memory in bytes.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "core/analyze.h"
#include "core/sampler.h"
#include "core/supervise-int.h"
#include "store/store.h"

#define WAKE_EVERY_S 1.0          /* the ring judged at most this often */
#define WAKE_MIN_SPAN_S 8.0       /* the ring must span this before a verdict */
#define WAKE_MIN_WINDOW_S 5.0     /* and the verdict's window, after warm-up (imports
                                   * climb fast and are no leak) */

void sv_census_hook(struct sv *sv, int64_t pid)
{
	(void)pid;
	sv->census_hooks++;
}

void sv_census_watch(struct sv *sv, double t, double v)
{
	struct census_wake *w = &sv->wake;
	/* an attached job has no hook of ours (leakproof made not its
	 * environment): a signal to it would reach its own handler */
	if (sv->census_woken || sv->o->census_ns <= 0 || sv->o->census_hook || sv->attached || !(v > 0))
		return;
	if (w->n && t - w->x[w->n - 1] < w->spacing_s)
		return;
	if (w->n == CENSUS_WAKE_RING) {      /* halve: every other point */
		size_t k = 0;
		for (size_t i = 0; i < w->n; i += 2, k++) {
			w->x[k] = w->x[i];
			w->y[k] = w->y[i];
		}
		w->n = k;
		w->spacing_s = w->spacing_s > 0 ? w->spacing_s * 2 : 0.5;
	}
	w->x[w->n] = t;
	w->y[w->n] = v;
	w->n++;
	if (t - w->judged_t < WAKE_EVERY_S || t - w->x[0] < WAKE_MIN_SPAN_S)
		return;
	w->judged_t = t;
	struct analyze_opts o;
	analyze_opts_init(&o);
	o.x_unit = "s";
	o.min_points = 10;
	struct analysis a;
	analyze_series(w->x, w->y, w->n, &o, &a);
	if (a.verdict != VERDICT_LEAK || a.window_x < WAKE_MIN_WINDOW_S)
		return;
	sv->census_woken = true;
	/* Not a forked child that still shares its parent's pages (a
	 * DataLoader's worker): a census walks every object it inherited and
	 * writes their reference counts, so the worker would copy its parent's
	 * pages for it (the copies of a four-epoch DataLoader rose again when
	 * its workers were woken late in the run). */
	const struct proc_mem *pm;
	size_t n = sampler_procs(sv->sampler, &pm), sent = 0, forks = 0;
	for (size_t i = 0; i < n; i++) {
		if (pm[i].pid <= 0)
			continue;
		if (pm[i].cow_base)
			forks++;
		else if (kill(pm[i].pid, SIGURG) == 0)
			sent++;
	}
	char d[480];
	int len = snprintf(d, sizeof(d), "memory grows (%s): SIGURG to %zu process%s to wake the object census",
	                   a.reason, sent, sent == 1 ? "" : "es");
	if (forks && len > 0 && (size_t)len < sizeof(d))
		snprintf(d + len, sizeof(d) - (size_t)len, "; %zu forked worker%s sharing %s parent's pages left alone",
		         forks, forks == 1 ? "" : "s", forks == 1 ? "its" : "their");
	store_add_event(sv->st, sv->run_id, t, "census", d);
}
