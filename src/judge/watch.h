/*
 * judge/watch.h — the runs of a store watched while they go on, the model
 * behind `leakproof top` (cmd/top.c draws it): which runs to list (those
 * running, those ended in the last WATCH_RECENT_SECONDS), each one's live
 * state (memory now, its recent course, restarts, how it last ended, and
 * whether it runs, ended or was interrupted (its supervisor gone)), its judgment so
 * far (the end-of-run summary's, judge/summary.h, made again at a cadence
 * that keeps its cost small) and the time to its memory limit at that
 * rate. It reads the store only (store/live.h), knows nothing of
 * terminals, and follows a store file deleted or made again at its path.
 * Costs and choices: docs/internals/top.md.
 *
 * Ownership: a struct watch owns its store connection and its runs; the
 * pointers it hands out (runs[], watch_find()) stay valid until the next
 * watch_refresh() or watch_release().
 * Units: bytes; t in seconds since the run started; *_at Unix time;
 * *_mono_ns CLOCK_MONOTONIC nanoseconds.
 */
#ifndef LP_MODEL_WATCH_H
#define LP_MODEL_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/store.h"

#define WATCH_RECENT_SECONDS 600.0   /* an ended (or interrupted) run stays listed this long */
#define WATCH_POINT_SECONDS 5.0      /* one recent point: the last sample of each 5 s */
#define WATCH_POINTS 120             /* recent points kept per run: 10 minutes */
#define WATCH_SITES 5                /* allocation sites kept per judgment */

enum watched_state {
	WATCHED_RUNNING,
	WATCHED_ENDED,
	WATCHED_INTERRUPTED,         /* never ended, no sample for 15 s, its job gone (as ls says of
	                              * a run whose supervisor died) */
};
/* "running", "ended", "interrupted": a static string. */
const char *watched_state_name(enum watched_state s);

/* One allocation site of a traced run, as judged. */
struct watch_site {
	char label[128];             /* "function (file.py:12)", "function (lib.so)" */
	double growth_bytes_per_x;   /* per the judgment's x_unit */
	double live_bytes;
	bool growing;
	const char *state;           /* site_state_name(): static */
};

/* The judgment so far: the end-of-run summary's, kept between refreshes. */
struct watch_judgment {
	bool valid;                  /* false: not judged yet */
	char verdict[16];            /* verdict_name() */
	char reason[256];            /* the verdict in one sentence */
	const char *x_unit;          /* "step" or "s" (judged over time): static */
	double growth_bytes_per_x;   /* the slope, per x_unit */
	double growth_low_bytes_per_x, growth_high_bytes_per_x;   /* its interval */
	double steps_per_second;     /* 0: no steps */
	double projected_seconds;    /* the summary's projection; <0: none */
	double limit_bytes;          /* 0: none known */
	char limit_source[16];       /* "max-mem", "cgroup", "machine", "" */
	double peak_bytes;
	size_t steps;
	struct watch_site sites[WATCH_SITES];   /* those growing the most */
	size_t nsites;
	bool traced;                 /* the run has allocation sites at all */
};

/* One run's live state. Read-only for callers. */
struct watched_run {
	int64_t id;
	struct run_row run;          /* its row as last read */
	char **argv;                 /* its command (run_command_parse()) */
	size_t argc;
	enum watched_state state;
	bool has_last;
	struct mem_sample last;      /* the newest sample read, when has_last */
	double recent_bytes[WATCH_POINTS];   /* the measure, one point per
	                                      * WATCH_POINT_SECONDS, oldest first */
	double recent_t[WATCH_POINTS];       /* each point's sample time */
	size_t nrecent;
	int restarts;                /* starts of its job after the first */
	char last_cause[32];         /* how its job last ended; "" none yet */
	struct watch_judgment j;
	double seconds_to_limit;     /* watched_run_seconds_to_limit() at the last read */

	/* watch.c's bookkeeping */
	bool seen;                   /* listed at this refresh */
	double last_t;               /* t of the newest sample read; -1 none */
	int64_t judged_mono_ns;      /* when it was last judged; 0 never */
	int64_t judge_cost_ns;       /* what that judgment took */
	bool judged_final;           /* judged with all it will write: never again */
	bool read_final;             /* read whole after its end: never read again */
	int64_t end_seen_mono_ns;    /* when first read ended; 0 not yet */
	bool segment_open;           /* its last segment has no end yet */
};

/* The memory now under the run's measure (its newest sample); -1 none. */
double watched_run_memory_bytes(const struct watched_run *r);
/* The most memory seen: the judged peak, or a recent point above it. */
double watched_run_peak_bytes(const struct watched_run *r);
/* Time to the limit at the judged rate, from the memory now:
 * (limit - now) / (growth per step x steps per second), or per second for
 * a run judged over time; 0 at or over the limit; -1 when there is none (the
 * run ended, nothing judged or projected, no growth, no limit, no sample). */
double watched_run_seconds_to_limit(const struct watched_run *r);

/* The runs of one store. */
struct watch {
	struct store *st;            /* NULL while the store file is not there */
	const char *path;            /* the caller's, kept */
	char host[256];              /* this host: only its runs can be told interrupted */
	struct watched_run **runs;   /* every run listed, newest first */
	size_t nruns;
	bool judge_all;              /* judge every run due at each refresh, with
	                              * no budget (a snapshot); else runs first
	                              * seen ended take 0.2 s a refresh at most */
	/* The clocks, the real ones after watch_init(); a test sets its own. */
	double (*wall_seconds)(void);
	int64_t (*mono_ns)(void);

	/* watch.c's bookkeeping */
	bool file_store;             /* a file (not a server): watched for replacement */
	bool have_ino;
	dev_t dev;                   /* the store file's, when opened */
	ino_t ino;
};

/* Open the store at path read-only (path is kept, not copied) and list
 * nothing yet. 0, or -1 after a message (nothing to release then). */
int watch_init(struct watch *w, const char *path, bool judge_all);
/* Close the store and free the runs. */
void watch_release(struct watch *w);

/*
 * Read the store again: the runs to list, new samples and segments of
 * those not read whole since their end, each run's state; judge those due
 * (when first seen, then a running run every 5 s, or 20 times what its last
 * judgment took if longer; an ended run once more with all it wrote). A
 * store file deleted or replaced is closed, its runs forgotten, and the one
 * at the path opened (none listed while there is none). 0, or -1 after a
 * message (the list is then what could be read; the next call tries again).
 */
int watch_refresh(struct watch *w);

/* The run listed with that id; NULL none. */
struct watched_run *watch_find(const struct watch *w, int64_t run_id);

/* The processes of run_id at its newest per-process sample, the most PSS
 * first (store_live_procs()); none while no store is open. The caller frees
 * *out with free(). 0, or -1 after a message. */
int watch_processes(struct watch *w, int64_t run_id, struct proc_row **out /* out */, size_t *n /* out */);

#endif
