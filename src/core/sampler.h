/*
 * sampler.h — measures the memory of a whole process tree, cheaply enough to
 * run at 100 Hz (1 kHz must work).
 *
 * The tree is every descendant of root_pid (root_pid itself excluded when
 * exclude_root: the supervisor, a child subreaper, samples its own children
 * and the orphans reparented to it). When the job has its own cgroup,
 * membership is read from its cgroup.procs instead, which also sees
 * processes that escaped the tree; a cgroup watched with the cgroups below
 * it (a SLURM job, `attach --slurm-job`) needs no root process at all.
 *
 * Cost model (docs/internals/sampler.md): each tick reads /proc/PID/statm of
 * every member through a descriptor kept open (one pread each), except that a
 * member whose statm has not moved for 500 ms is read every 100 ms, and a
 * tick with nothing to read returns the last sample as it stands. Membership
 * is checked every tree_scan_interval_ns (a new process shows up within
 * that, 200 ms by default) and only after a fork somewhere. PSS and USS
 * come from smaps_rollup, which costs milliseconds on large processes, so it
 * is re-read per process only when the process's RSS moved by more than
 * pss_refresh_fraction since its last exact read, or it is new, and never
 * more often than pss_cpu_budget allows; between reads PSS and USS are
 * estimated as exact value + (RSS now - RSS at the read): memory a training
 * job gains is private anonymous memory. A fork (or exit) moves several
 * members' PSS at once; their new values are shown together, once all are
 * read (or after settle_max_ns). Swap comes with smaps_rollup.
 * GPU memory is read through NVML at most every gpu_interval_ns.
 */
#ifndef LP_SAMPLER_H
#define LP_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/sample.h"

struct nvml;

struct sampler_config {
	const char *proc_root;        /* "/proc" when NULL */
	pid_t root_pid;
	bool exclude_root;
	const char *cgroup_dir;       /* the job's own cgroup directory, or NULL */
	int cgroup_version;           /* 1 or 2 when cgroup_dir is set */
	bool cgroup_tree;             /* membership from cgroup_dir's cgroup.procs and
	                               * those of every cgroup below it (a SLURM job's
	                               * steps and tasks); root_pid may then be 0 */
	const char *skip_comm;        /* with a cgroup: a process whose name (comm)
	                               * begins so is no member ("slurmstepd":
	                               * SLURM's daemon in the job's cgroup); NULL */
	struct nvml *nvml;            /* NULL: no GPU sampling; not owned */
	double pss_cpu_budget;        /* fraction of one CPU for smaps_rollup; default 0.02 */
	double pss_refresh_fraction;  /* default 0.02 (2% of the process's RSS) */
	int64_t tree_scan_interval_ns;/* membership checks (a fork seen?); default 200 ms */
	int64_t gpu_interval_ns;      /* default 500 ms */
	int64_t settle_max_ns;        /* a change of sharing (a fork) is shown once
	                               * every member it moved is read, or after
	                               * this; default 5 s */
	bool every_tick;              /* read every member's statm (and the cgroup's
	                               * usage) at every tick, quiet or not: a memory
	                               * budget or soft limit is enforced on what
	                               * the samples say (default false) */
};
void sampler_config_init(struct sampler_config *cfg);

struct sampler;
/* Returns NULL after printing an error. cfg's strings must outlive it. */
struct sampler *sampler_new(const struct sampler_config *cfg);
void sampler_free(struct sampler *s);

/*
 * Take one sample of the tree at now_ns (CLOCK_MONOTONIC). Fills *out except
 * out->t, which the caller sets. force_exact re-reads smaps_rollup of every
 * member regardless of the budget (used for the final sample). Returns the
 * number of processes, 0 when the tree is empty; never fails on a process
 * that vanished mid-sample.
 */
int sampler_sample(struct sampler *s, int64_t now_ns, bool force_exact, struct mem_sample *out);

/* The latest per-process values, valid until the next sampler_sample(). */
struct proc_mem {
	pid_t pid, ppid;
	char name[32];
	uint64_t rss, pss, uss, swap, gpu;
	/* growth kinds (docs/internals/growth-kinds.md), bytes */
	uint64_t anon;              /* resident anonymous pages (statm, this tick) */
	uint64_t file;              /* file-backed mapped pages, PSS (rollup, moved by statm) */
	uint64_t shmem;             /* shared memory mapped, PSS (last rollup) */
	uint64_t cow;               /* a forked child: parent's pages it copied (last rollup) */
	uint64_t cow_base;          /* ... out of this many it shared at first sight; 0: not one */
};
size_t sampler_procs(struct sampler *s, const struct proc_mem **out);

/*
 * When the sampler next has anything to read (CLOCK_MONOTONIC ns): every
 * source quiet, no membership, stat or GPU check and no rollup due before
 * then. Ticks before it would only repeat the last sample, so a caller may
 * sleep until then. At or before the last sample's time: due at every tick.
 */
int64_t sampler_next_due(const struct sampler *s);

/* A step of the job ended: the next sampler_sample() reads the dear
 * sources sooner (a rollup of each member that moved by 256 KiB, at most
 * every second each and on the CPU budget; memory.stat at most every
 * 100 ms, when the cgroup's usage moved), so that the growth kinds are
 * measured at step boundaries. */
void sampler_mark_step(struct sampler *s);

/* CPU time the sampler spent in smaps_rollup reads so far, nanoseconds. */
int64_t sampler_rollup_ns(const struct sampler *s);

/* The members whose kinds (anon, cow, file, shmem, gpu) moved by 64 KiB or
 * more since this function last returned them, or that it has not returned
 * for 5 s (so a quiet process is known to be alive): the rows of the store's
 * kind_samples. Same lifetime as sampler_procs()'s array (they share it). */
size_t sampler_kinds_due(struct sampler *s, int64_t now_ns, const struct proc_mem **out);

/* The job cgroup's page cache, shmem and anonymous memory (memory.stat,
 * read at most every 200 ms, 100 ms at a step, only when its usage moved;
 * at once when it moved by 256 KiB, on the rollups' CPU budget). Returns how many
 * times it was read so far (a new number: a new reading), 0 without a
 * cgroup or before a first read. */
struct cgroup_memstat;
uint64_t sampler_job_kinds(const struct sampler *s, struct cgroup_memstat *out);

/* True when the latest GPU figure is the devices' whole usage: NVML listed
 * processes but none of the tree's (a container's own PID namespace), or
 * only without sizes. Per-process gpu is 0 then. */
/* True when the job has no cgroup and sampler_job_kinds()'s shmem is the
 * growth of the machine's /dev/shm since the sampler began (file cache and
 * anon 0): shared memory the job may hold unmapped, anybody's files. */
bool sampler_job_kinds_dev_shm(const struct sampler *s);

bool sampler_gpu_is_device_total(const struct sampler *s);

#endif
