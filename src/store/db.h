/*
 * store/db.h — the thin database driver under the store: one interface over
 * the backends (SQLite today, PostgreSQL next), private to src/store/.
 *
 * The store's SQL text lives in its seam files (schema.c, runs.c, batch.c,
 * sweeps.c, trace.c) and is shared by every backend; a driver only connects,
 * prepares, binds, steps and reads columns, and keeps what is its own
 * (SQLite's file, pragmas and header fields; a server's connection). A new
 * backend is one file that fills a struct db_driver, plus one entry in the
 * table of db.c that says which store strings it takes.
 *
 * A connection and a statement begin with their driver, in the manner of
 * SQLite's sqlite3_file and its pMethods: the calls below are static inline
 * and cost one indirect call each, so the hot write path (a bind per column,
 * a step per row, on statements prepared once) stays what it was.
 *
 * Placeholders are `?NNN` (numbered, from 1) or `?`. Result codes are
 * enum db_rc; a failed call leaves its reason in db_errmsg(). Text bound is
 * copied. Text read from a column stays valid until the next step, reset or
 * finalize of that statement. Integers are 64-bit; NaN bound as a double is
 * stored as NULL.
 */
#ifndef LP_STORE_DB_H
#define LP_STORE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum db_rc {
	DB_OK = 0,
	DB_ROW,          /* step: a row is ready */
	DB_DONE,         /* step: no more rows */
	DB_BUSY,         /* another writer held the store too long */
	DB_FULL,         /* the disk (or the store's size limit) is full */
	DB_ERROR,        /* anything else */
};

/* What db_open() returns when it fails. */
enum { DB_OPEN_FAILED = -1, DB_OPEN_UNWRITABLE = -2 };

struct db_driver;
struct db { const struct db_driver *drv; };          /* a connection */
struct db_stmt { const struct db_driver *drv; };     /* a prepared statement */

struct db_driver {
	const char *name;                 /* "sqlite", "postgresql" */
	/* Whether a writer may use target: NULL when it may, else why not (a
	 * database that lives in memory and would lose the run). NULL: every
	 * target may. */
	const char *(*refuse_target)(const char *target);
	/* Connect to target (a path, a URI). readonly: never create nor write.
	 * 0 and *out; or DB_OPEN_FAILED, or DB_OPEN_UNWRITABLE (a writer's
	 * store it cannot write to: a read-only file system, another user's
	 * file or directory), with the reason in why (*out NULL). */
	int (*open)(const char *target, bool readonly, struct db **out, char *why, size_t whysz);
	void (*close)(struct db *db);                      /* NULL: nothing */
	/* A writable connection, once the store is known to be one this build
	 * can use (its version checked), before any migration: SQLite's
	 * journal mode. NULL: nothing to do. */
	enum db_rc (*setup_writer)(struct db *db);
	/* One or more statements without parameters nor rows. */
	enum db_rc (*exec)(struct db *db, const char *sql);
	/* persistent: the statement will be kept and reused many times. */
	enum db_rc (*prepare)(struct db *db, const char *sql, bool persistent, struct db_stmt **out);
	void (*finalize)(struct db_stmt *s);               /* NULL: nothing */
	void (*bind_int64)(struct db_stmt *s, int i, int64_t v);
	void (*bind_double)(struct db_stmt *s, int i, double v);
	void (*bind_text)(struct db_stmt *s, int i, const char *v);
	void (*bind_null)(struct db_stmt *s, int i);
	enum db_rc (*step)(struct db_stmt *s);
	void (*reset)(struct db_stmt *s);                  /* bindings are kept */
	bool (*column_is_null)(struct db_stmt *s, int col);
	int64_t (*column_int64)(struct db_stmt *s, int col);
	double (*column_double)(struct db_stmt *s, int col);
	const char *(*column_text)(struct db_stmt *s, int col);   /* NULL for NULL */
	int64_t (*changes)(struct db *db);                 /* rows the last statement changed */
	int64_t (*last_insert_id)(struct db *db);          /* of the last INSERT of a serial id */
	/* immediate: take the write lock now (SQLite's BEGIN IMMEDIATE), so
	 * what is read inside is not changed by another writer before COMMIT. */
	enum db_rc (*begin)(struct db *db, bool immediate);
	enum db_rc (*commit)(struct db *db);
	enum db_rc (*rollback)(struct db *db);
	bool (*in_transaction)(struct db *db);
	enum db_rc (*errcode)(struct db *db);              /* of the last failed call */
	const char *(*errmsg)(struct db *db);
	/* The schema version (0: empty, nothing there) and whether the database
	 * holds something that is not a leakproof store; the version is
	 * written inside a migration's transaction. */
	enum db_rc (*get_version)(struct db *db, int64_t *version, bool *foreign);
	enum db_rc (*set_version)(struct db *db, int64_t version);
	/* Optional (NULL: not supported): fail writes past max_bytes, as a
	 * full disk would (tests); bytes of heap the library holds in this
	 * process. */
	enum db_rc (*set_size_limit)(struct db *db, uint64_t max_bytes);
	/* Optional: after a write failed for a full disk, give back what the
	 * backend holds in reserve so that a retry may fit (SQLite: a
	 * checkpoint, after which the write-ahead log is written over from its
	 * start instead of grown). true when a retry is worth it. */
	bool (*make_room)(struct db *db);
	/* Optional: room kept on the store's disk for the end of a run, which
	 * a full disk must not lose (SQLite: sqlite.c's reserve). keep_reserve
	 * makes it when there is none: 0, or -1 with the reason in why when
	 * there is not the room. give_reserve gives it back for a write that
	 * failed for a full disk: true when there was one (a retry may fit). */
	int (*keep_reserve)(struct db *db, char *why, size_t whysz);
	bool (*give_reserve)(struct db *db);
	size_t (*memory_used)(void);
	/* Optional: rows this connection has dropped since it opened (a server
	 * unreachable past the driver's buffer), and why into why. The store
	 * marks its run partial when the count grows. NULL: never drops. */
	uint64_t (*dropped)(struct db *db, char *why, size_t whysz);
	/* Optional: after a call failed because the server went away (a
	 * restart), wait for it to be back, bounded as a writer's open is;
	 * true when it is, so that what failed may be tried again. false at
	 * once after any other failure. NULL: a store is never away. */
	bool (*wait_back)(struct db *db);
};

/* The backends, by the store string: db.c's table. */
extern const struct db_driver db_sqlite_driver;   /* sqlite.c */
extern const struct db_driver db_postgresql_driver;   /* postgres.c */

/* postgres.c: the store's SQL (SQLite's dialect) in PostgreSQL's.
 * ddl: a schema statement (types are translated too). *nparams gets the
 * highest placeholder; *conflict says what INSERT OR ... asked for (for
 * REPLACE the caller adds the ON CONFLICT clause, which needs the table's
 * key). The caller frees the result with free(). */
enum db_pg_conflict { DB_PG_PLAIN, DB_PG_IGNORE, DB_PG_REPLACE };
char *db_pg_translate(const char *sql, bool ddl, int *nparams, enum db_pg_conflict *conflict);

/* Text as a PostgreSQL server of encoding UTF8 takes it, and back: a job's
 * bytes (its working directory, a variable of its environment, a mark's
 * text) need not be UTF-8, and the server refuses a string that is not
 * ("invalid byte sequence for encoding "UTF8"", SQLSTATE 22021), where
 * SQLite keeps the bytes as they came. db_pg_text_encode() writes each
 * byte of v that is not part of valid UTF-8, and each byte of a code point
 * in U+10FF00..U+10FFFF (the escapes' own range, in the last private use
 * plane), as the code point U+10FF00 + the byte; NULL when v needs no
 * change, else a new string the caller frees with free().
 * db_pg_text_decode() turns every such code point back into its byte, in
 * place (never longer): what was stored reads back byte for byte. */
char *db_pg_text_encode(const char *v);
void db_pg_text_decode(char *v);

/* The store string fit to print: the password of a URI (`user:pass@`, or
 * `password=` in its query) is `***`. The caller frees it with free(). */
char *db_redact(const char *target);

/* The driver for a store string, or NULL with the reason in why (a backend
 * this build lacks). */
const struct db_driver *db_driver_for(const char *target, char *why, size_t whysz);
/* Why a writer may not use target (a backend's refuse_target, or a backend
 * this build lacks), or NULL; why is the buffer the reason may be put in. */
const char *db_refuse_target(const char *target, char *why, size_t whysz);
/* Open target with its driver: 0 and *out, or DB_OPEN_FAILED or
 * DB_OPEN_UNWRITABLE with why. */
int db_open(const char *target, bool readonly, struct db **out, char *why, size_t whysz);
/* Bytes of heap held by every backend's library in this process. */
size_t db_memory_used(void);

static inline void db_close(struct db *db)
{
	if (db && db->drv->close)
		db->drv->close(db);
}

static inline enum db_rc db_setup_writer(struct db *db)
{
	return db->drv->setup_writer ? db->drv->setup_writer(db) : DB_OK;
}

static inline enum db_rc db_exec(struct db *db, const char *sql)
{
	return db->drv->exec(db, sql);
}

/* *out NULL when it fails. */
static inline enum db_rc db_prepare(struct db *db, const char *sql, bool persistent, struct db_stmt **out)
{
	return db->drv->prepare(db, sql, persistent, out);
}

static inline void db_finalize(struct db_stmt *s)
{
	if (s && s->drv->finalize)
		s->drv->finalize(s);
}

static inline void db_bind_int64(struct db_stmt *s, int i, int64_t v) { s->drv->bind_int64(s, i, v); }
static inline void db_bind_double(struct db_stmt *s, int i, double v) { s->drv->bind_double(s, i, v); }
static inline void db_bind_null(struct db_stmt *s, int i) { s->drv->bind_null(s, i); }

/* NULL binds NULL. */
static inline void db_bind_text(struct db_stmt *s, int i, const char *v)
{
	if (v)
		s->drv->bind_text(s, i, v);
	else
		s->drv->bind_null(s, i);
}

static inline enum db_rc db_step(struct db_stmt *s) { return s->drv->step(s); }
static inline void db_reset(struct db_stmt *s) { s->drv->reset(s); }

static inline bool db_column_is_null(struct db_stmt *s, int col) { return s->drv->column_is_null(s, col); }
static inline int64_t db_column_int64(struct db_stmt *s, int col) { return s->drv->column_int64(s, col); }
static inline int db_column_int(struct db_stmt *s, int col) { return (int)s->drv->column_int64(s, col); }
static inline double db_column_double(struct db_stmt *s, int col) { return s->drv->column_double(s, col); }
static inline const char *db_column_text(struct db_stmt *s, int col) { return s->drv->column_text(s, col); }

static inline int64_t db_changes(struct db *db) { return db->drv->changes(db); }
static inline int64_t db_last_insert_id(struct db *db) { return db->drv->last_insert_id(db); }
static inline enum db_rc db_begin(struct db *db, bool immediate) { return db->drv->begin(db, immediate); }
static inline enum db_rc db_commit(struct db *db) { return db->drv->commit(db); }
static inline enum db_rc db_rollback(struct db *db) { return db->drv->rollback(db); }
static inline bool db_in_transaction(struct db *db) { return db->drv->in_transaction(db); }
static inline enum db_rc db_errcode(struct db *db) { return db->drv->errcode(db); }
static inline const char *db_errmsg(struct db *db) { return db->drv->errmsg(db); }
static inline enum db_rc db_get_version(struct db *db, int64_t *version, bool *foreign)
{
	return db->drv->get_version(db, version, foreign);
}
static inline enum db_rc db_set_version(struct db *db, int64_t version) { return db->drv->set_version(db, version); }
static inline bool db_make_room(struct db *db) { return db->drv->make_room && db->drv->make_room(db); }
static inline int db_keep_reserve(struct db *db, char *why, size_t whysz)
{
	return db->drv->keep_reserve ? db->drv->keep_reserve(db, why, whysz) : 0;
}
static inline bool db_give_reserve(struct db *db) { return db->drv->give_reserve && db->drv->give_reserve(db); }
static inline bool db_wait_back(struct db *db) { return db->drv->wait_back && db->drv->wait_back(db); }
static inline uint64_t db_dropped(struct db *db, char *why, size_t whysz)
{
	return db->drv->dropped ? db->drv->dropped(db, why, whysz) : 0;
}

/* Step a statement that returns no rows, then reset it: DB_OK or the
 * failure. */
static inline enum db_rc db_step_done(struct db_stmt *s)
{
	enum db_rc rc = db_step(s);
	db_reset(s);
	return rc == DB_DONE ? DB_OK : rc;
}

#endif
