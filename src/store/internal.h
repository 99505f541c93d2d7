/*
 * store/internal.h — what the files of src/store/ share, private to them:
 * the store itself, and the helpers every seam uses to report errors and
 * read rows. The seams:
 *
 *   store.c    open and close, the store string, test hooks
 *   schema.c   the schema: its versions and migrations
 *   batch.c    the write path of frequent rows: held samples, staging,
 *              store_flush()
 *   runs.c     runs and segments, and reading back everything of a run
 *   sweeps.c   sweeps and trials
 *   trace.c    allocation sites of traced runs
 *   common.c   the helpers below
 *   db.h, db.c the driver interface and the table of backends;
 *   sqlite.c   its SQLite backend
 *
 * Units as in store.h: bytes (INTEGER), seconds (REAL). Unsigned sizes are
 * stored as signed 64-bit integers (clamped).
 */
#ifndef LP_STORE_INTERNAL_H
#define LP_STORE_INTERNAL_H

/* The schema version that added placements and runs.gpu_peak_bytes
 * (schema.c): older stores are read without them. */
#define PLACEMENT_VERSION 10
#define JOB_LEFT_VERSION 12   /* segments.pid_start, cgroup, also */
#define PIDNS_VERSION 13      /* runs.supervisor_pidns, boot_id, left_pending; sweeps.cwd */
#define JUDGE_VERSION_COLUMN 14   /* runs.judge_version */
#define NEED_VERSION 15           /* trials.need_bytes */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/db.h"
#include "store/store.h"

struct batch;

struct store {
	struct db *db;
	char *path;           /* the store string, as given */
	bool readonly;
	int64_t version;      /* its schema version (a reader's may be older) */
	bool write_failed;    /* a write error was reported; quiet until a clean flush */
	bool batch_failed;    /* a write failed since the last flush */
	/* Rows this writer could not store (its run is partial): the first
	 * loss's time (t of its oldest row, -1 unknown) and reason. */
	bool lost;
	double lost_t;
	char lost_why[256];
	char last_why[600];   /* the reason of the last write that failed */
	bool last_full;       /* and whether it failed for a full disk */
	uint64_t dropped_seen;   /* db_dropped() when last looked at */
	bool lost_gaps;          /* the lost rows are gaps (an outage), not all from lost_t on */
	struct batch *batch;  /* batch.c: the rows waiting for store_flush(); NULL read-only */
	/* trace.c: the sites of trace_run already written (bit per site id) */
	int64_t trace_run;
	unsigned char *trace_written;
	size_t trace_written_bytes;
	/* runs.c: the end of a run that could not be written (a full disk,
	 * past the reserve), kept to be tried again at each flush and at
	 * close (store_retry_run_end); run_id 0: none. ended_run: the last
	 * run whose end is stored. */
	struct pending_end {
		int64_t run_id;
		struct run_end end;   /* its strings are the arrays below */
		char verdict[32];
		bool has_lost;
		char lost[512];
		bool full;            /* its last try failed for a full disk */
	} pending_end;
	int64_t ended_run;
	/* runs.c: the runs (this host's) this writer marked interrupted when
	 * it opened the store, with what their jobs left */
	struct stale_run *stale;
	size_t nstale;
};

static inline int64_t u64_to_db(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static inline uint64_t db_to_u64(int64_t v)
{
	return v < 0 ? 0 : (uint64_t)v;
}

/* ---- common.c ------------------------------------------------------------ */

/* A column as a newly allocated string, "" when NULL; the caller frees it. */
char *col_strdup(struct db_stmt *s, int col);
/* The same, NULL when NULL. */
char *col_strdup_or_null(struct db_stmt *s, int col);
/* A column copied into dst of cap bytes (truncated), "" when NULL. */
void col_strcpy(struct db_stmt *s, int col, char *dst, size_t cap);

/* Report a write failure once (until a flush goes in whole):
 * "cannot write WHAT to store 'PATH': REASON", and note that rows were
 * lost (store_run_end() marks the run partial). Returns -1. */
int store_write_error(struct store *st, const char *what);
/* The same for a write that will be tried again (its rows are kept). */
int store_write_delayed(struct store *st, const char *what);
/* The reason of the last failure in words, into buf; returns buf. */
const char *store_failure_reason(struct store *st, char *buf, size_t sz);
/* Whether the driver dropped rows since the last look (a server
 * unreachable past its buffer): if so, the run is noted partial
 * (st->lost) with the driver's reason. */
void store_check_dropped(struct store *st);
/* "cannot read store 'PATH': REASON". Returns -1. */
int store_read_error(struct store *st);
/* 0, or -1 with a message when the store is open read-only. */
int store_check_writable(struct store *st);
/* Prepare sql and bind run_id to ?1. 0, or -1 after the message. */
int store_prepare_read(struct store *st, const char *sql, int64_t run_id, struct db_stmt **s);
/*
 * Every row of statement s (prepared and bound; finalized here) into a new
 * array of size-byte rows, each zeroed and filled by read; its length in
 * *n, *rc 0. On a read error what was read is given to drop (NULL: free()),
 * *rc is -1 after a message and NULL is returned.
 */
void *store_load_rows(struct store *st, struct db_stmt *s, size_t size,
                      void (*read)(struct db_stmt *, void *), void (*drop)(void *, size_t),
                      size_t *n, int *rc);
/* store_prepare_read() and store_load_rows() in one: the rows of sql with
 * run_id bound to ?1 (NULL, *n 0 and *rc -1 after a message when it cannot
 * be prepared). */
void *store_select_rows(struct store *st, const char *sql, int64_t run_id, size_t size,
                        void (*read)(struct db_stmt *, void *), void (*drop)(void *, size_t),
                        size_t *n, int *rc);

/* store_load_rows' reader of a struct mem_sample from
 * "SELECT t, nprocs, rss, pss, uss, swap, cgroup, gpu, pss_exact" (runs.c). */
void store_read_sample(struct db_stmt *s, void *row);
/* Its reader of a struct proc_row from
 * "SELECT pid, ppid, name, rss, pss, uss, swap, gpu, t" (runs.c). */
void store_read_proc(struct db_stmt *s, void *row);

/* ---- runs.c -------------------------------------------------------------- */

/* Try again to write the end of a run that store_run_end() could not: 0
 * when there is none or it went in, else -1; last: the store closes, and
 * an end not written now is said lost. */
int store_retry_run_end(struct store *st, bool last);

/* ---- schema.c ------------------------------------------------------------ */

/* Check that the store is a leakproof store (or empty) of a schema this
 * build knows; *version gets its version. 0, or -1 with the reason in why. */
int store_schema_check(struct store *st, int64_t *version, char *why, size_t whysz);
/* Bring a writable store from version to the current one. 0, or -1 with
 * the reason in why. */
int store_schema_migrate(struct store *st, int64_t version, char *why, size_t whysz);
/* The schema version this build writes. */
int64_t store_schema_version(void);

/* ---- batch.c ------------------------------------------------------------- */

/* The staging tables and the statements of the write path. 0, or -1 with
 * the reason in why. */
int store_batch_open(struct store *st, char *why, size_t whysz);
/* Write the held rows in one transaction (store_flush() without the retry
 * of a run's end that runs.c keeps): 0, or -1 after a message. */
int batch_flush(struct store *st);
/* Finalize them (what is held is dropped: store_flush() first). */
void store_batch_close(struct store *st);

#endif
