/*
 * trial.c — one trial of a sweep, from its values to its end: what is
 * derived from its values (argv, parameters, env), what the store knows of
 * the sweep's trials (their rows, the latest attempt of each index), its
 * start, its end (recorded, retried, run again), and its pruning.
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
 * An OOM'd trial's retry (on_oom) and a warm trial's re-run after its
 * template ended are queued for a local sweep's loop (r->queue), or written
 * pending for any worker to claim. The lowest of the runner's files: it
 * calls admit.c (placement, predictions, streaks), expand.c, optuna.c,
 * prefork.c and slurm.c, never loop.c, cluster.c or runner.c
 * (runner-int.h).
 */
#include "sweep/runner-int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/spawn.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "sweep/optuna.h"
#include "sweep/prefork.h"
#include "sweep/slurm.h"
#include "sweep/spec.h"
#include "util/jsonw.h"
#include "util/util.h"

#define RETRIES_MAX 4              /* halvings of one trial after OOMs */
#define STEP_PATIENCE_NS (120LL * 1000000000LL)    /* job steps that do not start: how long trials go back */
#define STEP_BACKOFF_MIN_NS 1000000000LL           /* the first wait after one: 1 s, doubled to */
#define STEP_BACKOFF_MAX_NS 16000000000LL          /* 16 s */
#define VAL_SEP '\x1f'

/* ---- trials -------------------------------------------------------------- */

void trial_free(struct trial *t)
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

/* Fill everything of t derived from t->values. */
void trial_derive(struct runner *r, struct trial *t)
{
	struct sweep_assign a = { t->values };
	t->argv = sweep_trial_argv(&r->spec, &a);
	t->params = sweep_params_json(&r->spec, &a);
	t->env = sweep_env_json(&r->spec, &a);
	struct strbuf argv_json = STRBUF_INIT;
	jw_string_array(&argv_json, t->argv);
	t->argv_json = strbuf_detach(&argv_json, NULL);
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < r->spec.ndims; i++) {
		if (i)
			strbuf_addch(&sb, VAL_SEP);
		strbuf_addstr(&sb, t->values[i]);
	}
	t->vals = strbuf_detach(&sb, NULL);
}

/* Take ownership of an assignment's values (NULL-terminated copy). */
char **own_values(struct runner *r, struct sweep_assign *a)
{
	char **v = xcalloc(r->spec.ndims + 1, sizeof(char *));
	for (size_t i = 0; i < r->spec.ndims; i++)
		v[i] = xstrdup(a->values[i]);
	sweep_assign_free(a, r->spec.ndims);
	return v;
}

/* Values back from a trial row's vals; NULL when they do not fit the spec
 * (the file changed between the sweep and --resume). */
char **values_from_row(struct runner *r, const char *vals)
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
void describe_values(const struct runner *r, char **values, struct strbuf *sb)
{
	for (size_t i = 0; i < r->spec.ndims; i++) {
		if (i)
			strbuf_addch(sb, ' ');
		strbuf_addf(sb, "%s=%s", r->spec.dims[i].name, values[i]);
	}
}

/* "leakproof: trial 3.1/12 [lr=0.01 batch_size=64]: ", how a line about a
 * trial's end begins. */
void trial_line_start(const struct runner *r, const struct trial *t, struct strbuf *sb)
{
	strbuf_addf(sb, "leakproof: trial %lld", (long long)t->idx + 1);
	if (t->attempt)
		strbuf_addf(sb, ".%lld", (long long)t->attempt);
	strbuf_addf(sb, "/%llu [", (unsigned long long)r->total);
	describe_values(r, t->values, sb);
	strbuf_addstr(sb, "]: ");
}

void trial_say(const struct runner *r, const struct trial *t, const char *fmt, ...)
{
	if (r->o->quiet)
		return;
	struct strbuf sb = STRBUF_INIT;
	trial_line_start(r, t, &sb);
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", strbuf_str(&sb));
	strbuf_release(&sb);
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

void clear_rows(struct runner *r)
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
int reload_rows(struct runner *r)
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
void refresh_row(struct runner *r, int64_t idx, int64_t attempt)
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
const struct trial_row *last_attempt(const struct runner *r, int64_t idx)
{
	if (idx < 0 || (size_t)idx >= r->nlast || r->last_of[idx] < 0)
		return NULL;
	return &r->rows[r->last_of[idx]];
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

/* The `leakproof run` options trial t gets from the sweep file (t NULL:
 * those every trial gets): memory (t's own allocation when it was
 * resized), result regex, then the file's run_options (last). */
static void add_run_options(struct runner *r, struct trial *t, char ***v, size_t *n, size_t *cap)
{
	/* (sized workers: SLURM gives the allocation, the job's --mem) */
	if (t && t->alloc_bytes && t->alloc_bytes != r->memory_max && !r->sized_workers) {
		snprintf(t->alloc_arg, sizeof(t->alloc_arg), "%llu", (unsigned long long)t->alloc_bytes);
		add_arg(v, n, cap, "--max-mem");
		add_arg(v, n, cap, t->alloc_arg);
	} else if (r->spec.memory_max) {
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
int check_run_options(struct runner *r)
{
	if (!r->o->check_run_options || !r->spec.nrun_options)
		return 0;
	char **argv = NULL;
	size_t n = 0, cap = 0;
	add_run_options(r, NULL, &argv, &n, &cap);
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
int launch(struct runner *r, struct trial *t)
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
	add_run_options(r, t, &argv, &n, &cap);
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
		.need_bytes = t->need_bytes,
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

void queue_push(struct runner *r, struct trial *t)
{
	if (r->nqueue == r->capqueue) {
		r->capqueue = r->capqueue ? 2 * r->capqueue : 16;
		r->queue = xrealloc(r->queue, r->capqueue * sizeof(*r->queue));
	}
	r->queue[r->nqueue++] = *t;
	memset(t, 0, sizeof(*t));
}

/* on_oom resize: the retry of t, which ran out of host memory, with the
 * same values and a larger allocation (trial_allocation()); false when it
 * had memory.max_mem already. */
static bool make_resized(struct runner *r, const struct trial *t, struct trial *out)
{
	struct trial probe = *t;     /* predict_trial() fills its pred */
	uint64_t ran_out = t->alloc_bytes ? t->alloc_bytes : r->memory_max;
	char why[sizeof(out->note) - 32];
	uint64_t alloc = trial_allocation(r, &probe, ran_out, why, sizeof(why));
	if (!alloc)
		return false;
	memset(out, 0, sizeof(*out));
	out->idx = t->idx;
	out->attempt = t->attempt + 1;
	out->optuna_number = t->optuna_number;   /* the same configuration: told when it ends */
	out->values = xcalloc(r->spec.ndims + 1, sizeof(char *));
	for (size_t d = 0; d < r->spec.ndims; d++)
		out->values[d] = xstrdup(t->values[d]);
	out->alloc_bytes = alloc;
	out->sized = true;
	snprintf(out->note, sizeof(out->note), "run again after an OOM: %s", why);
	trial_derive(r, out);
	return true;
}

/* The retry of an OOM'd trial (cause: why it ended): with on_oom resize
 * and host memory, the same values with a larger allocation; else (or at
 * memory.max_mem) with the retry_with parameters halved, or for rule fit,
 * set to the largest value the memory model predicts to fit (halved when
 * it cannot tell); false when there is nothing left to change. */
bool make_retry(struct runner *r, const struct trial *t, enum end_cause cause, struct trial *out)
{
	if (t->attempt >= RETRIES_MAX)
		return false;
	if (r->spec.on_oom_resize && cause != CAUSE_CUDA_OOM && make_resized(r, t, out))
		return true;
	if (!r->spec.nretry)
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

/* Worker: write t's retry as a pending trial, for any worker to claim
 * (sized workers: any of the size class its allocation needs). */
static void put_pending(struct runner *r, struct trial *t)
{
	uint64_t need = t->need_bytes;
	if (r->sized_workers && t->alloc_bytes > r->memory_max)
		need = slurm_size_class(r->memory_max, r->memory_max_mem, t->alloc_bytes);
	struct trial_row row = {
		.sweep_id = r->sweep_id, .idx = t->idx, .attempt = t->attempt, .params = t->params,
		.env = t->env, .argv = t->argv_json, .vals = t->vals, .status = TRIAL_PENDING,
		.optuna_number = t->optuna_number, .note = t->note, .need_bytes = need,
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
		.optuna_number = t->optuna_number, .note = note, .need_bytes = t->need_bytes,
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
	if (t->lease_taken) {   /* another worker runs it again: its row is not ours */
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
		.note = t->note, .need_bytes = t->need_bytes,
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
	/* an OOM's retry (made now: the model has this end), before Optuna
	 * is told: one that runs the same configuration again tells */
	struct trial oom_retry;
	bool retried = row.status == TRIAL_OOM && !r->stop_signal && make_retry(r, t, cause, &oom_retry);
	bool same_again = retried && oom_retry.optuna_number == t->optuna_number;
	if (r->optuna_on && t->optuna_number >= 0 && !r->stop_signal && !template_died && !same_again) {
		if (row.status == TRIAL_OOM)   /* what does not fit: the sampler learns it (optuna.md) */
			optuna_proc_tell_memory(r->oproc, t->optuna_number, false, t->pred.peak[0],
			                        (double)(t->alloc_bytes ? t->alloc_bytes : r->memory_max));
		else   /* a rerun tells */
			optuna_proc_tell_state(r->oproc, t->optuna_number, t->pruned ? OPTUNA_PRUNED :
			                       row.status == TRIAL_OK && row.has_metric ? OPTUNA_COMPLETE : OPTUNA_FAIL,
			                       row.metric);
	}
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
	if (retried) {
		if (!r->o->quiet)
			fprintf(stderr, "leakproof: trial %lld will run again: %s\n", (long long)t->idx + 1, oom_retry.note);
		if (r->worker) {   /* for whichever worker claims it */
			put_pending(r, &oom_retry);
			trial_free(&oom_retry);
		} else {
			queue_push(r, &oom_retry);
		}
	}
}

/* Reap ended trials. */
void reap_trials(struct runner *r)
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
	if (t->optuna_number < 0 || t->pruned || t->lease_taken)
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
void check_pruning(struct runner *r)
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
