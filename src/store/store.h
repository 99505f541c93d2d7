/*
 * store.h — the run store: every run, its samples, steps, metrics, events and
 * results, kept in a database (SQLite today, in WAL mode; one writer per
 * run: its supervisor) chosen by the store string. Reports are made from
 * the store alone. The files of src/store/ and the driver under them:
 * store/internal.h and docs/internals/store.md.
 *
 * Writes are batched: samples are held in memory, steps, metrics, events
 * and results staged in the writer's own connection (microseconds each, no
 * lock on the store), and they reach the store, visible to every reader including this
 * connection, when store_flush() is called (the supervisor does so about
 * once a second and at the end), in one short transaction. A crash loses
 * at most that much. A run's beginning and end, and segments, are written
 * at once.
 *
 * Ownership: strings passed in are copied; structures returned by the load
 * functions are owned by the caller and freed with the matching *_free().
 * Units: bytes; times in seconds (t: since the run started; *_at: Unix time).
 */
#ifndef LP_STORE_H
#define LP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "base/placement.h"
#include "base/end_cause.h"
#include "base/sample.h"
#include "base/status.h"

struct store;

/* Open (creating the file, its directory and the schema as needed, and
 * migrating older schemas) the store at path: an SQLite file, or a
 * `postgresql://` or `postgres://` URI (a PostgreSQL database). Returns
 * NULL after printing "leakproof: cannot open store 'PATH': REASON" (a
 * URI's password shown as ***; "cannot write to store" when the file or
 * its directory cannot be written: a read-only file system, another
 * user's; "no room to keep 256 KiB for the end of a run" when the disk
 * has not the room the writer keeps in reserve). */
struct store *store_open(const char *path);
/* Whether a writer may use the store string path: 0, or -1 after
 * "leakproof: cannot use store 'PATH': REASON" when it names a database
 * that would not outlive the run (`:memory:`, `file:...?mode=memory`, ...).
 * store_open() refuses those too; `run` and `sweep` check first, to refuse
 * them as a usage error. */
int store_check_target(const char *path);
/* Open an existing store read-only; NULL with a message if it does not
 * exist. A store this user cannot write to (a read-only file system,
 * another user's directory) is read all the same when every commit is in
 * the file (SQLite: its write-ahead log checkpointed). */
struct store *store_open_readonly(const char *path);
void store_close(struct store *st);      /* commits what is pending */
/* Commit the open transaction. Returns -1 when the commit, or a write since
 * the last flush, failed (disk full...): what could not be written is
 * dropped, the error is printed once (again only after a batch went in
 * whole), and the store stays usable. Every store_add_* and
 * store_run_* returns -1 the same way; none of them exits. */
int store_flush(struct store *st);

/* A call of the store failed because its server went away (a PostgreSQL
 * restart): wait for it, as a writer opening the store does ($LEAKPROOF_
 * PG_CONNECT_WAIT, 30 s by default), saying so once. True when it is back
 * (the call may be made again; writes queued meanwhile are written);
 * false at once when the failure was not the server's absence (SQLite, a
 * refused statement) or after the wait. */
bool store_wait_back(struct store *st);

/* The store path from --store, else $LEAKPROOF_STORE, else the default
 * ./.leakproof/leakproof.db. Returns a static or argument string. */
const char *store_default_path(const char *from_option);

enum step_source { STEP_SOURCE_NONE = 0, STEP_SOURCE_CHANNEL, STEP_SOURCE_REGEX };
const char *step_source_name(enum step_source s);   /* "none", "channel", "regex" */

struct run_begin {
	double started_at;
	const char *command_json;   /* JSON array of the argv */
	const char *cwd;
	const char *hostname;
	enum measure measure;
	int64_t interval_ns;
	uint64_t limit_bytes;       /* 0 = none known */
	const char *limit_source;   /* "max-mem", "cgroup", "machine" */
	uint64_t mem_total_bytes;   /* the machine's memory */
	const char *cgroup_mode;    /* "v1", "v2", "none" — how the job was contained */
	const char *step_regex;     /* may be NULL */
	int pid;                    /* the job's first process; 0 when not started yet */
	int supervisor_pid;         /* leakproof's own pid, on hostname; 0: unknown */
	uint64_t supervisor_start;  /* its start time (/proc/PID/stat starttime, ticks) */
	uint64_t supervisor_pidns;  /* the inode of its PID namespace; 0: unknown */
	const char *boot_id;        /* the boot it runs in; NULL: unknown */
	const struct placement *placement;   /* its allocation and rank; NULL: none known */
};
/* Mark `interrupted` every run recorded as running on this host whose
 * supervisor (supervisor_pid, supervisor_start) is gone: killed with no
 * chance to record the end. The pid is read only where it names the
 * process it named when it was recorded: in the same PID namespace and
 * boot (a run recorded in another namespace is not judged, nor one of
 * another machine of the same name); a run of a boot before this one is
 * interrupted with nothing left to end. store_open() does it; readers
 * that open the store read-only see such runs as interrupted (struct
 * run_row). 0, or -1 after a message. */
int store_mark_stale_runs(struct store *st);
/* An interrupted run of this host, namespace and boot whose job's
 * leftovers are not known to be ended (runs.left_pending): marked by this
 * writer, or by an earlier one that could not end everything. */
struct stale_run {
	int64_t run_id;
	int64_t supervisor_pid;
	uint64_t supervisor_start;  /* its start time, ticks: the pid may be another's now */
	int64_t job_pid;        /* the job's main process, leader of its process group; 0: unknown */
	uint64_t job_start;     /* its /proc starttime, ticks; 0: unknown */
	char *cgroup;           /* the job's cgroup directory; NULL: none recorded */
	char *also;             /* its processes outside its group, as store_segment_set_also(); NULL: none */
};
size_t store_stale_runs(const struct store *st, const struct stale_run **runs);
/* Nothing of that run's job is left: its clean-up is no longer pending.
 * 0, or -1 after a message. */
int store_stale_run_cleaned(struct store *st, int64_t run_id);
/* Returns the new run's id (> 0), or -1 after "leakproof: cannot record a
 * new run in store 'PATH': REASON; the job is not started" (a full disk,
 * another writer holding the lock for over 5 s). Also records segment 0
 * (the job's first start) at rb->started_at, in the same transaction. */
int64_t store_run_begin(struct store *st, const struct run_begin *rb);

struct run_end {
	double ended_at;
	int exit_code;              /* -1 when killed by a signal */
	int exit_signal;            /* 0 when it exited */
	enum run_status status;     /* RUN_DONE (the zero value), RUN_FAILED_TO_START, ... */
	enum step_source step_source;
	int64_t steps;
	int64_t bad_lines, long_lines;   /* channel lines rejected */
	uint64_t peak_bytes;
	const char *verdict;        /* for `ls`; report recomputes */
	int judge_version;          /* of the judgment that wrote verdict (JUDGE_VERSION) */
	double growth_bytes_per_step;
};
/* Also ends every segment still open, with the run's exit status and cause
 * "exit", "signal" or the status when it is not "done". When a write of
 * this store failed and its rows were dropped, the run is marked partial
 * (run_row.lost says what is missing). On a full disk the end is written
 * in the room the writer keeps in reserve for it (SQLite); an end that
 * still cannot be written is kept, said, and tried again at each
 * store_flush() and at store_close(). */
int store_run_end(struct store *st, int64_t run_id, const struct run_end *re);

/*
 * Segments: one per start of the job's main process within a run (seq 0 is
 * made by store_run_begin; restarts add more).
 */
/* Start the next segment; returns its seq (>= 1 after segment 0), or -1. */
int64_t store_segment_begin(struct store *st, int64_t run_id, double started_at, int pid);
/* The job's main process of segment seq, once started: its pid, its start
 * time (/proc starttime, ticks; 0 unknown) and its cgroup's directory
 * (NULL: none), for the next writer should supervisor and guard be killed. */
int store_segment_set_pid(struct store *st, int64_t run_id, int64_t seq, int pid, uint64_t pid_start,
                          const char *cgroup);
/* The job's processes outside its process group (setsid) that its guard
 * was told of, "PID:START PID:START ..." (START: /proc starttime, ticks). */
int store_segment_set_also(struct store *st, int64_t run_id, int64_t seq, const char *also);
struct segment_end {
	double ended_at;
	int exit_code;              /* -1 when killed by a signal */
	int exit_signal;            /* 0 when it exited */
	enum end_cause cause;       /* CAUSE_NONE: not known */
	const char *evidence;       /* free text backing the cause; may be NULL */
	bool has_step;              /* a step was marked before the end */
	int64_t step;               /* the last step marked */
	uint64_t memory_bytes;      /* the run's measure at the end */
	const char *restart;        /* why the job was started again; NULL: it was not */
};
int store_segment_end(struct store *st, int64_t run_id, int64_t seq, const struct segment_end *se);

int store_add_sample(struct store *st, int64_t run_id, const struct mem_sample *s);
/* Per-process memory at a moment (the sampler's view, stored at a lower rate). */
int store_add_proc_sample(struct store *st, int64_t run_id, double t, int pid, int ppid,
                          const char *name, uint64_t rss, uint64_t pss, uint64_t uss,
                          uint64_t swap, uint64_t gpu);
/* Memory by kind of one process at a moment (growth kinds,
 * docs/internals/growth-kinds.md); pid 0 is the job's cgroup as a whole
 * (anon, page cache as file, shmem). Stored with the per-process samples. */
struct kind_row {
	double t;
	int pid, ppid;
	char name[32];
	uint64_t anon, cow, cow_base, file, shmem, gpu;
};
int store_add_kind_sample(struct store *st, int64_t run_id, const struct kind_row *k);
/* A run's kind rows ordered by t, then pid; the array is freed with free(). */
int store_load_kind_samples(struct store *st, int64_t run_id, struct kind_row **out, size_t *n);
struct step_rec {
	int64_t step;
	int64_t epoch;              /* -1 when unknown */
	struct mem_sample mem;      /* memory at the end of the step; mem.t is its time */
};
int store_add_step(struct store *st, int64_t run_id, const struct step_rec *s);
int store_add_metric(struct store *st, int64_t run_id, int64_t step, double t,
                     const char *name, double value);
/* kind: "mark", "epoch", "gpu-allocator", "signal", "exit", "warning", ... */
int store_add_event(struct store *st, int64_t run_id, double t, const char *kind,
                    const char *detail);
int store_add_result(struct store *st, int64_t run_id, const char *name, double value);

/* ---- reading back ---------------------------------------------------- */

/* Strings in rows are never NULL ("" when unknown). */
struct run_row {
	int64_t id;
	double started_at, ended_at;     /* ended_at 0 while running */
	/* exit_code -1 and exit_signal 0 until the run has ended */
	char *command_json, *cwd, *hostname, *verdict, *step_regex, *cgroup_mode;
	enum run_status status;          /* a running run whose supervisor is gone: RUN_INTERRUPTED */
	char *limit_source;
	enum measure measure;
	enum step_source step_source;
	int64_t interval_ns, steps, bad_lines, long_lines;
	uint64_t limit_bytes, mem_total_bytes, peak_bytes;
	int exit_code, exit_signal;
	double growth_bytes_per_step;
	char *lost;                      /* "": the run is whole; else what of it its
	                                  * writer could not store ("steps after 374
	                                  * were not stored (...): REASON") */
	bool has_place;                  /* a placement was recorded (schema 10) */
	struct placement place;          /* else zeroed, ranks -1 */
	int judge_version;               /* the judgment that wrote verdict; 0: not
	                                  * recorded (before schema 14) */
};
void run_row_release(struct run_row *r);

/* id 0 means the latest run. Returns 0, 1 when there is no such run, -1. */
int store_get_run(struct store *st, int64_t id, struct run_row *out);
/* The rows of the runs of ids (nids of them), in one statement per 256;
 * ids not in the store are left out, the order is the store's. The array
 * is the caller's (run_rows_free()). 0, or -1 after a message. */
int store_get_runs(struct store *st, const int64_t *ids, size_t nids, struct run_row **out, size_t *n);
/* All runs, newest first; *out is an array of *n rows, freed with
 * run_rows_free(). */
int store_list_runs(struct store *st, struct run_row **out, size_t *n);
void run_rows_free(struct run_row *rows, size_t n);
/* The runs of one job of several ranks (placement.job_key), by rank then
 * id, as store_list_runs(). A store older than schema 10 has none. */
int store_list_job_runs(struct store *st, const char *job_key, struct run_row **out, size_t *n);

int store_load_samples(struct store *st, int64_t run_id, struct mem_sample **out, size_t *n);
int store_load_steps(struct store *st, int64_t run_id, struct step_rec **out, size_t *n);

struct metric_row { int64_t step; double t; char name[64]; double value; };
int store_load_metrics(struct store *st, int64_t run_id, struct metric_row **out, size_t *n);
struct event_row { double t; char kind[32]; char *detail; };
int store_load_events(struct store *st, int64_t run_id, struct event_row **out, size_t *n);
void event_rows_free(struct event_row *rows, size_t n);
struct result_row { char name[64]; double value; };
int store_load_results(struct store *st, int64_t run_id, struct result_row **out, size_t *n);
/* The process that held the most (by PSS) at any stored moment. */
struct proc_row { int pid, ppid; char name[64]; uint64_t rss, pss, uss, swap, gpu; double t; };
int store_top_procs(struct store *st, int64_t run_id, struct proc_row **out, size_t *n, size_t max);
/* The arrays of the load functions above (metrics, results, samples, steps,
 * procs) are freed with free(); events with event_rows_free(). */

/* One row of a Python job's object census (docs/internals/census.md): the
 * count of one type in census seq, or with type "*" the census itself
 * (count: the objects it looked at; cost_us: its time in the job). */
struct census_row {
	double t;
	int64_t step;                    /* the last step marked by then; -1 none */
	int64_t seq;
	char type[128];
	int64_t count;
	int64_t bytes;                   /* -1 unknown */
	char *holder;                    /* NULL: none found (owned by the row) */
	int64_t cost_us;                 /* -1 unknown; "*" rows only */
};
/* holder is copied; NULL or "" stores none. */
int store_add_census(struct store *st, int64_t run_id, const struct census_row *r);
/* In order of time; freed with census_rows_free(). */
int store_load_census(struct store *st, int64_t run_id, struct census_row **out, size_t *n);
void census_rows_free(struct census_row *rows, size_t n);

struct segment_row {
	int64_t seq;
	int pid;                         /* 0 when unknown */
	double started_at, ended_at;     /* ended_at 0 while running */
	int exit_code, exit_signal;
	enum end_cause cause;            /* CAUSE_NONE when unknown (still running) */
	char *evidence;                  /* "" when unknown */
	bool has_step;
	int64_t end_step;                /* the last step marked in it */
	uint64_t memory_bytes;           /* the measure at its end; 0 unknown */
	char *restart;                   /* why the next segment started; "" none */
};
/* Segments of a run in order; freed with segment_rows_free(). */
int store_load_segments(struct store *st, int64_t run_id, struct segment_row **out, size_t *n);
void segment_rows_free(struct segment_row *rows, size_t n);

/* ---- for tests and diagnostics ---------------------------------------- */

/* Make the store refuse to grow past max_bytes, as a full disk would: the
 * next write that needs more space fails with "database or disk is full"
 * (SQLite; -1 with a message where the backend cannot). */
int store_set_size_limit(struct store *st, uint64_t max_bytes);
/* Bytes of heap the database libraries hold in this process (all
 * connections). */
size_t store_memory_used(void);

#endif
