/*
 * runner-int.h — what the sweep runner's files share, private to them:
 * one trial as it is made, admitted and run (struct trial), the state of
 * a sweep (struct runner), and what each file calls in those below it.
 * The files call one another in one direction only (make check-layers):
 * runner.c (sweep_run, the entry; resume) calls cluster.c (the controller
 * and the workers of executor slurm), which calls loop.c (the loop: the
 * next trial, skips, admission, waiting), which calls trial.c (a trial's
 * values, rows, start, end and pruning), which calls admit.c (admission by
 * memory, placement on GPUs, the memory model's predictions and skips,
 * failure streaks). Memory is bytes.
 */
#ifndef LP_SWEEP_RUNNER_INT_H
#define LP_SWEEP_RUNNER_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/sweeps.h"
#include "sweep/memmodel.h"
#include "sweep/optuna.h"
#include "sweep/runner.h"
#include "sweep/spec.h"

/* Shared by trial.c and loop.c: */
#define CLAIM_PATIENCE_NS (120LL * 1000000000LL)   /* a store refusing claims: how long a worker waits */
#define PRUNE_POLL_MS 500          /* running trials' intermediate values read this often (pruning) */

struct nvml;
struct store;
struct strbuf;

struct trial {
	int64_t idx, attempt;
	char **values;                 /* one per dim, owned */
	char *params, *env, *argv_json, *vals;
	char **argv;                   /* the job's command */
	int64_t optuna_number;         /* -1: none */
	char note[200];
	double expected;               /* bytes it is expected to need; < 0 unknown */
	bool expected_known;           /* computed (only when trials run side by side) */
	pid_t pid;
	double started_at;
	char log[PATH_MAX];
	int gpu;                       /* the device given to it; -1 none */
	double expected_gpu;           /* GPU bytes it is expected to need; < 0 unknown */
	double lease_until;            /* worker: its lease (wall seconds) */
	bool lease_taken;              /* worker: its lease was taken over; not ours to record */
	struct trial_prediction pred;  /* what the memory model predicted (NAN unknown) */
	bool noted_no_skip;            /* its note says it runs despite the model (--no-skip) */
	uint64_t alloc_bytes;          /* on_oom resize: the memory.max (--max-mem) it runs
	                                * with; 0: the file's memory.max */
	bool sized;                    /* its allocation was chosen (by the model, or after an OOM) */
	uint64_t need_bytes;           /* sized workers: the worker memory it needs (its
	                                * size class, trials.need_bytes); 0 the smallest */
	char alloc_arg[24];            /* alloc_bytes as --max-mem's value */
	/* pruning (optuna with a pruner): the metric's values reported so far,
	 * and whether the pruner stopped it */
	int64_t run_id;                /* its run, once it has one; 0 */
	size_t nreported;              /* values of the sweep metric told to Optuna */
	bool pruned;                   /* SIGTERM sent: the pruner said so */
	bool warm;                     /* started through the prefork template's stub */
};

/* An array of workers the controller submitted, of one size class. */
struct slurm_array {
	int64_t job;
	uint64_t mem_bytes;            /* its workers' memory; 0 slurm.mem (no classes) */
	int submits;                   /* arrays of this class submitted so far */
};

struct runner {
	const struct sweep_opts *o;
	struct sweep_spec spec;
	struct store *st;
	int64_t sweep_id;
	char exe[PATH_MAX];
	char *store_abs;               /* a worker: the store path made absolute for its trials; NULL: as given */
	char logdir[PATH_MAX];
	int parallel;
	int sigfd;
	int stop_signal;               /* a signal told us to stop */

	/* what is known of the sweep's trials, from the store, with their
	 * values parsed once and the latest attempt of each index */
	struct trial_row *rows;
	char ***row_vals;              /* NULL where they do not fit the spec */
	size_t nrows, caprows;
	int64_t *last_of;              /* idx -> row of its latest attempt, -1 */
	size_t nlast;

	uint64_t total;                /* trials to run in all (grid size, run_cap) */
	uint64_t next_idx;             /* the next fresh index to consider */
	struct trial *queue;           /* re-runs and retries, before fresh ones */
	size_t nqueue, capqueue;
	struct trial *running;
	size_t nrunning;
	struct trial *next;            /* made, waiting for admission */
	struct optuna_study optuna;
	bool optuna_on;
	struct optuna_proc *oproc;     /* the Optuna process (optuna_on) */
	bool pruning;                  /* a pruner and a metric: intermediate values go to Optuna */
	int64_t prune_check_ns;        /* when running trials' values are read next */
	struct prefork *prefork;       /* the template of warm starts; NULL: cold */
	uint64_t memory_max;           /* memory.max of the file, 0 none */
	uint64_t memory_max_mem;       /* memory.max_mem: the most a resized trial gets; 0 none */
	double memory_expect;          /* memory.expect, < 0 learn */
	int64_t done_count, started_count;
	struct nvml *nvml;             /* GPUs to place trials on; NULL: none */

	bool slurm;                    /* executor slurm: workers run the trials */
	int64_t slurm_array;           /* the workers' job array last submitted; 0 none */
	/* on_oom resize with executor slurm: workers of more than one size
	 * (size classes from slurm.mem to slurm.max_mem, slurm_size_class());
	 * memory_max and memory_max_mem are then slurm.mem and max_mem */
	bool sized_workers;
	uint64_t worker_mem;           /* a worker: its size class (the job's --mem) */
	int64_t rows_read_at_ns;       /* a worker reads the trials again from then */
	struct slurm_array *arrays;    /* the controller: the arrays submitted, by class */
	size_t narrays;

	/* a worker (sweep --worker): trials claimed from the store */
	bool worker;
	char worker_name[300];         /* HOST:PID */
	struct trial_claimer claimer;
	double lease_s;
	int64_t renew_at_ns;           /* the next heartbeat */
	int64_t claim_failing_since_ns;   /* the store refused claims since; 0: it does not */
	/* srun could not start a trial's job step (slurmctld away): the trial
	 * was put back; no claim before step_retry_at_ns */
	int64_t step_failing_since_ns, step_retry_at_ns, step_backoff_ns;
	const char *const *step_prefix;   /* srun ...: each trial a job step; NULL: none */
	int64_t slurm_job_id;          /* our own job (SLURM_JOB_ID); 0 none */
	enum end_cause stop_cause;     /* what SLURM says stopped us: CAUSE_CANCELLED, ...; CAUSE_NONE */

	struct memmodel model;         /* fitted on the finished trials (admit.c) */
	bool model_stale;              /* a trial finished since the fit */
	int host_streak;               /* OOMs or failures in a row on this machine */
	int *gpu_streak;               /* ... on each GPU (ngpu_streak of them) */
	bool *gpu_stopped;             /* that GPU gets no more trials */
	int ngpu_streak;
	bool host_stopped;             /* this machine gets no more trials */
};

/* admit.c (which calls none of the files above it): whether t may start now
 * (and on which GPU: t->gpu); the device for t, or -1; the number s is
 * as a whole, or NAN. */
bool admit(struct runner *r, struct trial *t);
int place_gpu(struct runner *r, struct trial *t);
double sweep_num_or_nan(const char *s);

/* The memory model (memmodel.h) of r's finished trials, fitted again when
 * a trial finished since (r->model_stale); t->pred filled from it. */
void model_refresh(struct runner *r);
void predict_trial(struct runner *r, struct trial *t);
/* on_oom resize: the allocation (bytes of --max-mem) trial t should run
 * with. Before it ran (after_oom 0): the upper bound of its predicted host
 * peak with a margin, rounded up to 64 MiB, when that is over memory.max,
 * at most memory.max_mem; memory.max when the model predicts it fits or
 * cannot tell. After it ran out of after_oom bytes: more than that, the
 * prediction when it is larger, else twice as much (the model had not
 * foreseen it), at most max_mem; 0 when after_oom was max_mem already.
 * why says how when the allocation is not memory.max ("" else). */
uint64_t trial_allocation(struct runner *r, struct trial *t, uint64_t after_oom, char *why, size_t whysz);
/* The most host memory a trial may get: memory.max_mem when trials are
 * resized, else memory.max (0: none). */
uint64_t host_budget(const struct runner *r);
/* Whether t is clearly too large for the budget (host memory.max, or
 * memory.max_mem when trials are resized; or the largest GPU): its
 * predicted peak's lower bound is above it, or it is at least as large as
 * a trial that ran out of memory under this budget.
 * true with why ("predicted peak ..."); with o->no_skip still false (why
 * says it runs anyway). */
bool too_large(struct runner *r, struct trial *t, char *why, size_t whysz);
/* on_oom retry_with fit: the largest value of dimension d below t's that
 * the model predicts to fit the budget the trial ran out of (cause), as
 * text into val, and how into why; false when the model cannot tell. */
bool retry_fit_value(struct runner *r, const struct trial *t, size_t d, enum end_cause cause, char *val, size_t valsz,
                     char *why, size_t whysz);
/* Count t's outcome (status) into the failure streaks of this machine and
 * of its GPU; when one reaches max_consecutive_failures, that place gets
 * no more trials (r->host_stopped when none is left): true, with what to
 * say in msg. */
bool note_outcome(struct runner *r, const struct trial *t, enum trial_status status, char *msg, size_t msgsz);
/* What admit.c holds: freed at the end of the sweep. */
void admit_release(struct runner *r);

/* ---- trial.c: a trial, from its values to its end ----------------------- */

/* Free what t holds (its values and what was derived from them) and zero
 * it; t itself is the caller's. NULL: nothing. */
void trial_free(struct trial *t);
/* Fill t's argv, params, env, argv_json and vals from t->values; t owns
 * them (trial_free). */
void trial_derive(struct runner *r, struct trial *t);
/* The values of assignment a as a NULL-terminated array of copies, which
 * the caller owns (a trial's values, freed by trial_free); a is freed. */
char **own_values(struct runner *r, struct sweep_assign *a);
/* The values of a trial row's vals, NULL-terminated, owned by the caller;
 * NULL when they do not fit the spec (the file changed between the sweep
 * and --resume). */
char **values_from_row(struct runner *r, const char *vals);
/* Append the dims as "lr=0.01 batch_size=64 OMP_NUM_THREADS=1" to sb. */
void describe_values(const struct runner *r, char **values, struct strbuf *sb);
/* Append "leakproof: trial 3.1/12 [lr=0.01 batch_size=64]: " to sb, how a
 * line about a trial's end begins. */
void trial_line_start(const struct runner *r, const struct trial *t, struct strbuf *sb);
/* That line, with what follows it, on stderr (unless -q). */
void trial_say(const struct runner *r, const struct trial *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* What r knows of the sweep's trials (r->rows, r->row_vals, r->last_of,
 * owned by r): freed; loaded again from the store (0, or -1 after a
 * message); one attempt as it is now in the store, added or replaced;
 * the latest attempt of idx, r's (NULL: none). */
void clear_rows(struct runner *r);
int reload_rows(struct runner *r);
void refresh_row(struct runner *r, int64_t idx, int64_t attempt);
const struct trial_row *last_attempt(const struct runner *r, int64_t idx);

/* Have o->check_run_options check the `leakproof run` options trials will
 * get from the file: 0, or -1 after "FILE:LINE:COLUMN: run_options: ...". */
int check_run_options(struct runner *r);
/* Start trial t, recorded "running" first: 0 when it runs (t->pid; the
 * caller keeps t among r->running), 1 when it ended at once (recorded as
 * ended), -1 after a message. t stays the caller's. */
int launch(struct runner *r, struct trial *t);
/* Reap the children that ended: a trial's end is recorded (and its retry
 * queued or written pending), and it leaves r->running; the Optuna process
 * and the prefork template are told apart. */
void reap_trials(struct runner *r);
/* Move t to the end of r->queue (re-runs and retries, run before fresh
 * trials); r owns it now and t is zeroed. */
void queue_push(struct runner *r, struct trial *t);
/* The retry of an OOM'd trial t (cause: why it ended) into out, which the
 * caller then owns: the retry_with parameters halved, or for rule fit set
 * to what the memory model predicts to fit; false when nothing is left to
 * change. */
bool make_retry(struct runner *r, const struct trial *t, enum end_cause cause, struct trial *out);
/* Every PRUNE_POLL_MS (pruning): the running trials' new values of the
 * metric to Optuna, and those its pruner stops ended (SIGTERM). */
void check_pruning(struct runner *r);

/* ---- loop.c: the loop of a sweep and of a worker ------------------------ */

/* The next fresh trial into t (which the caller then owns, trial_free):
 * the next index of r->total not known to the store, grid or random, or
 * asked of Optuna. 0, 1 when there is none left, -1 on error. */
int fresh_trial(struct runner *r, struct trial *t);
/* What the loop runs with, from the spec and the options: our own binary,
 * r->parallel, the memory budget, the GPUs (r->nvml), r->total. 0, or -1
 * after a message. */
int setup(struct runner *r);
/* Make r->logdir, where the trials' (and the workers') logs go:
 * DIR/sweeps/KEY/ID. 0, or -1 after a message. */
int make_logdir(struct runner *r);
/* Start trials while they may start, then wait for what comes, until
 * there is nothing left or a signal stops it (r->stop_signal; what runs
 * is then ended). false when it failed. */
bool run_loop(struct runner *r);

/* ---- cluster.c: executor slurm ------------------------------------------ */

/* The controller: a new sweep's trials written pending and its workers
 * submitted, or a resumed one followed; then followed to its end unless
 * o->no_wait. Fills *out; returns the exit status. */
int run_controller(struct runner *r, struct sweep_result *out);
/* A worker of sweep o->worker_id (r->st open): trials claimed and run
 * until none is left. Fills *out; returns the exit status. */
int run_worker(struct runner *r, struct sweep_result *out);

#endif
