/*
 * store.c — the run store in SQLite; the only file that includes sqlite3.h.
 *
 * One connection per process. The writer (the supervisor) holds its
 * samples and per-process samples (one sample per tick, up to 1 kHz) in
 * plain C arrays until the next flush: a sample costs a struct copy, no
 * SQLite call and no lock. (A statement of its own at every 10 ms tick finds
 * SQLite's pages and the CPU's caches cold: it cost 15-30 us of CPU a
 * sample on the development VM, as much as the supervisor's whole wake-up.)
 * The other frequent rows (steps, metrics, events, results) are staged in
 * TEMP tables of its own connection, one sqlite3_step() each on a cached
 * prepared statement, no lock on the store. store_flush() moves the arrays
 * and what is staged into the store in one short transaction (BEGIN
 * IMMEDIATE ... COMMIT, a few hundred microseconds; samples go PUT_ROWS to
 * a statement), so the disk sees one commit a second and two runs writing
 * to the same store never wait for each other longer than a flush. Rare
 * writes (a run's beginning and end, segments) go straight to the store.
 * The database is in WAL mode: `leakproof report` reads while a run writes.
 *
 * Memory stays flat however many rows are written: the arrays hold at most
 * SAMPLE_BUF_ROWS and PROC_BUF_ROWS rows (beyond that, and when a flush
 * must wait for another writer, their rows move to the staging tables,
 * after the older rows there), the staging tables are emptied at every
 * flush, and SQLite's page caches are bounded (2 MB each by default) and
 * spill to files.
 *
 * The schema is versioned with PRAGMA user_version; migrations[] holds the
 * SQL that takes version i to i + 1 and is only ever appended to. Layout and
 * contracts: docs/internals/store.md.
 *
 * Units: bytes (INTEGER), seconds (REAL; t since the run started, *_at Unix
 * time). Unsigned sizes are stored as signed 64-bit integers (clamped).
 */
#include "store/store.h"
#include "store/trace.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "util/util.h"

#define DEFAULT_STORE_PATH ".leakproof/leakproof.db"
#define BUSY_TIMEOUT_MS 5000
/* 'LKPF': marks the file as a leakproof store (PRAGMA application_id). */
#define APPLICATION_ID 0x4c4b5046
/* Samples held in memory between flushes (80 bytes each): two seconds at
 * 1 kHz. Beyond that they move to temp.stage_samples. */
#define SAMPLE_BUF_ROWS 2048
#define PUT_ROWS 50              /* samples per INSERT in a flush (500 variables, under 999) */
#define PROC_BUF_ROWS 1024       /* per-process samples (96 bytes each) */

/* ---- schema ------------------------------------------------------------ */

/*
 * migrations[i] takes a store from user_version i to i + 1. Append only:
 * never edit a released entry, never drop user data.
 */
static const char *const migrations[] = {
	/* 1: the first schema */
	"CREATE TABLE runs ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  started_at REAL NOT NULL,"
	"  ended_at REAL,"                       /* NULL while running */
	"  command TEXT NOT NULL,"               /* JSON array of the argv */
	"  cwd TEXT,"
	"  hostname TEXT,"
	"  measure TEXT NOT NULL,"               /* pss, rss, uss, cgroup, gpu */
	"  interval_ns INTEGER NOT NULL DEFAULT 0,"
	"  limit_bytes INTEGER NOT NULL DEFAULT 0,"
	"  limit_source TEXT,"
	"  mem_total_bytes INTEGER NOT NULL DEFAULT 0,"
	"  cgroup_mode TEXT,"
	"  step_regex TEXT,"
	"  status TEXT NOT NULL DEFAULT 'running',"
	"  exit_code INTEGER,"
	"  exit_signal INTEGER,"
	"  step_source TEXT NOT NULL DEFAULT 'none',"
	"  steps INTEGER NOT NULL DEFAULT 0,"
	"  bad_lines INTEGER NOT NULL DEFAULT 0,"
	"  long_lines INTEGER NOT NULL DEFAULT 0,"
	"  peak_bytes INTEGER NOT NULL DEFAULT 0,"
	"  verdict TEXT,"
	"  growth_bytes_per_step REAL"
	");"
	"CREATE TABLE segments ("
	"  run_id INTEGER NOT NULL REFERENCES runs(id),"
	"  seq INTEGER NOT NULL,"                /* 0 for the first start */
	"  pid INTEGER,"
	"  started_at REAL NOT NULL,"
	"  ended_at REAL,"
	"  exit_code INTEGER,"
	"  exit_signal INTEGER,"
	"  cause TEXT,"                          /* why it ended: exit, signal, oom, ... */
	"  evidence TEXT,"
	"  PRIMARY KEY (run_id, seq)"
	");"
	"CREATE TABLE samples ("
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  nprocs INTEGER NOT NULL,"
	"  rss INTEGER NOT NULL, pss INTEGER NOT NULL, uss INTEGER NOT NULL, swap INTEGER NOT NULL,"
	"  cgroup INTEGER,"                      /* NULL when not measured */
	"  gpu INTEGER,"                         /* NULL when not measured */
	"  pss_exact INTEGER NOT NULL DEFAULT 1"
	");"
	"CREATE INDEX samples_run ON samples(run_id, t);"
	"CREATE TABLE proc_samples ("
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  pid INTEGER NOT NULL, ppid INTEGER NOT NULL, name TEXT NOT NULL,"
	"  rss INTEGER NOT NULL, pss INTEGER NOT NULL, uss INTEGER NOT NULL, swap INTEGER NOT NULL,"
	"  gpu INTEGER NOT NULL DEFAULT 0"
	");"
	"CREATE INDEX proc_samples_run ON proc_samples(run_id, t);"
	"CREATE TABLE steps ("
	"  run_id INTEGER NOT NULL,"
	"  step INTEGER NOT NULL,"
	"  epoch INTEGER,"                       /* NULL when unknown */
	"  t REAL NOT NULL,"
	"  nprocs INTEGER NOT NULL,"
	"  rss INTEGER NOT NULL, pss INTEGER NOT NULL, uss INTEGER NOT NULL, swap INTEGER NOT NULL,"
	"  cgroup INTEGER, gpu INTEGER,"
	"  pss_exact INTEGER NOT NULL DEFAULT 1"
	");"
	"CREATE INDEX steps_run ON steps(run_id, t);"
	"CREATE TABLE metrics ("
	"  run_id INTEGER NOT NULL,"
	"  step INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  name TEXT NOT NULL,"
	"  value REAL"
	");"
	"CREATE INDEX metrics_run ON metrics(run_id, t);"
	"CREATE TABLE events ("
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  detail TEXT"
	");"
	"CREATE INDEX events_run ON events(run_id, t);"
	"CREATE TABLE results ("
	"  run_id INTEGER NOT NULL,"
	"  name TEXT NOT NULL,"
	"  value REAL,"
	"  PRIMARY KEY (run_id, name)"
	");",
	/* 2: what each segment ended on, and why the next one started */
	"ALTER TABLE segments ADD COLUMN end_step INTEGER;"      /* last step marked; NULL: none */
	"ALTER TABLE segments ADD COLUMN memory_bytes INTEGER;"  /* the measure at the end */
	"ALTER TABLE segments ADD COLUMN restart TEXT;",         /* why it was restarted; NULL: it was not */
	/* 3: sweeps, their trials, and what a sweep's table needs of each run */
	"CREATE TABLE sweeps ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  started_at REAL NOT NULL,"
	"  ended_at REAL,"
	"  file TEXT NOT NULL,"                  /* the sweep file, as given */
	"  spec TEXT NOT NULL,"                  /* its text when the sweep began */
	"  method TEXT NOT NULL,"
	"  metric TEXT,"                         /* NULL: none */
	"  maximize INTEGER NOT NULL DEFAULT 0,"
	"  status TEXT NOT NULL DEFAULT 'running',"  /* running, done, interrupted */
	"  pid INTEGER,"                         /* the sweep process while running */
	"  optuna_storage TEXT, optuna_study TEXT"
	");"
	"CREATE TABLE trials ("
	"  sweep_id INTEGER NOT NULL REFERENCES sweeps(id),"
	"  idx INTEGER NOT NULL,"                /* the trial's number in the sweep */
	"  attempt INTEGER NOT NULL,"            /* 0; more for retries and re-runs */
	"  params TEXT NOT NULL,"                /* JSON object */
	"  vals TEXT NOT NULL DEFAULT '',"       /* the values in the spec's order, 0x1f-separated */
	"  env TEXT NOT NULL,"                   /* JSON object */
	"  argv TEXT NOT NULL,"                  /* JSON array */
	"  status TEXT NOT NULL,"                /* running, ok, failed, oom, interrupted, skipped */
	"  run_id INTEGER,"
	"  cause TEXT,"
	"  metric REAL,"
	"  optuna_number INTEGER,"
	"  started_at REAL, ended_at REAL,"
	"  note TEXT,"
	"  PRIMARY KEY (sweep_id, idx, attempt)"
	");"
	"ALTER TABLE runs ADD COLUMN sweep_id INTEGER;"
	"ALTER TABLE runs ADD COLUMN trial_idx INTEGER;"
	"ALTER TABLE runs ADD COLUMN trial_attempt INTEGER;"
	"ALTER TABLE runs ADD COLUMN step_q0 REAL;"       /* per-step change quantiles, */
	"ALTER TABLE runs ADD COLUMN step_q1 REAL;"       /* kept at the end of the run */
	"ALTER TABLE runs ADD COLUMN step_q2 REAL;"       /* so a sweep's table needs */
	"ALTER TABLE runs ADD COLUMN step_q3 REAL;"       /* no re-analysis */
	"ALTER TABLE runs ADD COLUMN step_q4 REAL;"
	"ALTER TABLE runs ADD COLUMN steps_per_second REAL;"
	"CREATE INDEX runs_trial ON runs(sweep_id, trial_idx, trial_attempt);",
	/* 4: allocation sites of traced runs (store/trace.c) */
	"ALTER TABLE runs ADD COLUMN trace_mean INTEGER;"   /* sampling mean, bytes; NULL: not traced */
	"CREATE TABLE trace_sites ("
	"  run_id INTEGER NOT NULL,"
	"  site INTEGER NOT NULL,"
	"  kind TEXT NOT NULL,"                  /* m heap, a anonymous mmap */
	"  frames TEXT NOT NULL,"                /* PATH\tVADDR\tSYMBOL per line, innermost first */
	"  python TEXT,"                         /* LINE:FUNCTION:FILE, tab-separated, innermost first */
	"  symbols TEXT,"                        /* FUNCTION\tFILE:LINE per frame; NULL: not yet */
	"  live INTEGER, allocs INTEGER, frees INTEGER,"   /* at the end */
	"  PRIMARY KEY (run_id, site)"
	") WITHOUT ROWID;"
	"CREATE TABLE trace_live ("              /* a site's live bytes, when they changed */
	"  run_id INTEGER NOT NULL,"
	"  t REAL NOT NULL,"
	"  site INTEGER NOT NULL,"
	"  step INTEGER,"                        /* the last step marked by then; NULL: none */
	"  live INTEGER NOT NULL,"
	"  PRIMARY KEY (run_id, t, site)"
	") WITHOUT ROWID;",
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* The hot inserts, prepared once and reused; they stage rows (see below). */
enum stmt_id {
	STMT_SAMPLE,
	STMT_PROC_SAMPLE,
	STMT_STEP,
	STMT_METRIC,
	STMT_EVENT,
	STMT_RESULT,
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

struct store {
	sqlite3 *db;
	char *path;
	bool readonly;
	unsigned pending;     /* bit i: temp.stage_<staged[i].table> holds rows for store_flush() */
	bool write_failed;    /* a write error was reported; quiet until a clean flush */
	bool batch_failed;    /* a write failed since the last flush */
	sqlite3_stmt *stmt[STMT_COUNT];
	sqlite3_stmt *copy[NSTAGED], *clear[NSTAGED];
	sqlite3_stmt *begin, *commit, *rollback;   /* a flush's transaction */
	struct held_sample *held;   /* samples since the last flush, oldest first; */
	size_t nheld;               /* SAMPLE_BUF_ROWS of room, allocated at the first */
	sqlite3_stmt *put_sample;   /* INSERT INTO main.samples, inside a flush: */
	sqlite3_stmt *put_samples;  /* one row; PUT_ROWS rows */
	struct held_proc *held_procs;  /* likewise for per-process samples, */
	size_t nheld_procs;            /* PROC_BUF_ROWS of room */
	sqlite3_stmt *put_proc;        /* INSERT INTO main.proc_samples */
};

/* ---- small helpers ----------------------------------------------------- */

static sqlite3_int64 u64_to_db(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)v;
}

static uint64_t db_to_u64(sqlite3_int64 v)
{
	return v < 0 ? 0 : (uint64_t)v;
}

/* A column as a newly allocated string, "" when NULL; the caller frees it. */
static char *col_strdup(sqlite3_stmt *s, int col)
{
	const unsigned char *p = sqlite3_column_text(s, col);
	return xstrdup(p ? (const char *)p : "");
}

static void col_strcpy(sqlite3_stmt *s, int col, char *dst, size_t cap)
{
	const unsigned char *p = sqlite3_column_text(s, col);
	snprintf(dst, cap, "%s", p ? (const char *)p : "");
}

static int bind_text_or_null(sqlite3_stmt *s, int i, const char *v)
{
	return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(s, i);
}

static int open_error(const char *path, const char *reason)
{
	return error("cannot open store '%s': %s", path, reason);
}

/* Create the directories leading to path (not path itself). 0 or -1 with a
 * message in why. */
static int make_parent_dirs(const char *path, char *why, size_t whysz)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		snprintf(why, whysz, "path too long");
		return -1;
	}
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
			snprintf(why, whysz, "cannot create directory '%s': %s", dir, strerror(errno));
			return -1;
		}
		struct stat sb;
		if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
			snprintf(why, whysz, "'%s' is not a directory", dir);
			return -1;
		}
		*p = c;
		if (!c)
			break;
	}
	return 0;
}

static int exec_sql(struct store *st, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
	sqlite3_free(msg);
	return rc;
}

static int pragma_int(struct store *st, const char *sql, int *out)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int(s, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

/* Report a write failure once (until a flush goes in whole). Returns -1. */
static int write_error(struct store *st, const char *what)
{
	st->batch_failed = true;
	if (!st->write_failed) {
		st->write_failed = true;
		error("cannot write %s to store '%s': %s%s", what, st->path, sqlite3_errmsg(st->db),
		      sqlite3_errcode(st->db) == SQLITE_FULL ? " (data from now on may be lost)" : "");
	}
	return -1;
}

static int check_writable(struct store *st)
{
	if (st->readonly)
		return error("store '%s' is open read-only", st->path);
	return 0;
}

static sqlite3_stmt *cached_stmt(struct store *st, enum stmt_id id)
{
	if (!st->stmt[id] &&
	    sqlite3_prepare_v3(st->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[id], NULL) != SQLITE_OK) {
		error("store '%s': %s", st->path, sqlite3_errmsg(st->db));
		st->stmt[id] = NULL;
	}
	return st->stmt[id];
}

/* Step a bound insert to completion and reset it. */
static int step_insert(struct store *st, sqlite3_stmt *s, const char *what)
{
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_DONE)
		return write_error(st, what);
	for (size_t i = 0; i < NSTAGED; i++)
		if (st->stmt[staged[i].stmt] == s)
			st->pending |= 1u << i;
	return 0;
}

/* ---- open / close ------------------------------------------------------ */

const char *store_default_path(const char *from_option)
{
	if (from_option && *from_option)
		return from_option;
	const char *env = getenv("LEAKPROOF_STORE");
	if (env && *env)
		return env;
	return DEFAULT_STORE_PATH;
}

static void store_free(struct store *st)
{
	if (!st)
		return;
	for (int i = 0; i < STMT_COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	for (size_t i = 0; i < NSTAGED; i++) {
		sqlite3_finalize(st->copy[i]);
		sqlite3_finalize(st->clear[i]);
	}
	sqlite3_finalize(st->put_sample);
	sqlite3_finalize(st->put_samples);
	sqlite3_finalize(st->put_proc);
	sqlite3_finalize(st->begin);
	sqlite3_finalize(st->commit);
	sqlite3_finalize(st->rollback);
	sqlite3_close(st->db);
	free(st->held);
	free(st->held_procs);
	free(st->path);
	free(st);
}

/* Bring the schema to SCHEMA_VERSION. 0, or -1 with the reason in why. */
static int migrate(struct store *st, int version, char *why, size_t whysz)
{
	for (int v = version; v < SCHEMA_VERSION; v++) {
		char sql[96];
		if (exec_sql(st, "BEGIN IMMEDIATE") != SQLITE_OK)
			goto fail;
		/* Another process (a second run, a reader that found an older
		 * schema) may have migrated since version was read. */
		if (pragma_int(st, "PRAGMA user_version", &v) != SQLITE_OK)
			goto fail_rollback;
		if (v >= SCHEMA_VERSION) {
			exec_sql(st, "COMMIT");
			break;
		}
		if (exec_sql(st, migrations[v]) != SQLITE_OK)
			goto fail_rollback;
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d; PRAGMA application_id = %d",
		         v + 1, APPLICATION_ID);
		if (exec_sql(st, sql) != SQLITE_OK || exec_sql(st, "COMMIT") != SQLITE_OK)
			goto fail_rollback;
	}
	return 0;
fail_rollback:
	snprintf(why, whysz, "cannot migrate the schema to version %d: %s", SCHEMA_VERSION,
	         sqlite3_errmsg(st->db));
	if (!sqlite3_get_autocommit(st->db))
		exec_sql(st, "ROLLBACK");
	return -1;
fail:
	snprintf(why, whysz, "%s", sqlite3_errmsg(st->db));
	return -1;
}

/*
 * Check that the file is a leakproof store (or empty), and of a schema this
 * build knows. *version gets its user_version. 0 or -1 with why.
 */
static int check_schema(struct store *st, int *version, char *why, size_t whysz)
{
	int app_id = 0, ntables = 0;
	/* One snapshot: another process may commit a migration between reads. */
	bool read = exec_sql(st, "BEGIN") == SQLITE_OK &&
	            pragma_int(st, "PRAGMA user_version", version) == SQLITE_OK &&
	            pragma_int(st, "PRAGMA application_id", &app_id) == SQLITE_OK &&
	            pragma_int(st, "SELECT count(*) FROM sqlite_master", &ntables) == SQLITE_OK;
	if (!read)
		snprintf(why, whysz, "%s", sqlite3_errmsg(st->db));
	if (!sqlite3_get_autocommit(st->db))
		exec_sql(st, "COMMIT");
	if (!read)
		return -1;
	if ((app_id && app_id != APPLICATION_ID) || (*version == 0 && ntables > 0)) {
		snprintf(why, whysz, "not a leakproof store (an SQLite database of something else)");
		return -1;
	}
	if (*version > SCHEMA_VERSION) {
		snprintf(why, whysz, "made by a newer leakproof (schema version %d; this one knows up to %d)",
		         *version, SCHEMA_VERSION);
		return -1;
	}
	return 0;
}

/* The staging tables and the statements that move their rows to the store.
 * 0, or -1 with why. */
static int make_stage_table(struct store *st, size_t i)
{
	char sql[256];
	const char *t = staged[i].table;
	if (st->copy[i])
		return 0;
	snprintf(sql, sizeof(sql), "CREATE TEMP TABLE stage_%s AS SELECT * FROM main.%s WHERE 0", t, t);
	if (exec_sql(st, sql) != SQLITE_OK)
		return -1;
	snprintf(sql, sizeof(sql), "%s INTO main.%s SELECT * FROM temp.stage_%s ORDER BY rowid",
	         staged[i].verb, t, t);
	if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st->copy[i], NULL) != SQLITE_OK)
		return -1;
	snprintf(sql, sizeof(sql), "DELETE FROM temp.stage_%s", t);
	if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st->clear[i], NULL) != SQLITE_OK) {
		sqlite3_finalize(st->copy[i]);
		st->copy[i] = NULL;
		return -1;
	}
	return 0;
}

/* The stage of a table whose rows are held in memory (samples and
 * per-process samples), made when they first need it; or NULL after the
 * message. */
static sqlite3_stmt *held_stage_stmt(struct store *st, enum stmt_id id, const char *what)
{
	for (size_t i = 0; i < NSTAGED; i++)
		if (staged[i].stmt == id && make_stage_table(st, i) < 0) {
			write_error(st, what);
			return NULL;
		}
	return cached_stmt(st, id);
}

static int make_stage(struct store *st, char *why, size_t whysz)
{
	/* the held tables' stages only when needed (creating a table costs) */
	for (size_t i = 0; i < NSTAGED; i++)
		if (staged[i].stmt != STMT_SAMPLE && staged[i].stmt != STMT_PROC_SAMPLE &&
		    make_stage_table(st, i) < 0)
			goto fail;
	if (sqlite3_prepare_v3(st->db, "INSERT INTO main.samples " SAMPLE_COLUMNS, -1,
	                       SQLITE_PREPARE_PERSISTENT, &st->put_sample, NULL) != SQLITE_OK)
		goto fail;
	/* the same for PUT_ROWS rows at once: one statement step instead of
	 * PUT_ROWS (a flush runs on cold caches, each step costs) */
	char many[PUT_ROWS * 48 + 128];
	size_t len = (size_t)snprintf(many, sizeof(many), "INSERT INTO main.samples %.*s",
	                              (int)(strchr(SAMPLE_COLUMNS, 'V') - SAMPLE_COLUMNS), SAMPLE_COLUMNS);
	for (int r = 0; r < PUT_ROWS; r++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "%s(?,?,?,?,?,?,?,?,?,?)",
		                        r ? "," : "VALUES ");
	if (sqlite3_prepare_v3(st->db, many, -1, SQLITE_PREPARE_PERSISTENT, &st->put_samples, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(st->db, "INSERT INTO main.proc_samples " PROC_SAMPLE_COLUMNS, -1,
	                       SQLITE_PREPARE_PERSISTENT, &st->put_proc, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(st->db, "BEGIN IMMEDIATE", -1, SQLITE_PREPARE_PERSISTENT, &st->begin, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(st->db, "COMMIT", -1, SQLITE_PREPARE_PERSISTENT, &st->commit, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(st->db, "ROLLBACK", -1, SQLITE_PREPARE_PERSISTENT, &st->rollback, NULL) != SQLITE_OK)
		goto fail;
	return 0;
fail:
	snprintf(why, whysz, "cannot make the staging tables: %s", sqlite3_errmsg(st->db));
	return -1;
}

static struct store *open_common(const char *path, bool readonly)
{
	char why[PATH_MAX + 128] = "";
	struct stat sb;

	if (!path || !*path) {
		open_error("", "empty path");
		return NULL;
	}
	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		open_error(path, "is a directory");
		return NULL;
	}
	if (readonly && stat(path, &sb) < 0) {
		error("cannot open store '%s': %s%s", path, strerror(errno),
		      errno == ENOENT ? " (no run has been recorded there; see `leakproof run --store`)" : "");
		return NULL;
	}
	if (!readonly && make_parent_dirs(path, why, sizeof(why)) < 0) {
		open_error(path, why);
		return NULL;
	}

	struct store *st = xcalloc(1, sizeof(*st));
	st->path = xstrdup(path);
	st->readonly = readonly;
	int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
		snprintf(why, sizeof(why), "%s", st->db ? sqlite3_errmsg(st->db) : "out of memory");
		goto fail;
	}
	sqlite3_extended_result_codes(st->db, 0);
	sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);

	int version = 0;
	if (check_schema(st, &version, why, sizeof(why)) < 0)
		goto fail;
	if (!readonly) {
		/* WAL: readers do not block the writer nor it them; NORMAL
		 * sync is durable across a crash of leakproof, and loses at
		 * most the last commit on power loss. */
		char *msg = NULL;
		if (sqlite3_exec(st->db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
		                 " PRAGMA journal_size_limit = 67108864", NULL, NULL, &msg) != SQLITE_OK) {
			snprintf(why, sizeof(why), "%s", msg ? msg : sqlite3_errmsg(st->db));
			sqlite3_free(msg);
			goto fail;
		}
		if (migrate(st, version, why, sizeof(why)) < 0 || make_stage(st, why, sizeof(why)) < 0)
			goto fail;
	} else if (version < SCHEMA_VERSION) {
		/* An older schema: migrate it through a writable connection. */
		store_free(st);
		st = open_common(path, false);
		if (!st)
			return NULL;
		store_free(st);
		return open_common(path, true);
	}
	return st;
fail:
	open_error(path, why);
	store_free(st);
	return NULL;
}

struct store *store_open(const char *path)
{
	return open_common(path, false);
}

struct store *store_open_readonly(const char *path)
{
	return open_common(path, true);
}

/* Run a statement with no result rows; the SQLite result code. */
static int step_done(sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int put_held_samples(struct store *st);
static int stage_held_samples(struct store *st);
static int put_held_procs(struct store *st);
static int stage_held_procs(struct store *st);

int store_flush(struct store *st)
{
	if (!st || st->readonly)
		return 0;
	bool ok = !st->batch_failed;
	if (st->pending || st->nheld || st->nheld_procs) {
		/* Each stage that holds rows is copied and emptied inside the
		 * transaction (a rollback restores it), then the held samples
		 * go in after the staged ones, which are older. The flush runs
		 * on cold caches once a second: every statement counts. */
		bool copied = step_done(st->begin) == SQLITE_OK;
		for (size_t i = 0; copied && i < NSTAGED; i++)
			if (st->pending >> i & 1)
				copied = step_done(st->copy[i]) == SQLITE_OK && step_done(st->clear[i]) == SQLITE_OK;
		if (copied)
			copied = put_held_samples(st) == 0 && put_held_procs(st) == 0;
		if (copied && step_done(st->commit) == SQLITE_OK) {
			st->batch_failed = false;
			st->pending = 0;
			st->nheld = st->nheld_procs = 0;
		} else {
			int rc = sqlite3_errcode(st->db);
			bool busy = rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
			write_error(st, "a batch of rows");
			if (!sqlite3_get_autocommit(st->db))
				step_done(st->rollback);
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
					if (st->pending >> i & 1)
						step_done(st->clear[i]);
				st->pending = 0;
				st->nheld = st->nheld_procs = 0;
			}
		}
	}
	if (ok)
		st->write_failed = false;
	st->batch_failed = false;
	return ok ? 0 : -1;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	store_flush(st);
	store_free(st);
}

int store_set_size_limit(struct store *st, uint64_t max_bytes)
{
	int page_size = 0;
	if (pragma_int(st, "PRAGMA page_size", &page_size) != SQLITE_OK || page_size <= 0)
		return error("store '%s': %s", st->path, sqlite3_errmsg(st->db));
	char sql[96];
	snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %llu",
	         (unsigned long long)(max_bytes / (uint64_t)page_size + 1));
	int pages;
	if (pragma_int(st, sql, &pages) != SQLITE_OK)
		return error("store '%s': %s", st->path, sqlite3_errmsg(st->db));
	return 0;
}

sqlite3 *store_handle(struct store *st)
{
	return st->db;
}

size_t store_memory_used(void)
{
	return (size_t)sqlite3_memory_used();
}

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

/* Run a one-off statement straight on the store (its own transaction):
 * prepare, bind with fn, step, finalize. */
static int run_once(struct store *st, const char *sql, const char *what,
                    void (*bind)(sqlite3_stmt *, const void *), const void *arg)
{
	sqlite3_stmt *s;
	if (check_writable(st) < 0)
		return -1;
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
		return write_error(st, what);
	bind(s, arg);
	int rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return write_error(st, what);
	return 0;
}

static void bind_run_begin(sqlite3_stmt *s, const void *arg)
{
	const struct run_begin *rb = arg;
	const char *measure = measure_name(rb->measure);
	sqlite3_bind_double(s, 1, rb->started_at);
	sqlite3_bind_text(s, 2, rb->command_json ? rb->command_json : "[]", -1, SQLITE_TRANSIENT);
	bind_text_or_null(s, 3, rb->cwd);
	bind_text_or_null(s, 4, rb->hostname);
	sqlite3_bind_text(s, 5, measure ? measure : "pss", -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 6, rb->interval_ns);
	sqlite3_bind_int64(s, 7, u64_to_db(rb->limit_bytes));
	bind_text_or_null(s, 8, rb->limit_source);
	sqlite3_bind_int64(s, 9, u64_to_db(rb->mem_total_bytes));
	bind_text_or_null(s, 10, rb->cgroup_mode);
	bind_text_or_null(s, 11, rb->step_regex);
}

struct segment_begin_args { int64_t run_id, seq; double started_at; int pid; };

static void bind_segment_begin(sqlite3_stmt *s, const void *arg)
{
	const struct segment_begin_args *a = arg;
	sqlite3_bind_int64(s, 1, a->run_id);
	sqlite3_bind_int64(s, 2, a->seq);
	if (a->pid > 0)
		sqlite3_bind_int(s, 3, a->pid);
	else
		sqlite3_bind_null(s, 3);
	sqlite3_bind_double(s, 4, a->started_at);
}

#define SEGMENT_INSERT_SQL "INSERT INTO segments (run_id, seq, pid, started_at) VALUES (?1, ?2, ?3, ?4)"

int64_t store_run_begin(struct store *st, const struct run_begin *rb)
{
	if (run_once(st, "INSERT INTO runs (started_at, command, cwd, hostname, measure, interval_ns,"
	             " limit_bytes, limit_source, mem_total_bytes, cgroup_mode, step_regex)"
	             " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
	             "a run", bind_run_begin, rb) < 0)
		return -1;
	int64_t id = sqlite3_last_insert_rowid(st->db);
	struct segment_begin_args sa = { id, 0, rb->started_at, rb->pid };
	if (run_once(st, SEGMENT_INSERT_SQL, "a segment", bind_segment_begin, &sa) < 0)
		return -1;
	return id;
}

struct run_end_args { int64_t run_id; const struct run_end *re; };

static void bind_run_end(sqlite3_stmt *s, const void *arg)
{
	const struct run_end_args *a = arg;
	const struct run_end *re = a->re;
	sqlite3_bind_int64(s, 1, a->run_id);
	sqlite3_bind_double(s, 2, re->ended_at);
	sqlite3_bind_text(s, 3, re->status ? re->status : "done", -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(s, 4, re->exit_code);
	sqlite3_bind_int(s, 5, re->exit_signal);
	sqlite3_bind_text(s, 6, step_source_name(re->step_source), -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 7, re->steps);
	sqlite3_bind_int64(s, 8, re->bad_lines);
	sqlite3_bind_int64(s, 9, re->long_lines);
	sqlite3_bind_int64(s, 10, u64_to_db(re->peak_bytes));
	bind_text_or_null(s, 11, re->verdict);
	sqlite3_bind_double(s, 12, re->growth_bytes_per_step);
}

static void bind_segment_close(sqlite3_stmt *s, const void *arg)
{
	const struct run_end_args *a = arg;
	const struct run_end *re = a->re;
	const char *cause = re->exit_signal ? "signal" : "exit";
	if (re->status && strcmp(re->status, "done"))
		cause = re->status;
	sqlite3_bind_int64(s, 1, a->run_id);
	sqlite3_bind_double(s, 2, re->ended_at);
	sqlite3_bind_int(s, 3, re->exit_code);
	sqlite3_bind_int(s, 4, re->exit_signal);
	sqlite3_bind_text(s, 5, cause, -1, SQLITE_TRANSIENT);
}

int store_run_end(struct store *st, int64_t run_id, const struct run_end *re)
{
	struct run_end_args a = { run_id, re };
	if (run_once(st, "UPDATE runs SET ended_at = ?2, status = ?3, exit_code = ?4, exit_signal = ?5,"
	             " step_source = ?6, steps = ?7, bad_lines = ?8, long_lines = ?9, peak_bytes = ?10,"
	             " verdict = ?11, growth_bytes_per_step = ?12 WHERE id = ?1",
	             "the end of a run", bind_run_end, &a) < 0)
		return -1;
	/* A segment still open ends with the run. */
	return run_once(st, "UPDATE segments SET ended_at = ?2, exit_code = ?3, exit_signal = ?4, cause = ?5"
	                " WHERE run_id = ?1 AND ended_at IS NULL",
	                "the end of a segment", bind_segment_close, &a);
}

int64_t store_segment_begin(struct store *st, int64_t run_id, double started_at, int pid)
{
	sqlite3_stmt *s;
	int64_t seq = 0;
	if (check_writable(st) < 0)
		return -1;
	if (sqlite3_prepare_v2(st->db, "SELECT coalesce(max(seq) + 1, 0) FROM segments WHERE run_id = ?1",
	                       -1, &s, NULL) != SQLITE_OK)
		return write_error(st, "a segment");
	sqlite3_bind_int64(s, 1, run_id);
	if (sqlite3_step(s) == SQLITE_ROW)
		seq = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	struct segment_begin_args sa = { run_id, seq, started_at, pid };
	if (run_once(st, SEGMENT_INSERT_SQL, "a segment", bind_segment_begin, &sa) < 0)
		return -1;
	return seq;
}

struct segment_pid_args { int64_t run_id, seq; int pid; };

static void bind_segment_pid(sqlite3_stmt *s, const void *arg)
{
	const struct segment_pid_args *a = arg;
	sqlite3_bind_int64(s, 1, a->run_id);
	sqlite3_bind_int64(s, 2, a->seq);
	sqlite3_bind_int(s, 3, a->pid);
}

int store_segment_set_pid(struct store *st, int64_t run_id, int64_t seq, int pid)
{
	struct segment_pid_args a = { run_id, seq, pid };
	return run_once(st, "UPDATE segments SET pid = ?3 WHERE run_id = ?1 AND seq = ?2",
	                "a segment", bind_segment_pid, &a);
}

struct segment_end_args { int64_t run_id, seq; const struct segment_end *se; };

static void bind_segment_end(sqlite3_stmt *s, const void *arg)
{
	const struct segment_end_args *a = arg;
	sqlite3_bind_int64(s, 1, a->run_id);
	sqlite3_bind_int64(s, 2, a->seq);
	sqlite3_bind_double(s, 3, a->se->ended_at);
	sqlite3_bind_int(s, 4, a->se->exit_code);
	sqlite3_bind_int(s, 5, a->se->exit_signal);
	bind_text_or_null(s, 6, a->se->cause);
	bind_text_or_null(s, 7, a->se->evidence);
	if (a->se->has_step)
		sqlite3_bind_int64(s, 8, a->se->step);
	else
		sqlite3_bind_null(s, 8);
	sqlite3_bind_int64(s, 9, u64_to_db(a->se->memory_bytes));
	bind_text_or_null(s, 10, a->se->restart);
}

int store_segment_end(struct store *st, int64_t run_id, int64_t seq, const struct segment_end *se)
{
	struct segment_end_args a = { run_id, seq, se };
	return run_once(st, "UPDATE segments SET ended_at = ?3, exit_code = ?4, exit_signal = ?5,"
	                " cause = ?6, evidence = ?7, end_step = ?8, memory_bytes = ?9, restart = ?10"
	                " WHERE run_id = ?1 AND seq = ?2",
	                "the end of a segment", bind_segment_end, &a);
}

/* Bind the memory columns of a sample from index first: nprocs, rss, pss,
 * uss, swap, cgroup, gpu, pss_exact. */
static void bind_mem(sqlite3_stmt *s, int first, const struct mem_sample *m)
{
	sqlite3_bind_int(s, first, m->nprocs);
	sqlite3_bind_int64(s, first + 1, u64_to_db(m->rss));
	sqlite3_bind_int64(s, first + 2, u64_to_db(m->pss));
	sqlite3_bind_int64(s, first + 3, u64_to_db(m->uss));
	sqlite3_bind_int64(s, first + 4, u64_to_db(m->swap));
	if (m->has_cgroup)
		sqlite3_bind_int64(s, first + 5, u64_to_db(m->cgroup));
	else
		sqlite3_bind_null(s, first + 5);
	if (m->has_gpu)
		sqlite3_bind_int64(s, first + 6, u64_to_db(m->gpu));
	else
		sqlite3_bind_null(s, first + 6);
	sqlite3_bind_int(s, first + 7, m->pss_exact ? 1 : 0);
}

/* Bind a sample's 10 columns from index first. */
static void bind_sample(sqlite3_stmt *s, int first, const struct held_sample *h)
{
	sqlite3_bind_int64(s, first, h->run_id);
	sqlite3_bind_double(s, first + 1, h->m.t);
	bind_mem(s, first + 2, &h->m);
}

/* The held samples into main.samples, inside the flush's transaction.
 * 0, or the failing step's SQLite code (the array is kept). */
static int put_held_samples(struct store *st)
{
	size_t i = 0;
	for (; i + PUT_ROWS <= st->nheld; i += PUT_ROWS) {
		for (int r = 0; r < PUT_ROWS; r++)
			bind_sample(st->put_samples, 1 + 10 * r, &st->held[i + (size_t)r]);
		int rc = step_done(st->put_samples);
		if (rc != SQLITE_OK)
			return rc;
	}
	for (; i < st->nheld; i++) {
		bind_sample(st->put_sample, 1, &st->held[i]);
		int rc = step_done(st->put_sample);
		if (rc != SQLITE_OK)
			return rc;
	}
	return 0;
}

/* The held samples into temp.stage_samples, in one transaction of the temp
 * database alone (no lock on the store), after those staged before them;
 * the array is emptied whatever happens. 0, or -1 after the message. */
static int stage_held_samples(struct store *st)
{
	sqlite3_stmt *s = held_stage_stmt(st, STMT_SAMPLE, "a sample");
	int r = s && exec_sql(st, "SAVEPOINT stage_samples") == SQLITE_OK ? 0 : write_error(st, "a sample");
	for (size_t i = 0; r == 0 && i < st->nheld; i++) {
		bind_sample(s, 1, &st->held[i]);
		r = step_insert(st, s, "a sample");
	}
	if (s)
		exec_sql(st, "RELEASE stage_samples");   /* what went in stays */
	st->nheld = 0;
	return r;
}

int store_add_sample(struct store *st, int64_t run_id, const struct mem_sample *m)
{
	if (check_writable(st) < 0)
		return -1;
	int r = 0;
	if (!st->held)
		st->held = xmalloc(SAMPLE_BUF_ROWS * sizeof(*st->held));
	else if (st->nheld == SAMPLE_BUF_ROWS)
		r = stage_held_samples(st);  /* no flush for a long while */
	st->held[st->nheld].run_id = run_id;
	st->held[st->nheld].m = *m;
	st->nheld++;
	return r;
}

static void bind_proc(sqlite3_stmt *s, const struct held_proc *h, const char *name)
{
	sqlite3_bind_int64(s, 1, h->run_id);
	sqlite3_bind_double(s, 2, h->t);
	sqlite3_bind_int(s, 3, h->pid);
	sqlite3_bind_int(s, 4, h->ppid);
	sqlite3_bind_text(s, 5, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 6, u64_to_db(h->rss));
	sqlite3_bind_int64(s, 7, u64_to_db(h->pss));
	sqlite3_bind_int64(s, 8, u64_to_db(h->uss));
	sqlite3_bind_int64(s, 9, u64_to_db(h->swap));
	sqlite3_bind_int64(s, 10, u64_to_db(h->gpu));
}

/* As put_held_samples(), for the held per-process samples. */
static int put_held_procs(struct store *st)
{
	for (size_t i = 0; i < st->nheld_procs; i++) {
		bind_proc(st->put_proc, &st->held_procs[i], st->held_procs[i].name);
		int rc = step_done(st->put_proc);
		if (rc != SQLITE_OK)
			return rc;
	}
	return 0;
}

/* As stage_held_samples(), for the held per-process samples. */
static int stage_held_procs(struct store *st)
{
	sqlite3_stmt *s = held_stage_stmt(st, STMT_PROC_SAMPLE, "a process sample");
	int r = s && exec_sql(st, "SAVEPOINT stage_procs") == SQLITE_OK ? 0 : write_error(st, "a process sample");
	for (size_t i = 0; r == 0 && i < st->nheld_procs; i++) {
		bind_proc(s, &st->held_procs[i], st->held_procs[i].name);
		r = step_insert(st, s, "a process sample");
	}
	if (s)
		exec_sql(st, "RELEASE stage_procs");
	st->nheld_procs = 0;
	return r;
}

int store_add_proc_sample(struct store *st, int64_t run_id, double t, int pid, int ppid,
                          const char *name, uint64_t rss, uint64_t pss, uint64_t uss,
                          uint64_t swap, uint64_t gpu)
{
	if (check_writable(st) < 0)
		return -1;
	struct held_proc h = { run_id, t, pid, ppid, "", rss, pss, uss, swap, gpu };
	size_t len = name ? strlen(name) : 0;
	int r = 0;
	if (len >= sizeof(h.name) || st->nheld_procs == PROC_BUF_ROWS)
		r = stage_held_procs(st);   /* what is held goes first */
	if (len >= sizeof(h.name)) {
		sqlite3_stmt *s = held_stage_stmt(st, STMT_PROC_SAMPLE, "a process sample");
		if (!s)
			return -1;
		bind_proc(s, &h, name);
		int r2 = step_insert(st, s, "a process sample");
		return r < 0 ? r : r2;
	}
	memcpy(h.name, name ? name : "", len + 1);
	if (!st->held_procs)
		st->held_procs = xmalloc(PROC_BUF_ROWS * sizeof(*st->held_procs));
	st->held_procs[st->nheld_procs++] = h;
	return r;
}

int store_add_step(struct store *st, int64_t run_id, const struct step_rec *r)
{
	sqlite3_stmt *s;
	if (check_writable(st) < 0 || !(s = cached_stmt(st, STMT_STEP)))
		return -1;
	sqlite3_bind_int64(s, 1, run_id);
	sqlite3_bind_int64(s, 2, r->step);
	if (r->epoch >= 0)
		sqlite3_bind_int64(s, 3, r->epoch);
	else
		sqlite3_bind_null(s, 3);
	sqlite3_bind_double(s, 4, r->mem.t);
	bind_mem(s, 5, &r->mem);
	return step_insert(st, s, "a step");
}

int store_add_metric(struct store *st, int64_t run_id, int64_t step, double t,
                     const char *name, double value)
{
	sqlite3_stmt *s;
	if (check_writable(st) < 0 || !(s = cached_stmt(st, STMT_METRIC)))
		return -1;
	sqlite3_bind_int64(s, 1, run_id);
	sqlite3_bind_int64(s, 2, step);
	sqlite3_bind_double(s, 3, t);
	sqlite3_bind_text(s, 4, name ? name : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(s, 5, value);   /* NaN is stored as NULL */
	return step_insert(st, s, "a metric");
}

int store_add_event(struct store *st, int64_t run_id, double t, const char *kind,
                    const char *detail)
{
	sqlite3_stmt *s;
	if (check_writable(st) < 0 || !(s = cached_stmt(st, STMT_EVENT)))
		return -1;
	sqlite3_bind_int64(s, 1, run_id);
	sqlite3_bind_double(s, 2, t);
	sqlite3_bind_text(s, 3, kind ? kind : "", -1, SQLITE_TRANSIENT);
	bind_text_or_null(s, 4, detail);
	return step_insert(st, s, "an event");
}

int store_add_result(struct store *st, int64_t run_id, const char *name, double value)
{
	sqlite3_stmt *s;
	if (check_writable(st) < 0 || !(s = cached_stmt(st, STMT_RESULT)))
		return -1;
	sqlite3_bind_int64(s, 1, run_id);
	sqlite3_bind_text(s, 2, name ? name : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(s, 3, value);
	return step_insert(st, s, "a result");
}

/* ---- reading ----------------------------------------------------------- */

static int read_error(struct store *st)
{
	return error("cannot read store '%s': %s", st->path, sqlite3_errmsg(st->db));
}

static int prepare_read(struct store *st, const char *sql, int64_t run_id, sqlite3_stmt **s)
{
	if (sqlite3_prepare_v2(st->db, sql, -1, s, NULL) != SQLITE_OK)
		return read_error(st);
	sqlite3_bind_int64(*s, 1, run_id);
	return 0;
}

/* Grow *arr (of *cap elements of size sz) to hold at least n + 1. */
static void *grow(void *arr, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return arr;
	*cap = *cap ? *cap * 2 : 64;
	return xrealloc(arr, *cap * sz);
}

/*
 * Every row of statement s (prepared and bound; finalized here) into a new
 * array of size-byte rows, each zeroed and filled by read; its length in
 * *n, *rc 0. On a read error what was read is given to drop (NULL: free()),
 * *rc is -1 after a message and NULL is returned.
 */
static void *load_rows(struct store *st, sqlite3_stmt *s, size_t size, void (*read)(sqlite3_stmt *, void *),
                       void (*drop)(void *, size_t), size_t *n, int *rc)
{
	char *v = NULL;
	size_t len = 0, cap = 0;
	int step;
	while ((step = sqlite3_step(s)) == SQLITE_ROW) {
		v = grow(v, &cap, len, size);
		memset(v + len * size, 0, size);
		read(s, v + len * size);
		len++;
	}
	sqlite3_finalize(s);
	if (step != SQLITE_DONE) {
		if (drop)
			drop(v, len);
		else
			free(v);
		*n = 0;
		*rc = read_error(st);
		return NULL;
	}
	*n = len;
	*rc = 0;
	return v;
}

#define RUN_COLUMNS "id, started_at, coalesce(ended_at, 0), command, cwd, hostname, status, verdict," \
	" step_regex, cgroup_mode, limit_source, measure, step_source, interval_ns, steps, bad_lines," \
	" long_lines, limit_bytes, mem_total_bytes, peak_bytes, coalesce(exit_code, -1)," \
	" coalesce(exit_signal, 0), coalesce(growth_bytes_per_step, 0)"

static void read_run_row(sqlite3_stmt *s, struct run_row *r)
{
	memset(r, 0, sizeof(*r));
	r->id = sqlite3_column_int64(s, 0);
	r->started_at = sqlite3_column_double(s, 1);
	r->ended_at = sqlite3_column_double(s, 2);
	r->command_json = col_strdup(s, 3);
	r->cwd = col_strdup(s, 4);
	r->hostname = col_strdup(s, 5);
	r->status = col_strdup(s, 6);
	r->verdict = col_strdup(s, 7);
	r->step_regex = col_strdup(s, 8);
	r->cgroup_mode = col_strdup(s, 9);
	r->limit_source = col_strdup(s, 10);
	const unsigned char *m = sqlite3_column_text(s, 11);
	if (!m || measure_parse((const char *)m, &r->measure) < 0)
		r->measure = MEASURE_PSS;
	r->step_source = step_source_parse((const char *)sqlite3_column_text(s, 12));
	r->interval_ns = sqlite3_column_int64(s, 13);
	r->steps = sqlite3_column_int64(s, 14);
	r->bad_lines = sqlite3_column_int64(s, 15);
	r->long_lines = sqlite3_column_int64(s, 16);
	r->limit_bytes = db_to_u64(sqlite3_column_int64(s, 17));
	r->mem_total_bytes = db_to_u64(sqlite3_column_int64(s, 18));
	r->peak_bytes = db_to_u64(sqlite3_column_int64(s, 19));
	r->exit_code = sqlite3_column_int(s, 20);
	r->exit_signal = sqlite3_column_int(s, 21);
	r->growth_bytes_per_step = sqlite3_column_double(s, 22);
}

void run_row_release(struct run_row *r)
{
	if (!r)
		return;
	free(r->command_json);
	free(r->cwd);
	free(r->hostname);
	free(r->status);
	free(r->verdict);
	free(r->step_regex);
	free(r->cgroup_mode);
	free(r->limit_source);
	memset(r, 0, sizeof(*r));
}

int store_get_run(struct store *st, int64_t id, struct run_row *out)
{
	sqlite3_stmt *s;
	const char *sql = id > 0 ? "SELECT " RUN_COLUMNS " FROM runs WHERE id = ?1"
	                         : "SELECT " RUN_COLUMNS " FROM runs ORDER BY id DESC LIMIT 1";
	memset(out, 0, sizeof(*out));
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
		return read_error(st);
	if (id > 0)
		sqlite3_bind_int64(s, 1, id);
	int rc = sqlite3_step(s);
	int ret = 0;
	if (rc == SQLITE_ROW)
		read_run_row(s, out);
	else if (rc == SQLITE_DONE)
		ret = 1;
	else
		ret = read_error(st);
	sqlite3_finalize(s);
	return ret;
}

static void read_run(sqlite3_stmt *s, void *row)
{
	read_run_row(s, row);
}

static void drop_runs(void *rows, size_t n)
{
	run_rows_free(rows, n);
}

int store_list_runs(struct store *st, struct run_row **out, size_t *n)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	if (sqlite3_prepare_v2(st->db, "SELECT " RUN_COLUMNS " FROM runs ORDER BY id DESC", -1, &s, NULL) != SQLITE_OK)
		return read_error(st);
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_run, drop_runs, n, &rc);
	return rc;
}

void run_rows_free(struct run_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		run_row_release(&rows[i]);
	free(rows);
}

/* Read the memory columns from index first (see bind_mem). */
static void read_mem(sqlite3_stmt *s, int first, struct mem_sample *m)
{
	m->nprocs = sqlite3_column_int(s, first);
	m->rss = db_to_u64(sqlite3_column_int64(s, first + 1));
	m->pss = db_to_u64(sqlite3_column_int64(s, first + 2));
	m->uss = db_to_u64(sqlite3_column_int64(s, first + 3));
	m->swap = db_to_u64(sqlite3_column_int64(s, first + 4));
	m->has_cgroup = sqlite3_column_type(s, first + 5) != SQLITE_NULL;
	m->cgroup = m->has_cgroup ? db_to_u64(sqlite3_column_int64(s, first + 5)) : 0;
	m->has_gpu = sqlite3_column_type(s, first + 6) != SQLITE_NULL;
	m->gpu = m->has_gpu ? db_to_u64(sqlite3_column_int64(s, first + 6)) : 0;
	m->pss_exact = sqlite3_column_int(s, first + 7) != 0;
}

static void read_sample(sqlite3_stmt *s, void *row)
{
	struct mem_sample *m = row;
	m->t = sqlite3_column_double(s, 0);
	read_mem(s, 1, m);
}

int store_load_samples(struct store *st, int64_t run_id, struct mem_sample **out, size_t *n)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	if (prepare_read(st, "SELECT t, nprocs, rss, pss, uss, swap, cgroup, gpu, pss_exact FROM samples"
	                 " WHERE run_id = ?1 ORDER BY t, rowid", run_id, &s) < 0)
		return -1;
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_sample, NULL, n, &rc);
	return rc;
}

static void read_step(sqlite3_stmt *s, void *row)
{
	struct step_rec *r = row;
	r->step = sqlite3_column_int64(s, 0);
	r->epoch = sqlite3_column_int64(s, 1);
	r->mem.t = sqlite3_column_double(s, 2);
	read_mem(s, 3, &r->mem);
}

int store_load_steps(struct store *st, int64_t run_id, struct step_rec **out, size_t *n)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	if (prepare_read(st, "SELECT step, coalesce(epoch, -1), t, nprocs, rss, pss, uss, swap, cgroup, gpu,"
	                 " pss_exact FROM steps WHERE run_id = ?1 ORDER BY t, rowid", run_id, &s) < 0)
		return -1;
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_step, NULL, n, &rc);
	return rc;
}

static void read_metric(sqlite3_stmt *s, void *row)
{
	struct metric_row *m = row;
	m->step = sqlite3_column_int64(s, 0);
	m->t = sqlite3_column_double(s, 1);
	col_strcpy(s, 2, m->name, sizeof(m->name));
	m->value = sqlite3_column_type(s, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(s, 3);
}

int store_load_metrics(struct store *st, int64_t run_id, struct metric_row **out, size_t *n)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	if (prepare_read(st, "SELECT step, t, name, value FROM metrics WHERE run_id = ?1 ORDER BY t, rowid",
	                 run_id, &s) < 0)
		return -1;
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_metric, NULL, n, &rc);
	return rc;
}

static void read_event(sqlite3_stmt *s, void *row)
{
	struct event_row *e = row;
	e->t = sqlite3_column_double(s, 0);
	col_strcpy(s, 1, e->kind, sizeof(e->kind));
	e->detail = col_strdup(s, 2);
}

static void drop_events(void *rows, size_t n)
{
	event_rows_free(rows, n);
}

int store_load_events(struct store *st, int64_t run_id, struct event_row **out, size_t *n)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	if (prepare_read(st, "SELECT t, kind, detail FROM events WHERE run_id = ?1 ORDER BY t, rowid",
	                 run_id, &s) < 0)
		return -1;
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_event, drop_events, n, &rc);
	return rc;
}

void event_rows_free(struct event_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(rows[i].detail);
	free(rows);
}

static void read_result(sqlite3_stmt *s, void *row)
{
	struct result_row *r = row;
	col_strcpy(s, 0, r->name, sizeof(r->name));
	r->value = sqlite3_column_type(s, 1) == SQLITE_NULL ? NAN : sqlite3_column_double(s, 1);
}

int store_load_results(struct store *st, int64_t run_id, struct result_row **out, size_t *n)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	if (prepare_read(st, "SELECT name, value FROM results WHERE run_id = ?1 ORDER BY name", run_id, &s) < 0)
		return -1;
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_result, NULL, n, &rc);
	return rc;
}

static void read_proc(sqlite3_stmt *s, void *row)
{
	struct proc_row *p = row;
	p->pid = sqlite3_column_int(s, 0);
	p->ppid = sqlite3_column_int(s, 1);
	col_strcpy(s, 2, p->name, sizeof(p->name));
	p->rss = db_to_u64(sqlite3_column_int64(s, 3));
	p->pss = db_to_u64(sqlite3_column_int64(s, 4));
	p->uss = db_to_u64(sqlite3_column_int64(s, 5));
	p->swap = db_to_u64(sqlite3_column_int64(s, 6));
	p->gpu = db_to_u64(sqlite3_column_int64(s, 7));
	p->t = sqlite3_column_double(s, 8);
}

int store_top_procs(struct store *st, int64_t run_id, struct proc_row **out, size_t *n, size_t max)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	/* SQLite takes the bare columns from the row holding max(pss). */
	if (prepare_read(st, "SELECT pid, ppid, name, rss, max(pss) AS top, uss, swap, gpu, t FROM proc_samples"
	                 " WHERE run_id = ?1 GROUP BY pid, name ORDER BY top DESC, pid LIMIT ?2", run_id, &s) < 0)
		return -1;
	sqlite3_bind_int64(s, 2, max > (size_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)max);
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_proc, NULL, n, &rc);
	return rc;
}

static void read_segment(sqlite3_stmt *s, void *row)
{
	struct segment_row *g = row;
	g->seq = sqlite3_column_int64(s, 0);
	g->pid = sqlite3_column_int(s, 1);
	g->started_at = sqlite3_column_double(s, 2);
	g->ended_at = sqlite3_column_double(s, 3);
	g->exit_code = sqlite3_column_int(s, 4);
	g->exit_signal = sqlite3_column_int(s, 5);
	g->cause = col_strdup(s, 6);
	g->evidence = col_strdup(s, 7);
	g->has_step = sqlite3_column_type(s, 8) != SQLITE_NULL;
	g->end_step = sqlite3_column_int64(s, 8);
	g->memory_bytes = db_to_u64(sqlite3_column_int64(s, 9));
	g->restart = col_strdup(s, 10);
}

static void drop_segments(void *rows, size_t n)
{
	segment_rows_free(rows, n);
}

int store_load_segments(struct store *st, int64_t run_id, struct segment_row **out, size_t *n)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	if (prepare_read(st, "SELECT seq, coalesce(pid, 0), started_at, coalesce(ended_at, 0),"
	                 " coalesce(exit_code, -1), coalesce(exit_signal, 0), cause, evidence,"
	                 " end_step, coalesce(memory_bytes, 0), restart"
	                 " FROM segments WHERE run_id = ?1 ORDER BY seq", run_id, &s) < 0)
		return -1;
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_segment, drop_segments, n, &rc);
	return rc;
}

void segment_rows_free(struct segment_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(rows[i].cause);
		free(rows[i].evidence);
		free(rows[i].restart);
	}
	free(rows);
}

/* ---- traced runs (store/trace.h) ------------------------------------- */

int store_trace_begin(struct store *st, int64_t run_id, int64_t mean_bytes)
{
	sqlite3_stmt *s;
	if (check_writable(st) < 0)
		return -1;
	if (sqlite3_prepare_v2(st->db, "UPDATE runs SET trace_mean = ?2 WHERE id = ?1", -1, &s, NULL) != SQLITE_OK)
		return write_error(st, "the trace settings");
	sqlite3_bind_int64(s, 1, run_id);
	sqlite3_bind_int64(s, 2, mean_bytes);
	int rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : write_error(st, "the trace settings");
}

int store_trace_write(struct store *st, int64_t run_id, double t, bool has_step, int64_t step,
                      struct trace_site **sites, size_t n)
{
	if (check_writable(st) < 0)
		return -1;
	if (!n)
		return 0;
	sqlite3_stmt *site = NULL, *live = NULL;
	bool ok = exec_sql(st, "BEGIN") == SQLITE_OK &&
	          sqlite3_prepare_v2(st->db, "INSERT OR IGNORE INTO trace_sites (run_id, site, kind, frames, python)"
	                             " VALUES (?1, ?2, ?3, ?4, ?5)", -1, &site, NULL) == SQLITE_OK &&
	          sqlite3_prepare_v2(st->db, "INSERT OR REPLACE INTO trace_live (run_id, t, site, step, live)"
	                             " VALUES (?1, ?2, ?3, ?4, ?5)", -1, &live, NULL) == SQLITE_OK;
	for (size_t i = 0; ok && i < n; i++) {
		const struct trace_site *ts = sites[i];
		if (!ts->announced) {
			char kind[2] = { ts->kind, '\0' };
			sqlite3_bind_int64(site, 1, run_id);
			sqlite3_bind_int64(site, 2, ts->id);
			sqlite3_bind_text(site, 3, kind, -1, SQLITE_TRANSIENT);
			sqlite3_bind_text(site, 4, ts->frames, -1, SQLITE_STATIC);
			if (ts->python)
				sqlite3_bind_text(site, 5, ts->python, -1, SQLITE_STATIC);
			else
				sqlite3_bind_null(site, 5);
			ok = step_done(site) == SQLITE_OK;
		}
		sqlite3_bind_int64(live, 1, run_id);
		sqlite3_bind_double(live, 2, t);
		sqlite3_bind_int64(live, 3, ts->id);
		if (has_step)
			sqlite3_bind_int64(live, 4, step);
		else
			sqlite3_bind_null(live, 4);
		sqlite3_bind_int64(live, 5, ts->live);
		ok = ok && step_done(live) == SQLITE_OK;
	}
	ok = ok && exec_sql(st, "COMMIT") == SQLITE_OK;
	sqlite3_finalize(site);
	sqlite3_finalize(live);
	if (!ok) {
		int r = write_error(st, "allocation sites");
		if (!sqlite3_get_autocommit(st->db))
			exec_sql(st, "ROLLBACK");
		return r;
	}
	for (size_t i = 0; i < n; i++)
		sites[i]->announced = true;
	return 0;
}

int store_trace_sites_end(struct store *st, int64_t run_id, const struct trace_site *const *sites, size_t n)
{
	sqlite3_stmt *s = NULL;
	if (check_writable(st) < 0)
		return -1;
	bool ok = exec_sql(st, "BEGIN") == SQLITE_OK &&
	          sqlite3_prepare_v2(st->db, "UPDATE trace_sites SET live = ?3, allocs = ?4, frees = ?5"
	                             " WHERE run_id = ?1 AND site = ?2", -1, &s, NULL) == SQLITE_OK;
	for (size_t i = 0; ok && i < n; i++) {
		sqlite3_bind_int64(s, 1, run_id);
		sqlite3_bind_int64(s, 2, sites[i]->id);
		sqlite3_bind_int64(s, 3, sites[i]->live);
		sqlite3_bind_int64(s, 4, sites[i]->allocs);
		sqlite3_bind_int64(s, 5, sites[i]->frees);
		ok = step_done(s) == SQLITE_OK;
	}
	ok = ok && exec_sql(st, "COMMIT") == SQLITE_OK;
	sqlite3_finalize(s);
	if (!ok) {
		int r = write_error(st, "allocation sites");
		if (!sqlite3_get_autocommit(st->db))
			exec_sql(st, "ROLLBACK");
		return r;
	}
	return 0;
}

int store_trace_set_symbols(struct store *st, int64_t run_id, const int64_t *sites, char *const *symbols, size_t n)
{
	sqlite3_stmt *s = NULL;
	if (check_writable(st) < 0)
		return -1;
	bool ok = exec_sql(st, "BEGIN") == SQLITE_OK &&
	          sqlite3_prepare_v2(st->db, "UPDATE trace_sites SET symbols = ?3 WHERE run_id = ?1 AND site = ?2",
	                             -1, &s, NULL) == SQLITE_OK;
	for (size_t i = 0; ok && i < n; i++) {
		sqlite3_bind_int64(s, 1, run_id);
		sqlite3_bind_int64(s, 2, sites[i]);
		sqlite3_bind_text(s, 3, symbols[i], -1, SQLITE_STATIC);
		ok = step_done(s) == SQLITE_OK;
	}
	ok = ok && exec_sql(st, "COMMIT") == SQLITE_OK;
	sqlite3_finalize(s);
	if (!ok) {
		int r = write_error(st, "symbols of allocation sites");
		if (!sqlite3_get_autocommit(st->db))
			exec_sql(st, "ROLLBACK");
		return r;
	}
	return 0;
}

int store_trace_mean(struct store *st, int64_t run_id, int64_t *mean_bytes)
{
	sqlite3_stmt *s;
	*mean_bytes = 0;
	if (prepare_read(st, "SELECT coalesce(trace_mean, 0) FROM runs WHERE id = ?1", run_id, &s) < 0)
		return -1;
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*mean_bytes = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : read_error(st);
}

static char *col_strdup_or_null(sqlite3_stmt *s, int col)
{
	return sqlite3_column_type(s, col) == SQLITE_NULL ? NULL : col_strdup(s, col);
}

static void read_trace_site(sqlite3_stmt *s, void *row)
{
	struct trace_site_row *r = row;
	r->site = sqlite3_column_int64(s, 0);
	const unsigned char *k = sqlite3_column_text(s, 1);
	r->kind = k && *k ? (char)*k : 'm';
	r->frames = col_strdup(s, 2);
	r->python = col_strdup_or_null(s, 3);
	r->symbols = col_strdup_or_null(s, 4);
	r->live = sqlite3_column_int64(s, 5);
	r->allocs = sqlite3_column_int64(s, 6);
	r->frees = sqlite3_column_int64(s, 7);
}

static void drop_trace_sites(void *rows, size_t n)
{
	trace_site_rows_free(rows, n);
}

void trace_site_rows_free(struct trace_site_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(rows[i].frames);
		free(rows[i].python);
		free(rows[i].symbols);
	}
	free(rows);
}

int store_trace_load_sites(struct store *st, int64_t run_id, struct trace_site_row **out, size_t *n)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	if (prepare_read(st, "SELECT site, kind, frames, python, symbols, coalesce(live, 0), coalesce(allocs, 0),"
	                 " coalesce(frees, 0) FROM trace_sites WHERE run_id = ?1 ORDER BY site", run_id, &s) < 0)
		return -1;
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_trace_site, drop_trace_sites, n, &rc);
	return rc;
}

static void read_trace_live(sqlite3_stmt *s, void *row)
{
	struct trace_live_row *r = row;
	r->t = sqlite3_column_double(s, 0);
	r->site = sqlite3_column_int64(s, 1);
	r->has_step = sqlite3_column_type(s, 2) != SQLITE_NULL;
	r->step = sqlite3_column_int64(s, 2);
	r->live = sqlite3_column_int64(s, 3);
}

int store_trace_load_live(struct store *st, int64_t run_id, struct trace_live_row **out, size_t *n)
{
	sqlite3_stmt *s;
	*out = NULL;
	*n = 0;
	if (prepare_read(st, "SELECT t, site, step, live FROM trace_live WHERE run_id = ?1 ORDER BY t, site",
	                 run_id, &s) < 0)
		return -1;
	int rc;
	*out = load_rows(st, s, sizeof(**out), read_trace_live, NULL, n, &rc);
	return rc;
}
