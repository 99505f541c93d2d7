/*
 * supervise.h — run one job under supervision: start it in its own process
 * group (and its own cgroup where the machine allows), pass its output
 * through, read its channel, sample its memory, enforce its budgets,
 * restart it by its policy, and store everything as a run. Judging the run
 * and printing the summary are the caller's (cmd/run.c): supervise() says
 * which run it stored and how the job ended.
 */
#ifndef LP_SUPERVISE_H
#define LP_SUPERVISE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/sample.h"
#include "store/store.h"

struct step_regex;
struct slurm_job;

struct supervise_opts {
	char **argv;               /* the command, NULL-terminated; not owned */
	int64_t interval_ns;       /* sampling interval */
	enum measure measure;      /* what the verdict judges */
	const char *step_regex;    /* PCRE2 pattern or NULL, as the run records it */
	struct step_regex *step_re;   /* ... compiled (core/scan.h); not owned */
	struct step_regex *result_re; /* group 1 of a matching line is a result; not owned */
	const char *result_name;   /* ... named this ("result" by default) */
	int64_t trial[3];          /* sweep id, trial index, attempt; trial[0] 0: none */
	uint64_t max_mem_bytes;    /* --max-mem: the budget (kernel-enforced where the
	                            * job has a memory cgroup, else polled); 0: none,
	                            * the cgroup's or machine's limit for projections */
	uint64_t max_gpu_bytes;    /* --max-gpu: polled through NVML; 0: none */
	uint64_t soft_limit_bytes; /* --soft-limit; 0: 90% of max_mem_bytes */
	uint64_t soft_gpu_bytes;   /* 90% of max_gpu_bytes unless set */
	int stop_signal;           /* sent to the main process at a requested stop */
	int64_t grace_ns;          /* from the stop signal to SIGKILL */
	unsigned restart;          /* RESTART_* bits */
	int64_t restart_every;     /* steps per process with RESTART_EVERY */
	int max_restarts;
	bool use_cgroup;           /* put the job in a cgroup of its own when possible */
	int status_line;           /* 1 on, 0 off, -1 auto (stderr is a terminal) */
	bool no_pty;               /* pipes for the job even when leakproof runs in a
	                            * terminal (else it gets a pseudo-terminal) */
	int64_t leftover_grace_ns; /* SIGTERM to SIGKILL for processes left behind */
	bool trace;                /* --trace: preload the allocation tracer */
	int64_t trace_mean;        /* its sampling mean, bytes; 0: the tracer's default */
	int64_t census_ns;         /* between two object censuses of a Python job
	                            * that imports the client (LEAKPROOF_CENSUS);
	                            * 0: none (--no-census) */
	bool census_hook;          /* --census: start the census by a startup hook
	                            * (a sitecustomize first on PYTHONPATH) */
	/* `leakproof attach`: a job leakproof did not start (core/attach.c,
	 * docs/internals/attach.md); argv, restart and tracing unused */
	pid_t attach_pid;          /* its main process; 0: start argv instead */
	/* or a SLURM job (`attach --slurm-job`): everything in its cgroup,
	 * no main process; NULL: none. Not owned; outlives supervise() */
	const struct slurm_job *attach_slurm;
	const char *follow_log;    /* a log file it writes, followed as tail -F
	                            * for --step-regex; NULL: none */
};
/* The census interval without --census (the client's own, once imported)
 * and with it: docs/internals/census.md. */
#define CENSUS_AUTO_NS (30 * 1000000000LL)
#define CENSUS_ASKED_NS (5 * 1000000000LL)
enum {
	RESTART_AT_LIMIT = 1,      /* stop at the soft limit, start again */
	RESTART_EVERY = 2,         /* stop after restart_every steps, start again */
	RESTART_ON_OOM = 4,        /* start again after an out-of-memory end */
};
void supervise_opts_init(struct supervise_opts *o);

/* Make sure descriptors 0-2 are open (on /dev/null), so that nothing
 * opened later (the store, the job's pipes) lands on them: call it before
 * opening the store. */
void supervise_std_fds(void);

/* The runs store_open() found interrupted on this host: if a guard was
 * killed with its supervisor, the job may still run in the cgroups that
 * supervisor made below ours; end it and remove them, saying so
 * (platform/cgroup.h cgroup_reap_left). supervise() does it; a writer
 * that opens the store without supervising (a sweep) calls it. */
void supervise_end_interrupted(struct store *st);

enum supervise_outcome {
	SUPERVISE_FAILED,          /* leakproof failed (a message was printed); the
	                            * run, if one was recorded, did not end */
	SUPERVISE_NOT_STARTED,     /* the job could not start: the run is recorded
	                            * as failed to start */
	SUPERVISE_ENDED,           /* the job ran and ended: the run is recorded,
	                            * not yet judged */
};

struct supervise_result {
	enum supervise_outcome outcome;
	int64_t run_id;            /* the run recorded; 0: none */
	int exit_status;           /* what leakproof exits with: the job's own
	                            * status, 128+N for signal N, or 125, 126, 127 */
	struct run_end end;        /* SUPERVISE_ENDED: the end as recorded, verdict
	                            * NULL; the caller records it again judged */
};

/* A process `leakproof attach` may watch: 0, or -1 with why it may not
 * (no such process, a zombie, PID 1, leakproof itself or one of its
 * ancestors: *denied false, a usage error; its /proc entries unreadable
 * for this user: *denied true). */
int supervise_attach_check(pid_t pid, bool *denied /* out */, char *why, size_t whysz);

/*
 * Supervise the job o->argv to its end (or, with o->attach_pid, watch that
 * process until it ends or leakproof is told to stop: the end's status is
 * then "ended" or "detached", see core/attach.c), recording it as a run in st (open;
 * the caller's, still open on return). Fills *out and returns
 * out->exit_status. On SUPERVISE_ENDED the caller judges the run (the
 * model of a run) and records the verdict with store_run_end().
 */
int supervise(struct store *st, const struct supervise_opts *o, struct supervise_result *out);

#endif
