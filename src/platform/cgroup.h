/*
 * cgroup.h — the job's own cgroup: where to make it, putting the job in it,
 * reading its usage and limits, killing everything in it, removing it.
 * Supports cgroup v2 (unified) and v1 (memory controller); detects which,
 * never assumes. Roots are injectable (cgroup_set_roots) so tests can run on
 * fixture trees under t/fixtures.
 *
 * Units: bytes. Functions return 0 on success, -1 on failure; those marked
 * "quiet" put the reason in the caller's buffer instead of printing.
 */
#ifndef LP_CGROUP_H
#define LP_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Roots default to "/proc" and "/sys/fs/cgroup"... the mount points are
 * read from PROC_ROOT/self/mountinfo, so any layout is found. */
void cgroup_set_roots(const char *proc_root);

struct job_cgroup {
	int version;          /* 1 or 2 */
	char dir[4096];       /* the job cgroup's directory */
	bool has_memory;      /* memory controller available in it */
	bool moved_self;      /* v2: the caller was moved to a leaf sibling
	                       * "leakproof-supervisor-PID" so memory could be
	                       * enabled; cgroup_remove of the last such job
	                       * moves it back (docs/internals/cgroups.md) */
};

/* What a supervisor that is gone (pid, started at start_ticks) left below
 * the caller's cgroup, where it ran too: its job cgroups
 * ("leakproof-PID-N") and its v2 leaf ("leakproof-supervisor-PID"); and
 * recorded, its job's cgroup as its run recorded it (NULL: none),
 * wherever it is, if it is a cgroup directory so named. Every process in
 * them SIGKILLed, the directories removed. Nothing is done while the pid
 * is that supervisor's (start_ticks: 0 when unknown, then while any
 * process has the pid). While another process has the pid now, a cgroup so
 * named is taken only if it holds a process older than that one (it cannot
 * be the cgroup of a leakproof that has the pid now), or is empty and the
 * pid's process is no leakproof. Returns how many processes were killed;
 * *left: how many such cgroups are still there (not judged the gone one's,
 * or not removed), for a later try. */
int cgroup_reap_left(pid_t pid, uint64_t start_ticks, const char *recorded, int *left /* out */);
/* Create a fresh cgroup for a job (named "leakproof-PID-N") below the
 * caller's own memory cgroup. quiet: on failure *why holds the reason;
 * on success without a memory controller (has_memory false) *why says
 * why, otherwise it is "". why may be NULL. */
int cgroup_create_job(struct job_cgroup *out, char *why, size_t whysz);
/* Move process pid (0: the caller) into the job cgroup. Async-signal-safe
 * (it is called in the child between fork and exec); quiet: -1 with errno
 * set, nothing printed. */
int cgroup_enter(const struct job_cgroup *cg, pid_t pid);
/* Usage now (memory.current / memory.usage_in_bytes). Without a memory
 * controller: -1 quietly, errno ENOTSUP; read errors are printed. */
int cgroup_usage(const struct job_cgroup *cg, uint64_t *bytes);
/* Send sig to every process in it (v2 SIGKILL uses cgroup.kill). Returns
 * the number of processes signalled, or -1. Processes in process group
 * except_pgid (0: none) are left out unless sig is SIGKILL: the caller has
 * signalled that group itself, and a job trapping SIGINT must get one. */
int cgroup_signal_all(const struct job_cgroup *cg, int sig, pid_t except_pgid);
/* Number of processes in it, or -1. */
int cgroup_nprocs(const struct job_cgroup *cg);
/* Remove it (retrying for about 1 s while the kernel finishes reaping);
 * an already removed cgroup is success. */
int cgroup_remove(const struct job_cgroup *cg);

/* The cgroup process pid is in (a process leakproof did not start): its
 * v1 memory cgroup where that controller is mounted on v1, else its v2
 * cgroup (has_memory when memory.current is there). -1 quietly, with the
 * reason in why, when it is in the root cgroup or none can be found.
 * Whether the cgroup is the process's own (not a session's, shared with
 * others) is the caller's to judge, e.g. with cgroup_each_proc(). */
int cgroup_of_process(pid_t pid, struct job_cgroup *out, char *why, size_t whysz);
/* Every pid in cg's cgroup.procs through fn; how many, or -1 with errno. */
int cgroup_each_proc(const struct job_cgroup *cg, void (*fn)(pid_t pid, void *ctx), void *ctx);

/* The same for the cgroup directory dir and every cgroup below it, down to
 * CGROUP_TREE_DEPTH levels (a SLURM job's job_J/step_S/task_T, v2's
 * .../step_S/user/task_T): how many pids (a pid listed twice, as v1 may,
 * counts twice), or -1 with errno when dir's own cgroup.procs cannot be
 * read. A cgroup below that vanishes meanwhile is skipped. */
#define CGROUP_TREE_DEPTH 8
int cgroup_tree_each_proc(const char *dir, void (*fn)(pid_t pid, void *ctx), void *ctx);
/* The OOM kills in cg and the cgroups below it: v2's memory.events counts
 * them already; v1's memory.oom_control counts its own cgroup's only (a
 * kill where a step's or task's limit was hit is not its job's), so those
 * of the tree are summed. Quiet: a cgroup that cannot be read counts 0. */
uint64_t cgroup_tree_oom_kills(const struct job_cgroup *cg);

/* cg's own memory limit (v2 memory.max, v1 memory.limit_in_bytes), not
 * its ancestors'; 0 when unlimited or unreadable. */
uint64_t cgroup_limit_of(const struct job_cgroup *cg);

/* The memory limit in force for the caller (the smallest limit of its own
 * cgroup and its ancestors); 0 when unlimited or unknown. */
uint64_t cgroup_self_limit(void);

/* Set limits on the job cgroup: v2 memory.max (and memory.high when high >
 * 0), v1 memory.limit_in_bytes. Returns 0 or -1 with a message. */
int cgroup_set_limit(const struct job_cgroup *cg, uint64_t max_bytes, uint64_t high_bytes);

struct cgroup_events {
	uint64_t oom;         /* times the limit was hit and reclaim failed
	                       * (v2 oom; v1 has no such counter: oom_kill) */
	uint64_t oom_kill;    /* processes killed by the OOM killer */
	uint64_t max;         /* v2 "max" events / v1 failcnt */
	uint64_t high;        /* v2 "high" events */
};
/* Without a memory controller: -1 quietly, errno ENOTSUP. */
int cgroup_read_events(const struct job_cgroup *cg, struct cgroup_events *out);

/* The memory.stat of the cgroup directory dir (one open, read and close;
 * ~20-40 us). Returns 0, or -1 (no memory controller, unreadable, or not
 * parsed). */
struct cgroup_memstat;
int cgroup_read_memstat(const char *dir, struct cgroup_memstat *out);

/* ---- parsers, exposed for tests (pure: no I/O) ---------------------- */

/* From /proc/PID/cgroup text: the v2 path ("0::PATH") and the v1 memory
 * controller's path. Either output may be set to "" when absent (or when
 * it does not fit). Returns -1 when neither was found. */
int parse_proc_cgroup(const char *buf, char *v2_path, size_t v2sz, char *v1_mem_path, size_t v1sz);
/* From mountinfo text: mount point of the cgroup2 fs (the first one) and
 * of the v1 memory controller (with its root, the part of the hierarchy
 * mounted there), octal escapes such as \040 decoded; "" when absent.
 * Returns -1 when neither was found. */
int parse_cgroup_mounts(const char *mountinfo, char *v2_mount, size_t v2sz,
                        char *v1_mem_mount, size_t v1sz, char *v1_mem_root, size_t v1rsz);
/* v2 memory.events ("oom_kill 3\n...") and v1 memory.oom_control (which
 * sets oom_kill and oom). Both zero *out first; missing keys stay 0.
 * Return 0 when at least one known key was read, else -1. */
int parse_memory_events(const char *buf, struct cgroup_events *out);
int parse_oom_control(const char *buf, struct cgroup_events *out);
/* A cgroup's memory.stat (v1 or v2), in bytes. */
struct cgroup_memstat {
	uint64_t file_cache_bytes;  /* active_file + inactive_file: the page cache */
	uint64_t shmem_bytes;       /* shmem, tmpfs (/dev/shm) */
	uint64_t anon_bytes;        /* v2 anon, v1 rss */
};
/* Parse memory.stat text (v1: the total_* keys when present). Returns 0,
 * or -1 when active_file and inactive_file are missing. */
int parse_memory_stat(const char *buf, struct cgroup_memstat *out);
/* "max" or a number (v2 memory.max; v1 values near 2^63 mean unlimited):
 * 0 for unlimited (any value >= 2^62). Returns 0, or -1 for anything else
 * (junk, a sign, a number beyond 2^64 - 1). */
int parse_limit_value(const char *buf, uint64_t *out);

#endif
