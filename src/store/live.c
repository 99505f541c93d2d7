/*
 * live.c — the store's queries for `leakproof top` (store/live.h). Plain
 * SELECTs through the store's connection, one statement each, prepared at
 * every call: top makes a few of them per run a second, which costs
 * microseconds beside its drawing.
 */
#include "store/live.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static int live_error(struct store *st)
{
	return error("cannot read store: %s", sqlite3_errmsg(store_handle(st)));
}

static uint64_t col_u64(sqlite3_stmt *s, int i)
{
	sqlite3_int64 v = sqlite3_column_int64(s, i);
	return v > 0 ? (uint64_t)v : 0;
}

/* Step s to its end, giving each row to read(s, row i of an array of
 * size-byte rows); finalizes s. The array in *out (NULL when empty). */
static int collect(struct store *st, sqlite3_stmt *s, size_t size, void (*read)(sqlite3_stmt *, void *),
                   void **out, size_t *n)
{
	char *v = NULL;
	size_t len = 0, cap = 0;
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (len == cap) {
			cap = cap ? 2 * cap : 16;
			v = xrealloc(v, cap * size);
		}
		memset(v + len * size, 0, size);
		read(s, v + len * size);
		len++;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		free(v);
		*out = NULL;
		*n = 0;
		return live_error(st);
	}
	*out = v;
	*n = len;
	return 0;
}

static void read_id(sqlite3_stmt *s, void *row)
{
	*(int64_t *)row = sqlite3_column_int64(s, 0);
}

int store_live_run_ids(struct store *st, double ended_since, int64_t **out, size_t *n)
{
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(store_handle(st),
	                       "SELECT id FROM runs WHERE ended_at IS NULL OR ended_at >= ?1 ORDER BY id DESC",
	                       -1, &s, NULL) != SQLITE_OK) {
		*out = NULL;
		*n = 0;
		return live_error(st);
	}
	sqlite3_bind_double(s, 1, ended_since);
	return collect(st, s, sizeof(**out), read_id, (void **)out, n);
}

static void read_sample(sqlite3_stmt *s, void *row)
{
	struct mem_sample *m = row;
	m->t = sqlite3_column_double(s, 0);
	m->nprocs = sqlite3_column_int(s, 1);
	m->rss = col_u64(s, 2);
	m->pss = col_u64(s, 3);
	m->uss = col_u64(s, 4);
	m->swap = col_u64(s, 5);
	m->has_cgroup = sqlite3_column_type(s, 6) != SQLITE_NULL;
	m->cgroup = col_u64(s, 6);
	m->has_gpu = sqlite3_column_type(s, 7) != SQLITE_NULL;
	m->gpu = col_u64(s, 7);
	m->pss_exact = sqlite3_column_int(s, 8) != 0;
}

int store_live_tail(struct store *st, int64_t run_id, double after_t, size_t max,
                    struct mem_sample **out, size_t *n)
{
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(store_handle(st),
	                       "SELECT t, nprocs, rss, pss, uss, swap, cgroup, gpu, pss_exact FROM samples"
	                       " WHERE run_id = ?1 AND t > ?3 ORDER BY t DESC, rowid DESC LIMIT ?2",
	                       -1, &s, NULL) != SQLITE_OK) {
		*out = NULL;
		*n = 0;
		return live_error(st);
	}
	sqlite3_bind_int64(s, 1, run_id);
	sqlite3_bind_int64(s, 2, max > (size_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)max);
	sqlite3_bind_double(s, 3, after_t);
	if (collect(st, s, sizeof(**out), read_sample, (void **)out, n) < 0)
		return -1;
	for (size_t i = 0, j = *n; i + 1 < j; i++, j--) {   /* newest first -> oldest first */
		struct mem_sample tmp = (*out)[i];
		(*out)[i] = (*out)[j - 1];
		(*out)[j - 1] = tmp;
	}
	return 0;
}

static void read_proc(sqlite3_stmt *s, void *row)
{
	struct proc_row *p = row;
	p->pid = sqlite3_column_int(s, 0);
	p->ppid = sqlite3_column_int(s, 1);
	const unsigned char *name = sqlite3_column_text(s, 2);
	snprintf(p->name, sizeof(p->name), "%s", name ? (const char *)name : "");
	p->rss = col_u64(s, 3);
	p->pss = col_u64(s, 4);
	p->uss = col_u64(s, 5);
	p->swap = col_u64(s, 6);
	p->gpu = col_u64(s, 7);
	p->t = sqlite3_column_double(s, 8);
}

int store_live_procs(struct store *st, int64_t run_id, struct proc_row **out, size_t *n)
{
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(store_handle(st),
	                       "SELECT pid, ppid, name, rss, pss, uss, swap, gpu, t FROM proc_samples"
	                       " WHERE run_id = ?1 AND t = (SELECT max(t) FROM proc_samples WHERE run_id = ?1)"
	                       " ORDER BY pss DESC, pid",
	                       -1, &s, NULL) != SQLITE_OK) {
		*out = NULL;
		*n = 0;
		return live_error(st);
	}
	sqlite3_bind_int64(s, 1, run_id);
	return collect(st, s, sizeof(**out), read_proc, (void **)out, n);
}
