/*
 * trace.c — allocation sites of traced runs in the store (store/trace.h):
 * each site's stacks once, its live bytes each time they changed, its final
 * counts, and the symbols `report --trace` names its frames with.
 *
 * The store remembers which sites of the run it is writing it has already
 * stored (a bit per site id; ids are 1, 2, ... per run), so each site's
 * stacks are written once, by the first store_trace_write() that carries
 * it and commits. Each call is one transaction.
 */
#include "store/trace.h"

#include <stdlib.h>
#include <string.h>

#include "store/internal.h"
#include "util/util.h"

/* Site ids beyond this are written every time (INSERT OR IGNORE keeps the
 * first) rather than remembered: the bitmap stays under 16 MiB. */
#define MAX_REMEMBERED_SITE ((int64_t)1 << 27)

/* Whether the site id of run_id was written before. */
static bool site_written(const struct store *st, int64_t run_id, int64_t id)
{
	if (st->trace_run != run_id || id < 0 || (uint64_t)id / 8 >= st->trace_written_bytes)
		return false;
	return st->trace_written[id / 8] >> (id % 8) & 1;
}

static void remember_site(struct store *st, int64_t run_id, int64_t id)
{
	if (id < 0 || id > MAX_REMEMBERED_SITE)
		return;
	if (st->trace_run != run_id) {
		st->trace_run = run_id;
		if (st->trace_written)
			memset(st->trace_written, 0, st->trace_written_bytes);
	}
	size_t byte = (size_t)id / 8;
	if (byte >= st->trace_written_bytes) {
		size_t n = st->trace_written_bytes ? st->trace_written_bytes : 64;
		while (n <= byte)
			n *= 2;
		st->trace_written = xrealloc(st->trace_written, n);
		memset(st->trace_written + st->trace_written_bytes, 0, n - st->trace_written_bytes);
		st->trace_written_bytes = n;
	}
	st->trace_written[byte] |= (unsigned char)(1u << (id % 8));
}

/* End a transaction of many rows: COMMIT when ok, else the message and
 * ROLLBACK. 0 or -1. */
static int end_transaction(struct store *st, bool ok, const char *what)
{
	if (ok && db_commit(st->db) == DB_OK)
		return 0;
	int r = store_write_error(st, what);
	if (db_in_transaction(st->db))
		db_rollback(st->db);
	return r;
}

int store_trace_begin(struct store *st, int64_t run_id, int64_t mean_bytes)
{
	struct db_stmt *s;
	if (store_check_writable(st) < 0)
		return -1;
	if (db_prepare(st->db, "UPDATE runs SET trace_mean = ?2 WHERE id = ?1", false, &s) != DB_OK)
		return store_write_error(st, "the trace settings");
	db_bind_int64(s, 1, run_id);
	db_bind_int64(s, 2, mean_bytes);
	int r = db_step(s) == DB_DONE ? 0 : store_write_error(st, "the trace settings");
	db_finalize(s);
	return r;
}

int store_trace_write(struct store *st, int64_t run_id, double t, bool has_step, int64_t step,
                      struct trace_site **sites, size_t n)
{
	if (store_check_writable(st) < 0)
		return -1;
	if (!n)
		return 0;
	struct db_stmt *site = NULL, *live = NULL;
	bool ok = db_begin(st->db, false) == DB_OK &&
	          db_prepare(st->db, "INSERT OR IGNORE INTO trace_sites (run_id, site, kind, frames, python)"
	                     " VALUES (?1, ?2, ?3, ?4, ?5)", false, &site) == DB_OK &&
	          db_prepare(st->db, "INSERT OR REPLACE INTO trace_live (run_id, t, site, step, live)"
	                     " VALUES (?1, ?2, ?3, ?4, ?5)", false, &live) == DB_OK;
	for (size_t i = 0; ok && i < n; i++) {
		const struct trace_site *ts = sites[i];
		if (!site_written(st, run_id, ts->id)) {
			char kind[2] = { ts->kind, '\0' };
			db_bind_int64(site, 1, run_id);
			db_bind_int64(site, 2, ts->id);
			db_bind_text(site, 3, kind);
			db_bind_text(site, 4, ts->frames);
			db_bind_text(site, 5, ts->python);
			ok = db_step_done(site) == DB_OK;
		}
		db_bind_int64(live, 1, run_id);
		db_bind_double(live, 2, t);
		db_bind_int64(live, 3, ts->id);
		if (has_step)
			db_bind_int64(live, 4, step);
		else
			db_bind_null(live, 4);
		db_bind_int64(live, 5, ts->live);
		ok = ok && db_step_done(live) == DB_OK;
	}
	db_finalize(site);
	db_finalize(live);
	if (end_transaction(st, ok, "allocation sites") < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		remember_site(st, run_id, sites[i]->id);
	return 0;
}

int store_trace_sites_end(struct store *st, int64_t run_id, const struct trace_site *const *sites, size_t n)
{
	struct db_stmt *s = NULL;
	if (store_check_writable(st) < 0)
		return -1;
	bool ok = db_begin(st->db, false) == DB_OK &&
	          db_prepare(st->db, "UPDATE trace_sites SET live = ?3, allocs = ?4, frees = ?5"
	                     " WHERE run_id = ?1 AND site = ?2", false, &s) == DB_OK;
	for (size_t i = 0; ok && i < n; i++) {
		db_bind_int64(s, 1, run_id);
		db_bind_int64(s, 2, sites[i]->id);
		db_bind_int64(s, 3, sites[i]->live);
		db_bind_int64(s, 4, sites[i]->allocs);
		db_bind_int64(s, 5, sites[i]->frees);
		ok = db_step_done(s) == DB_OK;
	}
	db_finalize(s);
	return end_transaction(st, ok, "allocation sites");
}

int store_trace_set_symbols(struct store *st, int64_t run_id, const int64_t *sites, char *const *symbols, size_t n)
{
	struct db_stmt *s = NULL;
	if (store_check_writable(st) < 0)
		return -1;
	bool ok = db_begin(st->db, false) == DB_OK &&
	          db_prepare(st->db, "UPDATE trace_sites SET symbols = ?3 WHERE run_id = ?1 AND site = ?2",
	                     false, &s) == DB_OK;
	for (size_t i = 0; ok && i < n; i++) {
		db_bind_int64(s, 1, run_id);
		db_bind_int64(s, 2, sites[i]);
		db_bind_text(s, 3, symbols[i]);
		ok = db_step_done(s) == DB_OK;
	}
	db_finalize(s);
	return end_transaction(st, ok, "symbols of allocation sites");
}

int store_trace_mean(struct store *st, int64_t run_id, int64_t *mean_bytes)
{
	struct db_stmt *s;
	*mean_bytes = 0;
	if (store_prepare_read(st, "SELECT coalesce(trace_mean, 0) FROM runs WHERE id = ?1", run_id, &s) < 0)
		return -1;
	enum db_rc rc = db_step(s);
	if (rc == DB_ROW)
		*mean_bytes = db_column_int64(s, 0);
	int r = rc == DB_ROW || rc == DB_DONE ? 0 : store_read_error(st);
	db_finalize(s);
	return r;
}

static void read_trace_site(struct db_stmt *s, void *row)
{
	struct trace_site_row *r = row;
	r->site = db_column_int64(s, 0);
	const char *k = db_column_text(s, 1);
	r->kind = k && *k ? (char)*k : 'm';
	r->frames = col_strdup(s, 2);
	r->python = col_strdup_or_null(s, 3);
	r->symbols = col_strdup_or_null(s, 4);
	r->live = db_column_int64(s, 5);
	r->allocs = db_column_int64(s, 6);
	r->frees = db_column_int64(s, 7);
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
	int rc;
	*out = store_select_rows(st, "SELECT site, kind, frames, python, symbols, coalesce(live, 0), coalesce(allocs, 0),"
	                         " coalesce(frees, 0) FROM trace_sites WHERE run_id = ?1 ORDER BY site",
	                         run_id, sizeof(**out), read_trace_site, drop_trace_sites, n, &rc);
	return rc;
}

static void read_trace_live(struct db_stmt *s, void *row)
{
	struct trace_live_row *r = row;
	r->t = db_column_double(s, 0);
	r->site = db_column_int64(s, 1);
	r->has_step = !db_column_is_null(s, 2);
	r->step = db_column_int64(s, 2);
	r->live = db_column_int64(s, 3);
}

int store_trace_load_live(struct store *st, int64_t run_id, struct trace_live_row **out, size_t *n)
{
	int rc;
	*out = store_select_rows(st, "SELECT t, site, step, live FROM trace_live WHERE run_id = ?1 ORDER BY t, site",
	                         run_id, sizeof(**out), read_trace_live, NULL, n, &rc);
	return rc;
}
