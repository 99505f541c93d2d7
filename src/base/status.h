/*
 * status.h — where a run, a sweep and a trial of a sweep stand, named from
 * fixed vocabularies. The store keeps the names (runs.status,
 * sweeps.status, trials.status); everything between the store and the
 * output holds the enums. Each zero value is the one a writer means when
 * it says nothing: a run that ended "done", a sweep "running", a trial
 * "pending".
 */
#ifndef LP_STATUS_H
#define LP_STATUS_H

enum run_status {
	RUN_DONE = 0,          /* "done": the job ended and its status is known */
	RUN_RUNNING,           /* "running": a supervisor is (or was, until it died) watching */
	RUN_FAILED_TO_START,   /* "failed-to-start": the command could not be run */
	RUN_INTERRUPTED,       /* "interrupted": the supervisor died, or was stopped, before the job ended */
	RUN_DETACHED,          /* "detached": attach stopped watching; the job went on */
	RUN_ENDED,             /* "ended": an attached job ended, its exit status unknown */
	RUN_STATUS_UNKNOWN,    /* a name this leakproof does not know (a newer writer's) */
};

enum sweep_status {
	SWEEP_RUNNING = 0,     /* "running" */
	SWEEP_DONE,            /* "done": every trial has its outcome */
	SWEEP_INTERRUPTED,     /* "interrupted": stopped with trials left; --resume goes on */
	SWEEP_STATUS_UNKNOWN,
};

enum trial_status {
	TRIAL_PENDING = 0,     /* "pending": not started */
	TRIAL_RUNNING,         /* "running": started (claimed, on a cluster) */
	TRIAL_OK,              /* "ok": ended with exit status 0 */
	TRIAL_FAILED,          /* "failed": ended otherwise, not for memory */
	TRIAL_OOM,             /* "oom": ended for memory (host or GPU) */
	TRIAL_SKIPPED,         /* "skipped": never started (predicted not to fit, and the like) */
	TRIAL_PRUNED,          /* "pruned": stopped early by the sampler's pruner */
	TRIAL_INTERRUPTED,     /* "interrupted": the sweep stopped it; run again on resume */
	TRIAL_STATUS_UNKNOWN,
};

/* The names above, static strings; "unknown" for *_STATUS_UNKNOWN and for
 * a value outside the enum. */
const char *run_status_name(enum run_status s);
const char *sweep_status_name(enum sweep_status s);
const char *trial_status_name(enum trial_status s);
/* The status named exactly name; *_STATUS_UNKNOWN for any other string,
 * NULL included. Prints nothing. */
enum run_status run_status_parse(const char *name);
enum sweep_status sweep_status_parse(const char *name);
enum trial_status trial_status_parse(const char *name);

/* A trial that ended for good: ok, failed, oom, skipped or pruned. */
int trial_status_final(enum trial_status s);

#endif
