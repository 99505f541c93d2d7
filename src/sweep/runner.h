/*
 * runner.h — `leakproof sweep`: run every trial of a search as a supervised
 * `leakproof run` of its own, admit parallel trials by the memory they are
 * expected to need, record every trial in the store as it starts and ends,
 * and resume an interrupted sweep. See docs/internals/sweeps.md.
 */
#ifndef LP_SWEEP_RUNNER_H
#define LP_SWEEP_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sweep_opts {
	const char *file;          /* the sweep file */
	const char *store_path;
	int parallel;              /* 0: the file's (default 1) */
	bool resume;               /* finish the latest unfinished sweep of this file */
	int64_t resume_id;         /* ... or this one */
	bool dry_run;              /* list the trials, run nothing */
	const char *result_regex;  /* overrides the file's */
	bool quiet;                /* no line per trial */
	const char *prefork;       /* modules to prefork, comma-separated ("" none);
	                              NULL: the file's prefork: list */
	bool no_skip;              /* run the trials the memory model says will not fit */
	/* Checks the `leakproof run` options a trial will get (opts[0..n),
	 * those from the file's run_options from opts[first] on) without
	 * running anything: 0, or -1 with why and the index of the option at
	 * fault in *bad. NULL: not checked. (The command sets it: the run
	 * options are the run command's.) */
	int (*check_run_options)(char *const *opts, size_t n, size_t first, size_t *bad, char *why, size_t whysz);
	/* Cluster mode (docs/internals/sweeps.md, "Workers and claims"). */
	const char *executor;      /* "local" or "slurm": overrides the file's; NULL: the file's */
	bool no_wait;              /* executor slurm: exit once the workers are submitted */
	int64_t worker_id;         /* > 0: be a worker of this sweep (file unused): claim
	                            * its pending trials from the store and run them
	                            * until none is left */
	uint64_t worker_mem_bytes; /* a worker's memory (its size class, on_oom resize
	                            * with executor slurm); 0: slurm.mem */
	double lease_s;            /* a worker's lease on a trial, renewed while it
	                            * runs; 0: LEASE_DEFAULT_S */
};

#define LEASE_DEFAULT_S 60.0

/* How a sweep ended, for the command to tell (the table, or how to resume). */
struct sweep_result {
	int64_t sweep_id;          /* the sweep in the store; 0: none */
	bool ended;                /* the sweep ran to its end, complete or stopped;
	                            * false: it failed before (a message was printed) */
	bool complete;             /* every trial ran; false: stopped, to resume */
	bool worker;               /* it was a worker (sweep --worker) */
	int64_t submitted;         /* executor slurm: the workers' job array; 0 none */
};

/* Run (or with dry_run, list) the sweep. Fills *out; prints a line per
 * trial unless quiet, not the table at the end. The exit status: 0 when
 * every trial was run (whatever their outcome), 1 when the sweep could not
 * finish, 124 for a bad file or options, 125 when leakproof failed, 128+N
 * when stopped by signal N. */
int sweep_run(const struct sweep_opts *o, struct sweep_result *out);

#endif
