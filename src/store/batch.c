/*
 * batch.c — the store's write path for frequent rows: samples, per-process
 * samples, steps, metrics, events, results and census rows, and
 * store_flush().
 *
 * The writer (the supervisor) holds its samples and per-process samples
 * (one sample per tick, up to 1 kHz) in plain C arrays until the next
 * flush: a sample costs a struct copy, no database call and no lock. (A
 * statement of its own at every 10 ms tick finds SQLite's pages and the
 * CPU's caches cold: it cost 15-30 us of CPU a sample on the development
 * VM, as much as the supervisor's whole wake-up.) The other frequent rows
 * are staged in TEMP tables of its own connection, one step each on a
 * cached prepared statement, no lock on the store. store_flush() moves the
 * arrays and what is staged into the store in one short transaction (BEGIN
 * IMMEDIATE ... COMMIT, a few hundred microseconds; samples go PUT_ROWS to
 * a statement), so the disk sees one commit a second and two runs writing
 * to the same store never wait for each other longer than a flush. Each
 * bind is one indirect call into the backend (db.h), nothing more.
 *
 * Memory stays flat however many rows are written: the arrays hold at most
 * SAMPLE_BUF_ROWS and PROC_BUF_ROWS rows (beyond that, and when a flush
 * must wait for another writer, their rows move to the staging tables,
 * after the older rows there), the staging tables are emptied at every
 * flush, and SQLite's page caches are bounded (2 MB each by default) and
 * spill to files.
 */
#include "store/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* Samples held in memory between flushes (80 bytes each): two seconds at
 * 1 kHz. Beyond that they move to temp.stage_samples. */
#define SAMPLE_BUF_ROWS 2048
#define PUT_ROWS 50              /* samples per INSERT in a flush (500 variables, under 999) */
#define PROC_BUF_ROWS 1024       /* per-process samples (96 bytes each) */

/* The hot inserts, prepared once and reused: those that stage rows (see
 * below), then those a flush puts the held rows into the store with. */
enum stmt_id {
	STMT_SAMPLE,
	STMT_PROC_SAMPLE,
	STMT_STEP,
	STMT_METRIC,
	STMT_EVENT,
	STMT_RESULT,
	STMT_CENSUS,
	STMT_KIND_SAMPLE,
	STMT_PUT_SAMPLE,    /* INSERT INTO main.samples, one row; */
	STMT_PUT_SAMPLES,   /* PUT_ROWS rows */
	STMT_PUT_PROC,      /* INSERT INTO main.proc_samples */
	STMT_COUNT
};

#define SAMPLE_COLUMNS "(run_id, t, nprocs, rss, pss, uss, swap, cgroup, gpu, pss_exact)" \
                       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
#define PROC_SAMPLE_COLUMNS "(run_id, t, pid, ppid, name, rss, pss, uss, swap, gpu)" \
                            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"

static const char *const stmt_sql[STMT_COUNT] = {
	[STMT_SAMPLE] = "INSERT INTO temp.stage_samples " SAMPLE_COLUMNS,
	[STMT_PROC_SAMPLE] = "INSERT INTO temp.stage_proc_samples " PROC_SAMPLE_COLUMNS,
	[STMT_STEP] = "INSERT INTO temp.stage_steps (run_id, step, epoch, t, nprocs, rss, pss, uss, swap, cgroup, gpu, pss_exact)"
	              " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
	[STMT_METRIC] = "INSERT INTO temp.stage_metrics (run_id, step, t, name, value) VALUES (?1, ?2, ?3, ?4, ?5)",
	[STMT_EVENT] = "INSERT INTO temp.stage_events (run_id, t, kind, detail) VALUES (?1, ?2, ?3, ?4)",
	[STMT_RESULT] = "INSERT INTO temp.stage_results (run_id, name, value) VALUES (?1, ?2, ?3)",
	[STMT_CENSUS] = "INSERT INTO temp.stage_census (run_id, t, step, seq, type, count, bytes, holder, cost_us)"
	                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	[STMT_KIND_SAMPLE] = "INSERT INTO temp.stage_kind_samples (run_id, t, pid, ppid, name, anon, cow, cow_base, file, shmem, gpu)"
	                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
	[STMT_PUT_SAMPLE] = "INSERT INTO main.samples " SAMPLE_COLUMNS,
	/* STMT_PUT_SAMPLES: made by store_batch_open() */
	[STMT_PUT_PROC] = "INSERT INTO main.proc_samples " PROC_SAMPLE_COLUMNS,
};

/*
 * The staged tables: temp.stage_NAME mirrors main.NAME. The staging insert
 * of each (above) names the stage table; flushing copies it over in rowid
 * order. results is an upsert: the last value of a name wins.
 */
static const struct { enum stmt_id stmt; const char *table; const char *verb; } staged[] = {
	{ STMT_SAMPLE, "samples", "INSERT" },
	{ STMT_PROC_SAMPLE, "proc_samples", "INSERT" },
	{ STMT_STEP, "steps", "INSERT" },
	{ STMT_METRIC, "metrics", "INSERT" },
	{ STMT_EVENT, "events", "INSERT" },
	{ STMT_RESULT, "results", "INSERT OR REPLACE" },
	{ STMT_CENSUS, "census", "INSERT" },
	{ STMT_KIND_SAMPLE, "kind_samples", "INSERT" },
};
#define NSTAGED (sizeof(staged) / sizeof(staged[0]))

/* A sample waiting in memory for the next flush. */
struct held_sample {
	int64_t run_id;
	struct mem_sample m;
};

/* A per-process sample, the same way (a longer name is staged instead). */
struct held_proc {
	int64_t run_id;
	double t;
	int pid, ppid;
	char name[32];
	uint64_t rss, pss, uss, swap, gpu;
};

struct batch {
	unsigned pending;     /* bit i: temp.stage_<staged[i].table> holds rows for store_flush() */
	struct db_stmt *stmt[STMT_COUNT];
	struct db_stmt *copy[NSTAGED], *clear[NSTAGED];
	struct held_sample *held;   /* samples since the last flush, oldest first; */
	size_t nheld;               /* SAMPLE_BUF_ROWS of room, allocated at the first */
	struct held_proc *held_procs;  /* likewise for per-process samples, */
	size_t nheld_procs;            /* PROC_BUF_ROWS of room */
};

static struct db_stmt *cached_stmt(struct store *st, enum stmt_id id)
{
	struct batch *b = st->batch;
	if (!b->stmt[id] && db_prepare(st->db, stmt_sql[id], true, &b->stmt[id]) != DB_OK)
		error("store '%s': %s", st->path, db_errmsg(st->db));
	return b->stmt[id];
}

/* Step a bound insert to completion and reset it. */
static int step_insert(struct store *st, struct db_stmt *s, const char *what)
{
	if (db_step_done(s) != DB_OK)
		return store_write_error(st, what);
	struct batch *b = st->batch;
	for (size_t i = 0; i < NSTAGED; i++)
		if (b->stmt[staged[i].stmt] == s)
			b->pending |= 1u << i;
	return 0;
}

/* ---- the staging tables ------------------------------------------------ */

/* The staging table of staged[i] and the statements that move its rows to
 * the store. 0, or -1. */
static int make_stage_table(struct store *st, size_t i)
{
	struct batch *b = st->batch;
	char sql[256];
	const char *t = staged[i].table;
	if (b->copy[i])
		return 0;
	snprintf(sql, sizeof(sql), "CREATE TEMP TABLE stage_%s AS SELECT * FROM main.%s WHERE 0", t, t);
	if (db_exec(st->db, sql) != DB_OK)
		return -1;
	snprintf(sql, sizeof(sql), "%s INTO main.%s SELECT * FROM temp.stage_%s ORDER BY rowid",
	         staged[i].verb, t, t);
	if (db_prepare(st->db, sql, true, &b->copy[i]) != DB_OK)
		return -1;
	snprintf(sql, sizeof(sql), "DELETE FROM temp.stage_%s", t);
	if (db_prepare(st->db, sql, true, &b->clear[i]) != DB_OK) {
		db_finalize(b->copy[i]);
		b->copy[i] = NULL;
		return -1;
	}
	return 0;
}

/* The stage of a table whose rows are held in memory (samples and
 * per-process samples), made when they first need it; or NULL after the
 * message. */
static struct db_stmt *held_stage_stmt(struct store *st, enum stmt_id id, const char *what)
{
	for (size_t i = 0; i < NSTAGED; i++)
		if (staged[i].stmt == id && make_stage_table(st, i) < 0) {
			store_write_error(st, what);
			return NULL;
		}
	return cached_stmt(st, id);
}

int store_batch_open(struct store *st, char *why, size_t whysz)
{
	struct batch *b = st->batch = xcalloc(1, sizeof(*st->batch));
	/* the held tables' stages only when needed (creating a table costs) */
	for (size_t i = 0; i < NSTAGED; i++)
		if (staged[i].stmt != STMT_SAMPLE && staged[i].stmt != STMT_PROC_SAMPLE &&
		    make_stage_table(st, i) < 0)
			goto fail;
	if (db_prepare(st->db, stmt_sql[STMT_PUT_SAMPLE], true, &b->stmt[STMT_PUT_SAMPLE]) != DB_OK)
		goto fail;
	/* the same for PUT_ROWS rows at once: one statement step instead of
	 * PUT_ROWS (a flush runs on cold caches, each step costs) */
	char many[PUT_ROWS * 48 + 128];
	size_t len = (size_t)snprintf(many, sizeof(many), "INSERT INTO main.samples %.*s",
	                              (int)(strchr(SAMPLE_COLUMNS, 'V') - SAMPLE_COLUMNS), SAMPLE_COLUMNS);
	for (int r = 0; r < PUT_ROWS; r++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "%s(?,?,?,?,?,?,?,?,?,?)",
		                        r ? "," : "VALUES ");
	if (db_prepare(st->db, many, true, &b->stmt[STMT_PUT_SAMPLES]) != DB_OK ||
	    db_prepare(st->db, stmt_sql[STMT_PUT_PROC], true, &b->stmt[STMT_PUT_PROC]) != DB_OK)
		goto fail;
	return 0;
fail:
	snprintf(why, whysz, "cannot make the staging tables: %s", db_errmsg(st->db));
	return -1;
}

void store_batch_close(struct store *st)
{
	struct batch *b = st->batch;
	if (!b)
		return;
	for (int i = 0; i < STMT_COUNT; i++)
		db_finalize(b->stmt[i]);
	for (size_t i = 0; i < NSTAGED; i++) {
		db_finalize(b->copy[i]);
		db_finalize(b->clear[i]);
	}
	free(b->held);
	free(b->held_procs);
	free(b);
	st->batch = NULL;
}

/* ---- binding ----------------------------------------------------------- */

/* Bind the memory columns of a sample from index first: nprocs, rss, pss,
 * uss, swap, cgroup, gpu, pss_exact. */
static void bind_mem(struct db_stmt *s, int first, const struct mem_sample *m)
{
	db_bind_int64(s, first, m->nprocs);
	db_bind_int64(s, first + 1, u64_to_db(m->rss));
	db_bind_int64(s, first + 2, u64_to_db(m->pss));
	db_bind_int64(s, first + 3, u64_to_db(m->uss));
	db_bind_int64(s, first + 4, u64_to_db(m->swap));
	if (m->has_cgroup)
		db_bind_int64(s, first + 5, u64_to_db(m->cgroup));
	else
		db_bind_null(s, first + 5);
	if (m->has_gpu)
		db_bind_int64(s, first + 6, u64_to_db(m->gpu));
	else
		db_bind_null(s, first + 6);
	db_bind_int64(s, first + 7, m->pss_exact ? 1 : 0);
}

/* Bind a sample's 10 columns from index first. */
static void bind_sample(struct db_stmt *s, int first, const struct held_sample *h)
{
	db_bind_int64(s, first, h->run_id);
	db_bind_double(s, first + 1, h->m.t);
	bind_mem(s, first + 2, &h->m);
}

static void bind_proc(struct db_stmt *s, const struct held_proc *h, const char *name)
{
	db_bind_int64(s, 1, h->run_id);
	db_bind_double(s, 2, h->t);
	db_bind_int64(s, 3, h->pid);
	db_bind_int64(s, 4, h->ppid);
	db_bind_text(s, 5, name);
	db_bind_int64(s, 6, u64_to_db(h->rss));
	db_bind_int64(s, 7, u64_to_db(h->pss));
	db_bind_int64(s, 8, u64_to_db(h->uss));
	db_bind_int64(s, 9, u64_to_db(h->swap));
	db_bind_int64(s, 10, u64_to_db(h->gpu));
}

/* ---- held samples ------------------------------------------------------ */

/* The binders of a held row (samples, per-process samples), from ?1. */
static void bind_held_sample(struct db_stmt *s, const void *row)
{
	bind_sample(s, 1, row);
}

static void bind_held_proc(struct db_stmt *s, const void *row)
{
	const struct held_proc *h = row;
	bind_proc(s, h, h->name);
}

/* n held rows of size bytes into the store with s, one step each, inside
 * the flush's transaction. 0, or the failing step's code. */
static enum db_rc put_held(struct db_stmt *s, const void *rows, size_t size, size_t n,
                           void (*bind)(struct db_stmt *, const void *))
{
	for (size_t i = 0; i < n; i++) {
		bind(s, (const char *)rows + i * size);
		enum db_rc rc = db_step_done(s);
		if (rc != DB_OK)
			return rc;
	}
	return DB_OK;
}

/* The held samples into main.samples, PUT_ROWS to a step, the rest one by
 * one. 0, or the failing step's code (the array is kept). */
static enum db_rc put_held_samples(struct batch *b)
{
	size_t i = 0;
	for (; i + PUT_ROWS <= b->nheld; i += PUT_ROWS) {
		for (int r = 0; r < PUT_ROWS; r++)
			bind_sample(b->stmt[STMT_PUT_SAMPLES], 1 + 10 * r, &b->held[i + (size_t)r]);
		enum db_rc rc = db_step_done(b->stmt[STMT_PUT_SAMPLES]);
		if (rc != DB_OK)
			return rc;
	}
	return put_held(b->stmt[STMT_PUT_SAMPLE], b->held + i, sizeof(*b->held), b->nheld - i, bind_held_sample);
}

/* The held per-process samples into main.proc_samples, the same way. */
static enum db_rc put_held_procs(struct batch *b)
{
	return put_held(b->stmt[STMT_PUT_PROC], b->held_procs, sizeof(*b->held_procs), b->nheld_procs,
	                bind_held_proc);
}

/* *n held rows of size bytes into their stage (the staging insert id), in
 * one transaction of the temp database alone (no lock on the store), after
 * the rows staged before them; *n is 0 after, whatever happens. 0, or -1
 * after the message, which says what. */
static int stage_held(struct store *st, enum stmt_id id, const char *what, const void *rows, size_t size,
                      size_t *n, void (*bind)(struct db_stmt *, const void *))
{
	struct db_stmt *s = held_stage_stmt(st, id, what);
	int r = s && db_exec(st->db, "SAVEPOINT stage_held") == DB_OK ? 0 : store_write_error(st, what);
	for (size_t i = 0; r == 0 && i < *n; i++) {
		bind(s, (const char *)rows + i * size);
		r = step_insert(st, s, what);
	}
	if (s)
		db_exec(st->db, "RELEASE stage_held");   /* what went in stays */
	*n = 0;
	return r;
}

static int stage_held_samples(struct store *st)
{
	struct batch *b = st->batch;
	return stage_held(st, STMT_SAMPLE, "a sample", b->held, sizeof(*b->held), &b->nheld, bind_held_sample);
}

static int stage_held_procs(struct store *st)
{
	struct batch *b = st->batch;
	return stage_held(st, STMT_PROC_SAMPLE, "a process sample", b->held_procs, sizeof(*b->held_procs),
	                  &b->nheld_procs, bind_held_proc);
}

/* ---- flush ------------------------------------------------------------- */

/* One try at moving the batch into the store: true when committed; else
 * the transaction may still be open, with the failure's code. */
static bool flush_once(struct store *st)
{
	struct batch *b = st->batch;
	bool copied = db_begin(st->db, true) == DB_OK;
	for (size_t i = 0; copied && i < NSTAGED; i++)
		if (b->pending >> i & 1)
			copied = db_step_done(b->copy[i]) == DB_OK && db_step_done(b->clear[i]) == DB_OK;
	if (copied)
		copied = put_held_samples(b) == DB_OK && put_held_procs(b) == DB_OK;
	return copied && db_commit(st->db) == DB_OK;
}

int batch_flush(struct store *st)
{
	if (!st || st->readonly)
		return 0;
	struct batch *b = st->batch;
	bool ok = !st->batch_failed;
	if (b->pending || b->nheld || b->nheld_procs) {
		/* Each stage that holds rows is copied and emptied inside the
		 * transaction (a rollback restores it), then the held samples
		 * go in after the staged ones, which are older. The flush runs
		 * on cold caches once a second: every statement counts. */
		bool copied = flush_once(st);
		if (!copied && db_errcode(st->db) == DB_FULL) {
			/* a full disk: once more, in the room a checkpoint leaves */
			if (db_in_transaction(st->db))
				db_rollback(st->db);
			copied = db_make_room(st->db) && flush_once(st);
		}
		if (copied) {
			st->batch_failed = false;
			b->pending = 0;
			b->nheld = b->nheld_procs = 0;
		} else {
			bool busy = db_errcode(st->db) == DB_BUSY;
			if (busy) {
				store_write_delayed(st, "a batch of rows");
			} else {
				if (!st->lost && b->nheld)
					st->lost_t = b->held[0].m.t;
				store_write_error(st, "a batch of rows");
			}
			if (db_in_transaction(st->db))
				db_rollback(st->db);
			ok = false;
			/* Another writer held the store longer than busy_timeout:
			 * keep the batch for the next flush (the held samples go
			 * to the stage). Anything else (a full disk): drop it, the
			 * stage must not grow. */
			if (busy) {
				stage_held_samples(st);
				stage_held_procs(st);
			} else {
				for (size_t i = 0; i < NSTAGED; i++)
					if (b->pending >> i & 1)
						db_step_done(b->clear[i]);
				b->pending = 0;
				b->nheld = b->nheld_procs = 0;
			}
		}
	}
	store_check_dropped(st);
	if (ok)
		st->write_failed = false;
	st->batch_failed = false;
	return ok ? 0 : -1;
}

/* ---- adding rows ------------------------------------------------------- */

/* The staging insert id with run_id bound to ?1, for a row of run_id: NULL
 * after the message (a read-only store, a statement that cannot be made). */
static struct db_stmt *stage_row(struct store *st, enum stmt_id id, int64_t run_id)
{
	struct db_stmt *s;
	if (store_check_writable(st) < 0 || !(s = cached_stmt(st, id)))
		return NULL;
	db_bind_int64(s, 1, run_id);
	return s;
}

int store_add_sample(struct store *st, int64_t run_id, const struct mem_sample *m)
{
	if (store_check_writable(st) < 0)
		return -1;
	struct batch *b = st->batch;
	int r = 0;
	if (!b->held)
		b->held = xmalloc(SAMPLE_BUF_ROWS * sizeof(*b->held));
	else if (b->nheld == SAMPLE_BUF_ROWS)
		r = stage_held_samples(st);  /* no flush for a long while */
	b->held[b->nheld].run_id = run_id;
	b->held[b->nheld].m = *m;
	b->nheld++;
	return r;
}

int store_add_proc_sample(struct store *st, int64_t run_id, double t, int pid, int ppid,
                          const char *name, uint64_t rss, uint64_t pss, uint64_t uss,
                          uint64_t swap, uint64_t gpu)
{
	if (store_check_writable(st) < 0)
		return -1;
	struct batch *b = st->batch;
	struct held_proc h = { run_id, t, pid, ppid, "", rss, pss, uss, swap, gpu };
	size_t len = name ? strlen(name) : 0;
	int r = 0;
	if (len >= sizeof(h.name) || b->nheld_procs == PROC_BUF_ROWS)
		r = stage_held_procs(st);   /* what is held goes first */
	if (len >= sizeof(h.name)) {
		struct db_stmt *s = held_stage_stmt(st, STMT_PROC_SAMPLE, "a process sample");
		if (!s)
			return -1;
		bind_proc(s, &h, name);
		int r2 = step_insert(st, s, "a process sample");
		return r < 0 ? r : r2;
	}
	memcpy(h.name, name ? name : "", len + 1);
	if (!b->held_procs)
		b->held_procs = xmalloc(PROC_BUF_ROWS * sizeof(*b->held_procs));
	b->held_procs[b->nheld_procs++] = h;
	return r;
}

int store_add_kind_sample(struct store *st, int64_t run_id, const struct kind_row *k)
{
	struct db_stmt *s = stage_row(st, STMT_KIND_SAMPLE, run_id);
	if (!s)
		return -1;
	db_bind_double(s, 2, k->t);
	db_bind_int64(s, 3, k->pid);
	db_bind_int64(s, 4, k->ppid);
	db_bind_text(s, 5, k->name);
	db_bind_int64(s, 6, u64_to_db(k->anon));
	db_bind_int64(s, 7, u64_to_db(k->cow));
	db_bind_int64(s, 8, u64_to_db(k->cow_base));
	db_bind_int64(s, 9, u64_to_db(k->file));
	db_bind_int64(s, 10, u64_to_db(k->shmem));
	db_bind_int64(s, 11, u64_to_db(k->gpu));
	return step_insert(st, s, "a kind sample");
}

int store_add_step(struct store *st, int64_t run_id, const struct step_rec *r)
{
	struct db_stmt *s = stage_row(st, STMT_STEP, run_id);
	if (!s)
		return -1;
	db_bind_int64(s, 2, r->step);
	if (r->epoch >= 0)
		db_bind_int64(s, 3, r->epoch);
	else
		db_bind_null(s, 3);
	db_bind_double(s, 4, r->mem.t);
	bind_mem(s, 5, &r->mem);
	return step_insert(st, s, "a step");
}

int store_add_metric(struct store *st, int64_t run_id, int64_t step, double t,
                     const char *name, double value)
{
	struct db_stmt *s = stage_row(st, STMT_METRIC, run_id);
	if (!s)
		return -1;
	db_bind_int64(s, 2, step);
	db_bind_double(s, 3, t);
	db_bind_text(s, 4, name ? name : "");
	db_bind_double(s, 5, value);   /* NaN is stored as NULL */
	return step_insert(st, s, "a metric");
}

int store_add_event(struct store *st, int64_t run_id, double t, const char *kind,
                    const char *detail)
{
	struct db_stmt *s = stage_row(st, STMT_EVENT, run_id);
	if (!s)
		return -1;
	db_bind_double(s, 2, t);
	db_bind_text(s, 3, kind ? kind : "");
	db_bind_text(s, 4, detail);
	return step_insert(st, s, "an event");
}

int store_add_result(struct store *st, int64_t run_id, const char *name, double value)
{
	struct db_stmt *s = stage_row(st, STMT_RESULT, run_id);
	if (!s)
		return -1;
	db_bind_text(s, 2, name ? name : "");
	db_bind_double(s, 3, value);
	return step_insert(st, s, "a result");
}

int store_add_census(struct store *st, int64_t run_id, const struct census_row *r)
{
	struct db_stmt *s = stage_row(st, STMT_CENSUS, run_id);
	if (!s)
		return -1;
	db_bind_double(s, 2, r->t);
	if (r->step >= 0)
		db_bind_int64(s, 3, r->step);
	else
		db_bind_null(s, 3);
	db_bind_int64(s, 4, r->seq);
	db_bind_text(s, 5, r->type);
	db_bind_int64(s, 6, r->count);
	if (r->bytes >= 0)
		db_bind_int64(s, 7, r->bytes);
	else
		db_bind_null(s, 7);
	if (r->holder && *r->holder)
		db_bind_text(s, 8, r->holder);
	else
		db_bind_null(s, 8);
	if (r->cost_us >= 0)
		db_bind_int64(s, 9, r->cost_us);
	else
		db_bind_null(s, 9);
	return step_insert(st, s, "a census row");
}
