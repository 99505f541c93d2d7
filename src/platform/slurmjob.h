/*
 * slurmjob.h — a running SLURM job (or one of its steps) on this node, as
 * `leakproof attach --slurm-job JOBID[.STEP]` watches it: SLURM asked what
 * it is (`scontrol -o show job`: its state, user, nodes, name) and which
 * of its processes run here (`scontrol listpids`, answered by this node's
 * slurmd), and its cgroup found from where those processes are: the
 * `job_J` (or `job_J/step_S`) directory of the path in /proc/PID/cgroup,
 * whatever SLURM's layout around it (v1's `slurm[_NODE]/uid_U/`, v2's
 * `system.slice/slurmstepd.scope/`). docs/internals/attach.md says why.
 *
 * Nothing here prints; strings are fixed arrays, nothing to free.
 */
#ifndef LP_PLATFORM_SLURMJOB_H
#define LP_PLATFORM_SLURMJOB_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "platform/cgroup.h"
#include "platform/spawn.h"

#define SLURM_JOB_PIDS_MAX 64   /* of listpids' pids, kept (the first ones) */

struct slurm_job {
	char job_id[32];           /* SLURM's JobId ("12"; an array task's own id) */
	char step[32];             /* "batch", "0", "extern"; "" the whole job */
	char array_job_id[32];     /* ArrayJobId, "" unless an array task */
	char array_task_id[32];    /* ArrayTaskId */
	char state[32];            /* JobState: RUNNING, PENDING, ... */
	char name[128];            /* JobName */
	char user[64];             /* UserId's name */
	long uid;                  /* UserId's number; -1 unknown */
	char nodes[256];           /* NodeList */
	char command[1024];        /* Command; "" when SLURM has none ("(null)": --wrap) */
	char workdir[1024];        /* WorkDir */
	int records;               /* scontrol's records: > 1 for an array's tasks */
	pid_t pids[SLURM_JOB_PIDS_MAX];   /* its processes here (listpids) */
	size_t npids;
	struct job_cgroup cg;      /* the job's (or step's) cgroup on this node */
};

/* What slurm_job_find() says. */
enum slurm_find {
	SLURM_FIND_OK = 0,
	SLURM_FIND_REFUSED,        /* no such job, not running, not here, no cgroup */
	SLURM_FIND_DENIED,         /* another user's, which the caller may not read */
	SLURM_FIND_FAILED,         /* SLURM could not be asked (no scontrol, ...) */
};

/* Find job spec ("12", "12.batch", "12.0", "10_3", "10_3.0") running on
 * this node and its cgroup. Fills *out; on anything but SLURM_FIND_OK, why
 * says what, for the user. */
enum slurm_find slurm_job_find(const char *spec, struct slurm_job *out, char *why, size_t whysz);

/* Run a SLURM command (argv[0] looked up on PATH; env its environment,
 * NULL ours) to its end within timeout_ms, its stdout and stderr captured
 * into cap (SPAWN_CAPTURE_INIT; the caller releases cap->out and cap->err).
 * 0 when it exited 0; 1 when it ended otherwise (the caller words that from
 * what it printed); -1 with why when it did not run to an end: not found
 * ("is SLURM installed here?"), not started, no answer in time, too much
 * printed. */
int slurm_run(const char *const *argv, const char *const *env, int timeout_ms, struct spawn_capture *cap,
              char *why, size_t whysz);

/* ---- parsers, exposed for tests (pure: no I/O) ---------------------- */

/* "12.batch" -> job "12", step "batch"; "10_3" -> "10_3", "". The job part
 * is digits with an optional _TASK, the step digits or batch, extern,
 * interactive. -1 when spec is none of these. */
int slurm_parse_spec(const char *spec, char *job, size_t jobsz, char *step, size_t stepsz);
/* `scontrol -o show job` output (a line a record): the first record's
 * fields into out (records counted). -1 when it holds no JobId. */
int slurm_parse_show_job(const char *text, struct slurm_job *out);
/* `scontrol listpids` output ("PID JOBID STEPID LOCALID GLOBALID", a
 * header line first): the pids of job job_id (and of step step, unless
 * ""), at most cap of them into pids. Returns how many were found. */
size_t slurm_parse_listpids(const char *text, const char *job_id, const char *step, pid_t *pids, size_t cap);
/* The job's cgroup directory from the directory dir one of its processes
 * is in: dir up to its component "job_ID" (and "step_STEP" right below it
 * when step is not ""). -1 when dir has no such component (the job's
 * processes are in no cgroup of SLURM's: proctrack/cgroup not in use). */
int slurm_cgroup_cut(const char *dir, const char *job_id, const char *step, char *out, size_t outsz);

#endif
