/*
 * common.c — the helpers every seam of the store shares (store/internal.h):
 * error reports in the store's wording, reading columns into strings, and
 * the one loop that reads a query's rows into an array.
 */
#include "store/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

char *col_strdup(struct db_stmt *s, int col)
{
	const char *p = db_column_text(s, col);
	return xstrdup(p ? p : "");
}

char *col_strdup_or_null(struct db_stmt *s, int col)
{
	return db_column_is_null(s, col) ? NULL : col_strdup(s, col);
}

void col_strcpy(struct db_stmt *s, int col, char *dst, size_t cap)
{
	const char *p = db_column_text(s, col);
	snprintf(dst, cap, "%s", p ? p : "");
}

const char *store_failure_reason(struct store *st, char *buf, size_t sz)
{
	if (db_errcode(st->db) == DB_BUSY && strcmp(st->db->drv->name, "sqlite"))
		snprintf(buf, sz, "%s", db_errmsg(st->db));   /* a server away: its own words */
	else if (db_errcode(st->db) == DB_BUSY)
		snprintf(buf, sz, "another process held its write lock for over 5 s (%s)", db_errmsg(st->db));
	else
		snprintf(buf, sz, "%s", db_errmsg(st->db));
	return buf;
}

static int write_failed(struct store *st, const char *what, bool rows_lost)
{
	char *reason = st->last_why;
	store_failure_reason(st, reason, sizeof(st->last_why));
	st->last_full = db_errcode(st->db) == DB_FULL;
	st->batch_failed = true;
	if (rows_lost && !st->lost) {
		st->lost = true;
		snprintf(st->lost_why, sizeof(st->lost_why), "%s", db_errmsg(st->db));
	}
	if (!st->write_failed) {
		st->write_failed = true;
		error("cannot write %s to store '%s': %s%s", what, st->path, reason,
		      !rows_lost ? " (kept for the next try)" :
		      db_errcode(st->db) == DB_FULL ? " (data from now on may be lost; the run will be marked partial)" :
		      " (the run will be marked partial)");
	}
	return -1;
}

int store_write_error(struct store *st, const char *what)
{
	return write_failed(st, what, true);
}

int store_write_delayed(struct store *st, const char *what)
{
	return write_failed(st, what, false);
}

void store_check_dropped(struct store *st)
{
	char why[256] = "";
	uint64_t n = db_dropped(st->db, why, sizeof(why));
	if (n <= st->dropped_seen)
		return;
	st->dropped_seen = n;
	if (!st->lost) {
		st->lost = true;
		st->lost_t = -1;   /* which rows: not known here */
		st->lost_gaps = true;
		snprintf(st->lost_why, sizeof(st->lost_why), "%s", why);
	}
}

int store_read_error(struct store *st)
{
	return error("cannot read store '%s': %s", st->path, db_errmsg(st->db));
}

int store_check_writable(struct store *st)
{
	if (st->readonly)
		return error("store '%s' is open read-only", st->path);
	return 0;
}

int store_prepare_read(struct store *st, const char *sql, int64_t run_id, struct db_stmt **s)
{
	if (db_prepare(st->db, sql, false, s) != DB_OK)
		return store_read_error(st);
	db_bind_int64(*s, 1, run_id);
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

void *store_load_rows(struct store *st, struct db_stmt *s, size_t size,
                      void (*read)(struct db_stmt *, void *), void (*drop)(void *, size_t),
                      size_t *n, int *rc)
{
	char *v = NULL;
	size_t len = 0, cap = 0;
	enum db_rc step;
	while ((step = db_step(s)) == DB_ROW) {
		v = grow(v, &cap, len, size);
		memset(v + len * size, 0, size);
		read(s, v + len * size);
		len++;
	}
	if (step != DB_DONE) {
		/* the message before finalize, which may clear it */
		*rc = store_read_error(st);
		db_finalize(s);
		if (drop)
			drop(v, len);
		else
			free(v);
		*n = 0;
		return NULL;
	}
	db_finalize(s);
	*n = len;
	*rc = 0;
	return v;
}

void *store_select_rows(struct store *st, const char *sql, int64_t run_id, size_t size,
                        void (*read)(struct db_stmt *, void *), void (*drop)(void *, size_t),
                        size_t *n, int *rc)
{
	struct db_stmt *s;
	*n = 0;
	*rc = store_prepare_read(st, sql, run_id, &s);
	return *rc < 0 ? NULL : store_load_rows(st, s, size, read, drop, n, rc);
}
