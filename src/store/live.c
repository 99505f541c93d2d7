/*
 * live.c — the store's queries for `leakproof top` (store/live.h). Plain
 * SELECTs through the store's driver (db.h), so top reads an SQLite file
 * or a shared PostgreSQL store alike; one statement each, prepared at every
 * call: top makes a few of them per run a second, which costs microseconds
 * beside its drawing.
 */
#include "store/live.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"
#include "util/util.h"

static void read_live_run(struct db_stmt *s, void *row)
{
	struct live_run *r = row;
	r->id = db_column_int64(s, 0);
	r->ended_at = db_column_is_null(s, 1) ? 0 : db_column_double(s, 1);
}

int store_live_runs(struct store *st, double ended_since, struct live_run **out, size_t *n)
{
	struct db_stmt *s;
	int rc;
	*out = NULL;
	*n = 0;
	if (db_prepare(st->db, "SELECT id, ended_at FROM runs WHERE ended_at IS NULL OR ended_at >= ?1"
	                       " ORDER BY id DESC", false, &s) != DB_OK)
		return store_read_error(st);
	db_bind_double(s, 1, ended_since);
	*out = store_load_rows(st, s, sizeof(**out), read_live_run, NULL, n, &rc);
	return rc;
}

int store_live_tail(struct store *st, int64_t run_id, double after_t, size_t max,
                    struct mem_sample **out, size_t *n)
{
	struct db_stmt *s;
	int rc;
	*out = NULL;
	*n = 0;
	if (store_prepare_read(st, "SELECT t, nprocs, rss, pss, uss, swap, cgroup, gpu, pss_exact FROM samples"
	                           " WHERE run_id = ?1 AND t > ?3 ORDER BY t DESC LIMIT ?2", run_id, &s) < 0)
		return -1;
	db_bind_int64(s, 2, max > (size_t)INT64_MAX ? INT64_MAX : (int64_t)max);
	db_bind_double(s, 3, after_t);
	*out = store_load_rows(st, s, sizeof(**out), store_read_sample, NULL, n, &rc);
	if (rc < 0)
		return -1;
	for (size_t i = 0, j = *n; i + 1 < j; i++, j--) {   /* newest first -> oldest first */
		struct mem_sample tmp = (*out)[i];
		(*out)[i] = (*out)[j - 1];
		(*out)[j - 1] = tmp;
	}
	return 0;
}

int store_live_procs(struct store *st, int64_t run_id, struct proc_row **out, size_t *n)
{
	int rc;
	*out = store_select_rows(st, "SELECT pid, ppid, name, rss, pss, uss, swap, gpu, t FROM proc_samples"
	                         " WHERE run_id = ?1 AND t = (SELECT max(t) FROM proc_samples WHERE run_id = ?1)"
	                         " ORDER BY pss DESC, pid",
	                         run_id, sizeof(**out), store_read_proc, NULL, n, &rc);
	return rc;
}
