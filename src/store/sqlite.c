/*
 * sqlite.c — the SQLite backend of the store's driver (store/db.h); the only
 * file that includes sqlite3.h.
 *
 * A store string that is not a URI of another backend is a path: the file
 * is created with its missing directories when opened for writing, and
 * opened in WAL mode (readers never block the writer nor it them) with
 * synchronous = NORMAL (a commit survives a crash of leakproof; power loss
 * can lose the last one) and a busy timeout of 5 s. The schema version is
 * PRAGMA user_version, and PRAGMA application_id 'LKPF' marks the file as a
 * leakproof store. BEGIN, COMMIT and ROLLBACK are statements prepared once
 * per connection: a flush runs them once a second on cold caches. A writer
 * keeps RESERVE_BYTES of the store's file system for the end of its run,
 * which a full disk must not lose (make_reserve()).
 */
#include "store/db.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "util/util.h"

#define BUSY_TIMEOUT_MS 5000
/* 'LKPF': marks the file as a leakproof store (PRAGMA application_id). */
#define APPLICATION_ID 0x4c4b5046

enum { TX_BEGIN, TX_BEGIN_IMMEDIATE, TX_COMMIT, TX_ROLLBACK, TX_COUNT };
static const char *const tx_sql[TX_COUNT] = { "BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK" };

/* Room a writer keeps on the store's file system for the end of its run
 * (see make_reserve()): the few pages of the end, each commit appended to
 * the write-ahead log, with a margin for a checkpoint. */
#define RESERVE_BYTES (256 * 1024)

struct lite_db {
	struct db base;
	sqlite3 *db;
	sqlite3_stmt *tx[TX_COUNT];   /* prepared at their first use */
	char msg[512];                /* errmsg() with the system's reason */
	int reserve_fd;               /* the reserve, an unnamed file; -1: none */
};

struct lite_stmt {
	struct db_stmt base;
	sqlite3_stmt *s;
};

static sqlite3 *handle(struct db *db)
{
	return ((struct lite_db *)db)->db;
}

static sqlite3_stmt *stmt(struct db_stmt *s)
{
	return ((struct lite_stmt *)s)->s;
}

static enum db_rc map_rc(int rc)
{
	switch (rc) {
	case SQLITE_OK: return DB_OK;
	case SQLITE_ROW: return DB_ROW;
	case SQLITE_DONE: return DB_DONE;
	case SQLITE_BUSY: case SQLITE_LOCKED: return DB_BUSY;
	case SQLITE_FULL: return DB_FULL;
	default: return DB_ERROR;
	}
}

/* Create the directories leading to path (not path itself). 0 or -1 with a
 * message in why. */
static int make_parent_dirs(const char *path, char *why, size_t whysz)
{
	char dir[PATH_MAX];
	if (strncmp(path, "file:", 5) == 0)
		return 0;   /* an SQLite URI: its directory is not made (it was made as "file:" here) */
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

/* The hex digit c's value, or -1. */
static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Whether the n bytes at p, %-decoded as in a URI, are the string want. */
static bool uri_part_is(const char *p, size_t n, const char *want)
{
	for (; n; want++) {
		char c = *p++;
		n--;
		if (c == '%' && n >= 2 && hexval(p[0]) >= 0 && hexval(p[1]) >= 0) {
			c = (char)(hexval(p[0]) * 16 + hexval(p[1]));
			p += 2;
			n -= 2;
		}
		if (!*want || *want != c)
			return false;
	}
	return *want == '\0';
}

/*
 * A store string that SQLite would keep in memory or in a temporary file
 * deleted on close: ":memory:", and the URIs (SQLite is built to take
 * "file:" URIs as file names) "file::memory:", "file:" with no path,
 * "?mode=memory" and "?vfs=memdb". A run written there is lost.
 */
static const char *lite_refuse_target(const char *t)
{
	static const char memory[] = "an in-memory database keeps nothing after the run ends; give the path of a file";
	if (!strcmp(t, ":memory:"))
		return memory;
	if (strncmp(t, "file:", 5) != 0)
		return NULL;
	const char *p = t + 5;
	if (!strncmp(p, "//", 2))
		p += 2 + strcspn(p + 2, "/?#");   /* the authority */
	size_t n = strcspn(p, "?#");
	if (n == 0)
		return "a URI without a file name is a temporary database, deleted when the run ends; give the path of a file";
	if (uri_part_is(p, n, ":memory:"))
		return memory;
	for (const char *q = p + n; *q == '?' || *q == '&'; ) {
		q++;
		size_t len = strcspn(q, "&#"), klen = strcspn(q, "=&#");
		if (klen < len) {
			const char *v = q + klen + 1;
			size_t vlen = len - klen - 1;
			if ((uri_part_is(q, klen, "mode") && uri_part_is(v, vlen, "memory")) ||
			    (uri_part_is(q, klen, "vfs") && uri_part_is(v, vlen, "memdb")))
				return memory;
		}
		q += len;
	}
	return NULL;
}

/* Why a writer cannot write to the store at path, into why: the file is
 * not writable (a read-only file system, another user's file), or its
 * directory is not, where SQLite must create the write-ahead log and its
 * index. false when neither is known (or path is a URI). */
static bool unwritable_reason(const char *path, char *why, size_t whysz)
{
	char dir[PATH_MAX], wal[PATH_MAX];
	if (!strncmp(path, "file:", 5))
		return false;
	if (access(path, F_OK) == 0 && access(path, W_OK) < 0) {
		snprintf(why, whysz, "%s", strerror(errno));
		return true;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		slash[slash == dir] = '\0';
	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (access(wal, F_OK) < 0 && access(dir, W_OK) < 0) {
		snprintf(why, whysz, "%s (SQLite makes its write-ahead log in the directory '%s')",
		         strerror(errno), dir);
		return true;
	}
	return false;
}

static void lite_close(struct db *db)
{
	struct lite_db *d = (struct lite_db *)db;
	for (int i = 0; i < TX_COUNT; i++)
		sqlite3_finalize(d->tx[i]);
	sqlite3_close(d->db);
	if (d->reserve_fd >= 0)
		close(d->reserve_fd);
	free(d);
}

/* Read the schema: a read-only connection finds here whether it can read
 * the file at all (a WAL store needs its -shm index), waiting for a writer
 * as any read does. SQLite's code. */
static int probe(sqlite3 *db)
{
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
	return sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
}

/* path as an SQLite URI of the same file opened immutable: SQLite then
 * takes no lock and makes no -shm (for a store whose directory cannot be
 * written, whose write-ahead log is checkpointed). */
static void immutable_uri(const char *path, char *uri, size_t cap)
{
	size_t n = (size_t)snprintf(uri, cap, "file:%s", path[0] == '/' ? "//" : "");
	for (const unsigned char *p = (const unsigned char *)path; *p && n + 4 < cap; p++) {
		if (*p == '%' || *p == '?' || *p == '#' || *p <= ' ' || *p >= 0x7f)
			n += (size_t)snprintf(uri + n, cap - n, "%%%02X", *p);
		else
			uri[n++] = (char)*p;
	}
	snprintf(uri + n, cap - n, "?immutable=1");
}

/*
 * A reader. A store in WAL mode is read through its -shm index, which
 * SQLite creates beside it when missing: in a directory this user cannot
 * write (a read-only file system, another user's store) that fails. When
 * the write-ahead log is absent or empty (every commit checkpointed into
 * the file: the last writer closed it), the file is read as immutable,
 * as it is; otherwise the commits in the log cannot be read, and why says
 * so. Another user's store whose writers are all gone (no -wal, no -shm) is
 * read so at once: the -wal and -shm SQLite would make beside it would be
 * this user's, and its owner's next run could not write them (in a shared
 * directory with the sticky bit, nor remove them).
 */
static int open_reader(struct lite_db *d, const char *path, char *why, size_t whysz)
{
	char wal[PATH_MAX], shm[PATH_MAX], uri[3 * PATH_MAX + 32];
	struct stat sb;
	snprintf(wal, sizeof(wal), "%s-wal", path);
	snprintf(shm, sizeof(shm), "%s-shm", path);
	bool uri_path = strncmp(path, "file:", 5) == 0;
	bool foreign = !uri_path && geteuid() != 0 && stat(path, &sb) == 0 && sb.st_uid != geteuid() &&
	               stat(wal, &sb) != 0 && stat(shm, &sb) != 0;
	int rc = SQLITE_CANTOPEN;
	if (!foreign) {
		rc = sqlite3_open_v2(path, &d->db, SQLITE_OPEN_READONLY, NULL);
		if (rc == SQLITE_OK)
			rc = probe(d->db);
	}
	int primary = d->db ? sqlite3_extended_errcode(d->db) & 0xff : rc;
	if (rc == SQLITE_OK || uri_path ||
	    (primary != SQLITE_CANTOPEN && primary != SQLITE_READONLY && primary != SQLITE_IOERR))
		goto out;
	if (stat(wal, &sb) == 0 && sb.st_size > 0) {
		snprintf(why, whysz, "%s; its write-ahead log '%s' holds commits that were not checkpointed"
		         " and cannot be read without writing beside it", sqlite3_errmsg(d->db), wal);
		return -1;
	}
	sqlite3_close(d->db);
	d->db = NULL;
	immutable_uri(path, uri, sizeof(uri));
	rc = sqlite3_open_v2(uri, &d->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
	if (rc == SQLITE_OK)
		rc = probe(d->db);
out:
	if (rc != SQLITE_OK && rc != SQLITE_NOTADB) {
		/* not a database: said when its version is read */
		snprintf(why, whysz, "%s", d->db ? sqlite3_errmsg(d->db) : "out of memory");
		return -1;
	}
	return 0;
}

/* A writer: the file (created with its directories when missing) must be
 * writable, and so must its directory while there is no write-ahead log:
 * else DB_OPEN_UNWRITABLE with the reason. */
static int open_writer(struct lite_db *d, const char *path, char *why, size_t whysz)
{
	if (make_parent_dirs(path, why, whysz) < 0)
		return DB_OPEN_FAILED;
	int rc = sqlite3_open_v2(path, &d->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc == SQLITE_OK && sqlite3_db_readonly(d->db, "main") != 1 && !unwritable_reason(path, why, whysz))
		return 0;
	if (unwritable_reason(path, why, whysz))
		return DB_OPEN_UNWRITABLE;
	if (rc == SQLITE_OK) {
		snprintf(why, whysz, "the file is read-only");
		return DB_OPEN_UNWRITABLE;
	}
	snprintf(why, whysz, "%s", d->db ? sqlite3_errmsg(d->db) : "out of memory");
	return DB_OPEN_FAILED;
}

static int lite_open(const char *path, bool readonly, struct db **out, char *why, size_t whysz)
{
	struct stat sb;
	*out = NULL;
	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		snprintf(why, whysz, "is a directory");
		return DB_OPEN_FAILED;
	}
	if (readonly && stat(path, &sb) < 0) {
		snprintf(why, whysz, "%s%s", strerror(errno),
		         errno == ENOENT ? " (no run has been recorded there; see `leakproof run --store`)" : "");
		return DB_OPEN_FAILED;
	}

	struct lite_db *d = xcalloc(1, sizeof(*d));
	d->base.drv = &db_sqlite_driver;
	d->reserve_fd = -1;
	int rc = readonly ? open_reader(d, path, why, whysz) : open_writer(d, path, why, whysz);
	if (rc < 0) {
		lite_close(&d->base);
		return rc;
	}
	sqlite3_extended_result_codes(d->db, 0);
	sqlite3_busy_timeout(d->db, BUSY_TIMEOUT_MS);
	*out = &d->base;
	return 0;
}

/* WAL: readers do not block the writer nor it them; NORMAL sync is durable
 * across a crash of leakproof, and loses at most the last commit on power
 * loss. Set once the file is known to be a store this build can use: a
 * store refused is left as it was. Switching a new file to WAL takes an
 * exclusive lock and answers SQLITE_BUSY at once, without the busy
 * handler, while another process holds the file (eight runs starting on a
 * new store): it is tried again for as long as the busy timeout. */
static enum db_rc lite_setup_writer(struct db *db)
{
	const char *sql = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
	                  " PRAGMA journal_size_limit = 67108864";
	int rc;
	for (int waited_ms = 0; ; waited_ms += 5) {
		rc = sqlite3_exec(handle(db), sql, NULL, NULL, NULL);
		if (rc != SQLITE_BUSY || waited_ms >= BUSY_TIMEOUT_MS)
			break;
		sqlite3_sleep(5);
	}
	return map_rc(rc);
}

static enum db_rc lite_exec(struct db *db, const char *sql)
{
	return map_rc(sqlite3_exec(handle(db), sql, NULL, NULL, NULL));
}

static enum db_rc lite_prepare(struct db *db, const char *sql, bool persistent, struct db_stmt **out)
{
	sqlite3_stmt *s = NULL;
	*out = NULL;
	int rc = sqlite3_prepare_v3(handle(db), sql, -1, persistent ? SQLITE_PREPARE_PERSISTENT : 0, &s, NULL);
	if (rc != SQLITE_OK)
		return map_rc(rc);
	struct lite_stmt *ls = xmalloc(sizeof(*ls));
	ls->base.drv = &db_sqlite_driver;
	ls->s = s;
	*out = &ls->base;
	return DB_OK;
}

static void lite_finalize(struct db_stmt *s)
{
	sqlite3_finalize(stmt(s));
	free(s);
}

static void lite_bind_int64(struct db_stmt *s, int i, int64_t v)
{
	sqlite3_bind_int64(stmt(s), i, v);
}

static void lite_bind_double(struct db_stmt *s, int i, double v)
{
	sqlite3_bind_double(stmt(s), i, v);
}

static void lite_bind_text(struct db_stmt *s, int i, const char *v)
{
	sqlite3_bind_text(stmt(s), i, v, -1, SQLITE_TRANSIENT);
}

static void lite_bind_null(struct db_stmt *s, int i)
{
	sqlite3_bind_null(stmt(s), i);
}

static enum db_rc lite_step(struct db_stmt *s)
{
	return map_rc(sqlite3_step(stmt(s)));
}

static void lite_reset(struct db_stmt *s)
{
	sqlite3_reset(stmt(s));
}

static bool lite_column_is_null(struct db_stmt *s, int col)
{
	return sqlite3_column_type(stmt(s), col) == SQLITE_NULL;
}

static int64_t lite_column_int64(struct db_stmt *s, int col)
{
	return sqlite3_column_int64(stmt(s), col);
}

static double lite_column_double(struct db_stmt *s, int col)
{
	return sqlite3_column_double(stmt(s), col);
}

static const char *lite_column_text(struct db_stmt *s, int col)
{
	return (const char *)sqlite3_column_text(stmt(s), col);
}

static int64_t lite_changes(struct db *db)
{
	return sqlite3_changes64(handle(db));
}

static int64_t lite_last_insert_id(struct db *db)
{
	return sqlite3_last_insert_rowid(handle(db));
}

static enum db_rc tx(struct db *db, int which)
{
	struct lite_db *d = (struct lite_db *)db;
	if (!d->tx[which]) {
		int rc = sqlite3_prepare_v3(d->db, tx_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &d->tx[which], NULL);
		if (rc != SQLITE_OK)
			return map_rc(rc);
	}
	int rc = sqlite3_step(d->tx[which]);
	sqlite3_reset(d->tx[which]);
	return rc == SQLITE_DONE ? DB_OK : map_rc(rc);
}

static enum db_rc lite_begin(struct db *db, bool immediate)
{
	return tx(db, immediate ? TX_BEGIN_IMMEDIATE : TX_BEGIN);
}

static enum db_rc lite_commit(struct db *db)
{
	return tx(db, TX_COMMIT);
}

static enum db_rc lite_rollback(struct db *db)
{
	return tx(db, TX_ROLLBACK);
}

static bool lite_in_transaction(struct db *db)
{
	return !sqlite3_get_autocommit(handle(db));
}

/* An I/O error whose cause was a full disk is a full disk. */
static enum db_rc lite_errcode(struct db *db)
{
	int rc = sqlite3_errcode(handle(db));
	if (rc == SQLITE_IOERR && sqlite3_system_errno(handle(db)) == ENOSPC)
		return DB_FULL;
	return map_rc(rc);
}

/* SQLite's message, and for a failure of the file system ("disk I/O
 * error", "unable to open database file") the system's reason. */
static const char *lite_errmsg(struct db *db)
{
	struct lite_db *d = (struct lite_db *)db;
	int rc = sqlite3_errcode(d->db), sys = sqlite3_system_errno(d->db);
	if ((rc == SQLITE_IOERR || rc == SQLITE_CANTOPEN || rc == SQLITE_FULL) && sys > 0) {
		snprintf(d->msg, sizeof(d->msg), "%s (%s)", sqlite3_errmsg(d->db), strerror(sys));
		return d->msg;
	}
	return sqlite3_errmsg(d->db);
}

/* One integer from a statement without parameters. */
static int pragma_int(sqlite3 *db, const char *sql, int64_t *out)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

/* A file with another application id, or with tables but no version, is
 * something else's. One statement, so one read transaction: another
 * writer's migration is seen whole or not at all. */
static enum db_rc lite_get_version(struct db *db, int64_t *version, bool *foreign)
{
	sqlite3_stmt *s;
	*version = 0;
	*foreign = false;
	int rc = sqlite3_prepare_v2(handle(db), "SELECT user_version, application_id,"
	                            " (SELECT count(*) FROM sqlite_master)"
	                            " FROM pragma_user_version, pragma_application_id", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return map_rc(rc);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*version = sqlite3_column_int64(s, 0);
		int64_t app_id = sqlite3_column_int64(s, 1), ntables = sqlite3_column_int64(s, 2);
		*foreign = (app_id && app_id != APPLICATION_ID) || (*version == 0 && ntables > 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return map_rc(rc);
}

static enum db_rc lite_set_version(struct db *db, int64_t version)
{
	char sql[96];
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld; PRAGMA application_id = %d",
	         (long long)version, APPLICATION_ID);
	return lite_exec(db, sql);
}

static enum db_rc lite_set_size_limit(struct db *db, uint64_t max_bytes)
{
	int64_t page_size = 0, pages;
	int rc = pragma_int(handle(db), "PRAGMA page_size", &page_size);
	if (rc != SQLITE_OK)
		return map_rc(rc);
	if (page_size <= 0)
		return DB_ERROR;
	char sql[96];
	snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %llu",
	         (unsigned long long)(max_bytes / (uint64_t)page_size + 1));
	return map_rc(pragma_int(handle(db), sql, &pages));
}

/* A passive checkpoint copies the committed log into the file (pages
 * written in place) without waiting for anyone; when it is whole, the next
 * transaction writes the log from its start, in space the file system has
 * already given it. */
static bool lite_make_room(struct db *db)
{
	int log = 0, done = 0;
	int rc = sqlite3_wal_checkpoint_v2(handle(db), NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
	return rc == SQLITE_OK && done == log;
}

/*
 * The reserve: RESERVE_BYTES of the store's file system, held by this
 * writer in a file of its own beside the store that has no name (O_TMPFILE;
 * else a name removed at once), allocated (posix_fallocate) and closed on
 * exec. When the disk fills during a run, the writes of rows fail, and
 * so would the end of the run: the write-ahead log cannot grow by the
 * pages of its commit, and the checkpoint that would let it be written
 * over from its start cannot grow the store by the pages the log holds.
 * Closing the reserve gives its room back to the file system for the
 * end. A file, not pages in the store: what the log and a checkpoint need
 * is room on the file system, and pages freed inside the store would have
 * to be written through the log first. No file survives the writer, even
 * killed. 0, or -1 with the reason in why when the file system has not
 * the room (a full disk, a quota); a file system that cannot hold such a
 * file leaves the writer without a reserve.
 */
static int make_reserve(struct lite_db *d, char *why, size_t whysz)
{
	const char *file = sqlite3_db_filename(d->db, "main");
	char dir[PATH_MAX], name[PATH_MAX + 16];
	if (d->reserve_fd >= 0 || !file || !*file || snprintf(dir, sizeof(dir), "%s", file) >= (int)sizeof(dir))
		return 0;
	char *slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		slash[slash == dir] = '\0';
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && errno != ENOSPC && errno != EDQUOT) {
		/* a file system without unnamed files */
		snprintf(name, sizeof(name), "%s-reserve-XXXXXX", file);
		fd = mkostemp(name, O_CLOEXEC);
		if (fd >= 0)
			unlink(name);
	}
	int err = fd < 0 ? errno : posix_fallocate(fd, 0, RESERVE_BYTES);
	if (err == 0) {
		d->reserve_fd = fd;
		return 0;
	}
	if (fd >= 0)
		close(fd);
	if (err != ENOSPC && err != EDQUOT)
		return 0;
	snprintf(why, whysz, "no room to keep %d KiB for the end of a run: %s", RESERVE_BYTES / 1024, strerror(err));
	return -1;
}

static int lite_keep_reserve(struct db *db, char *why, size_t whysz)
{
	return make_reserve((struct lite_db *)db, why, whysz);
}

/* The reserve's room back to the file system; true when there was one. */
static bool lite_give_reserve(struct db *db)
{
	struct lite_db *d = (struct lite_db *)db;
	if (d->reserve_fd < 0)
		return false;
	close(d->reserve_fd);
	d->reserve_fd = -1;
	return true;
}

static size_t lite_memory_used(void)
{
	return (size_t)sqlite3_memory_used();
}

const struct db_driver db_sqlite_driver = {
	.name = "sqlite",
	.refuse_target = lite_refuse_target,
	.open = lite_open,
	.close = lite_close,
	.setup_writer = lite_setup_writer,
	.exec = lite_exec,
	.prepare = lite_prepare,
	.finalize = lite_finalize,
	.bind_int64 = lite_bind_int64,
	.bind_double = lite_bind_double,
	.bind_text = lite_bind_text,
	.bind_null = lite_bind_null,
	.step = lite_step,
	.reset = lite_reset,
	.column_is_null = lite_column_is_null,
	.column_int64 = lite_column_int64,
	.column_double = lite_column_double,
	.column_text = lite_column_text,
	.changes = lite_changes,
	.last_insert_id = lite_last_insert_id,
	.begin = lite_begin,
	.commit = lite_commit,
	.rollback = lite_rollback,
	.in_transaction = lite_in_transaction,
	.errcode = lite_errcode,
	.errmsg = lite_errmsg,
	.get_version = lite_get_version,
	.set_version = lite_set_version,
	.set_size_limit = lite_set_size_limit,
	.memory_used = lite_memory_used,
	.make_room = lite_make_room,
	.keep_reserve = lite_keep_reserve,
	.give_reserve = lite_give_reserve,
};
