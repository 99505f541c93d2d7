/*
 * slurm.h — the SLURM side of `executor: slurm` (slurm.c): the job array
 * that runs a sweep's workers, whether it still runs, what SLURM says
 * ended a worker's job, each trial as a job step of its own, and SLURM's
 * evidence of an OOM kill in a trial's output. Through SLURM's own
 * commands (sbatch, squeue, scontrol, srun), never its libraries, so
 * nothing links SLURM. See docs/internals/sweeps.md.
 */
#ifndef LP_SWEEP_SLURM_H
#define LP_SWEEP_SLURM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/end_cause.h"
#include "sweep/spec.h"

/* The SLURM job this process runs in, from its environment. */
struct slurm_job_env {
	bool in_job;               /* SLURM_JOB_ID is set */
	int64_t job_id;            /* SLURM_JOB_ID (an array task's own id) */
	int64_t array_job;         /* SLURM_ARRAY_JOB_ID, else job_id */
	int64_t array_task;        /* SLURM_ARRAY_TASK_ID; -1 none */
};
void slurm_job_env_read(struct slurm_job_env *e);

/* What the job array of a sweep is made of. */
struct slurm_submit {
	const struct sweep_slurm *slurm;   /* the file's slurm: block */
	int workers;                       /* array tasks, >= 1 */
	const char *exe;                   /* leakproof's own binary, absolute */
	const char *store;                 /* the store string, given to the workers in
	                                      their environment (LEAKPROOF_STORE), not
	                                      on a command line */
	int64_t sweep_id;
	const char *dir;                   /* the sweep's log directory, absolute:
	                                      worker.sh and worker-JOB_TASK.out go there */
	uint64_t mem_bytes;                /* the workers' memory, their size class
	                                      (--mem, and told to each worker); 0:
	                                      slurm.mem, not told */
};
/* Write the batch script (it execs `leakproof sweep --worker ID`) and
 * submit it as one `sbatch --array=0-(workers-1)`. 0 and *job (the array
 * job id), or -1 after a message with sbatch's own words. */
int slurm_submit_array(const struct slurm_submit *s, int64_t *job);

/* The size class of a worker for a trial that needs need_bytes, on the
 * ladder from mem_bytes to max_mem_bytes: mem, mem * 1.5, mem * 1.5^2, ...
 * (in whole MiB), the last max_mem. The smallest class of at least
 * need_bytes; max_mem_bytes when none is (the caller skips such a trial). */
uint64_t slurm_size_class(uint64_t mem_bytes, uint64_t max_mem_bytes, uint64_t need_bytes);

/* Whether any task of job still is in SLURM's queue (pending or running):
 * 1, 0 when none is, -1 when squeue could not say (a message was not
 * printed). */
int slurm_job_alive(int64_t job);

/* What SLURM says ended job (a worker that was told to stop): the cause
 * a trial it ran gets (CAUSE_CANCELLED, CAUSE_TIME_LIMIT, CAUSE_PREEMPTED,
 * CAUSE_NODE_FAIL, CAUSE_OOM_KILL), or CAUSE_NONE when SLURM does not say
 * (scontrol's JobState). */
enum end_cause slurm_end_cause(int64_t job);

/* The argv prefix that runs one trial as a job step of the current job
 * (srun ... with the trial's name), NULL-terminated, static; or NULL when
 * trials are not run as steps (not in a job, or no srun on PATH). */
const char *const *slurm_step_prefix(void);

/* SLURM's evidence of an OOM kill in a trial's output file: slurmstepd's
 * "Detected N oom-kill event(s) in StepId=J.S" line, and the step's
 * memory cgroup (from our own, as SLURM names it), into buf. true when the
 * line is there. */
bool slurm_oom_evidence(const char *log, char *buf, size_t bufsz);

#endif
