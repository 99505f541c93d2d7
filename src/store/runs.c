/*
 * runs.c — runs and their segments in the store, and reading back every
 * part of a run (samples, steps, metrics, events, results, per-process
 * samples). A run's beginning and end, and its segments, are written at
 * once, each statement its own transaction; the frequent rows go through
 * batch.c. Readers see what the last flush committed.
 */
#include "store/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/proc.h"
#include "util/util.h"

/* ---- writing ----------------------------------------------------------- */

const char *step_source_name(enum step_source s)
{
	switch (s) {
	case STEP_SOURCE_CHANNEL: return "channel";
	case STEP_SOURCE_REGEX: return "regex";
	default: return "none";
	}
}

static enum step_source step_source_parse(const char *s)
{
	if (s && !strcmp(s, "channel"))
		return STEP_SOURCE_CHANNEL;
	if (s && !strcmp(s, "regex"))
		return STEP_SOURCE_REGEX;
	return STEP_SOURCE_NONE;
}

/* Step s again after a full disk, in the room a checkpoint leaves. */
static enum db_rc retry_in_room(struct store *st, struct db_stmt *s)
{
	if (!db_make_room(st->db))
		return DB_FULL;
	db_reset(s);
	return db_step(s);
}

/* Run a one-off statement straight on the store (its own transaction):
 * prepare, bind with fn, step, finalize. A write of the end of a run
 * (spend) may spend the room the store keeps in reserve for it when the
 * disk is full. */
static int write_once(struct store *st, const char *sql, const char *what,
                      void (*bind)(struct db_stmt *, const void *), const void *arg, bool spend)
{
	struct db_stmt *s;
	if (store_check_writable(st) < 0)
		return -1;
	if (db_prepare(st->db, sql, false, &s) != DB_OK)
		return store_write_error(st, what);
	bind(s, arg);
	enum db_rc rc = db_step(s);
	if (rc == DB_FULL)
		rc = retry_in_room(st, s);
	if (rc == DB_FULL && spend && db_give_reserve(st->db)) {
		db_reset(s);
		rc = db_step(s);
		if (rc == DB_FULL)
			rc = retry_in_room(st, s);
	}
	int r = rc == DB_DONE ? 0 : store_write_error(st, what);
	db_finalize(s);
	return r;
}

static void bind_text_or_null(struct db_stmt *s, int i, const char *v);
static void bind_int_or_null(struct db_stmt *s, int i, int64_t v, int64_t none);
static int run_once(struct store *st, const char *sql, const char *what,
                    void (*bind)(struct db_stmt *, const void *), const void *arg)
{
	return write_once(st, sql, what, bind, arg, false);
}

static void bind_run_begin(struct db_stmt *s, const void *arg)
{
	const struct run_begin *rb = arg;
	const char *measure = measure_name(rb->measure);
	db_bind_double(s, 1, rb->started_at);
	db_bind_text(s, 2, rb->command_json ? rb->command_json : "[]");
	db_bind_text(s, 3, rb->cwd);
	db_bind_text(s, 4, rb->hostname);
	db_bind_text(s, 5, measure ? measure : "pss");
	db_bind_int64(s, 6, rb->interval_ns);
	db_bind_int64(s, 7, u64_to_db(rb->limit_bytes));
	db_bind_text(s, 8, rb->limit_source);
	db_bind_int64(s, 9, u64_to_db(rb->mem_total_bytes));
	db_bind_text(s, 10, rb->cgroup_mode);
	db_bind_text(s, 11, rb->step_regex);
	if (rb->supervisor_pid > 0) {
		db_bind_int64(s, 12, rb->supervisor_pid);
		db_bind_int64(s, 13, u64_to_db(rb->supervisor_start));
	} else {
		db_bind_null(s, 12);
		db_bind_null(s, 13);
	}
}

/* The same, and where the supervisor's pid means it (schema 13): ?14, ?15. */
static void bind_run_begin_where(struct db_stmt *s, const void *arg)
{
	const struct run_begin *rb = arg;
	bind_run_begin(s, rb);
	bind_int_or_null(s, 14, u64_to_db(rb->supervisor_pidns), 0);
	bind_text_or_null(s, 15, rb->boot_id);
}

struct segment_begin_args { int64_t run_id, seq; double started_at; int pid; };

static void bind_segment_begin(struct db_stmt *s, const void *arg)
{
	const struct segment_begin_args *a = arg;
	db_bind_int64(s, 1, a->run_id);
	db_bind_int64(s, 2, a->seq);
	if (a->pid > 0)
		db_bind_int64(s, 3, a->pid);
	else
		db_bind_null(s, 3);
	db_bind_double(s, 4, a->started_at);
}

/* Where it runs (schema 7), beside the run: NULL for what is not known. */
static void bind_text_or_null(struct db_stmt *s, int i, const char *v)
{
	if (v && *v)
		db_bind_text(s, i, v);
	else
		db_bind_null(s, i);
}

static void bind_int_or_null(struct db_stmt *s, int i, int64_t v, int64_t none)
{
	if (v != none)
		db_bind_int64(s, i, v);
	else
		db_bind_null(s, i);
}

struct placement_args { int64_t run_id; const struct placement *p; };

static void bind_placement(struct db_stmt *s, const void *arg)
{
	const struct placement_args *a = arg;
	const struct placement *p = a->p;
	db_bind_int64(s, 1, a->run_id);
	bind_text_or_null(s, 2, p->slurm_job_id);
	bind_text_or_null(s, 3, p->slurm_array_job_id);
	bind_text_or_null(s, 4, p->slurm_array_task_id);
	bind_text_or_null(s, 5, p->slurm_step_id);
	bind_int_or_null(s, 6, u64_to_db(p->alloc_mem_bytes), 0);
	bind_text_or_null(s, 7, p->gpus);
	bind_text_or_null(s, 8, p->launcher);
	bind_text_or_null(s, 9, p->job_key);
	bind_int_or_null(s, 10, p->rank, -1);
	bind_int_or_null(s, 11, p->local_rank, -1);
	bind_int_or_null(s, 12, p->world_size, 0);
	bind_int_or_null(s, 13, p->node_id, -1);
}

#define PLACEMENT_INSERT_SQL "INSERT INTO placements (run_id, slurm_job_id, slurm_array_job_id," \
	" slurm_array_task_id, slurm_step_id, alloc_mem_bytes, gpus, launcher, job_key, job_rank, local_rank," \
	" world_size, node_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"

#define SEGMENT_INSERT_SQL "INSERT INTO segments (run_id, seq, pid, started_at) VALUES (?1, ?2, ?3, ?4)"

/* A try that failed: its reason into why (before finalize, which may
 * clear it), rolled back. */
static int64_t begin_failed(struct store *st, struct db_stmt *s, char *why, size_t whysz)
{
	store_failure_reason(st, why, whysz);
	if (s)
		db_finalize(s);
	if (db_in_transaction(st->db))
		db_rollback(st->db);
	return -1;
}

/* One insert of try_run_begin(): prepare, bind with fn, step, finalize.
 * 0, or -1 as begin_failed(). */
static int begin_insert(struct store *st, const char *sql, void (*bind)(struct db_stmt *, const void *),
                        const void *arg, char *why, size_t whysz)
{
	struct db_stmt *s;
	if (db_prepare(st->db, sql, false, &s) != DB_OK)
		return begin_failed(st, NULL, why, whysz);
	bind(s, arg);
	if (db_step(s) != DB_DONE)
		return begin_failed(st, s, why, whysz);
	db_finalize(s);
	return 0;
}

/* The run, its segment 0 and its placement in one transaction: a run
 * begins whole or not at all. */
static int64_t try_run_begin(struct store *st, const struct run_begin *rb, char *why, size_t whysz)
{
	if (db_begin(st->db, true) != DB_OK)
		return begin_failed(st, NULL, why, whysz);
	bool where = st->version >= PIDNS_VERSION;
	if (begin_insert(st, where ? "INSERT INTO runs (started_at, command, cwd, hostname, measure, interval_ns,"
	                 " limit_bytes, limit_source, mem_total_bytes, cgroup_mode, step_regex, supervisor_pid,"
	                 " supervisor_start, supervisor_pidns, boot_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
	                 " ?10, ?11, ?12, ?13, ?14, ?15)"
	                 : "INSERT INTO runs (started_at, command, cwd, hostname, measure, interval_ns,"
	                 " limit_bytes, limit_source, mem_total_bytes, cgroup_mode, step_regex, supervisor_pid,"
	                 " supervisor_start) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
	                 where ? bind_run_begin_where : bind_run_begin, rb, why, whysz) < 0)
		return -1;
	int64_t id = db_last_insert_id(st->db);
	struct segment_begin_args sa = { id, 0, rb->started_at, rb->pid };
	if (begin_insert(st, SEGMENT_INSERT_SQL, bind_segment_begin, &sa, why, whysz) < 0)
		return -1;
	struct placement_args pa = { id, rb->placement };
	if (rb->placement && begin_insert(st, PLACEMENT_INSERT_SQL, bind_placement, &pa, why, whysz) < 0)
		return -1;
	if (db_commit(st->db) != DB_OK)
		return begin_failed(st, NULL, why, whysz);
	return id;
}

/* How many times a run is begun again after its store's server went away
 * under it (each time waiting for it to be back). */
#define BEGIN_TRIES 3

int64_t store_run_begin(struct store *st, const struct run_begin *rb)
{
	char reason[600];
	if (store_check_writable(st) < 0)
		return -1;
	/* made again when an earlier run of this writer spent it */
	if (db_keep_reserve(st->db, reason, sizeof(reason)) < 0)
		return error("cannot record a new run in store '%s': %s; the job is not started", st->path, reason);
	for (int i = 1;; i++) {
		int64_t id = try_run_begin(st, rb, reason, sizeof(reason));
		if (id >= 0)
			return id;
		if (i == BEGIN_TRIES || !db_wait_back(st->db))
			break;
	}
	/* said, so that nobody takes it for a run that started */
	error("cannot record a new run in store '%s': %s; the job is not started", st->path, reason);
	return -1;
}

static void bind_run_id(struct db_stmt *s, const void *arg);

struct run_end_args { int64_t run_id; const struct run_end *re; const char *lost; };

static void bind_run_end(struct db_stmt *s, const void *arg)
{
	const struct run_end_args *a = arg;
	const struct run_end *re = a->re;
	db_bind_int64(s, 1, a->run_id);
	db_bind_double(s, 2, re->ended_at);
	db_bind_text(s, 3, run_status_name(re->status));
	db_bind_int64(s, 4, re->exit_code);
	db_bind_int64(s, 5, re->exit_signal);
	db_bind_text(s, 6, step_source_name(re->step_source));
	db_bind_int64(s, 7, re->steps);
	db_bind_int64(s, 8, re->bad_lines);
	db_bind_int64(s, 9, re->long_lines);
	db_bind_int64(s, 10, u64_to_db(re->peak_bytes));
	db_bind_text(s, 11, re->verdict);
	db_bind_double(s, 12, re->growth_bytes_per_step);
	if (a->lost)
		db_bind_text(s, 13, a->lost);
	else
		db_bind_null(s, 13);
	bind_int_or_null(s, 14, re->verdict ? re->judge_version : 0, 0);
}

/*
 * What of run_id this writer could not store, in words, into buf (steps
 * is the number the run marked): "steps after 374 were not stored (2626
 * of 3000 missing): database or disk is full". NULL when nothing was lost.
 */
static const char *describe_lost(struct store *st, int64_t run_id, int64_t steps, char *buf, size_t sz)
{
	struct db_stmt *s;
	int64_t stored = 0, last = 0;
	bool has_last = false, counted = false;
	store_check_dropped(st);
	if (!st->lost)
		return NULL;
	if (db_prepare(st->db, "SELECT count(*), (SELECT max(step) FROM steps WHERE run_id = ?1"
	               " AND (?2 < 0 OR t < ?2)) FROM steps WHERE run_id = ?1", false, &s) == DB_OK) {
		db_bind_int64(s, 1, run_id);
		db_bind_double(s, 2, st->lost_t);
		if (db_step(s) == DB_ROW) {
			counted = true;
			stored = db_column_int64(s, 0);
			has_last = !db_column_is_null(s, 1);
			last = db_column_int64(s, 1);
		}
		db_finalize(s);
	}
	if (!counted)   /* the store cannot be read now (a server away): no numbers */
		snprintf(buf, sz, "some rows were not stored: %s", st->lost_why);
	else if (steps > stored && has_last && !st->lost_gaps)
		snprintf(buf, sz, "steps after %lld were not stored (%lld of %lld missing): %s", (long long)last,
		         (long long)(steps - stored), (long long)steps, st->lost_why);
	else if (steps > stored)
		snprintf(buf, sz, "%lld of %lld steps were not stored: %s",
		         (long long)(steps - stored), (long long)steps, st->lost_why);
	else if (st->lost_t >= 0)
		snprintf(buf, sz, "memory samples from %.1f s on were not stored: %s", st->lost_t, st->lost_why);
	else
		snprintf(buf, sz, "some rows were not stored: %s", st->lost_why);
	return buf;
}

static void bind_segment_close(struct db_stmt *s, const void *arg)
{
	const struct run_end_args *a = arg;
	const struct run_end *re = a->re;
	enum end_cause cause = CAUSE_UNKNOWN;
	switch (re->status) {
	case RUN_DONE: cause = re->exit_signal ? CAUSE_SIGNAL : CAUSE_EXIT; break;
	case RUN_FAILED_TO_START: cause = CAUSE_FAILED_TO_START; break;
	case RUN_INTERRUPTED: cause = CAUSE_INTERRUPTED; break;
	case RUN_DETACHED: cause = CAUSE_DETACHED; break;
	case RUN_ENDED: cause = CAUSE_ENDED; break;
	case RUN_RUNNING: case RUN_STATUS_UNKNOWN: break;
	}
	db_bind_int64(s, 1, a->run_id);
	db_bind_double(s, 2, re->ended_at);
	db_bind_int64(s, 3, re->exit_code);
	db_bind_int64(s, 4, re->exit_signal);
	db_bind_text(s, 5, cause_name(cause));
}

/* The end of a run, its segments' and its GPU peak, each a write of its
 * own that may spend the store's reserve. 0, or -1 when the run's own row
 * could not be written (st->last_why says why; nothing said). */
static int write_run_end(struct store *st, const struct run_end_args *a)
{
	/* Its failure has words of its own, said even after another, and
	 * loses no row of the run: the end is kept (store_run_end()). */
	bool quiet = st->write_failed, lost = st->lost;
	st->write_failed = true;
	int r = write_once(st, "UPDATE runs SET ended_at = ?2, status = ?3, exit_code = ?4, exit_signal = ?5,"
	                   " step_source = ?6, steps = ?7, bad_lines = ?8, long_lines = ?9, peak_bytes = ?10,"
	                   " verdict = ?11, growth_bytes_per_step = ?12, lost = ?13, judge_version = ?14 WHERE id = ?1",
	                   "the end of a run", bind_run_end, a, true);
	st->write_failed = quiet;
	st->lost = lost;
	if (r < 0)
		return -1;
	/* A segment still open ends with the run. */
	write_once(st, "UPDATE segments SET ended_at = ?2, exit_code = ?3, exit_signal = ?4, cause = ?5"
	           " WHERE run_id = ?1 AND ended_at IS NULL", "the end of a segment", bind_segment_close, a, true);
	/* Its GPU peak, kept for the sweep's table (schema 7): the samples are
	 * all in (the supervisor flushes before it ends the run). */
	if (st->version >= PLACEMENT_VERSION)
		write_once(st, "UPDATE runs SET gpu_peak_bytes = (SELECT coalesce(max(gpu), 0) FROM samples"
		           " WHERE run_id = ?1) WHERE id = ?1", "the GPU peak of a run", bind_run_id, &a->run_id, true);
	return 0;
}

/* The end kept for later, copied (its strings too). */
static void keep_end(struct store *st, int64_t run_id, const struct run_end *re, const char *lost)
{
	struct pending_end *p = &st->pending_end;
	p->run_id = run_id;
	p->end = *re;
	snprintf(p->verdict, sizeof(p->verdict), "%s", re->verdict ? re->verdict : "");
	p->end.verdict = re->verdict ? p->verdict : NULL;
	p->has_lost = lost != NULL;
	snprintf(p->lost, sizeof(p->lost), "%s", lost ? lost : "");
}

int store_run_end(struct store *st, int64_t run_id, const struct run_end *re)
{
	char lost[512];
	struct run_end_args a = { run_id, re, describe_lost(st, run_id, re->steps, lost, sizeof(lost)) };
	if (st->pending_end.run_id == run_id)
		st->pending_end.run_id = 0;   /* this one is newer */
	if (write_run_end(st, &a) == 0) {
		st->ended_run = run_id;
		return 0;
	}
	if (st->ended_run == run_id)   /* the end is there: its verdict is not */
		return error("cannot write the verdict of run %lld to store '%s': %s", (long long)run_id,
		             st->path, st->last_why);
	/* Not lost yet: kept, and written at the next flush or at the close
	 * that finds room (a server's disk). */
	keep_end(st, run_id, re, a.lost);
	st->pending_end.full = st->last_full;
	return error("cannot write the end of run %lld to store '%s': %s; it is kept to be tried again until"
	             " leakproof exits%s", (long long)run_id, st->path, st->last_why,
	             a.lost ? " (its rows are not all there)" : "");
}

int store_retry_run_end(struct store *st, bool last)
{
	struct pending_end *p = &st->pending_end;
	if (!p->run_id)
		return 0;
	struct run_end_args a = { p->run_id, &p->end, p->has_lost ? p->lost : NULL };
	bool quiet = st->write_failed;
	st->write_failed = true;   /* each try fails quietly */
	int r = write_run_end(st, &a);
	st->write_failed = quiet;
	if (r == 0) {
		st->ended_run = p->run_id;
		p->run_id = 0;
		warning("the end of run %lld is now stored in store '%s'", (long long)a.run_id, st->path);
		return 0;
	}
	p->full = st->last_full;
	if (last) {
		p->run_id = 0;
		error("the end of run %lld could not be written to store '%s': %s; `leakproof ls` will show it"
		      " as interrupted%s", (long long)a.run_id, st->path, st->last_why,
		      a.lost ? " and its rows are not all there" : "");
	}
	return -1;
}

int64_t store_segment_begin(struct store *st, int64_t run_id, double started_at, int pid)
{
	struct db_stmt *s;
	int64_t seq = 0;
	if (store_check_writable(st) < 0)
		return -1;
	if (db_prepare(st->db, "SELECT coalesce(max(seq) + 1, 0) FROM segments WHERE run_id = ?1",
	               false, &s) != DB_OK)
		return store_write_error(st, "a segment");
	db_bind_int64(s, 1, run_id);
	if (db_step(s) == DB_ROW)
		seq = db_column_int64(s, 0);
	db_finalize(s);
	struct segment_begin_args sa = { run_id, seq, started_at, pid };
	if (run_once(st, SEGMENT_INSERT_SQL, "a segment", bind_segment_begin, &sa) < 0)
		return -1;
	return seq;
}

struct segment_pid_args { int64_t run_id, seq; int pid; uint64_t pid_start; const char *cgroup; };

static void bind_segment_pid(struct db_stmt *s, const void *arg)
{
	const struct segment_pid_args *a = arg;
	db_bind_int64(s, 1, a->run_id);
	db_bind_int64(s, 2, a->seq);
	db_bind_int64(s, 3, a->pid);
	if (a->pid_start)
		db_bind_int64(s, 4, u64_to_db(a->pid_start));
	else
		db_bind_null(s, 4);
	db_bind_text(s, 5, a->cgroup);
}

int store_segment_set_pid(struct store *st, int64_t run_id, int64_t seq, int pid, uint64_t pid_start,
                          const char *cgroup)
{
	struct segment_pid_args a = { run_id, seq, pid, pid_start, cgroup };
	return run_once(st, "UPDATE segments SET pid = ?3, pid_start = ?4, cgroup = ?5 WHERE run_id = ?1 AND seq = ?2",
	                "a segment", bind_segment_pid, &a);
}

struct segment_also_args { int64_t run_id, seq; const char *also; };

static void bind_segment_also(struct db_stmt *s, const void *arg)
{
	const struct segment_also_args *a = arg;
	db_bind_int64(s, 1, a->run_id);
	db_bind_int64(s, 2, a->seq);
	db_bind_text(s, 3, a->also);
}

int store_segment_set_also(struct store *st, int64_t run_id, int64_t seq, const char *also)
{
	struct segment_also_args a = { run_id, seq, also };
	return run_once(st, "UPDATE segments SET also = ?3 WHERE run_id = ?1 AND seq = ?2",
	                "a segment", bind_segment_also, &a);
}

struct segment_end_args { int64_t run_id, seq; const struct segment_end *se; };

static void bind_segment_end(struct db_stmt *s, const void *arg)
{
	const struct segment_end_args *a = arg;
	db_bind_int64(s, 1, a->run_id);
	db_bind_int64(s, 2, a->seq);
	db_bind_double(s, 3, a->se->ended_at);
	db_bind_int64(s, 4, a->se->exit_code);
	db_bind_int64(s, 5, a->se->exit_signal);
	db_bind_text(s, 6, a->se->cause != CAUSE_NONE ? cause_name(a->se->cause) : NULL);
	db_bind_text(s, 7, a->se->evidence);
	if (a->se->has_step)
		db_bind_int64(s, 8, a->se->step);
	else
		db_bind_null(s, 8);
	db_bind_int64(s, 9, u64_to_db(a->se->memory_bytes));
	db_bind_text(s, 10, a->se->restart);
}

int store_segment_end(struct store *st, int64_t run_id, int64_t seq, const struct segment_end *se)
{
	struct segment_end_args a = { run_id, seq, se };
	return run_once(st, "UPDATE segments SET ended_at = ?3, exit_code = ?4, exit_signal = ?5,"
	                " cause = ?6, evidence = ?7, end_step = ?8, memory_bytes = ?9, restart = ?10"
	                " WHERE run_id = ?1 AND seq = ?2",
	                "the end of a segment", bind_segment_end, &a);
}

/* ---- reading ----------------------------------------------------------- */

#define RUN_COLUMNS "id, started_at, coalesce(ended_at, 0), command, cwd, hostname, status, verdict," \
	" step_regex, cgroup_mode, limit_source, measure, step_source, interval_ns, steps, bad_lines," \
	" long_lines, limit_bytes, mem_total_bytes, peak_bytes, coalesce(exit_code, -1)," \
	" coalesce(exit_signal, 0), coalesce(growth_bytes_per_step, 0), %s, %s, %s, " SO_FAR_COLUMNS ", %s, %s"
/* The placement's columns (schema 7; a LEFT JOIN, all NULL without a row). */
#define PLACEMENT_COLUMNS "placements.run_id, slurm_job_id, slurm_array_job_id, slurm_array_task_id," \
	" slurm_step_id, coalesce(alloc_mem_bytes, 0), gpus, launcher, job_key, coalesce(job_rank, -1)," \
	" coalesce(local_rank, -1), coalesce(world_size, 0), coalesce(node_id, -1)"
#define PLACEMENT_NONE "NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL, -1, -1, 0, -1"
#define PLACEMENT_JOIN "LEFT JOIN placements ON placements.run_id = runs.id"
/* What a run still 'running' has stored so far, read from its rows (the
 * runs row gets them only at its end): the time of its last sample, its
 * steps, its peak under its measure. For a run whose supervisor is gone. */
#define SO_FAR_LAST_T "(SELECT max(t) FROM samples WHERE samples.run_id = runs.id)"
#define SO_FAR_STEPS "(SELECT count(*) FROM steps WHERE steps.run_id = runs.id)"
#define SO_FAR_PEAK "(SELECT max(CASE runs.measure WHEN 'rss' THEN rss WHEN 'uss' THEN uss" \
	" WHEN 'cgroup' THEN cgroup WHEN 'gpu' THEN gpu ELSE pss END) FROM samples WHERE samples.run_id = runs.id)"
#define SO_FAR_COLUMNS "CASE WHEN status = 'running' THEN coalesce(" SO_FAR_LAST_T ", 0) ELSE 0 END," \
	" CASE WHEN status = 'running' THEN " SO_FAR_STEPS " ELSE 0 END," \
	" CASE WHEN status = 'running' THEN coalesce(" SO_FAR_PEAK ", 0) ELSE 0 END"
/* The lost column, or NULL in a store older than it (read as it is). */
#define LOST_VERSION 5
/* The supervisor's pid and start time, or 0 in a store older than them. */
#define SUPERVISOR_VERSION 6
#define KINDS_VERSION 9        /* kind_samples (growth kinds) */
#define SUPERVISOR_COLUMNS "coalesce(supervisor_pid, 0), coalesce(supervisor_start, 0)"

/* Where this process runs, read once: its host, PID namespace and boot. */
struct here {
	bool read;
	char host[256];
	uint64_t pidns;       /* 0: unknown */
	char boot_id[64];     /* "": unknown */
	int64_t btime;        /* 0: unknown */
};

static const struct here *here(void)
{
	static struct here h;
	if (!h.read) {
		h.read = true;
		if (gethostname(h.host, sizeof(h.host) - 1) < 0)
			h.host[0] = '\0';
		if (proc_self_pidns(&h.pidns) < 0)
			h.pidns = 0;
		if (read_boot_id(h.boot_id, sizeof(h.boot_id)) < 0)
			h.boot_id[0] = '\0';
		if (read_boot_time(&h.btime) < 0)
			h.btime = 0;
	}
	return &h;
}

/* A running run's supervisor as recorded: where, which process. */
struct recorded_supervisor {
	const char *host;
	int64_t pid, start;   /* start: /proc starttime, ticks */
	uint64_t pidns;       /* 0: not recorded (older) */
	const char *boot_id;  /* NULL: not recorded (older) */
	double started_at;    /* the run's start, wall seconds */
};

enum supervisor_state {
	SUPERVISOR_KEPT,        /* alive, or not ours to judge */
	SUPERVISOR_GONE,        /* gone; its job may run on */
	SUPERVISOR_GONE_BOOT,   /* of a boot before this one: nothing of it runs */
};

/*
 * Whether a run recorded as running has lost its supervisor. A pid means
 * a process only on its host, in its PID namespace and in its boot: a
 * writer in another namespace (a container that kept the host's name, or
 * the host looking at a container) would read another process, or none,
 * under the same number, so it does not judge. A boot id that differs
 * with this boot started after the run did is a reboot; one that differs
 * with this boot older than the run is another machine of the same name.
 * Unknown supervisors are kept.
 */
static enum supervisor_state supervisor_state(const struct recorded_supervisor *r)
{
	const struct here *h = here();
	struct proc_stat ps;
	if (r->pid <= 0 || !r->host || !h->host[0] || strcmp(r->host, h->host))
		return SUPERVISOR_KEPT;
	if (r->boot_id && *r->boot_id && strcmp(r->boot_id, h->boot_id))
		return h->boot_id[0] && h->btime > 0 && (double)h->btime > r->started_at ? SUPERVISOR_GONE_BOOT
		                                                                          : SUPERVISOR_KEPT;
	if (r->pidns && r->pidns != h->pidns)
		return SUPERVISOR_KEPT;
	if (read_proc_stat(NULL, (pid_t)r->pid, &ps) < 0)
		return errno == ENOENT || errno == ESRCH ? SUPERVISOR_GONE : SUPERVISOR_KEPT;
	return ps.state == 'Z' || ps.state == 'X' || u64_to_db(ps.starttime_ticks) != r->start ? SUPERVISOR_GONE
	                                                                                         : SUPERVISOR_KEPT;
}

static void bind_run_id(struct db_stmt *s, const void *arg)
{
	db_bind_int64(s, 1, *(const int64_t *)arg);
}

/* A stale run's last open segment: its job's leader and cgroup. */
static void read_job_left(struct store *st, struct stale_run *r)
{
	struct db_stmt *s;
	if (db_prepare(st->db, "SELECT coalesce(pid, 0), coalesce(pid_start, 0), cgroup, also FROM segments"
	               " WHERE run_id = ?1 AND ended_at IS NULL ORDER BY seq DESC LIMIT 1", false, &s) != DB_OK)
		return;
	db_bind_int64(s, 1, r->run_id);
	if (db_step(s) == DB_ROW) {
		r->job_pid = db_column_int64(s, 0);
		r->job_start = db_to_u64(db_column_int64(s, 1));
		const char *cg = db_column_text(s, 2);
		r->cgroup = cg && *cg ? xstrdup(cg) : NULL;
		const char *also = db_column_text(s, 3);
		r->also = also && *also ? xstrdup(also) : NULL;
	}
	db_finalize(s);
}

/* What is recorded of where a running run's supervisor runs, in the order
 * of recorded_supervisor; constants where this store's version lacks it. */
#define WHERE_COLUMNS "coalesce(supervisor_pidns, 0), boot_id"
#define WHERE_NONE "0, NULL"

struct stale_mark { int64_t id; bool left; };

static void bind_stale_mark(struct db_stmt *s, const void *arg)
{
	const struct stale_mark *m = arg;
	db_bind_int64(s, 1, m->id);
	if (m->left)
		db_bind_int64(s, 2, 1);
	else
		db_bind_null(s, 2);
}

enum { MAX_STALE = 64 };

/* The interrupted runs whose job's leftovers are still to be ended, of
 * this host, namespace and boot, into st->stale. */
static int read_pending_cleanups(struct store *st)
{
	const struct here *h = here();
	struct db_stmt *s;
	if (db_prepare(st->db, "SELECT id, " SUPERVISOR_COLUMNS ", " WHERE_COLUMNS " FROM runs WHERE"
	               " left_pending = 1 AND status = 'interrupted' AND hostname = ?1 ORDER BY id",
	               false, &s) != DB_OK)
		return store_read_error(st);
	db_bind_text(s, 1, h->host);
	while (st->nstale < MAX_STALE && db_step(s) == DB_ROW) {
		uint64_t pidns = db_to_u64(db_column_int64(s, 3));
		const char *boot = db_column_text(s, 4);
		if ((pidns && pidns != h->pidns) || (boot && *boot && strcmp(boot, h->boot_id)))
			continue;   /* not ours to end: its pids name other processes here */
		st->stale[st->nstale++] = (struct stale_run){ .run_id = db_column_int64(s, 0),
		                                              .supervisor_pid = db_column_int64(s, 1),
		                                              .supervisor_start = db_to_u64(db_column_int64(s, 2)) };
	}
	db_finalize(s);
	for (size_t i = 0; i < st->nstale; i++)
		read_job_left(st, &st->stale[i]);
	return 0;
}

int store_mark_stale_runs(struct store *st)
{
	struct db_stmt *s;
	struct stale_mark marks[MAX_STALE];
	size_t nmarks = 0;
	bool where = st->version >= PIDNS_VERSION;
	if (st->version < SUPERVISOR_VERSION)
		return 0;
	if (db_prepare(st->db, where ? "SELECT id, hostname, " SUPERVISOR_COLUMNS ", started_at, " WHERE_COLUMNS
	               " FROM runs WHERE status = 'running' AND supervisor_pid IS NOT NULL"
	               : "SELECT id, hostname, " SUPERVISOR_COLUMNS ", started_at, " WHERE_NONE
	               " FROM runs WHERE status = 'running' AND supervisor_pid IS NOT NULL", false, &s) != DB_OK)
		return -1;
	while (nmarks < MAX_STALE && db_step(s) == DB_ROW) {
		struct recorded_supervisor r = {
			.host = db_column_text(s, 1), .pid = db_column_int64(s, 2), .start = db_column_int64(s, 3),
			.started_at = db_column_double(s, 4), .pidns = db_to_u64(db_column_int64(s, 5)),
			.boot_id = db_column_text(s, 6),
		};
		enum supervisor_state state = supervisor_state(&r);
		if (state != SUPERVISOR_KEPT)
			marks[nmarks++] = (struct stale_mark){ db_column_int64(s, 0), state == SUPERVISOR_GONE };
	}
	db_finalize(s);
	for (size_t i = 0; i < nmarks; i++) {
		/* it ended no earlier than its last sample; what its job left
		 * is to be ended, until a writer has ended it all */
		int rc = where ? run_once(st, "UPDATE runs SET status = 'interrupted', ended_at = started_at + coalesce("
		                          SO_FAR_LAST_T ", 0), steps = " SO_FAR_STEPS ", peak_bytes = coalesce(" SO_FAR_PEAK
		                          ", peak_bytes), left_pending = ?2 WHERE id = ?1 AND status = 'running'",
		                          "a run whose supervisor is gone", bind_stale_mark, &marks[i])
		               : run_once(st, "UPDATE runs SET status = 'interrupted', ended_at = started_at + coalesce("
		                          SO_FAR_LAST_T ", 0), steps = " SO_FAR_STEPS ", peak_bytes = coalesce(" SO_FAR_PEAK
		                          ", peak_bytes) WHERE id = ?1 AND status = 'running'",
		                          "a run whose supervisor is gone", bind_run_id, &marks[i].id);
		if (rc < 0)
			return -1;
		run_once(st, "UPDATE segments SET cause = 'interrupted' WHERE run_id = ?1 AND ended_at IS NULL",
		         "a run whose supervisor is gone", bind_run_id, &marks[i].id);
	}
	if (batch_flush(st) < 0)
		return -1;
	st->stale = xcalloc(MAX_STALE, sizeof(*st->stale));
	if (where)
		return read_pending_cleanups(st);
	for (size_t i = 0; i < nmarks; i++)   /* an older store: what was marked now */
		if (marks[i].left) {
			struct stale_run *r = &st->stale[st->nstale++];
			r->run_id = marks[i].id;
			if (st->version >= JOB_LEFT_VERSION)
				read_job_left(st, r);
		}
	return 0;
}

size_t store_stale_runs(const struct store *st, const struct stale_run **runs)
{
	*runs = st->stale;
	return st->nstale;
}

int store_stale_run_cleaned(struct store *st, int64_t run_id)
{
	if (st->version < PIDNS_VERSION)
		return 0;
	return run_once(st, "UPDATE runs SET left_pending = NULL WHERE id = ?1",
	                "the end of an interrupted run's clean-up", bind_run_id, &run_id);
}

/* "SELECT RUN_COLUMNS FROM runs rest" for this store, into sql. */
static const char *run_select(struct store *st, const char *rest, char *sql, size_t sz)
{
	char cols[2048];
	bool placed = st->version >= PLACEMENT_VERSION;
	snprintf(cols, sizeof(cols), RUN_COLUMNS, st->version >= LOST_VERSION ? "lost" : "NULL",
	         st->version >= SUPERVISOR_VERSION ? SUPERVISOR_COLUMNS : "0, 0",
	         placed ? PLACEMENT_COLUMNS : PLACEMENT_NONE, st->version >= PIDNS_VERSION ? WHERE_COLUMNS : WHERE_NONE,
	         st->version >= JUDGE_VERSION_COLUMN ? "coalesce(judge_version, 0)" : "0");
	snprintf(sql, sz, "SELECT %s FROM runs %s %s", cols, placed ? PLACEMENT_JOIN : "", rest);
	return sql;
}

/* The placement's columns from index first (PLACEMENT_COLUMNS). */
static void read_placement(struct db_stmt *s, int first, struct run_row *r)
{
	struct placement *p = &r->place;
	r->has_place = !db_column_is_null(s, first);
	col_strcpy(s, first + 1, p->slurm_job_id, sizeof(p->slurm_job_id));
	col_strcpy(s, first + 2, p->slurm_array_job_id, sizeof(p->slurm_array_job_id));
	col_strcpy(s, first + 3, p->slurm_array_task_id, sizeof(p->slurm_array_task_id));
	col_strcpy(s, first + 4, p->slurm_step_id, sizeof(p->slurm_step_id));
	p->alloc_mem_bytes = db_to_u64(db_column_int64(s, first + 5));
	col_strcpy(s, first + 6, p->gpus, sizeof(p->gpus));
	col_strcpy(s, first + 7, p->launcher, sizeof(p->launcher));
	col_strcpy(s, first + 8, p->job_key, sizeof(p->job_key));
	p->rank = db_column_int(s, first + 9);
	p->local_rank = db_column_int(s, first + 10);
	p->world_size = db_column_int(s, first + 11);
	p->node_id = db_column_int(s, first + 12);
}

static void read_run_row(struct db_stmt *s, struct run_row *r)
{
	memset(r, 0, sizeof(*r));
	r->id = db_column_int64(s, 0);
	r->started_at = db_column_double(s, 1);
	r->ended_at = db_column_double(s, 2);
	r->command_json = col_strdup(s, 3);
	r->cwd = col_strdup(s, 4);
	r->hostname = col_strdup(s, 5);
	r->status = run_status_parse(db_column_text(s, 6));
	r->verdict = col_strdup(s, 7);
	r->step_regex = col_strdup(s, 8);
	r->cgroup_mode = col_strdup(s, 9);
	r->limit_source = col_strdup(s, 10);
	const char *m = db_column_text(s, 11);
	if (!m || measure_parse(m, &r->measure) < 0)
		r->measure = MEASURE_PSS;
	r->step_source = step_source_parse(db_column_text(s, 12));
	r->interval_ns = db_column_int64(s, 13);
	r->steps = db_column_int64(s, 14);
	r->bad_lines = db_column_int64(s, 15);
	r->long_lines = db_column_int64(s, 16);
	r->limit_bytes = db_to_u64(db_column_int64(s, 17));
	r->mem_total_bytes = db_to_u64(db_column_int64(s, 18));
	r->peak_bytes = db_to_u64(db_column_int64(s, 19));
	r->exit_code = db_column_int(s, 20);
	r->exit_signal = db_column_int(s, 21);
	r->growth_bytes_per_step = db_column_double(s, 22);
	r->lost = col_strdup(s, 23);
	read_placement(s, 26, r);
	r->judge_version = db_column_int(s, 44);
	/* read-only readers (ls, report) see a dead supervisor's run as it is */
	struct recorded_supervisor sup = {
		.host = r->hostname, .pid = db_column_int64(s, 24), .start = db_column_int64(s, 25),
		.started_at = r->started_at, .pidns = db_to_u64(db_column_int64(s, 42)), .boot_id = db_column_text(s, 43),
	};
	if (r->status == RUN_RUNNING && supervisor_state(&sup) != SUPERVISOR_KEPT) {
		r->status = RUN_INTERRUPTED;
		if (r->ended_at <= 0)   /* no earlier than its last sample */
			r->ended_at = r->started_at + db_column_double(s, 39);
		r->steps = db_column_int64(s, 40);
		r->peak_bytes = db_to_u64(db_column_int64(s, 41));
	}
}

void run_row_release(struct run_row *r)
{
	if (!r)
		return;
	free(r->command_json);
	free(r->cwd);
	free(r->hostname);
	free(r->verdict);
	free(r->step_regex);
	free(r->cgroup_mode);
	free(r->limit_source);
	free(r->lost);
	memset(r, 0, sizeof(*r));
}

int store_get_run(struct store *st, int64_t id, struct run_row *out)
{
	struct db_stmt *s;
	char buf[4096];
	const char *sql = run_select(st, id > 0 ? "WHERE id = ?1" : "ORDER BY id DESC LIMIT 1", buf, sizeof(buf));
	memset(out, 0, sizeof(*out));
	if (db_prepare(st->db, sql, false, &s) != DB_OK)
		return store_read_error(st);
	if (id > 0)
		db_bind_int64(s, 1, id);
	int rc = db_step(s);
	int ret = 0;
	if (rc == DB_ROW)
		read_run_row(s, out);
	else if (rc == DB_DONE)
		ret = 1;
	else
		ret = store_read_error(st);
	db_finalize(s);
	return ret;
}

static void read_run(struct db_stmt *s, void *row)
{
	read_run_row(s, row);
}

static void drop_runs(void *rows, size_t n)
{
	run_rows_free(rows, n);
}

int store_get_runs(struct store *st, const int64_t *ids, size_t nids, struct run_row **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < nids;) {
		/* the ids as literals, GET_RUNS_CHUNK a statement: no parameter limit to meet */
		enum { GET_RUNS_CHUNK = 256 };
		struct strbuf where = STRBUF_INIT;
		strbuf_addstr(&where, "WHERE id IN (");
		for (size_t k = 0; k < GET_RUNS_CHUNK && i < nids; k++, i++)
			strbuf_addf(&where, "%s%lld", k ? ", " : "", (long long)ids[i]);
		strbuf_addstr(&where, ")");
		size_t sqlsz = where.len + 4096;
		char *sql = xmalloc(sqlsz);
		struct db_stmt *s;
		enum db_rc prc = db_prepare(st->db, run_select(st, strbuf_str(&where), sql, sqlsz), false, &s);
		free(sql);
		strbuf_release(&where);
		if (prc != DB_OK) {
			int rc = store_read_error(st);
			run_rows_free(*out, *n);
			*out = NULL;
			*n = 0;
			return rc;
		}
		int rc;
		size_t m;
		struct run_row *rows = store_load_rows(st, s, sizeof(*rows), read_run, drop_runs, &m, &rc);
		if (rc < 0) {
			run_rows_free(*out, *n);
			*out = NULL;
			*n = 0;
			return -1;
		}
		*out = xrealloc(*out, (*n + m ? *n + m : 1) * sizeof(**out));
		if (m)
			memcpy(*out + *n, rows, m * sizeof(*rows));
		*n += m;
		free(rows);
	}
	return 0;
}

int store_list_runs(struct store *st, struct run_row **out, size_t *n)
{
	struct db_stmt *s;
	*out = NULL;
	*n = 0;
	char sql[4096];
	if (db_prepare(st->db, run_select(st, "ORDER BY id DESC", sql, sizeof(sql)), false, &s) != DB_OK)
		return store_read_error(st);
	int rc;
	*out = store_load_rows(st, s, sizeof(**out), read_run, drop_runs, n, &rc);
	return rc;
}

int store_list_job_runs(struct store *st, const char *job_key, struct run_row **out, size_t *n)
{
	struct db_stmt *s;
	*out = NULL;
	*n = 0;
	if (st->version < PLACEMENT_VERSION || !job_key || !*job_key)
		return 0;
	char sql[4096];
	if (db_prepare(st->db, run_select(st, "WHERE job_key = ?1 ORDER BY job_rank, id", sql, sizeof(sql)), false,
	               &s) != DB_OK)
		return store_read_error(st);
	db_bind_text(s, 1, job_key);
	int rc;
	*out = store_load_rows(st, s, sizeof(**out), read_run, drop_runs, n, &rc);
	return rc;
}

void run_rows_free(struct run_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		run_row_release(&rows[i]);
	free(rows);
}

/* Read the memory columns from index first (see bind_mem). */
static void read_mem(struct db_stmt *s, int first, struct mem_sample *m)
{
	m->nprocs = db_column_int(s, first);
	m->rss = db_to_u64(db_column_int64(s, first + 1));
	m->pss = db_to_u64(db_column_int64(s, first + 2));
	m->uss = db_to_u64(db_column_int64(s, first + 3));
	m->swap = db_to_u64(db_column_int64(s, first + 4));
	m->has_cgroup = !db_column_is_null(s, first + 5);
	m->cgroup = m->has_cgroup ? db_to_u64(db_column_int64(s, first + 5)) : 0;
	m->has_gpu = !db_column_is_null(s, first + 6);
	m->gpu = m->has_gpu ? db_to_u64(db_column_int64(s, first + 6)) : 0;
	m->pss_exact = db_column_int(s, first + 7) != 0;
}

void store_read_sample(struct db_stmt *s, void *row)
{
	struct mem_sample *m = row;
	m->t = db_column_double(s, 0);
	read_mem(s, 1, m);
}

int store_load_samples(struct store *st, int64_t run_id, struct mem_sample **out, size_t *n)
{
	int rc;
	*out = store_select_rows(st, "SELECT t, nprocs, rss, pss, uss, swap, cgroup, gpu, pss_exact FROM samples"
	                         " WHERE run_id = ?1 ORDER BY t, rowid",
	                         run_id, sizeof(**out), store_read_sample, NULL, n, &rc);
	return rc;
}

static void read_step(struct db_stmt *s, void *row)
{
	struct step_rec *r = row;
	r->step = db_column_int64(s, 0);
	r->epoch = db_column_int64(s, 1);
	r->mem.t = db_column_double(s, 2);
	read_mem(s, 3, &r->mem);
}

int store_load_steps(struct store *st, int64_t run_id, struct step_rec **out, size_t *n)
{
	int rc;
	*out = store_select_rows(st, "SELECT step, coalesce(epoch, -1), t, nprocs, rss, pss, uss, swap, cgroup, gpu,"
	                         " pss_exact FROM steps WHERE run_id = ?1 ORDER BY t, rowid",
	                         run_id, sizeof(**out), read_step, NULL, n, &rc);
	return rc;
}

static void read_metric(struct db_stmt *s, void *row)
{
	struct metric_row *m = row;
	m->step = db_column_int64(s, 0);
	m->t = db_column_double(s, 1);
	col_strcpy(s, 2, m->name, sizeof(m->name));
	m->value = db_column_is_null(s, 3) ? NAN : db_column_double(s, 3);
}

int store_load_metrics(struct store *st, int64_t run_id, struct metric_row **out, size_t *n)
{
	int rc;
	*out = store_select_rows(st, "SELECT step, t, name, value FROM metrics WHERE run_id = ?1 ORDER BY t, rowid",
	                         run_id, sizeof(**out), read_metric, NULL, n, &rc);
	return rc;
}

static void read_event(struct db_stmt *s, void *row)
{
	struct event_row *e = row;
	e->t = db_column_double(s, 0);
	col_strcpy(s, 1, e->kind, sizeof(e->kind));
	e->detail = col_strdup(s, 2);
}

static void drop_events(void *rows, size_t n)
{
	event_rows_free(rows, n);
}

int store_load_events(struct store *st, int64_t run_id, struct event_row **out, size_t *n)
{
	int rc;
	*out = store_select_rows(st, "SELECT t, kind, detail FROM events WHERE run_id = ?1 ORDER BY t, rowid",
	                         run_id, sizeof(**out), read_event, drop_events, n, &rc);
	return rc;
}

void event_rows_free(struct event_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(rows[i].detail);
	free(rows);
}

static void read_census(struct db_stmt *s, void *row)
{
	struct census_row *r = row;
	r->t = db_column_double(s, 0);
	r->step = db_column_is_null(s, 1) ? -1 : db_column_int64(s, 1);
	r->seq = db_column_int64(s, 2);
	col_strcpy(s, 3, r->type, sizeof(r->type));
	r->count = db_column_int64(s, 4);
	r->bytes = db_column_is_null(s, 5) ? -1 : db_column_int64(s, 5);
	r->holder = col_strdup_or_null(s, 6);
	r->cost_us = db_column_is_null(s, 7) ? -1 : db_column_int64(s, 7);
}

static void drop_census(void *rows, size_t n)
{
	census_rows_free(rows, n);
}

int store_load_census(struct store *st, int64_t run_id, struct census_row **out, size_t *n)
{
	int rc;
	*out = store_select_rows(st, "SELECT t, step, seq, type, count, bytes, holder, cost_us FROM census"
	                         " WHERE run_id = ?1 ORDER BY t, rowid",
	                         run_id, sizeof(**out), read_census, drop_census, n, &rc);
	return rc;
}

void census_rows_free(struct census_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(rows[i].holder);
	free(rows);
}

static void read_result(struct db_stmt *s, void *row)
{
	struct result_row *r = row;
	col_strcpy(s, 0, r->name, sizeof(r->name));
	r->value = db_column_is_null(s, 1) ? NAN : db_column_double(s, 1);
}

int store_load_results(struct store *st, int64_t run_id, struct result_row **out, size_t *n)
{
	int rc;
	*out = store_select_rows(st, "SELECT name, value FROM results WHERE run_id = ?1 ORDER BY name",
	                         run_id, sizeof(**out), read_result, NULL, n, &rc);
	return rc;
}

void store_read_proc(struct db_stmt *s, void *row)
{
	struct proc_row *p = row;
	p->pid = db_column_int(s, 0);
	p->ppid = db_column_int(s, 1);
	col_strcpy(s, 2, p->name, sizeof(p->name));
	p->rss = db_to_u64(db_column_int64(s, 3));
	p->pss = db_to_u64(db_column_int64(s, 4));
	p->uss = db_to_u64(db_column_int64(s, 5));
	p->swap = db_to_u64(db_column_int64(s, 6));
	p->gpu = db_to_u64(db_column_int64(s, 7));
	p->t = db_column_double(s, 8);
}

int store_top_procs(struct store *st, int64_t run_id, struct proc_row **out, size_t *n, size_t max)
{
	struct db_stmt *s;
	*out = NULL;
	*n = 0;
	/* The row of each process holding its largest pss (the earliest of
	 * equals); a window, which SQLite and PostgreSQL both know. */
	if (store_prepare_read(st, "SELECT pid, ppid, name, rss, pss AS top, uss, swap, gpu, t FROM"
	                       " (SELECT *, row_number() OVER (PARTITION BY pid, name ORDER BY pss DESC, t) AS n"
	                       " FROM proc_samples WHERE run_id = ?1) AS p"
	                       " WHERE n = 1 ORDER BY top DESC, pid LIMIT ?2", run_id, &s) < 0)
		return -1;
	db_bind_int64(s, 2, max > (size_t)INT64_MAX ? INT64_MAX : (int64_t)max);
	int rc;
	*out = store_load_rows(st, s, sizeof(**out), store_read_proc, NULL, n, &rc);
	return rc;
}

static void read_kind(struct db_stmt *s, void *row)
{
	struct kind_row *k = row;
	k->t = db_column_double(s, 0);
	k->pid = db_column_int(s, 1);
	k->ppid = db_column_int(s, 2);
	const char *name = db_column_text(s, 3);
	snprintf(k->name, sizeof(k->name), "%s", name ? name : "");
	k->anon = db_to_u64(db_column_int64(s, 4));
	k->cow = db_to_u64(db_column_int64(s, 5));
	k->cow_base = db_to_u64(db_column_int64(s, 6));
	k->file = db_to_u64(db_column_int64(s, 7));
	k->shmem = db_to_u64(db_column_int64(s, 8));
	k->gpu = db_to_u64(db_column_int64(s, 9));
}

int store_load_kind_samples(struct store *st, int64_t run_id, struct kind_row **out, size_t *n)
{
	int rc;
	*out = NULL;
	*n = 0;
	if (st->version < KINDS_VERSION)
		return 0;               /* an older store, read as it is: no kinds */
	*out = store_select_rows(st, "SELECT t, pid, ppid, name, anon, cow, cow_base, file, shmem, gpu"
	                         " FROM kind_samples WHERE run_id = ?1 ORDER BY t, pid",
	                         run_id, sizeof(**out), read_kind, NULL, n, &rc);
	return rc;
}

static void read_segment(struct db_stmt *s, void *row)
{
	struct segment_row *g = row;
	g->seq = db_column_int64(s, 0);
	g->pid = db_column_int(s, 1);
	g->started_at = db_column_double(s, 2);
	g->ended_at = db_column_double(s, 3);
	g->exit_code = db_column_int(s, 4);
	g->exit_signal = db_column_int(s, 5);
	g->cause = cause_read(db_column_text(s, 6));
	g->evidence = col_strdup(s, 7);
	g->has_step = !db_column_is_null(s, 8);
	g->end_step = db_column_int64(s, 8);
	g->memory_bytes = db_to_u64(db_column_int64(s, 9));
	g->restart = col_strdup(s, 10);
}

static void drop_segments(void *rows, size_t n)
{
	segment_rows_free(rows, n);
}

int store_load_segments(struct store *st, int64_t run_id, struct segment_row **out, size_t *n)
{
	int rc;
	*out = store_select_rows(st, "SELECT seq, coalesce(pid, 0), started_at, coalesce(ended_at, 0),"
	                         " coalesce(exit_code, -1), coalesce(exit_signal, 0), cause, evidence,"
	                         " end_step, coalesce(memory_bytes, 0), restart"
	                         " FROM segments WHERE run_id = ?1 ORDER BY seq",
	                         run_id, sizeof(**out), read_segment, drop_segments, n, &rc);
	return rc;
}

void segment_rows_free(struct segment_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(rows[i].evidence);
		free(rows[i].restart);
	}
	free(rows);
}

