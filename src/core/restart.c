/*
 * restart.c — how a segment (one start of the job's main process) ends
 * and whether the job starts again: requested stops (the stop signal,
 * SIGKILL after the grace period), the cause of the end (core/cause.c) and
 * its record in the store, the restart policy (--restart at-limit,
 * every=N, on-oom; --max-restarts), and the wait before a restart of a job
 * that dies right after it starts. Part of the supervisor
 * (supervise-int.h); docs/internals/restarts.md.
 *
 * Times are CLOCK_MONOTONIC nanoseconds; memory is bytes.
 */
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "core/supervise-int.h"
#include "store/store.h"

#define QUICK_DEATH_NS (10 * NS_PER_S)     /* a process that ends sooner, before a step, */
#define BACKOFF_FIRST_NS NS_PER_S          /* made no progress: wait before starting it again, */
#define BACKOFF_MAX_NS (30 * NS_PER_S)     /* doubling up to this */


/*
 * Ask the job to stop: the stop signal to its main process only (as a
 * container runtime does: the main process is the one that checkpoints and
 * shuts its workers down), SIGKILL to everything after the grace period.
 */
void sv_request_stop(struct sv *sv, int64_t now, const char *restart_why, const char *reason)
{
	if (sv->stop_sent || sv->child_exited)
		return;
	sv->stop_sent = true;
	sv->restart_why = restart_why;
	sv->stop_deadline_ns = now + sv->o->grace_ns;
	snprintf(sv->why_stopped, sizeof(sv->why_stopped), "%s", reason);
	/* sigqueue, not kill (job.c): a prefork stub (sweep/prefork.c) forwards
	 * a signal to its pid alone only when it is not a kill() of its group */
	sv_signal_main(sv, sv->o->stop_signal);
	store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "stop-requested", reason);
	char grace[32];
	fmt_duration(grace, sizeof(grace), (double)sv->o->grace_ns / 1e9);
	sv_say(sv, "%s: sending SIG%s to the job (SIGKILL in %s if it is still running)",
	       reason, sigabbrev_np(sv->o->stop_signal), grace);
}

/* The cgroup's count of OOM kills so far; 0 without a memory cgroup. */
uint64_t sv_oom_kills_now(const struct sv *sv)
{
	struct cgroup_events ev;
	if (!sv->have_cg || !sv->cg.has_memory || cgroup_read_events(&sv->cg, &ev) < 0)
		return 0;
	return ev.oom_kill;
}

/* Why the job should start again after this end, or NULL. */
static const char *restart_policy(const struct sv *sv, enum end_cause c)
{
	unsigned p = sv->o->restart;
	if (sv->interrupted)
		return NULL;
	if (c == CAUSE_STOP_REQUESTED)
		return sv->restart_why;
	if ((c == CAUSE_OOM_KILL || c == CAUSE_BUDGET_KILL) && (p & (RESTART_ON_OOM | RESTART_AT_LIMIT)))
		return p & RESTART_ON_OOM ? "on-oom" : "at-limit";
	if ((c == CAUSE_CUDA_OOM || c == CAUSE_HOST_ALLOC_FAIL) && (p & RESTART_ON_OOM))
		return "on-oom";
	return NULL;
}

/* The main process and its leftovers are gone: name the cause, record the
 * segment's end, say it. Returns why to start the job again, or NULL. */
const char *sv_end_segment(struct sv *sv)
{
	struct cause_input in = {
		.exited = !sv->exit_signal,
		.exit_code = sv->exit_code,
		.signal = sv->exit_signal,
		.core_dumped = sv->core_dumped,
		.budget_killed = sv->budget_killed,
		.stop_requested = sv->stop_sent,
		.scan = &sv->scan,
	};
	uint64_t ooms = sv_oom_kills_now(sv);
	in.oom_kills = ooms > sv->oom_kills_at_start ? ooms - sv->oom_kills_at_start : 0;
	sv->oom_kills_at_start = ooms;   /* the next start's baseline: the cgroup is empty now */
	char evidence[CAUSE_LINE_MAX + 64];
	enum end_cause c = cause_classify(&in, evidence, sizeof(evidence));
	if (c == CAUSE_BUDGET_KILL || c == CAUSE_STOP_REQUESTED) {
		/* what leakproof saw is better evidence than that it acted */
		const char *how = strrchr(evidence, ';');
		char tail[96];
		snprintf(tail, sizeof(tail), "%s", how ? how : "");
		snprintf(evidence, sizeof(evidence), "%s%s", sv->why_stopped, tail);
	}
	const char *again = restart_policy(sv, c);
	if (again && !strcmp(again, "at-limit") && sv->seg_steps == 0) {
		/* it would only reach the limit again before doing anything */
		sv_say(sv, "not restarting the job: it reached the soft limit before its first step (raise --max-mem or --soft-limit)");
		again = NULL;
	}
	if (again && sv->restarts >= sv->o->max_restarts) {
		sv_say(sv, "not restarting the job after %s: it was restarted %d times already (--max-restarts %d)",
		       cause_name(c), sv->restarts, sv->o->max_restarts);
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "max-restarts", cause_name(c));
		again = NULL;
	}
	struct segment_end se = {
		.ended_at = wall_seconds(),
		.exit_code = sv->exit_signal ? -1 : sv->exit_code,
		.exit_signal = sv->exit_signal,
		.cause = c,
		.evidence = evidence,
		.has_step = sv->seg_steps > 0,
		.step = sv->last_step,
		.memory_bytes = sv->have_last ? (uint64_t)fmax(0, mem_sample_value(&sv->last, sv->o->measure)) : 0,
		.restart = again,
	};
	store_segment_end(sv->st, sv->run_id, sv->seg, &se);
	store_flush(sv->st);
	/* With a restart policy, each end is news as it happens; without one
	 * the summary tells it. */
	if (sv->o->restart && (again || c != CAUSE_EXIT)) {
		char mem[32] = "?", at[48] = "before its first step";
		if (sv->have_last)
			fmt_bytes(mem, sizeof(mem), (double)se.memory_bytes);
		if (sv->seg_steps)
			snprintf(at, sizeof(at), "at step %lld", (long long)sv->last_step);
		sv_say(sv, "the job ended (%s: %s) %s with %s%s%s", cause_name(c), evidence, at, mem,
		       again ? "; restarting it: " : "", again ? again : "");
	}
	return again;
}

/* Wait ns before a restart, passing signals on: one to stop leakproof ends
 * the wait and the run. Returns 0, or -1 when told to stop. */
static int wait_backoff(struct sv *sv, int64_t ns)
{
	int64_t end = mono_ns() + ns;
	for (;;) {
		int64_t left = end - mono_ns();
		if (left <= 0)
			return 0;
		struct pollfd pfd = { .fd = sv->sigfd, .events = POLLIN };
		if (poll(&pfd, 1, (int)(left / 1000000) + 1) <= 0)
			continue;
		struct signalfd_siginfo si;
		while (read(sv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (si.ssi_signo == SIGCHLD) {
				sv_reap(sv);
				continue;
			}
			sv->interrupted = true;
			sv->exit_code = -1;
			sv->exit_signal = (int)si.ssi_signo;
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "signal",
			                "stopped while waiting to restart");
			sv_say(sv, "stopped by SIG%s while waiting to restart the job", sigabbrev_np((int)si.ssi_signo));
			return -1;
		}
	}
}

/*
 * Before the next start: a process that dies right after starting is not
 * started again at once, but after 1 s, 2 s, 4 s ... up to 30 s, until one
 * lives longer (QUICK_DEATH_NS) or marks a step. Returns 0, or -1 when
 * leakproof was told to stop while it waited.
 */
int sv_wait_before_restart(struct sv *sv)
{
	bool progress = sv->seg_steps > 0 || mono_ns() - sv->seg_start_ns >= QUICK_DEATH_NS;
	if (!sv->stop_sent && !progress)
		sv->backoff_ns = sv->backoff_ns ? (2 * sv->backoff_ns > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : 2 * sv->backoff_ns)
		                                : BACKOFF_FIRST_NS;
	else
		sv->backoff_ns = 0;
	if (!sv->backoff_ns)
		return 0;
	char d[32];
	fmt_duration(d, sizeof(d), (double)sv->backoff_ns / 1e9);
	sv_say(sv, "the job ended %.1f s after it started, before its first step; waiting %s before restarting it",
	       (double)(mono_ns() - sv->seg_start_ns) / 1e9, d);
	return wait_backoff(sv, sv->backoff_ns);
}
