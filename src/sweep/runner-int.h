/*
 * runner-int.h — what the sweep runner's files share, private to them:
 * one trial as it is made, admitted and run (struct trial), the state of
 * a sweep (struct runner), and what runner.c (the loop, trials made,
 * started and finished, resume) calls in admit.c (admission by memory,
 * placement on GPUs, the memory model's predictions and skips, failure
 * streaks). Memory is bytes.
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

struct nvml;
struct store;

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
	bool lost;                     /* worker: its lease was taken over; not ours to record */
	struct trial_prediction pred;  /* what the memory model predicted (NAN unknown) */
	bool noted_no_skip;            /* its note says it runs despite the model (--no-skip) */
	/* pruning (optuna with a pruner): the metric's values reported so far,
	 * and whether the pruner stopped it */
	int64_t run_id;                /* its run, once it has one; 0 */
	size_t nreported;              /* values of the sweep metric told to Optuna */
	bool pruned;                   /* SIGTERM sent: the pruner said so */
	bool warm;                     /* started through the prefork template's stub */
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
	double memory_expect;          /* memory.expect, < 0 learn */
	int64_t done_count, started_count;
	struct nvml *nvml;             /* GPUs to place trials on; NULL: none */

	bool slurm;                    /* executor slurm: workers run the trials */
	int64_t slurm_array;           /* the workers' job array last submitted; 0 none */

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

/* admit.c (which calls nothing in runner.c): whether t may start now
 * (and on which GPU: t->gpu); the device for t, or -1; the number s is
 * as a whole, or NAN. */
bool admit(struct runner *r, struct trial *t);
int place_gpu(struct runner *r, struct trial *t);
double sweep_num_or_nan(const char *s);

/* The memory model (memmodel.h) of r's finished trials, fitted again when
 * a trial finished since (r->model_stale); t->pred filled from it. */
void model_refresh(struct runner *r);
void predict_trial(struct runner *r, struct trial *t);
/* Whether t is clearly too large for the budget (host memory.max, or the
 * largest GPU): its predicted peak's lower bound is above it, or it is at
 * least as large as a trial that ran out of memory under this budget.
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

#endif
