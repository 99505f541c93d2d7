/*
 * runner.c — `leakproof sweep`: every trial in its own supervised process.
 *
 * A trial is `leakproof run --trial SWEEP:IDX:ATTEMPT ... -- ARGV`, started
 * by this process (our own binary, through platform/spawn.h, never a
 * shell), with its output in a log file beside the store. The trial's run
 * records itself in the store; this process records the trial (status
 * "running" before it starts, its outcome when it ends), so a sweep killed
 * at any moment — SIGKILL included — knows on --resume exactly which trials
 * finished. Trial children die with the sweep (PR_SET_PDEATHSIG), and their
 * own supervisors take their jobs with them.
 *
 * Parallel trials are admitted by memory: a trial starts only when the
 * memory it is expected to need is available (admit.c,
 * docs/internals/sweeps.md); one that the memory model says clearly will
 * not fit is recorded as skipped instead (memmodel.c,
 * docs/internals/memory-model.md). What the runner's files share is
 * runner-int.h.
 *
 * The same loop is a worker's (`sweep --worker ID`): the next trial is
 * claimed from the store under a lease that the loop renews, instead of
 * being made here. With executor slurm this process is the controller: it
 * writes every trial pending, submits the workers as one job array
 * (slurm.c) and follows the sweep in the store. "Workers and claims" in
 * docs/internals/sweeps.md.
 */
#include "sweep/runner.h"
#include "sweep/runner-int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/locate.h"
#include "core/supervise.h"
#include "platform/cgroup.h"
#include "platform/nvml.h"
#include "platform/spawn.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "sweep/optuna.h"
#include "sweep/prefork.h"
#include "sweep/slurm.h"
#include "sweep/spec.h"
#include "util/util.h"

#define MAX_PARALLEL 256
#define RETRIES_MAX 4              /* halvings of one trial after OOMs */
#define STOP_WAIT_NS (30LL * 1000000000LL)
#define IDLE_POLL_MS 500           /* a worker with nothing to run looks again */
#define CLAIM_PATIENCE_NS (120LL * 1000000000LL)   /* a store refusing claims: how long a worker waits */
#define STEP_PATIENCE_NS (120LL * 1000000000LL)    /* job steps that do not start: how long trials go back */
#define STEP_BACKOFF_MIN_NS 1000000000LL           /* the first wait after one: 1 s, doubled to */
#define STEP_BACKOFF_MAX_NS 16000000000LL          /* 16 s */
#define VAL_SEP '\x1f'
#define PREFORK_READY_MS 600000    /* importing torch from a network file system */
#define PRUNE_POLL_MS 500          /* running trials' intermediate values read this often (pruning) */

/* ---- trials -------------------------------------------------------------- */

static void trial_free(struct trial *t)
{
	if (!t)
		return;
	if (t->values) {
		for (size_t i = 0; t->values[i]; i++)
			free(t->values[i]);
		free(t->values);
	}
	free(t->params);
	free(t->env);
	free(t->argv_json);
	free(t->vals);
	sweep_argv_free(t->argv);
	memset(t, 0, sizeof(*t));
}

static char *json_str_array(char **v)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addch(&sb, '[');
	for (size_t i = 0; v[i]; i++) {
		if (i)
			strbuf_addstr(&sb, ", ");
		strbuf_add_json_str(&sb, v[i]);
	}
	strbuf_addch(&sb, ']');
	return strbuf_detach(&sb, NULL);
}

/* Fill everything of t derived from t->values. */
static void trial_derive(struct runner *r, struct trial *t)
{
	struct sweep_assign a = { t->values };
	t->argv = sweep_trial_argv(&r->spec, &a);
	t->params = sweep_params_json(&r->spec, &a);
	t->env = sweep_env_json(&r->spec, &a);
	t->argv_json = json_str_array(t->argv);
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < r->spec.ndims; i++) {
		if (i)
			strbuf_addch(&sb, VAL_SEP);
		strbuf_addstr(&sb, t->values[i]);
	}
	t->vals = strbuf_detach(&sb, NULL);
}

/* Take ownership of an assignment's values (NULL-terminated copy). */
static char **own_values(struct runner *r, struct sweep_assign *a)
{
	char **v = xcalloc(r->spec.ndims + 1, sizeof(char *));
	for (size_t i = 0; i < r->spec.ndims; i++)
		v[i] = xstrdup(a->values[i]);
	sweep_assign_free(a, r->spec.ndims);
	return v;
}

/* Values back from a trial row's vals; NULL when they do not fit the spec
 * (the file changed between the sweep and --resume). */
static char **values_from_row(struct runner *r, const char *vals)
{
	char **v = xcalloc(r->spec.ndims + 1, sizeof(char *));
	const char *p = vals;
	for (size_t i = 0; i < r->spec.ndims; i++) {
		const char *end = strchr(p, VAL_SEP);
		if (!end)
			end = p + strlen(p);
		if (i + 1 < r->spec.ndims && !*end) {
			for (size_t k = 0; k < i; k++)
				free(v[k]);
			free(v);
			return NULL;
		}
		v[i] = xmalloc((size_t)(end - p) + 1);
		memcpy(v[i], p, (size_t)(end - p));
		v[i][end - p] = '\0';
		p = *end ? end + 1 : end;
	}
	return v;
}

/* The dims as "lr=0.01 batch_size=64 OMP_NUM_THREADS=1". */
static void describe_values(const struct runner *r, char **values, struct strbuf *sb)
{
	for (size_t i = 0; i < r->spec.ndims; i++) {
		if (i)
			strbuf_addch(sb, ' ');
		strbuf_addf(sb, "%s=%s", r->spec.dims[i].name, values[i]);
	}
}

/* "leakproof: trial 3.1/12 [lr=0.01 batch_size=64]: ", how a line about a
 * trial's end begins. */
static void trial_line_start(const struct runner *r, const struct trial *t, struct strbuf *sb)
{
	strbuf_addf(sb, "leakproof: trial %lld", (long long)t->idx + 1);
	if (t->attempt)
		strbuf_addf(sb, ".%lld", (long long)t->attempt);
	strbuf_addf(sb, "/%llu [", (unsigned long long)r->total);
	describe_values(r, t->values, sb);
	strbuf_addstr(sb, "]: ");
}

/* ---- what is in the store ------------------------------------------------ */

static void free_values(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

static void clear_rows(struct runner *r)
{
	for (size_t i = 0; i < r->nrows; i++)
		free_values(r->row_vals[i]);
	free(r->row_vals);
	trial_rows_free(r->rows, r->nrows);
	free(r->last_of);
	r->rows = NULL;
	r->row_vals = NULL;
	r->last_of = NULL;
	r->nrows = r->caprows = r->nlast = 0;
}

static void index_row(struct runner *r, size_t i)
{
	int64_t idx = r->rows[i].idx;
	if (idx < 0)
		return;
	if ((size_t)idx >= r->nlast) {
		size_t n = r->nlast ? r->nlast : 64;
		while (n <= (size_t)idx)
			n *= 2;
		r->last_of = xrealloc(r->last_of, n * sizeof(*r->last_of));
		for (size_t k = r->nlast; k < n; k++)
			r->last_of[k] = -1;
		r->nlast = n;
	}
	int64_t cur = r->last_of[idx];
	if (cur < 0 || r->rows[cur].attempt <= r->rows[i].attempt)
		r->last_of[idx] = (int64_t)i;
}

/* All the sweep's trials, afresh (at the start and after a resume's fixes). */
static int reload_rows(struct runner *r)
{
	clear_rows(r);
	if (store_load_trials(r->st, r->sweep_id, &r->rows, &r->nrows) < 0)
		return -1;
	r->caprows = r->nrows;
	r->row_vals = xcalloc(r->nrows + 1, sizeof(char **));
	for (size_t i = 0; i < r->nrows; i++) {
		r->row_vals[i] = values_from_row(r, r->rows[i].vals);
		index_row(r, i);
	}
	return 0;
}

/* One trial attempt as it is now in the store, added or replaced: a
 * finished trial costs one query, not a reload of the whole sweep. */
static void refresh_row(struct runner *r, int64_t idx, int64_t attempt)
{
	struct trial_row t;
	int rc;
	while ((rc = store_load_trial(r->st, r->sweep_id, idx, attempt, &t)) < 0 && store_wait_back(r->st))
		;
	if (rc != 0)
		return;
	size_t i = r->nrows;
	if (idx >= 0 && (size_t)idx < r->nlast && r->last_of[idx] >= 0 &&
	    r->rows[r->last_of[idx]].attempt == attempt) {
		i = (size_t)r->last_of[idx];
		trial_row_release(&r->rows[i]);
		free_values(r->row_vals[i]);
	} else {
		if (r->nrows == r->caprows) {
			r->caprows = r->caprows ? 2 * r->caprows : 64;
			r->rows = xrealloc(r->rows, r->caprows * sizeof(*r->rows));
			r->row_vals = xrealloc(r->row_vals, r->caprows * sizeof(*r->row_vals));
		}
		r->nrows++;
	}
	r->rows[i] = t;
	r->row_vals[i] = values_from_row(r, t.vals);
	index_row(r, i);
}

/* The latest attempt of idx, or NULL. */
static const struct trial_row *last_attempt(const struct runner *r, int64_t idx)
{
	if (idx < 0 || (size_t)idx >= r->nlast || r->last_of[idx] < 0)
		return NULL;
	return &r->rows[r->last_of[idx]];
}


/* ---- making the next trial ------------------------------------------------ */

static void queue_push(struct runner *r, struct trial *t)
{
	if (r->nqueue == r->capqueue) {
		r->capqueue = r->capqueue ? 2 * r->capqueue : 16;
		r->queue = xrealloc(r->queue, r->capqueue * sizeof(*r->queue));
	}
	r->queue[r->nqueue++] = *t;
	memset(t, 0, sizeof(*t));
}

/* A fresh trial at index idx (grid, random) or from optuna. 0, 1 when
 * there is none left, -1 on error. */
static int fresh_trial(struct runner *r, struct trial *t)
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

/* ---- running one -------------------------------------------------------- */

static void add_arg(char ***v, size_t *n, size_t *cap, const char *s)
{
	if (*n + 2 > *cap) {
		*cap = *cap ? 2 * *cap : 32;
		*v = xrealloc(*v, *cap * sizeof(char *));
	}
	(*v)[(*n)++] = (char *)s;
	(*v)[*n] = NULL;
}

static void finish_trial(struct runner *r, struct trial *t, int wstatus);
static void report_values(struct runner *r, struct trial *t);

/* The `leakproof run` options a trial gets from the sweep file: memory,
 * result regex, then the file's run_options (last). */
static void add_run_options(struct runner *r, char ***v, size_t *n, size_t *cap)
{
	if (r->spec.memory_max) {
		add_arg(v, n, cap, "--max-mem");
		add_arg(v, n, cap, r->spec.memory_max);
	}
	if (r->spec.memory_restart) {
		add_arg(v, n, cap, "--restart");
		add_arg(v, n, cap, r->spec.memory_restart);
	}
	const char *rre = r->o->result_regex ? r->o->result_regex : r->spec.result_regex;
	if (rre) {
		add_arg(v, n, cap, "--result-regex");
		add_arg(v, n, cap, rre);
		add_arg(v, n, cap, "--result-name");
		add_arg(v, n, cap, r->spec.metric_name ? r->spec.metric_name : "result");
	}
	for (size_t i = 0; i < r->spec.nrun_options; i++)
		add_arg(v, n, cap, r->spec.run_options[i]);
}

/* Have `leakproof run` check the options that trials will get (o->
 * check_run_options), and point at the run_options item at fault. 0, or
 * -1 after a message "FILE:LINE:COLUMN: run_options: ...". */
static int check_run_options(struct runner *r)
{
	if (!r->o->check_run_options || !r->spec.nrun_options)
		return 0;
	char **argv = NULL;
	size_t n = 0, cap = 0;
	add_run_options(r, &argv, &n, &cap);
	size_t first = n - r->spec.nrun_options, bad = 0;
	char why[256];
	int rc = r->o->check_run_options(argv, n, first, &bad, why, sizeof(why));
	free(argv);
	if (rc == 0)
		return 0;
	size_t i = bad >= first && bad < n ? bad - first : 0;
	return error("%s:%zu:%zu: run_options: %s", r->o->file, r->spec.run_option_line[i],
	             r->spec.run_option_col[i], why);
}


/* Start trial t. Returns 0 when it runs, 1 when it ended at once (our
 * binary did not exec; recorded as ended), -1 after printing why not. */
static int launch(struct runner *r, struct trial *t)
{
	char trial_arg[96];
	snprintf(trial_arg, sizeof(trial_arg), "%lld:%lld:%lld", (long long)r->sweep_id, (long long)t->idx,
	         (long long)t->attempt);
	char **argv = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; r->step_prefix && r->step_prefix[i]; i++)
		add_arg(&argv, &n, &cap, r->step_prefix[i]);   /* srun: the trial is a job step */
	add_arg(&argv, &n, &cap, r->exe);
	add_arg(&argv, &n, &cap, "run");
	/* the store reaches the trial in its environment (LEAKPROOF_STORE,
	 * below), never on its command line: a PostgreSQL URI may hold a
	 * password, and every user reads a command line (ps, /proc/PID/
	 * cmdline; srun's step too, and the supervisor's guard, a fork) */
	add_arg(&argv, &n, &cap, "--trial");
	add_arg(&argv, &n, &cap, trial_arg);
	add_arg(&argv, &n, &cap, "--no-status-line");
	/* a job step: the job stays in SLURM's step cgroup, where SLURM's
	 * memory enforcement sees (and reports) an OOM kill; in a cgroup of
	 * its own below it, the kill would be counted there and SLURM would
	 * say nothing */
	if (r->step_prefix)
		add_arg(&argv, &n, &cap, "--no-cgroup");
	add_run_options(r, &argv, &n, &cap);
	add_arg(&argv, &n, &cap, "--");
	t->warm = r->prefork != NULL;
	char **job = r->prefork ? prefork_argv(r->prefork, t->argv) : t->argv;
	for (size_t i = 0; job[i]; i++)
		add_arg(&argv, &n, &cap, job[i]);
	if (job != t->argv)
		free(job);

	/* the environment: ours, overlaid with the env dimensions and the
	 * store (last: no dimension redirects a trial's rows) */
	char **env = xcalloc(r->spec.ndims + 3, sizeof(char *));
	size_t k = 0;
	for (size_t d = 0; d < r->spec.ndims; d++) {
		if (!r->spec.dims[d].is_env)
			continue;
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s=%s", r->spec.dims[d].name, t->values[d]);
		env[k++] = strbuf_detach(&sb, NULL);
	}
	if (r->nvml && t->gpu < 0)
		t->gpu = place_gpu(r, t);   /* started alone: the roomiest device */
	if (t->gpu >= 0) {
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "CUDA_VISIBLE_DEVICES=%d", t->gpu);
		env[k++] = strbuf_detach(&sb, NULL);
		size_t len = strlen(t->note);
		snprintf(t->note + len, sizeof(t->note) - len, "%sGPU %d", len ? "; " : "", t->gpu);
	}
	struct strbuf store_env = STRBUF_INIT;
	strbuf_addf(&store_env, "LEAKPROOF_STORE=%s", r->store_abs ? r->store_abs : r->o->store_path);
	env[k++] = strbuf_detach(&store_env, NULL);
	env[k] = NULL;

	snprintf(t->log, sizeof(t->log), "%.3900s/trial-%lld.%lld.log", r->logdir, (long long)t->idx,
	         (long long)t->attempt);
	int logfd = open(t->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	t->started_at = wall_seconds();

	/* recorded before it starts: a sweep killed now knows it was running */
	struct trial_row row = {
		.sweep_id = r->sweep_id, .idx = t->idx, .attempt = t->attempt, .params = t->params,
		.env = t->env, .argv = t->argv_json, .vals = t->vals, .status = TRIAL_RUNNING,
		.optuna_number = t->optuna_number, .started_at = t->started_at, .note = t->note,
	};
	if (r->worker) {
		row.worker = r->worker_name;
		row.lease_until = t->lease_until;
		row.slurm_job = r->claimer.slurm_job;
		row.slurm_task = r->claimer.slurm_task;
	}
	int rc;
	while ((rc = store_trial_put(r->st, &row)) < 0 && store_wait_back(r->st))
		;   /* the server restarts: the trial starts when it is back */
	predict_trial(r, t);
	if (rc == 0 && (isfinite(t->pred.peak[0]) || isfinite(t->pred.gpu[0])))
		store_trial_prediction_put(r->st, r->sweep_id, &t->pred);   /* said if it fails; the trial runs */
	struct spawn sp = {
		.argv = (const char *const *)argv, .env = (const char *const *)env, .in.how = SPAWN_NULL,
		.death_signal = SIGTERM,   /* the trial dies with the sweep */
		.path_lookup = r->step_prefix != NULL,
	};
	if (logfd >= 0)
		sp.out = sp.err = (struct spawn_fd){ SPAWN_FD, logfd };
	int started = rc < 0 ? -1 : spawn_start(&sp);
	int e = errno;
	if (logfd >= 0)
		close(logfd);
	free(argv);
	for (size_t i = 0; env[i]; i++)
		free(env[i]);
	free(env);
	if (started < 0) {
		errno = e;
		return rc < 0 ? -1 : error_errno("cannot start a trial");
	}
	r->started_count++;
	if (started) {
		/* our own binary did not exec: the trial ends with that status */
		finish_trial(r, t, started << 8);
		return 1;
	}
	t->pid = sp.pid;
	return 0;
}

/* ---- a trial ended --------------------------------------------------------- */

/* The retry of an OOM'd trial (cause: why it ended) with the retry_with
 * parameters halved, or for rule fit, set to the largest value the memory
 * model predicts to fit (halved when it cannot tell); false when there is
 * nothing left to change. */
static bool make_retry(struct runner *r, const struct trial *t, enum end_cause cause, struct trial *out)
{
	if (!r->spec.nretry || t->attempt >= RETRIES_MAX)
		return false;
	char **v = xcalloc(r->spec.ndims + 1, sizeof(char *));
	struct strbuf what = STRBUF_INIT;
	bool changed = false;
	for (size_t d = 0; d < r->spec.ndims; d++) {
		v[d] = xstrdup(t->values[d]);
		for (size_t k = 0; k < r->spec.nretry; k++) {
			if (strcmp(r->spec.retry_names[k], r->spec.dims[d].name))
				continue;
			double x = sweep_num_or_nan(v[d]);
			if (!isfinite(x))
				continue;
			char nv[64], why[160] = "";
			bool is_int = !strpbrk(v[d], ".eE");
			if (!strcmp(r->spec.retry_rules[k], "fit") &&
			    retry_fit_value(r, t, d, cause, nv, sizeof(nv), why, sizeof(why))) {
				/* nv: the model's choice */
			} else if (is_int) {
				long long h = (long long)x / 2;
				if (h < 1)
					continue;
				snprintf(nv, sizeof(nv), "%lld", h);
			} else {
				snprintf(nv, sizeof(nv), "%.10g", x / 2);
			}
			if (!strcmp(nv, v[d]))
				continue;
			strbuf_addf(&what, "%s%s %s -> %s", what.len ? ", " : "", r->spec.dims[d].name, v[d], nv);
			if (why[0])
				strbuf_addf(&what, " (%s)", why);
			else if (!strcmp(r->spec.retry_rules[k], "fit"))
				strbuf_addstr(&what, " (halved: the model cannot tell yet)");
			free(v[d]);
			v[d] = xstrdup(nv);
			changed = true;
		}
	}
	if (!changed) {
		for (size_t d = 0; d < r->spec.ndims; d++)
			free(v[d]);
		free(v);
		strbuf_release(&what);
		return false;
	}
	memset(out, 0, sizeof(*out));
	out->idx = t->idx;
	out->attempt = t->attempt + 1;
	out->optuna_number = -1;     /* optuna asked for the original values */
	out->values = v;
	snprintf(out->note, sizeof(out->note), "retry after an OOM: %s", strbuf_str(&what));
	strbuf_release(&what);
	trial_derive(r, out);
	return true;
}

/* The next attempt of t with the same values, into out. */
static void make_rerun(struct runner *r, const struct trial *t, struct trial *out)
{
	memset(out, 0, sizeof(*out));
	out->idx = t->idx;
	out->attempt = t->attempt + 1;
	out->optuna_number = t->optuna_number;
	out->values = xcalloc(r->spec.ndims + 1, sizeof(char *));
	for (size_t d = 0; d < r->spec.ndims; d++)
		out->values[d] = xstrdup(t->values[d]);
	snprintf(out->note, sizeof(out->note), "run again: the prefork template ended while attempt %lld ran",
	         (long long)t->attempt);
	trial_derive(r, out);
}

/* Worker: write t's retry as a pending trial, for any worker to claim. */
static void put_pending(struct runner *r, struct trial *t)
{
	struct trial_row row = {
		.sweep_id = r->sweep_id, .idx = t->idx, .attempt = t->attempt, .params = t->params,
		.env = t->env, .argv = t->argv_json, .vals = t->vals, .status = TRIAL_PENDING,
		.optuna_number = t->optuna_number, .note = t->note,
	};
	store_trial_put(r->st, &row);
}

/*
 * Worker: a trial whose job step never started (srun failed before our
 * `leakproof run` recorded a run: slurmctld unreachable for a while, a
 * restart, "Unable to contact slurm controller") is put back pending, as
 * it was, not recorded failed; this worker claims nothing for a backoff
 * (1 s doubled to 16 s) and any worker may take it again. After
 * STEP_PATIENCE_NS of steps that do not start, trials are recorded failed
 * again ("did not start"), so a worker whose srun cannot work ends. Whether
 * t was put back.
 */
static bool put_back_unstarted(struct runner *r, struct trial *t, int64_t run_id, int wstatus)
{
	if (run_id != 0 || r->stop_signal || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
		if (run_id > 0)
			r->step_failing_since_ns = r->step_retry_at_ns = r->step_backoff_ns = 0;
		return false;
	}
	int64_t now = mono_ns();
	if (!r->step_failing_since_ns)
		r->step_failing_since_ns = now;
	if (now - r->step_failing_since_ns >= STEP_PATIENCE_NS)
		return false;
	r->step_backoff_ns = !r->step_backoff_ns ? STEP_BACKOFF_MIN_NS
	                     : r->step_backoff_ns * 2 > STEP_BACKOFF_MAX_NS ? STEP_BACKOFF_MAX_NS : r->step_backoff_ns * 2;
	r->step_retry_at_ns = now + r->step_backoff_ns;
	char note[sizeof(t->log) + 64];
	snprintf(note, sizeof(note), "put back: its job step did not start (see %s)", t->log);
	struct trial_row row = {
		.sweep_id = r->sweep_id, .idx = t->idx, .attempt = t->attempt, .params = t->params,
		.env = t->env, .argv = t->argv_json, .vals = t->vals, .status = TRIAL_PENDING,
		.optuna_number = t->optuna_number, .note = note,
	};
	int rc;
	while ((rc = store_trial_put(r->st, &row)) < 0 && store_wait_back(r->st))
		;
	if (rc < 0)
		return false;   /* recorded as it ended, below, if the store takes that */
	if (!r->o->quiet)
		fprintf(stderr, "leakproof: trial %lld.%lld: its job step did not start (log %s): put back, "
		        "claiming again in %lld s\n", (long long)t->idx + 1, (long long)t->attempt, t->log,
		        (long long)(r->step_backoff_ns / 1000000000LL));
	return true;
}

static void finish_trial(struct runner *r, struct trial *t, int wstatus)
{
	if (t->lost) {   /* another worker runs it again: its row is not ours */
		if (!r->o->quiet)
			fprintf(stderr, "leakproof: trial %lld.%lld: its lease was lost; not recorded here\n",
			        (long long)t->idx + 1, (long long)t->attempt);
		return;
	}
	/* A trial's outcome must reach a shared store that is away for a
	 * while (a server restarting): else a trial that ended well would be
	 * told failed (its results unread), stay "running" until its lease
	 * ran out, and run again. The sweep waits for the server, bounded,
	 * as its trials' runs do (store_wait_back); a worker, longer. */
	int64_t run_id;
	while ((run_id = store_trial_run(r->st, r->sweep_id, t->idx, t->attempt)) < 0 && store_wait_back(r->st))
		;
	for (int64_t end = mono_ns() + CLAIM_PATIENCE_NS; r->worker && run_id < 0 && mono_ns() < end;) {
		sleep(1);
		run_id = store_trial_run(r->st, r->sweep_id, t->idx, t->attempt);
	}
	if (r->step_prefix && put_back_unstarted(r, t, run_id, wstatus))
		return;
	struct trial_row row = {
		.sweep_id = r->sweep_id, .idx = t->idx, .attempt = t->attempt, .params = t->params,
		.env = t->env, .argv = t->argv_json, .vals = t->vals, .optuna_number = t->optuna_number,
		.started_at = t->started_at, .ended_at = wall_seconds(), .run_id = run_id > 0 ? run_id : 0,
		.note = t->note,
	};
	enum end_cause cause = CAUSE_NONE;
	char metric_note[PATH_MAX + 256] = "";
	struct segment_row *segs = NULL;
	size_t nsegs = 0;
	int got = -1;
	while (run_id > 0 && (got = store_load_segments(r->st, run_id, &segs, &nsegs)) < 0 && store_wait_back(r->st))
		;
	if (run_id > 0 && got == 0 && nsegs)
		cause = segs[nsegs - 1].cause;
	segment_rows_free(segs, nsegs);
	char slurm_note[1400] = "";
	if (r->worker) {
		row.worker = r->worker_name;
		row.slurm_job = r->claimer.slurm_job;
		row.slurm_task = r->claimer.slurm_task;
		/* SLURM's memory enforcement: slurmstepd's line in the step's output */
		char ev[1000];
		if (r->step_prefix && slurm_oom_evidence(t->log, ev, sizeof(ev))) {
			if (!cause_is_oom(cause))
				cause = CAUSE_OOM_KILL;
			snprintf(slurm_note, sizeof(slurm_note), "%.200s%sSLURM: %s", t->note, t->note[0] ? "; " : "", ev);
			row.note = slurm_note;
		} else if (r->stop_signal && r->stop_cause != CAUSE_NONE) {
			cause = r->stop_cause;
		}
	}
	row.cause = cause;

	const char *metric = r->spec.metric_name ? r->spec.metric_name :
	                     (r->o->result_regex || r->spec.result_regex) ? "result" : NULL;
	if (run_id > 0 && metric) {
		struct result_row *res = NULL;
		size_t nres = 0;
		int rc;
		while ((rc = store_load_results(r->st, run_id, &res, &nres)) < 0 && store_wait_back(r->st))
			;
		if (rc == 0)
			for (size_t i = 0; i < nres; i++)
				if (!strcmp(res[i].name, metric)) {
					row.has_metric = true;
					row.metric = res[i].value;
				}
		free(res);
	}
	bool exited0 = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
	if (r->stop_signal)
		row.status = TRIAL_INTERRUPTED;
	else if (t->pruned)
		row.status = TRIAL_PRUNED;     /* stopped by us: whatever its end says */
	else if (cause_is_oom(cause))
		row.status = TRIAL_OOM;
	else if (exited0 && metric && r->spec.metric_name && !row.has_metric) {
		row.status = TRIAL_FAILED;
		snprintf(metric_note, sizeof(metric_note), "%s%sno '%s' result reported", t->note,
		         t->note[0] ? "; " : "", metric);
		row.note = metric_note;
	} else if (exited0)
		row.status = TRIAL_OK;
	else
		row.status = TRIAL_FAILED;
	/* a warm trial that failed with its template gone was ended with the
	 * template (its stub kills the fork when the template ends): not the
	 * trial's doing, so it runs again, cold */
	bool template_died = t->warm && row.status == TRIAL_FAILED && prefork_gone(r->prefork) &&
	                     t->attempt < RETRIES_MAX;
	char template_note[sizeof(t->note) + 80];
	if (template_died) {
		row.status = TRIAL_INTERRUPTED;
		snprintf(template_note, sizeof(template_note), "%s%sthe prefork template ended while it ran", t->note,
		         t->note[0] ? "; " : "");
		row.note = template_note;
	}
	if (!run_id && !r->stop_signal) {
		snprintf(metric_note, sizeof(metric_note), "the trial did not start: see %s", t->log);
		row.note = metric_note;
	}
	char streak[200] = "", full_note[sizeof(metric_note) + sizeof(streak) + 4];
	if (!r->stop_signal && note_outcome(r, t, row.status, streak, sizeof(streak))) {
		snprintf(full_note, sizeof(full_note), "%s%s%s", row.note, row.note[0] ? "; " : "", streak);
		row.note = full_note;
	}
	int put;
	while ((put = store_trial_put(r->st, &row)) < 0 && store_wait_back(r->st))
		;
	for (int64_t end = mono_ns() + CLAIM_PATIENCE_NS; r->worker && put < 0 && mono_ns() < end;) {
		sleep(1);
		put = store_trial_put(r->st, &row);
	}
	if (r->worker && r->stop_signal) {
		char note[160];
		snprintf(note, sizeof(note), "run again: attempt %lld was %s", (long long)t->attempt,
		         r->stop_cause != CAUSE_NONE ? cause_name(r->stop_cause) : "interrupted");
		store_trial_requeue(r->st, r->sweep_id, t->idx, t->attempt, note);
	}
	refresh_row(r, t->idx, t->attempt);
	r->model_stale = true;

	/* the values it reported since the last look: a finished trial's
	 * whole curve is what the pruner compares the next ones with */
	if (r->pruning && r->oproc && !r->stop_signal && run_id > 0) {
		t->run_id = run_id;
		report_values(r, t);
	}
	int64_t late_step;
	double late_value;
	if (r->oproc && t->optuna_number >= 0)   /* too late: it ended */
		optuna_proc_take_prune(r->oproc, t->optuna_number, &late_step, &late_value);
	if (r->optuna_on && t->optuna_number >= 0 && !r->stop_signal && !template_died)   /* a rerun tells */
		optuna_proc_tell_state(r->oproc, t->optuna_number, t->pruned ? OPTUNA_PRUNED :
		                       row.status == TRIAL_OK && row.has_metric ? OPTUNA_COMPLETE : OPTUNA_FAIL,
		                       row.metric);
	if (!r->stop_signal)
		r->done_count++;

	if (!r->o->quiet) {
		struct strbuf sb = STRBUF_INIT;
		trial_line_start(r, t, &sb);
		strbuf_addstr(&sb, trial_status_name(row.status));
		if (cause != CAUSE_NONE && cause != CAUSE_EXIT)
			strbuf_addf(&sb, " (%s)", cause_name(cause));
		if (row.has_metric)
			strbuf_addf(&sb, ", %s=%.6g", metric, row.metric);
		const struct trial_row *known = last_attempt(r, t->idx);
		if (known && known->verdict[0]) {
			char g[32], p[32];
			strbuf_addf(&sb, ", %s", known->verdict);
			if (isfinite(known->growth_bytes_per_step) && !strcmp(known->verdict, "leak"))
				strbuf_addf(&sb, " %s/step", fmt_bytes(g, sizeof(g), known->growth_bytes_per_step));
			strbuf_addf(&sb, ", peak %s", fmt_bytes(p, sizeof(p), (double)known->peak_bytes));
		}
		if (run_id > 0)
			strbuf_addf(&sb, " (run %lld)", (long long)run_id);
		if (t->pruned)
			strbuf_addf(&sb, "; %s", t->note);
		else if (row.status != TRIAL_OK && row.status != TRIAL_INTERRUPTED)
			strbuf_addf(&sb, "; log %s", t->log);
		fprintf(stderr, "%s\n", strbuf_str(&sb));
		strbuf_release(&sb);
	}
	if (streak[0])
		fprintf(stderr, "leakproof: %s\n", streak);

	struct trial retry;
	if (template_died && !r->stop_signal) {
		make_rerun(r, t, &retry);
		if (!r->o->quiet)
			fprintf(stderr, "leakproof: trial %lld will run again: %s\n", (long long)t->idx + 1, retry.note);
		if (r->worker) {
			put_pending(r, &retry);
			trial_free(&retry);
		} else {
			queue_push(r, &retry);
		}
	}
	if (row.status == TRIAL_OOM && !r->stop_signal && make_retry(r, t, cause, &retry)) {
		if (!r->o->quiet)
			fprintf(stderr, "leakproof: trial %lld will run again: %s\n", (long long)t->idx + 1, retry.note);
		if (r->worker) {   /* for whichever worker claims it */
			put_pending(r, &retry);
			trial_free(&retry);
		} else {
			queue_push(r, &retry);
		}
	}
}

/* Reap ended trials. */
static void reap_trials(struct runner *r)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			return;
		if (optuna_proc_reaped(r->oproc, pid, status))
			continue;
		if (prefork_reaped(r->prefork, pid, status)) {
			warning("prefork: the template ended; trials start cold from now on");
			prefork_stop(r->prefork);
			r->prefork = NULL;
			continue;
		}
		for (size_t i = 0; i < r->nrunning; i++) {
			if (r->running[i].pid != pid)
				continue;
			finish_trial(r, &r->running[i], status);
			trial_free(&r->running[i]);
			r->running[i] = r->running[--r->nrunning];
			break;
		}
	}
}

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
		if (t->lost)
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
			.slurm_job = r->claimer.slurm_job, .slurm_task = r->claimer.slurm_task,
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
		if (t->lost)
			continue;
		int rc = store_trial_renew(r->st, r->sweep_id, t->idx, t->attempt, r->worker_name, until);
		if (rc == 0) {
			t->lease_until = until;
		} else if (rc > 0) {
			t->lost = true;
			warning("trial %lld.%lld: its lease ran out and another worker took it over: ending it here",
			        (long long)t->idx + 1, (long long)t->attempt);
			kill(t->pid, SIGTERM);
		}
	}
	if (r->next && store_trial_renew(r->st, r->sweep_id, r->next->idx, r->next->attempt, r->worker_name,
	                                 until) == 0)
		r->next->lease_until = until;
}

/* ---- pruning --------------------------------------------------------------- */

/*
 * Pruning (method optuna with a pruner): each running trial's new values
 * of the sweep's metric, as its job reported them (`metric NAME=VALUE`
 * on the client channel, at the step it had reached), go to Optuna as
 * intermediate values; when the pruner says so, the trial is ended
 * (SIGTERM to its supervisor, which ends the job's tree with the usual
 * grace) and recorded as pruned. The values are read from the store, where
 * the trial's supervisor writes them about once a second.
 */
static void report_values(struct runner *r, struct trial *t)
{
	const char *name = r->spec.metric_name;
	if (t->optuna_number < 0 || t->pruned || t->lost)
		return;
	if (t->run_id <= 0)
		t->run_id = store_trial_run(r->st, r->sweep_id, t->idx, t->attempt);
	struct metric_row *m = NULL;
	size_t nm = 0;
	if (t->run_id <= 0 || store_load_metrics(r->st, t->run_id, &m, &nm) < 0)
		return;
	int64_t *steps = xcalloc(nm + 1, sizeof(*steps));
	double *values = xcalloc(nm + 1, sizeof(*values));
	size_t seen = 0, n = 0;
	for (size_t k = 0; k < nm; k++) {
		if (strcmp(m[k].name, name) || seen++ < t->nreported)
			continue;
		steps[n] = m[k].step < 0 ? 0 : m[k].step;
		values[n++] = m[k].value;
	}
	free(m);
	if (n)
		optuna_proc_report(r->oproc, t->optuna_number, steps, values, n);
	t->nreported = seen;
	free(steps);
	free(values);
}

/* End t: its pruner said so, on the values up to step (value there). */
static void prune_trial(struct runner *r, struct trial *t, int64_t step, double value)
{
	t->pruned = true;
	size_t len = strlen(t->note);
	snprintf(t->note + len, sizeof(t->note) - len, "%spruned at step %lld (%s=%.6g; %s)", len ? "; " : "",
	         (long long)step, r->spec.metric_name, value, r->spec.optuna_pruner);
	kill(t->pid, SIGTERM);
}

/* Every PRUNE_POLL_MS: the running trials' new values to their pruner. */
static void check_pruning(struct runner *r)
{
	if (!r->pruning || !r->oproc || r->stop_signal || mono_ns() < r->prune_check_ns)
		return;
	r->prune_check_ns = mono_ns() + (int64_t)PRUNE_POLL_MS * 1000000;
	optuna_proc_poll(r->oproc);    /* the answers to earlier reports */
	for (size_t i = 0; i < r->nrunning; i++) {
		struct trial *t = &r->running[i];
		int64_t step;
		double value;
		if (t->optuna_number >= 0 && !t->pruned && optuna_proc_take_prune(r->oproc, t->optuna_number, &step, &value))
			prune_trial(r, t, step, value);
		else
			report_values(r, t);
	}
}

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

/* ---- skipped ---------------------------------------------------------------- */

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
		return false;
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
	if (r->optuna_on && t->optuna_number >= 0)
		optuna_proc_tell(r->oproc, t->optuna_number, false, 0);
	r->done_count++;
	if (!r->o->quiet) {
		struct strbuf sb = STRBUF_INIT;
		trial_line_start(r, t, &sb);
		strbuf_addf(&sb, "skipped: %s", why);
		fprintf(stderr, "%s\n", strbuf_str(&sb));
		strbuf_release(&sb);
	}
	trial_free(t);
	free(t);
	return true;
}

/* ---- the sweep ------------------------------------------------------------- */

/* Recorded "running" by a sweep that is gone: interrupted, to run again. */
static void requeue_interrupted(struct runner *r)
{
	for (size_t i = 0; i < r->nrows; i++) {
		const struct trial_row *row = &r->rows[i];
		if (last_attempt(r, row->idx) != row)
			continue;
		bool was_running = row->status == TRIAL_RUNNING;
		bool interrupted = row->status == TRIAL_INTERRUPTED;
		bool oom_to_retry = row->status == TRIAL_OOM && r->spec.nretry;
		if (!was_running && !interrupted && !oom_to_retry)
			continue;
		char **v = values_from_row(r, row->vals);
		if (!v) {
			warning("trial %lld does not fit the sweep file any more: not run again", (long long)row->idx + 1);
			continue;
		}
		struct trial t;
		memset(&t, 0, sizeof(t));
		t.idx = row->idx;
		t.values = v;
		t.optuna_number = row->optuna_number;
		if (oom_to_retry) {
			struct trial from = t;
			snprintf(from.note, sizeof(from.note), "%s", row->note);
			from.attempt = row->attempt;
			bool ok = make_retry(r, &from, row->cause, &t);
			for (size_t d = 0; v[d]; d++)
				free(v[d]);
			free(v);
			if (!ok)
				continue;
		} else {
			t.attempt = row->attempt + 1;
			snprintf(t.note, sizeof(t.note), "run again: attempt %lld was interrupted", (long long)row->attempt);
			trial_derive(r, &t);
			if (was_running) {
				/* say so in the store: that attempt did not finish */
				struct trial_row upd = *row;
				upd.status = TRIAL_INTERRUPTED;
				upd.note = "the sweep stopped while it ran";
				int64_t run = store_trial_run(r->st, r->sweep_id, row->idx, row->attempt);
				if (run > 0)
					upd.run_id = run;
				store_trial_put(r->st, &upd);
			}
		}
		queue_push(r, &t);
	}
	reload_rows(r);
}

static int setup(struct runner *r)
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

static int open_sweep(struct runner *r, char *text)
{
	const struct sweep_opts *o = r->o;
	char *abs = realpath(o->file, NULL);
	if (o->resume) {
		struct sweep_row sw;
		int rc = store_get_sweep(r->st, o->resume_id, &sw);
		if (rc) {
			free(abs);
			if (rc > 0)
				error(o->resume_id ? "no sweep %lld in the store" : "no sweep to resume in the store",
				      (long long)o->resume_id);
			return -1;
		}
		bool same = abs && !strcmp(sw.file, abs);
		if (!o->resume_id && !same) {
			error("the latest sweep in the store is of '%s', not '%s'; give its id: --resume=ID", sw.file,
			      o->file);
			sweep_row_release(&sw);
			free(abs);
			return -1;
		}
		bool slurm = !strcmp(sw.executor, "slurm");
		if (o->executor && slurm != !strcmp(o->executor, "slurm")) {
			error("sweep %lld ran with executor %s: resume it with the same", (long long)sw.id,
			      slurm ? "slurm" : "local");
			sweep_row_release(&sw);
			free(abs);
			return -1;
		}
		r->slurm = slurm;
		r->slurm_array = sw.slurm_job;
		/* a cluster sweep's controller may be followed from any shell */
		if (!slurm && sw.status == SWEEP_RUNNING && sw.pid > 0 && sw.pid != getpid() && kill(sw.pid, 0) == 0) {
			error("sweep %lld is still running (pid %d)", (long long)sw.id, sw.pid);
			sweep_row_release(&sw);
			free(abs);
			return -1;
		}
		if (strcmp(sw.text, text))
			warning("%s changed since sweep %lld began; the trials already run keep their values",
			        o->file, (long long)sw.id);
		r->sweep_id = sw.id;
		if (r->optuna_on) {
			r->optuna.storage = xstrdup(sw.optuna_storage);
			r->optuna.name = xstrdup(sw.optuna_study);
		}
		sweep_row_release(&sw);
		free(abs);
		if (r->slurm)
			return 0;   /* its status is the workers' to end */
		return store_sweep_set_status(r->st, r->sweep_id, SWEEP_RUNNING, 0, getpid());
	}
	char *cwd = getcwd(NULL, 0);   /* where its trials run, also a worker's started elsewhere */
	struct sweep_begin b = {
		.started_at = wall_seconds(), .file = abs ? abs : o->file, .text = text, .cwd = cwd,
		.method = r->spec.method == SWEEP_GRID ? "grid" : r->spec.method == SWEEP_RANDOM ? "random" : "optuna",
		.metric = r->spec.metric_name, .maximize = r->spec.maximize, .pid = getpid(),
		.executor = r->slurm ? "slurm" : NULL,
	};
	if (r->optuna_on)
		r->optuna.storage = optuna_default_storage(o->store_path);
	r->sweep_id = store_sweep_begin(r->st, &b);
	free(abs);
	free(cwd);
	if (r->sweep_id < 0)
		return -1;
	if (r->optuna_on) {
		/* the study is named after the sweep, now that it has an id */
		char study[64];
		snprintf(study, sizeof(study), "leakproof-sweep-%lld", (long long)r->sweep_id);
		r->optuna.name = xstrdup(study);
		if (store_sweep_set_optuna(r->st, r->sweep_id, r->optuna.storage, r->optuna.name) < 0)
			return -1;
	}
	return 0;
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

static void list_trials(struct runner *r)
{
	struct trial t;
	printf("%llu trial%s (%s):\n", (unsigned long long)r->total, r->total == 1 ? "" : "s",
	       r->spec.method == SWEEP_GRID ? "grid" : r->spec.method == SWEEP_RANDOM ? "random" : "optuna");
	if (r->spec.method == SWEEP_OPTUNA) {
		printf("  (asked of optuna one at a time)\n");
		return;
	}
	while (fresh_trial(r, &t) == 0) {
		struct strbuf sb = STRBUF_INIT;
		describe_values(r, t.values, &sb);
		printf("  %lld  %s\n     ", (long long)t.idx + 1, strbuf_str(&sb));
		for (size_t i = 0; t.argv[i]; i++) {
			struct strbuf q = STRBUF_INIT;
			strbuf_add_json_str(&q, t.argv[i]);
			printf(" %s", strbuf_str(&q));
			strbuf_release(&q);
		}
		printf("\n");
		strbuf_release(&sb);
		trial_free(&t);
	}
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
static int make_logdir(struct runner *r)
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

/* Start trials while they may start, then wait for what comes, until
 * there is nothing left or a signal stops us. false when it failed. */
static bool run_loop(struct runner *r)
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

/* ---- a cluster sweep's controller ------------------------------------------ */

/* Every trial of a new cluster sweep, written pending (a transaction per
 * thousand). */
static int write_pending(struct runner *r)
{
	enum { CHUNK = 1000 };
	struct trial *ts = xcalloc(CHUNK, sizeof(*ts));
	struct trial_row *rows = xcalloc(CHUNK, sizeof(*rows));
	int rc = 0;
	for (;;) {
		size_t n = 0;
		while (n < CHUNK && fresh_trial(r, &ts[n]) == 0)
			n++;
		for (size_t i = 0; i < n; i++)
			rows[i] = (struct trial_row){
				.sweep_id = r->sweep_id, .idx = ts[i].idx, .attempt = 0, .params = ts[i].params,
				.env = ts[i].env, .argv = ts[i].argv_json, .vals = ts[i].vals, .status = TRIAL_PENDING,
				.optuna_number = -1,
			};
		if (n && store_trials_put_many(r->st, rows, n) < 0)
			rc = -1;
		for (size_t i = 0; i < n; i++)
			trial_free(&ts[i]);
		if (rc < 0 || n < CHUNK)
			break;
	}
	free(ts);
	free(rows);
	return rc;
}

static int submit_workers(struct runner *r, int64_t left)
{
	const struct sweep_slurm *sl = &r->spec.slurm;
	int workers = r->o->parallel ? r->o->parallel : sl->workers ? sl->workers :
	              r->spec.parallel > 1 ? r->spec.parallel : 4;
	if (left > 0 && workers > left)
		workers = (int)left;
	/* a SQLite store by its absolute path: the workers may start elsewhere */
	char *abs = strstr(r->o->store_path, "://") ? NULL : realpath(r->o->store_path, NULL);
	struct slurm_submit sub = {
		.slurm = sl, .workers = workers, .exe = r->exe, .store = abs ? abs : r->o->store_path,
		.sweep_id = r->sweep_id, .dir = r->logdir,
	};
	int64_t job;
	int rc = slurm_submit_array(&sub, &job);
	free(abs);
	if (rc < 0)
		return -1;
	r->slurm_array = job;
	store_sweep_set_executor(r->st, r->sweep_id, "slurm", job);
	fprintf(stderr, "leakproof: sweep %lld: %lld trial%s for %d SLURM worker%s: job array %lld"
	        " (output in %s/worker-%lld_N.out)\n", (long long)r->sweep_id, (long long)left, left == 1 ? "" : "s",
	        workers, workers == 1 ? "" : "s", (long long)job, r->logdir, (long long)job);
	return 0;
}

/*
 * Follow a cluster sweep in the store until every trial has ended: leases
 * that ran out are ended (their trials pending again), and when trials
 * are pending but no worker of the sweep's job array is left, a resume
 * (may_submit) submits new workers once. Returns the exit status.
 */
static int follow(struct runner *r, bool may_submit, bool *complete)
{
	int sigfd = r->sigfd;   /* SIGINT, SIGTERM, SIGHUP; SIGCHLD of sbatch and squeue only wakes it */
	int64_t shown_finished = -1, shown_running = -1;
	int status = 0;
	*complete = false;
	for (;;) {
		struct trial_counts c;
		if (store_trials_expire(r->st, r->sweep_id, wall_seconds()) < 0 ||
		    store_trial_counts(r->st, r->sweep_id, &c) < 0) {
			/* the server restarts: the workers wait for it, and so does
			 * the controller that follows them */
			if (store_wait_back(r->st))
				continue;
			status = 1;
			break;
		}
		if (!r->o->quiet && (c.finished != shown_finished || c.running != shown_running)) {
			fprintf(stderr, "leakproof: sweep %lld: %lld of %lld trials ended, %lld running, %lld pending\n",
			        (long long)r->sweep_id, (long long)c.finished,
			        (long long)(c.finished + c.running + c.pending + c.interrupted), (long long)c.running,
			        (long long)c.pending);
			shown_finished = c.finished;
			shown_running = c.running;
		}
		if (!c.pending && !c.running) {
			*complete = true;
			while (store_sweep_set_status(r->st, r->sweep_id, SWEEP_DONE, wall_seconds(), 0) < 0 && store_wait_back(r->st))
				;
			break;
		}
		if (c.pending && !c.running) {
			int alive = r->slurm_array > 0 ? slurm_job_alive(r->slurm_array) : 0;
			if (alive == 0 && may_submit) {
				may_submit = false;
				if (submit_workers(r, c.pending) < 0) {
					status = 1;
					break;
				}
			} else if (alive == 0) {
				error("sweep %lld: the workers of job %lld ended with %lld trial%s pending; "
				      "submit new ones with: leakproof sweep %s --resume=%lld", (long long)r->sweep_id,
				      (long long)r->slurm_array, (long long)c.pending, c.pending == 1 ? "" : "s",
				      r->o->file ? r->o->file : "FILE", (long long)r->sweep_id);
				status = 1;
				break;
			}
		}
		int stop = 0;
		int64_t until = mono_ns() + 2000000000LL;
		for (int64_t left; !stop && (left = until - mono_ns()) > 0;) {
			struct pollfd pfd = { .fd = sigfd, .events = POLLIN };
			if (poll(&pfd, 1, (int)(left / 1000000) + 1) <= 0)
				break;
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				if (si.ssi_signo != SIGCHLD)
					stop = (int)si.ssi_signo;
		}
		if (stop) {
			fprintf(stderr, "leakproof: no longer following sweep %lld (SIG%s); its workers go on\n",
			        (long long)r->sweep_id, sigabbrev_np(stop));
			status = 128 + stop;
			break;
		}
	}
	return status;
}

/* executor slurm: a new sweep's trials written pending and its workers
 * submitted, or a resumed one followed (and new workers submitted when
 * trials are left and none is); then followed to its end unless no_wait. */
static int run_controller(struct runner *r, struct sweep_result *out)
{
	if (!r->o->resume) {
		int64_t total = (int64_t)r->total;
		if (store_sweep_set_executor(r->st, r->sweep_id, "slurm", 0) < 0 || write_pending(r) < 0 ||
		    submit_workers(r, total) < 0)
			return 1;
	}
	out->sweep_id = r->sweep_id;
	out->ended = true;
	out->submitted = r->slurm_array;
	if (r->o->no_wait) {
		fprintf(stderr, "leakproof: follow it with: leakproof sweep %s --resume=%lld (or leakproof report sweep:%lld)\n",
		        r->o->file, (long long)r->sweep_id, (long long)r->sweep_id);
		return 0;
	}
	bool complete;
	int status = follow(r, r->o->resume, &complete);
	out->complete = complete;
	return status;
}

/* ---- a worker ------------------------------------------------------------ */

/* A worker: chdir to the sweep's directory, its store path made absolute
 * first for the trials. 0, or -1 after a message. */
static int enter_sweep_dir(struct runner *r, const char *dir)
{
	char *here = getcwd(NULL, 0);
	bool same = here && !strcmp(here, dir);
	free(here);
	if (same)
		return 0;
	const char *store = r->o->store_path;
	if (!strstr(store, "://") && store[0] != '/') {
		r->store_abs = realpath(store, NULL);
		if (!r->store_abs)
			return error_errno("cannot make the store path '%s' absolute", store);
	}
	if (chdir(dir) < 0)
		return error_errno("sweep %lld runs its trials in '%s', which this worker cannot enter",
		                   (long long)r->sweep_id, dir);
	if (!r->o->quiet)
		fprintf(stderr, "leakproof: worker: trials of sweep %lld run in its directory '%s'\n",
		        (long long)r->sweep_id, dir);
	return 0;
}

/* Join sweep o->worker_id: its spec from the store (the text it began
 * with), trials claimed one after another until none is left. */
static int run_worker(struct runner *r, struct sweep_result *out)
{
	const struct sweep_opts *o = r->o;
	struct sweep_row sw;
	int rc = store_get_sweep(r->st, o->worker_id, &sw);
	if (rc) {
		if (rc > 0)
			error("no sweep %lld in the store", (long long)o->worker_id);
		return rc > 0 ? LP_EXIT_USAGE : LP_EXIT_FAILURE;
	}
	r->sweep_id = sw.id;
	int status = LP_EXIT_FAILURE;
	if (sweep_spec_parse(sw.text, strlen(sw.text), sw.file, &r->spec) < 0) {
		sweep_row_release(&sw);
		return LP_EXIT_USAGE;
	}
	char *sweep_dir = sw.cwd && *sw.cwd ? xstrdup(sw.cwd) : NULL;
	sweep_row_release(&sw);
	if (r->spec.method == SWEEP_OPTUNA) {
		error("sweep %lld asks Optuna for its trials: it runs locally, not with workers", (long long)r->sweep_id);
		return LP_EXIT_USAGE;
	}
	/* signals blocked before setup() loads NVML (see sweep_run) */
	static const int sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, 0 };
	r->sigfd = spawn_signalfd(sigs, NULL);
	if (r->sigfd < 0) {
		error_errno("cannot create signalfd");
		return LP_EXIT_FAILURE;
	}
	if (setup(r) < 0)
		return LP_EXIT_USAGE;
	r->parallel = o->parallel ? o->parallel : 1;   /* a worker runs one trial at a time unless told */
	r->worker = true;
	r->lease_s = o->lease_s > 0 ? o->lease_s : LEASE_DEFAULT_S;
	r->renew_at_ns = mono_ns() + (int64_t)(r->lease_s / 3 * 1e9);
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	snprintf(r->worker_name, sizeof(r->worker_name), "%s:%d", host, (int)getpid());
	struct slurm_job_env job;
	slurm_job_env_read(&job);
	r->slurm_job_id = job.job_id;
	r->claimer = (struct trial_claimer){ .worker = r->worker_name, .slurm_job = job.in_job ? job.array_job : 0,
	                                     .slurm_task = job.array_task };
	r->step_prefix = slurm_step_prefix();
	if (make_logdir(r) < 0 || reload_rows(r) < 0) {
		free(sweep_dir);
		return LP_EXIT_FAILURE;
	}
	/* The trials run where the sweep was started, as its own would: their
	 * relative paths (the script, data, outputs) mean what they meant
	 * there. Before, a worker started by hand elsewhere ran them in its
	 * own directory, every trial failed and "the sweep is done". */
	if (sweep_dir && enter_sweep_dir(r, sweep_dir) < 0) {
		free(sweep_dir);
		return LP_EXIT_FAILURE;
	}
	free(sweep_dir);
	r->running = xcalloc((size_t)r->parallel, sizeof(*r->running));
	if (!o->quiet) {
		char slurm[96] = "";
		if (job.in_job)
			snprintf(slurm, sizeof(slurm), " (SLURM job %lld, array task %lld)", (long long)job.array_job,
			         (long long)job.array_task);
		fprintf(stderr, "leakproof: worker %s of sweep %lld%s: claiming trials\n", r->worker_name,
		        (long long)r->sweep_id, slurm);
	}
	bool ok = run_loop(r);
	struct trial_counts c;
	bool complete = ok && !r->stop_signal && store_trial_counts(r->st, r->sweep_id, &c) == 0 && !c.pending &&
	                !c.running;
	if (complete)
		store_sweep_set_status(r->st, r->sweep_id, SWEEP_DONE, wall_seconds(), 0);
	if (!o->quiet)
		fprintf(stderr, "leakproof: worker %s: %lld trial%s run%s\n", r->worker_name, (long long)r->done_count,
		        r->done_count == 1 ? "" : "s", r->stop_signal ? "; stopped" :
		        r->host_stopped ? "; this machine gets no more trials" : complete ? "; the sweep is done" : "");
	out->sweep_id = r->sweep_id;
	out->ended = true;
	out->complete = complete;
	out->worker = true;
	status = r->stop_signal ? 128 + r->stop_signal : ok && !r->host_stopped ? 0 : 1;
	return status;
}

static void runner_release(struct runner *r)
{
	if (r->next) {
		trial_free(r->next);
		free(r->next);
	}
	for (size_t i = 0; i < r->nqueue; i++)
		trial_free(&r->queue[i]);
	free(r->queue);
	free(r->store_abs);
	free(r->running);
	clear_rows(r);
	admit_release(r);
	nvml_close(r->nvml);
	if (r->sigfd >= 0)
		close(r->sigfd);
	if (r->st)
		store_close(r->st);
	optuna_proc_close(r->oproc);
	prefork_stop(r->prefork);
	if (r->optuna_on) {
		free((char *)r->optuna.storage);
		free((char *)r->optuna.name);
	}
	sweep_spec_free(&r->spec);
}

/* The template of warm starts, when the file or --prefork asks for one;
 * where it cannot be, a warning says why and trials start cold. */
static void start_prefork(struct runner *r)
{
	char **mods = r->spec.prefork, **own = NULL;
	if (r->o->prefork) {
		size_t n = 0;
		char *list = xstrdup(r->o->prefork), *save = NULL;
		own = xcalloc(strlen(list) + 2, sizeof(char *));
		for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			own[n++] = xstrdup(tok);
		free(list);
		mods = own;
	}
	if (mods && mods[0]) {
		char why[512] = "";
		r->prefork = prefork_start(r->spec.command[0], python_client_dir(), mods, PREFORK_READY_MS, why,
		                           sizeof(why));
		if (!r->prefork)
			warning("prefork: %s: trials start cold", why);
		else if (!r->o->quiet)
			fprintf(stderr, "leakproof: prefork: %s imported once; trials are forked from it\n", mods[0]);
	}
	for (size_t i = 0; own && own[i]; i++)
		free(own[i]);
	free(own);
}

int sweep_run(const struct sweep_opts *o, struct sweep_result *out)
{
	struct runner r;
	memset(out, 0, sizeof(*out));
	memset(&r, 0, sizeof(r));
	r.o = o;
	r.sigfd = -1;
	int status = LP_EXIT_FAILURE;
	char *text = NULL;

	if (o->worker_id > 0) {
		r.st = store_open(o->store_path);
		if (r.st)
			supervise_end_interrupted(r.st);
		status = r.st ? run_worker(&r, out) : LP_EXIT_FAILURE;
		runner_release(&r);
		return status;
	}

	char buf[1 << 16];
	ssize_t len = read_file_buf(o->file, buf, sizeof(buf));
	if (len < 0) {
		error_errno("cannot read sweep file '%s'", o->file);
		return LP_EXIT_USAGE;
	}
	if (sweep_spec_parse(buf, (size_t)len, o->file, &r.spec) < 0)
		return LP_EXIT_USAGE;
	if (check_run_options(&r) < 0) {
		sweep_spec_free(&r.spec);
		return LP_EXIT_USAGE;
	}
	text = xstrdup(buf);
	r.slurm = o->executor ? !strcmp(o->executor, "slurm") : r.spec.executor == SWEEP_SLURM;
	r.optuna_on = r.spec.method == SWEEP_OPTUNA;
	r.optuna.optuna = "optuna";
	r.optuna.sampler = "TPESampler";
	r.optuna.seed = r.spec.seed;
	r.optuna.maximize = r.spec.maximize;
	if (r.slurm && r.optuna_on) {
		error("%s: executor slurm runs grid and random sweeps; method optuna runs locally", o->file);
		status = LP_EXIT_USAGE;
		goto out;
	}
	if (r.spec.optuna_sampler)
		r.optuna.sampler = r.spec.optuna_sampler;
	r.optuna.sampler_kwargs = r.spec.optuna_sampler_kwargs;
	r.optuna.pruner = r.spec.optuna_pruner;
	r.optuna.pruner_kwargs = r.spec.optuna_pruner_kwargs;
	r.pruning = r.optuna_on && r.spec.optuna_pruner && r.spec.metric_name;
	/* Signals blocked before setup() loads NVML: a thread it starts keeps
	 * the mask it was born with and would take SIGCHLD from the signalfd. */
	static const int sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, 0 };
	r.sigfd = spawn_signalfd(sigs, NULL);
	if (r.sigfd < 0) {
		error_errno("cannot create signalfd");
		goto out;
	}
	if (setup(&r) < 0) {
		status = LP_EXIT_USAGE;
		goto out;
	}
	if (o->dry_run) {
		list_trials(&r);
		status = 0;
		goto out;
	}

	r.st = store_open(o->store_path);
	if (!r.st)
		goto out;
	supervise_end_interrupted(r.st);
	if (open_sweep(&r, text) < 0)
		goto out;
	if (make_logdir(&r) < 0)
		goto out;
	if (r.slurm) {
		/* a worker's trials are SLURM job steps without a cgroup of their
		 * own, which a fork cannot join: said, not dropped silently */
		if ((o->prefork ? *o->prefork != '\0' : r.spec.prefork && r.spec.prefork[0]))
			warning("prefork: not with executor slurm: its workers start every trial cold");
		status = run_controller(&r, out);
		goto out;
	}
	if (reload_rows(&r) < 0)
		goto out;
	requeue_interrupted(&r);
	if (r.optuna_on) {
		char *pw = optuna_storage_password(o->store_path);
		r.optuna.password = pw;
		r.optuna.client_dir = python_client_dir();
		r.oproc = optuna_proc_open(&r.optuna, &r.spec, (uint64_t)r.nrows);
		free(pw);            /* optuna_proc_open() sent it */
		r.optuna.password = NULL;
		if (!r.oproc)
			goto out;
	}
	start_prefork(&r);

	r.running = xcalloc((size_t)r.parallel, sizeof(*r.running));
	if (!o->quiet)
		fprintf(stderr, "leakproof: sweep %lld: %llu trial%s, %d at a time%s\n", (long long)r.sweep_id,
		        (unsigned long long)r.total, r.total == 1 ? "" : "s", r.parallel,
		        o->resume ? " (resumed)" : "");

	bool ok = run_loop(&r);
	/* the tells still due are answered before the sweep is done */
	if (r.oproc && optuna_proc_close(r.oproc) < 0)
		ok = false;
	r.oproc = NULL;
	bool complete = !r.stop_signal && ok && !r.host_stopped;
	while (store_sweep_set_status(r.st, r.sweep_id, complete ? SWEEP_DONE : SWEEP_INTERRUPTED, wall_seconds(), 0) < 0 &&
	       store_wait_back(r.st))
		;
	out->sweep_id = r.sweep_id;
	out->ended = true;
	out->complete = complete;
	status = r.stop_signal ? 128 + r.stop_signal : ok && !r.host_stopped ? 0 : 1;
out:
	runner_release(&r);
	free(text);
	return status;
}
