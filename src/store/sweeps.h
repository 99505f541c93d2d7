/*
 * sweeps.h — sweeps and their trials in the store (schema 3, see
 * docs/internals/store.md). A trial is one attempt at one point of the
 * search space; it runs as a `leakproof run` of its own, whose run row
 * carries (sweep_id, trial_idx, trial_attempt). Writes here go straight to
 * the store in their own transaction: a sweep killed at any moment finds
 * every finished trial again when it resumes.
 */
#ifndef LP_STORE_SWEEPS_H
#define LP_STORE_SWEEPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "store/store.h"

struct sweep_begin {
	double started_at;
	const char *file, *text, *method, *metric;
	bool maximize;
	int pid;
	const char *optuna_storage, *optuna_study;   /* NULL unless optuna */
	const char *executor;                        /* NULL: local; "slurm" */
	const char *cwd;                             /* the directory its trials run in */
};
/* The new sweep's id (> 0), or -1. */
int64_t store_sweep_begin(struct store *st, const struct sweep_begin *sb);
int store_sweep_set_optuna(struct store *st, int64_t id, const char *storage, const char *study);
/* SWEEP_RUNNING (with pid, on resume), SWEEP_DONE or SWEEP_INTERRUPTED. */
int store_sweep_set_status(struct store *st, int64_t id, enum sweep_status status, double ended_at, int pid);

struct sweep_row {
	int64_t id;
	double started_at, ended_at;      /* ended_at 0 while running */
	char *file, *text, *method, *metric, *optuna_storage, *optuna_study;  /* "" unknown */
	enum sweep_status status;
	bool maximize;
	int pid;
	char *executor;                   /* "" local, "slurm" */
	int64_t slurm_job;                /* the array job last submitted; 0 none */
	char *cwd;                        /* the directory its trials run in; "" unknown (older) */
};
/* id 0: the latest sweep. 0, 1 when there is none, -1 on error. */
int store_get_sweep(struct store *st, int64_t id, struct sweep_row *out);
void sweep_row_release(struct sweep_row *r);
/* The sweep run_id belongs to: its id, 0 when none, -1 on error. */
int64_t store_sweep_of_run(struct store *st, int64_t run_id);

struct trial_row {
	int64_t sweep_id, idx, attempt;
	char *params, *env, *argv;        /* JSON */
	char *vals;                       /* the values in the spec's dims order, 0x1f-separated */
	enum trial_status status;         /* TRIAL_PENDING, the zero value, until it starts */
	enum end_cause cause;             /* why its run ended; CAUSE_NONE unknown */
	char *note;                       /* "" none */
	int64_t run_id;                   /* 0: none yet */
	bool has_metric;
	double metric;
	int64_t optuna_number;            /* -1: not from optuna */
	double started_at, ended_at;
	/* from the trial's run, by store_load_trials */
	char *verdict;
	int judge_version;                /* of the judgment that wrote verdict; 0 not recorded */
	double growth_bytes_per_step;     /* NAN unknown */
	double q[5];                      /* per-step change min, q1, median, q3, max; NAN unknown */
	double steps_per_second;          /* NAN unknown */
	uint64_t peak_bytes;
	uint64_t limit_bytes;             /* its run's memory budget given by --max-mem (its
	                                   * allocation); 0 none */
	uint64_t gpu_peak_bytes;          /* the most GPU memory at one sample; 0 none */
	int64_t steps;
	/* claimed by a worker (schema 7) */
	char *worker;                     /* HOST:PID; "" none (store_trial_put: NULL) */
	double lease_until;               /* wall seconds; 0 none */
	int64_t slurm_job, slurm_task;    /* the worker's array job (0 none) and task (-1 none) */
	char *host;                       /* the host it ran on; "" unknown */
	uint64_t need_bytes;              /* the memory it needs of a worker (schema 15);
	                                   * 0: any worker's */
};
/* Insert or replace the row (sweep_id, idx, attempt). Strings may be NULL. */
int store_trial_put(struct store *st, const struct trial_row *t);
/* Every trial of a sweep, by idx then attempt, joined with its run. */
int store_load_trials(struct store *st, int64_t sweep_id, struct trial_row **out, size_t *n);
/* One trial attempt, the same way: 0, 1 when there is none, -1. The
 * strings are freed with trial_row_release(). */
int store_load_trial(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt, struct trial_row *out);
void trial_row_release(struct trial_row *t);
void trial_rows_free(struct trial_row *rows, size_t n);

/* What the sweep's memory model predicted of a trial attempt (schema 7):
 * peak and GPU peak as {point, 95% lower bound, 95% upper bound} in
 * bytes, growth in bytes per step; NAN: unknown. */
struct trial_prediction {
	int64_t idx, attempt;
	double peak[3], gpu[3], growth;
};
/* Insert or replace the prediction of (sweep_id, p->idx, p->attempt). */
int store_trial_prediction_put(struct store *st, int64_t sweep_id, const struct trial_prediction *p);
/* Every prediction of a sweep, by idx then attempt; *out (n of them) is
 * the caller's to free(). 0 or -1. */
int store_load_trial_predictions(struct store *st, int64_t sweep_id, struct trial_prediction **out, size_t *n);

/* Link a run to its trial, and keep its per-step change quantiles and
 * median step rate (NAN: unknown) for the sweep's table. */
int store_run_set_trial(struct store *st, int64_t run_id, int64_t sweep_id, int64_t idx, int64_t attempt);
int store_run_set_summary(struct store *st, int64_t run_id, const double q[5], double steps_per_second);
/* The run of a trial attempt: its id, 0 when none was recorded, -1. */
int64_t store_trial_run(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt);
/* The newest sample of a run under measure m (bytes), or -1. */
double store_run_last_memory(struct store *st, int64_t run_id, enum measure m);

/* ---- trials claimed by workers (schema 7) ----------------------------------
 *
 * A sweep whose trials are run by workers (SLURM array tasks, or workers
 * started by hand) has its trials written first with status "pending".
 * A worker claims the next one: in one transaction, the first pending
 * trial by index becomes "running" with the worker's name and a lease
 * (lease_until, wall seconds). On PostgreSQL the pending row is read
 * FOR UPDATE SKIP LOCKED, so concurrent workers each take a different
 * row without waiting; on SQLite the transaction is BEGIN IMMEDIATE, so
 * claims are taken one after another. Either way a trial is claimed once.
 * The worker renews its lease while the trial runs; a lease that runs out
 * (its worker died without a word) makes that attempt "interrupted" and a
 * new attempt pending, done by whoever claims or checks next. Times are
 * the callers' wall clocks: leases assume clocks agree within seconds.
 */

/* Who claims: the worker's name (HOST:PID) and its SLURM array job and
 * task (-1: none). */
struct trial_claimer {
	const char *worker;
	int64_t slurm_job, slurm_task;
	uint64_t class_bytes;             /* its memory: it claims only trials that need at
	                                   * most this, the largest need first; 0: any */
};

/* Write trials (status "pending" unless set) in one transaction. */
int store_trials_put_many(struct store *st, const struct trial_row *rows, size_t n);
/* Claim the next pending trial of sweep_id for who, leased until
 * now + lease_s; expired leases are ended first. 0 and *out (freed with
 * trial_row_release(); run fields empty), 1 when none is pending, -1. */
int store_trial_claim(struct store *st, int64_t sweep_id, const struct trial_claimer *who, double now,
                      double lease_s, struct trial_row *out);
/* Renew the lease of a trial attempt who holds: 0, 1 when it is no
 * longer theirs (expired and taken over, or ended), -1. */
int store_trial_renew(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt, const char *worker,
                      double lease_until);
/* End the leases of sweep_id that ran out before now: each such attempt
 * becomes "interrupted" (its run linked, note why) and attempt + 1 is
 * pending. The number ended, or -1. */
int store_trials_expire(struct store *st, int64_t sweep_id, double now);
/* Put attempt + 1 of a trial attempt back as pending, with a note; the
 * attempt's own row is left as it is. 0 or -1. */
int store_trial_requeue(struct store *st, int64_t sweep_id, int64_t idx, int64_t attempt, const char *note);
/* Trials of a sweep by the state of each one's latest attempt: pending,
 * running (claimed), interrupted (to run again), and finished (any other
 * outcome). 0 or -1. */
struct trial_counts {
	int64_t pending, running, interrupted, finished;
};
int store_trial_counts(struct store *st, int64_t sweep_id, struct trial_counts *out);
/* The pending trials of a sweep by what they need of a worker
 * (need_bytes, 0 for any), the largest first: at most cap pairs into
 * need[] and count[]. The number of pairs, or -1. */
int store_trial_pending_needs(struct store *st, int64_t sweep_id, uint64_t *need, int64_t *count, size_t cap);
/* The sweep's executor ("slurm") and the array job last submitted. */
int store_sweep_set_executor(struct store *st, int64_t id, const char *executor, int64_t slurm_job);

#endif
