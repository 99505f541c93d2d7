/*
 * loop.c — the loop that runs a sweep's trials, a local sweep's and a
 * worker's alike: the next trial made (queued re-runs and retries first,
 * then fresh indexes), recorded as skipped when the memory model says it
 * clearly will not fit, admitted by memory and started; then a wait for
 * signals, ended trials reaped, until none is left or a signal stops it.
 * Also what the loop runs with (setup(): parallelism, the memory budget,
 * GPUs, the number of trials; make_logdir(): where the trials' logs go),
 * for a sweep and a worker.
 *
 * Parallel trials are admitted by memory: a trial starts only when the
 * memory it is expected to need is available (admit.c,
 * docs/internals/sweeps.md); one that the memory model says clearly will
 * not fit is recorded as skipped instead (memmodel.c,
 * docs/internals/memory-model.md).
 *
 * The same loop is a worker's (`sweep --worker ID`, cluster.c): the next
 * trial is claimed from the store under a lease that the loop renews,
 * instead of being made here; a worker told to stop gives its trials back
 * at once. A worker of a size class (on_oom resize on SLURM) puts a trial
 * it claimed back, with its need, when the model says it needs a larger
 * worker, and leaves when no pending trial fits it. It calls trial.c and
 * admit.c; cluster.c and runner.c call it.
 */
#include "sweep/runner-int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/nvml.h"
#include "store/sweeps.h"
#include "sweep/optuna.h"
#include "sweep/slurm.h"
#include "sweep/spec.h"
#include "util/util.h"

#define MAX_PARALLEL 256
#define STOP_WAIT_NS (30LL * 1000000000LL)
#define IDLE_POLL_MS 500           /* a worker with nothing to run looks again */
#define ROWS_REREAD_NS 1000000000LL   /* a worker reads the sweep's trials again after */

/* ---- making the next trial ------------------------------------------------ */

/* A fresh trial at index idx (grid, random) or from optuna. 0, 1 when
 * there is none left, -1 on error. */
int fresh_trial(struct runner *r, struct trial *t)
{
	for (;;) {
		if (r->next_idx >= r->total)
			return 1;
		uint64_t idx = r->next_idx++;
		const struct trial_row *row = last_attempt(r, (int64_t)idx);
		if (row)
			continue;              /* known: finished, queued or running */
		memset(t, 0, sizeof(*t));
		t->idx = (int64_t)idx;
		t->optuna_number = -1;
		struct sweep_assign a = { NULL };
		if (r->spec.method == SWEEP_GRID) {
			sweep_grid_trial(&r->spec, idx, &a);
		} else if (r->spec.method == SWEEP_RANDOM) {
			sweep_random_trial(&r->spec, idx, &a);
		} else {
			if (optuna_proc_ask(r->oproc, &r->spec, &t->optuna_number, &a) < 0)
				return -1;
		}
		t->values = own_values(r, &a);
		trial_derive(r, t);
		return 0;
	}
}

/* Worker: the next pending trial, claimed from the store. 0, 1 when none
 * is pending, -1 on error. */
static int claim_next(struct runner *r, struct trial *t)
{
	for (;;) {
		struct trial_row row;
		int rc = store_trial_claim(r->st, r->sweep_id, &r->claimer, wall_seconds(), r->lease_s, &row);
		if (rc)
			return rc;
		/* on_oom resize: the model learns from every worker's trials, not
		 * only this one's: what the store knows, read again (at most
		 * once a second) before the claimed trial is sized */
		if (r->spec.on_oom_resize && mono_ns() >= r->rows_read_at_ns) {
			if (reload_rows(r) == 0)
				r->model_stale = true;
			r->rows_read_at_ns = mono_ns() + ROWS_REREAD_NS;
		}
		char **v = values_from_row(r, row.vals);
		if (!v) {   /* cannot be with the sweep's own text; said, not run */
			row.status = TRIAL_FAILED;
			row.note = "its values do not fit the sweep's file";
			row.ended_at = wall_seconds();
			store_trial_put(r->st, &row);
			trial_row_release(&row);
			continue;
		}
		memset(t, 0, sizeof(*t));
		t->idx = row.idx;
		t->attempt = row.attempt;
		t->values = v;
		t->optuna_number = row.optuna_number;
		t->lease_until = row.lease_until;
		t->need_bytes = row.need_bytes;
		snprintf(t->note, sizeof(t->note), "%s", row.note);
		trial_derive(r, t);
		trial_row_release(&row);
		return 0;
	}
}

/* The next trial to run into r->next: queued re-runs first. 0, 1 none, -1. */
static int make_next(struct runner *r)
{
	if (r->next)
		return 0;
	struct trial t;
	if (r->worker && r->step_retry_at_ns && mono_ns() < r->step_retry_at_ns)
		return 1;   /* a step did not start: claim nothing until the backoff is over */
	if (r->worker) {
		int rc = claim_next(r, &t);
		if (rc < 0) {
			/* the store is away (a server restarting): wait, bounded */
			int64_t now = mono_ns();
			if (!r->claim_failing_since_ns)
				r->claim_failing_since_ns = now;
			if (now - r->claim_failing_since_ns < CLAIM_PATIENCE_NS)
				return 1;
			return error("worker: the store refused claims for %lld s: giving up",
			             (long long)(CLAIM_PATIENCE_NS / 1000000000LL));
		}
		r->claim_failing_since_ns = 0;
		if (rc)
			return rc;
	} else if (r->nqueue) {
		t = r->queue[0];
		memmove(r->queue, r->queue + 1, (r->nqueue - 1) * sizeof(*r->queue));
		r->nqueue--;
	} else {
		int rc = fresh_trial(r, &t);
		if (rc)
			return rc;
	}
	t.gpu = -1;
	t.expected_gpu = -1;
	r->next = xmalloc(sizeof(*r->next));
	*r->next = t;
	return 0;
}

/* ---- skipped ---------------------------------------------------------------- */

/*
 * Sized workers: the next trial, claimed by this worker, when it needs a
 * larger one (what the model predicts of it, or what an OOM left it,
 * over this worker's memory): put back pending with that need, its size
 * class, for a worker of that size to claim (cluster.c submits one), and
 * never started here (true). Else it runs with this worker's memory as
 * its allocation.
 */
static bool too_small_worker(struct runner *r)
{
	struct trial *t = r->next;
	uint64_t need = t->alloc_bytes > t->need_bytes ? t->alloc_bytes : t->need_bytes;
	uint64_t cls = slurm_size_class(r->memory_max, r->memory_max_mem, need);
	if (cls <= r->worker_mem) {
		t->alloc_bytes = r->worker_mem;
		return false;
	}
	char a[32], b[32];
	if (!t->sized) {   /* its need was set before it was claimed: say so again */
		size_t len = strlen(t->note);
		snprintf(t->note + len, sizeof(t->note) - len, "%sneeds %s", len ? "; " : "",
		         fmt_bytes(a, sizeof(a), (double)need));
	}
	size_t len = strlen(t->note);
	snprintf(t->note + len, sizeof(t->note) - len, "; for a worker of %s (this one has %s)",
	         fmt_bytes(a, sizeof(a), (double)cls), fmt_bytes(b, sizeof(b), (double)r->worker_mem));
	r->next = NULL;
	struct trial_row row = {
		.sweep_id = r->sweep_id, .idx = t->idx, .attempt = t->attempt, .params = t->params,
		.env = t->env, .argv = t->argv_json, .vals = t->vals, .status = TRIAL_PENDING,
		.optuna_number = t->optuna_number, .note = t->note, .need_bytes = cls,
	};
	int rc;
	while ((rc = store_trial_put(r->st, &row)) < 0 && store_wait_back(r->st))
		;
	trial_say(r, t, "put back for a worker of %s: %s", fmt_bytes(a, sizeof(a), (double)cls), t->note);
	trial_free(t);
	free(t);
	return true;
}

/* The next trial, when the memory model says it clearly will not fit
 * (admit.c too_large): recorded as skipped, with its prediction and why,
 * and never started (true). With --no-skip it runs, and its note says so. */
static bool skip_next(struct runner *r)
{
	struct trial *t = r->next;
	char why[sizeof(t->note)];
	if (!too_large(r, t, why, sizeof(why))) {
		if (why[0] && !t->noted_no_skip) {
			size_t len = strlen(t->note);
			snprintf(t->note + len, sizeof(t->note) - len, "%s%s", len ? "; " : "", why);
			t->noted_no_skip = true;
		}
		/* on_oom resize, before the first OOM: a trial the model predicts
		 * over memory.max starts with what it needs (asked again while it
		 * waits: the model may learn meanwhile) */
		if (r->spec.on_oom_resize && !t->sized) {
			t->alloc_bytes = trial_allocation(r, t, 0, why, sizeof(why));
			/* (a trial that was given a need, by a worker too small for
			 * it or by an OOM, says why in its note already) */
			if (why[0] && r->sized_workers && t->need_bytes) {
				t->sized = true;
			} else if (why[0]) {
				size_t len = strlen(t->note);
				snprintf(t->note + len, sizeof(t->note) - len, "%s%s", len ? "; " : "", why);
				t->sized = true;
			}
		}
		return r->sized_workers && r->worker && too_small_worker(r);
	}
	r->next = NULL;
	double now = wall_seconds();
	struct trial_row row = {
		.sweep_id = r->sweep_id, .idx = t->idx, .attempt = t->attempt, .params = t->params,
		.env = t->env, .argv = t->argv_json, .vals = t->vals, .status = TRIAL_SKIPPED,
		.optuna_number = t->optuna_number, .started_at = now, .ended_at = now, .note = why,
	};
	store_trial_put(r->st, &row);
	store_trial_prediction_put(r->st, r->sweep_id, &t->pred);
	refresh_row(r, t->idx, t->attempt);
	if (r->optuna_on && t->optuna_number >= 0)   /* what does not fit: the sampler learns it */
		optuna_proc_tell_memory(r->oproc, t->optuna_number, true, t->pred.peak[0],
		                        (double)host_budget(r));
	r->done_count++;
	trial_say(r, t, "skipped: %s", why);
	trial_free(t);
	free(t);
	return true;
}

/* ---- a worker's trials --------------------------------------------------- */

/* A worker told to stop (SLURM's scancel, time limit or preemption, or a
 * user): say why in its trials and give them back at once, before SLURM's
 * SIGKILL after KillWait may end this process; the trials' own ends are
 * recorded when their supervisors have stopped them. */
static void worker_stopping(struct runner *r)
{
	if (r->slurm_job_id > 0)
		r->stop_cause = slurm_end_cause(r->slurm_job_id);
	for (size_t i = 0; i < r->nrunning; i++) {
		struct trial *t = &r->running[i];
		if (t->lease_taken)
			continue;
		size_t len = strlen(t->note);
		if (r->slurm_job_id > 0)
			snprintf(t->note + len, sizeof(t->note) - len, "%sits worker was stopped: %s (SLURM job %lld)",
			         len ? "; " : "", r->stop_cause != CAUSE_NONE ? cause_name(r->stop_cause) : "a signal",
			         (long long)r->slurm_job_id);
		else
			snprintf(t->note + len, sizeof(t->note) - len, "%sits worker was stopped (SIG%s)", len ? "; " : "",
			         sigabbrev_np(r->stop_signal));
		struct trial_row row = {
			.sweep_id = r->sweep_id, .idx = t->idx, .attempt = t->attempt, .params = t->params,
			.env = t->env, .argv = t->argv_json, .vals = t->vals, .status = TRIAL_INTERRUPTED,
			.optuna_number = t->optuna_number, .started_at = t->started_at, .ended_at = wall_seconds(),
			.note = t->note, .cause = r->stop_cause, .worker = r->worker_name,
			.slurm_job = r->claimer.slurm_job, .slurm_task = r->claimer.slurm_task, .need_bytes = t->need_bytes,
		};
		store_trial_put(r->st, &row);
		char note[160];
		snprintf(note, sizeof(note), "run again: attempt %lld was %s", (long long)t->attempt,
		         r->stop_cause != CAUSE_NONE ? cause_name(r->stop_cause) : "interrupted");
		store_trial_requeue(r->st, r->sweep_id, t->idx, t->attempt, note);
	}
}

/* Worker: renew the leases of the trials it holds (every third of a lease).
 * A lease taken over (this worker was thought dead) ends its trial. */
static void renew_leases(struct runner *r)
{
	if (!r->worker || r->stop_signal || mono_ns() < r->renew_at_ns)
		return;   /* stopping: its trials were given back already */
	r->renew_at_ns = mono_ns() + (int64_t)(r->lease_s / 3 * 1e9);
	double until = wall_seconds() + r->lease_s;
	for (size_t i = 0; i < r->nrunning; i++) {
		struct trial *t = &r->running[i];
		if (t->lease_taken)
			continue;
		int rc = store_trial_renew(r->st, r->sweep_id, t->idx, t->attempt, r->worker_name, until);
		if (rc == 0) {
			t->lease_until = until;
		} else if (rc > 0) {
			t->lease_taken = true;
			warning("trial %lld.%lld: its lease ran out and another worker took it over: ending it here",
			        (long long)t->idx + 1, (long long)t->attempt);
			kill(t->pid, SIGTERM);
		}
	}
	if (r->next && store_trial_renew(r->st, r->sweep_id, r->next->idx, r->next->attempt, r->worker_name,
	                                 until) == 0)
		r->next->lease_until = until;
}

/* ---- waiting ------------------------------------------------------------- */

/* Wait for a signal (or timeout_ms); handle what came. */
static void wait_events(struct runner *r, int timeout_ms)
{
	struct pollfd pfd = { .fd = r->sigfd, .events = POLLIN };
	if (poll(&pfd, 1, timeout_ms) <= 0)
		return;
	struct signalfd_siginfo si;
	while (read(r->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			continue;
		if (!r->stop_signal) {
			r->stop_signal = (int)si.ssi_signo;
			fprintf(stderr, "leakproof: stopping the %s (SIG%s): ending %zu running trial%s\n",
			        r->worker ? "worker" : "sweep", sigabbrev_np((int)si.ssi_signo), r->nrunning,
			        r->nrunning == 1 ? "" : "s");
			for (size_t i = 0; i < r->nrunning; i++)
				kill(r->running[i].pid, SIGTERM);
			if (r->worker)
				worker_stopping(r);
		}
	}
	reap_trials(r);
}

/* Stop what runs: SIGTERM (already sent by wait_events), then SIGKILL. */
static void drain(struct runner *r)
{
	int64_t end = mono_ns() + STOP_WAIT_NS;
	while (r->nrunning && mono_ns() < end)
		wait_events(r, 200);
	for (size_t i = 0; i < r->nrunning; i++)
		kill(r->running[i].pid, SIGKILL);
	while (r->nrunning)
		wait_events(r, 200);
}

/* ---- what the loop runs with --------------------------------------------- */

int setup(struct runner *r)
{
	const struct sweep_opts *o = r->o;
	ssize_t n = readlink("/proc/self/exe", r->exe, sizeof(r->exe) - 1);
	if (n <= 0)
		return error_errno("cannot find leakproof's own binary");
	r->exe[n] = '\0';
	r->parallel = o->parallel ? o->parallel : r->spec.parallel > 0 ? r->spec.parallel : 1;
	if (r->parallel > MAX_PARALLEL)
		r->parallel = MAX_PARALLEL;
	r->memory_expect = -1;
	if (r->spec.memory_expect) {
		uint64_t v;
		if (parse_size(r->spec.memory_expect, 0, &v) < 0)
			return -1;
		r->memory_expect = (double)v;
	}
	if (r->spec.memory_max) {
		uint64_t total = 0;
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		if (pages > 0 && psz > 0)
			total = (uint64_t)pages * (uint64_t)psz;
		if (parse_size(r->spec.memory_max, total, &r->memory_max) < 0)
			return -1;
	}
	/* on_oom resize on SLURM: a trial's allocation is its worker's, from
	 * slurm.mem to slurm.max_mem by size classes (cluster.c) */
	r->sized_workers = r->spec.on_oom_resize && r->spec.slurm.max_mem_bytes && r->spec.slurm.mem_bytes &&
	                   (r->slurm || o->worker_id);
	if (r->sized_workers) {
		r->memory_max = r->spec.slurm.mem_bytes;
		r->memory_max_mem = r->spec.slurm.max_mem_bytes;
	} else if (r->spec.memory_max_mem) {
		if (parse_size(r->spec.memory_max_mem, 0, &r->memory_max_mem) < 0)
			return -1;
		if (r->memory_max_mem < r->memory_max)
			return error("%s: memory.max_mem (%s) is less than memory.max (%s)", r->o->file,
			             r->spec.memory_max_mem, r->spec.memory_max);
	}
	/* GPUs: each trial gets one with room, unless the user chose already */
	bool chosen = getenv("CUDA_VISIBLE_DEVICES") != NULL;
	for (size_t d = 0; d < r->spec.ndims; d++)
		chosen |= r->spec.dims[d].is_env && !strcmp(r->spec.dims[d].name, "CUDA_VISIBLE_DEVICES");
	const char *why = NULL;
	if (!chosen && !o->dry_run && (r->nvml = nvml_open(&why)) && nvml_device_count(r->nvml) < 1) {
		nvml_close(r->nvml);
		r->nvml = NULL;
	}
	if (r->spec.method == SWEEP_GRID) {
		r->total = sweep_grid_size(&r->spec);
		if (r->spec.run_cap && (uint64_t)r->spec.run_cap < r->total)
			r->total = (uint64_t)r->spec.run_cap;
	} else {
		r->total = (uint64_t)r->spec.run_cap;
	}
	return 0;
}

/* The trials' logs: DIR/sweeps/ID beside a SQLite store, ./sweeps/ID for
 * a server's (a cluster's workers start in the directory the sweep was
 * submitted from), made absolute. */
/* The store's name among the stores that keep their sweeps' logs in one
 * directory, fit for a file name (its caller's buffer, of cap bytes): a
 * SQLite store's file name; a server's host, port, database and options
 * (no user, no password), each byte but [A-Za-z0-9.-] as _. */
static void store_key(const char *store, char *key, size_t cap)
{
	struct strbuf sb = STRBUF_INIT;
	const char *scheme = strstr(store, "://");
	if (!scheme) {
		const char *slash = strrchr(store, '/');
		strbuf_addstr(&sb, slash ? slash + 1 : store);
	} else {
		const char *auth = scheme + 3, *end = auth + strcspn(auth, "/?#"), *host = auth;
		for (const char *q = auth; q < end; q++)
			if (*q == '@')
				host = q + 1;
		strbuf_add(&sb, host, (size_t)(end - host));
		const char *path = end + (*end == '/');
		size_t plen = strcspn(path, "?#");
		if (plen) {
			strbuf_addch(&sb, '_');
			strbuf_add(&sb, path, plen);
		}
		if (path[plen] == '?')   /* the options but a password */
			for (const char *q = path + plen + 1; *q && *q != '#';) {
				size_t n = strcspn(q, "&#");
				if (strncasecmp(q, "password=", 9) != 0) {
					strbuf_addch(&sb, '_');
					strbuf_add(&sb, q, n);
				}
				q += n + (q[n] == '&');
			}
	}
	if (!sb.len)
		strbuf_addstr(&sb, "store");
	snprintf(key, cap, "%s", strbuf_str(&sb));
	strbuf_release(&sb);
	for (char *p = key; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-')
			*p = '_';
	if (key[0] == '.')   /* no ".", "..", nor a hidden name */
		key[0] = '_';
}

/* A sweep's logs: DIR/sweeps/KEY/ID, DIR the SQLite store's directory or
 * the working directory for a server's, KEY the store's name there
 * (store_key()): two stores of one directory each have their sweep 1. */
int make_logdir(struct runner *r)
{
	char dir[PATH_MAX], key[256];
	snprintf(dir, sizeof(dir), "%s", r->o->store_path);
	char *slash = strrchr(dir, '/');
	if (slash && !strstr(dir, "://"))   /* a server's URI: the working directory */
		*slash = '\0';
	else
		strcpy(dir, ".");
	if (!dir[0])
		strcpy(dir, "/");
	store_key(r->o->store_path, key, sizeof(key));
	char *abs = realpath(dir, NULL);
	snprintf(r->logdir, sizeof(r->logdir), "%.3900s/sweeps", abs ? abs : dir);
	free(abs);
	mkdir(r->logdir, 0755);
	size_t len = strlen(r->logdir);
	snprintf(r->logdir + len, sizeof(r->logdir) - len, "/%s", key);
	mkdir(r->logdir, 0755);
	len = strlen(r->logdir);
	snprintf(r->logdir + len, sizeof(r->logdir) - len, "/%lld", (long long)r->sweep_id);
	if (mkdir(r->logdir, 0755) < 0 && errno != EEXIST)
		return error_errno("cannot make '%s'", r->logdir);
	return 0;
}

/* ---- the loop ------------------------------------------------------------ */

/* A sized worker: whether no pending trial fits it. */
static bool fits_none(struct runner *r)
{
	uint64_t need[64];
	int64_t count[64];
	int n = store_trial_pending_needs(r->st, r->sweep_id, need, count, 64);
	if (n < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (need[i] <= r->worker_mem)
			return false;
	return true;
}

/* Start trials while they may start, then wait for what comes, until
 * there is nothing left or a signal stops us. false when it failed. */
bool run_loop(struct runner *r)
{
	bool failed = false;
	while (!r->stop_signal) {
		/* start what may start */
		while ((int)r->nrunning < r->parallel && !r->host_stopped) {
			int rc = make_next(r);
			if (rc < 0) {
				failed = true;
				break;
			}
			if (rc == 0 && skip_next(r))
				continue;
			if (rc > 0 || !admit(r, r->next))
				break;
			struct trial *t = r->next;
			r->next = NULL;
			int started = launch(r, t);
			if (started != 0) {
				trial_free(t);
				free(t);
				if (started > 0)
					continue;   /* it ended at once */
				failed = true;
				break;
			}
			r->running[r->nrunning++] = *t;
			free(t);
			/* Optuna's answer for the next trial comes while this one runs */
			if (r->oproc && r->next_idx < r->total)
				optuna_proc_ask_ahead(r->oproc);
		}
		if (failed || (!r->nrunning && r->host_stopped))
			break;
		if (!r->nrunning && !r->next && !r->nqueue) {
			if (!r->worker)
				break;
			/* a worker with nothing to run: done when no trial is pending
			 * nor held by another worker (whose trial may yet come back) */
			struct trial_counts c;
			if (!r->claim_failing_since_ns && store_trial_counts(r->st, r->sweep_id, &c) == 0 &&
			    !c.pending && !c.running)
				break;
			/* a sized worker: done when no pending trial fits it (the
			 * others wait for larger workers, which the controller
			 * submits; this one's memory goes back to SLURM) */
			if (r->sized_workers && !r->claim_failing_since_ns && fits_none(r))
				break;
		}
		int timeout = r->worker ? IDLE_POLL_MS : r->next ? 500 : -1;
		if (r->pruning && r->nrunning && (timeout < 0 || timeout > PRUNE_POLL_MS))
			timeout = PRUNE_POLL_MS;
		wait_events(r, timeout);
		renew_leases(r);
		check_pruning(r);
	}
	if (r->stop_signal || failed) {
		if (!r->stop_signal)
			for (size_t i = 0; i < r->nrunning; i++)
				kill(r->running[i].pid, SIGTERM);
		drain(r);
	}
	return !failed;
}
