/*
 * judge/kinds.h — what kind of memory grows, and in which process: the
 * growth kinds of a stored run (its kind_samples, written by the sampler),
 * each judged with the run's own statistics (core/analyze), the diagnosis
 * that names the kind driving the verdict, and the OOM flight recorder (the
 * last seconds before an out-of-memory end, from what was stored before it).
 * Method and wording: docs/internals/growth-kinds.md.
 *
 * Units: bytes; growth in bytes per unit of the run's x (a step, or a
 * second when the run marked no steps); times in seconds since the run
 * began. Everything is owned by struct run_kinds, freed by
 * run_kinds_release().
 */
#ifndef LP_MODEL_KINDS_H
#define LP_MODEL_KINDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/analyze.h"
#include "store/store.h"

/* The kinds, in the order reports list them. */
enum mem_kind {
	KIND_ANONYMOUS = 0,    /* resident anonymous memory of a process (its heap, tensors) */
	KIND_COW,              /* a forked child's private copies of its parent's pages */
	KIND_FILE,             /* file-backed: mapped files; the cgroup's page cache */
	KIND_SHMEM,            /* shared memory: shmem, tmpfs, /dev/shm */
	KIND_GPU,              /* GPU memory (NVML, per process) */
	KIND_COUNT,
	/* Not a kind of any one process, so outside KIND_COUNT (no rows,
	 * totals or flight-recorder columns): processes that pile up in the
	 * tree. Its growth_kind has pid -1 (the tree) and its growth is the
	 * memory they add per step. */
	KIND_PROCESSES = KIND_COUNT
};
/* "anonymous", "copy-on-write", "file-cache", ..., "processes" */
const char *mem_kind_name(enum mem_kind k);

/* One series: a kind of one process (pid 0: the job's cgroup), judged. */
struct growth_kind {
	enum mem_kind kind;
	int pid, ppid;               /* pid 0: the job's cgroup as a whole (or, named
	                              * "/dev/shm", the machine's /dev/shm when the
	                              * job has no cgroup); -1: the tree (processes) */
	char name[32];               /* the process's name ("cgroup" for pid 0) */
	char role[48];               /* "main", "worker 1", "cgroup", or the name */
	struct analysis a;           /* on the run's x */
	double bytes;                /* the last value */
	double first_bytes;          /* the first value */
	double bound_bytes;          /* copy-on-write: what it shared at first sight; 0 else */
};

/* The last seconds before an out-of-memory end, per process. */
struct flight_proc {
	int pid;
	char name[32];
	char role[48];
	double first[KIND_COUNT];    /* at the window's start; -1: not alive then */
	double last[KIND_COUNT];     /* at the end (the last row stored before it) */
};

struct run_kinds {
	struct growth_kind *k;       /* worth showing (a MiB or more, or growing),
	                              * the fastest growth first */
	size_t n;

	/* the diagnosis: the kind that drives the verdict */
	bool has_diagnosis;
	enum mem_kind diagnosis_kind;
	char diagnosis[512];         /* "copy-on-write — 2 forked workers ..."; "" none */
	bool diagnosis_leak;         /* it names a leak: a process's own memory,
	                              * shmem nobody maps, processes piling up */
	bool overrides_verdict;      /* the verdict was leak or unclear, and the
	                              * growth is only page cache, or copy-on-write
	                              * that stopped or levels off under the limit */
	/* copy-on-write of the forked workers, summed */
	int cow_workers;
	double cow_bytes, cow_bound_bytes;
	bool cow_rising;
	double cow_flat_since_x;     /* NAN: not flat */
	double cow_level_bytes;      /* rising: the run's measure once every worker has
	                              * copied all it shares (now + bound - copied); 0 */

	/* processes that pile up (run_kinds_processes()) */
	bool procs_piling;
	double procs_first, procs_last;  /* alive at the judged window's start, at the end */
	double procs_per_x;              /* processes added per step (second) */
	double procs_each_bytes;         /* the newcomers' anonymous memory, on average */
	/* the run's x the kinds were judged on, for run_kinds_rediagnose() */
	double x_first, x_last;
	bool diagnosed;                  /* diagnose() ran (the grid was not empty) */

	/* the OOM flight recorder; oom false when the run did not end so */
	bool oom;
	enum end_cause oom_cause;    /* one for which cause_is_oom() */
	double end_t, window_t;      /* the end, and the window's start */
	int64_t end_step;            /* the last step marked; -1 none */
	int64_t window_steps;        /* steps marked in the window */
	struct flight_proc *fp;
	size_t nfp;
	char flight[1280];           /* one paragraph: what grew, where, what killed it */

	/* the rows behind it, for run_kinds_totals() */
	struct kind_row *rows;
	size_t nrows;
	struct kproc *procs;         /* private to kinds.c */
	size_t nprocs;
};

/*
 * Judge the kinds of run_id on the run's own x: steps (x[i] the step of
 * step_t[i], i < nsteps) or, when nsteps is 0, seconds (bins of
 * bin_seconds). run_started_at: the run's start (Unix time), to place
 * the segments' ends. opts: the run's analysis options. run: the run's judgment
 * (the diagnosis explains it). segments: the run's (for the flight
 * recorder). top_site (NULL: none): the fastest growing allocation site of
 * a traced run, in words, for the flight recorder. Returns 0 (a run
 * without kind rows gives an empty *out), -1 on error.
 */
int run_kinds_load(struct store *st, int64_t run_id, const double *step_x, const double *step_t,
                   size_t nsteps, double bin_seconds, double run_started_at,
                   const struct analyze_opts *opts,
                   const struct analysis *run, const struct segment_row *segments,
                   size_t nsegments, const char *top_site, struct run_kinds *out);
void run_kinds_release(struct run_kinds *k);

/*
 * The job's memory of each kind at the n times t (seconds since the run
 * began; best in increasing order), summed over its processes: anonymous
 * (every process's, as RSS counts it), copy-on-write (the forked workers'
 * copies), file-cache and shared-memory (the job's cgroup's when it was
 * measured then, else the processes' mapped pages), gpu. out[k] (for each
 * k < KIND_COUNT; NULL: not wanted) receives n values, NAN where no process
 * was alive. Returns a mask of the kinds that were above 0 somewhere
 * (1 << k); 0 when the run stored no kinds.
 */
unsigned run_kinds_totals(const struct run_kinds *k, const double *t, size_t n, double *out[KIND_COUNT]);

/*
 * Shared memory the job holds that no process maps (files in /dev/shm or
 * another tmpfs, SysV and POSIX segments nobody attached), at the n times
 * t: the cgroup's shmem minus the processes' mapped shmem (PSS), at least
 * 0; without a cgroup, the growth of the machine's /dev/shm since the job
 * began, less what the processes map. out (n values) gets 0 where it is
 * not known. Returns the largest value (0: none, or no such rows).
 */
double run_kinds_unmapped_shm(const struct run_kinds *k, const double *t, size_t n, double *out);

/* True when the shared memory above comes from the machine's /dev/shm
 * (the job had no cgroup of its own), not from the job's cgroup. */
bool run_kinds_shm_is_machine_wide(const struct run_kinds *k);
/* The machine's /dev/shm judged growing while a job without a cgroup of its
 * own ran (shown, never blamed on the job, never in its verdict); NULL. */
const struct growth_kind *run_kinds_machine_shm_growth(const struct run_kinds *k);

/*
 * Processes that pile up: count[i] processes alive in the tree at x[i]
 * (n points, the run's judged x), judged with opts like a memory series
 * (each process weighing a MiB). When the count grows (judged leak, and by
 * 2 or more), sets procs_* and adds a KIND_PROCESSES growth kind; then
 * run_kinds_rediagnose() names it. t[i] is x[i]'s time (seconds since
 * the run began), for the newcomers' memory.
 */
void run_kinds_processes(struct run_kinds *k, const double *x, const double *t, const double *count,
                         size_t n, const struct analyze_opts *opts);

/* The diagnosis again, for a new judgment of the run (run: the measure
 * changed, or run_kinds_processes() found processes piling up). */
void run_kinds_rediagnose(struct run_kinds *k, const struct analysis *run, const struct analyze_opts *opts);

/* How many times kinds were stored between t0 and t1 (seconds since the
 * run began): the distinct times of its rows. */
size_t run_kinds_readings(const struct run_kinds *k, double t0, double t1);

/* Append sentence (a whole sentence, ending with its full stop) to the
 * flight recorder's paragraph, after a space; cut to fit. */
void run_kinds_flight_append(struct run_kinds *k, const char *sentence);

#endif
