/*
 * store.c — the front door of the run store: open (choosing the backend by
 * the store string, checking and migrating the schema, preparing the write
 * path) and close. The rest lives by seam (store/internal.h lists the
 * files): schema.c, batch.c, runs.c, sweeps.c, trace.c, over the driver of
 * db.h whose SQLite backend is sqlite.c.
 *
 * One connection per process. The writer (the supervisor) holds its
 * samples and per-process samples in plain C arrays and stages its other
 * frequent rows in its own connection until the next store_flush(), which
 * moves them into the store in one short transaction (batch.c); rare writes
 * go straight to the store. The database is in WAL mode: `leakproof report`
 * reads while a run writes. Layout and contracts: docs/internals/store.md.
 */
#include "store/internal.h"

#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/util.h"

#define DEFAULT_STORE_PATH ".leakproof/leakproof.db"

const char *store_default_path(const char *from_option)
{
	if (from_option)
		return from_option;   /* "" too: refused when opened, not read as "the default" */
	const char *env = getenv("LEAKPROOF_STORE");
	if (env && *env)
		return env;
	return DEFAULT_STORE_PATH;
}

bool store_wait_back(struct store *st)
{
	return st && st->db && !st->readonly && db_wait_back(st->db);
}

static void store_free(struct store *st)
{
	if (!st)
		return;
	store_batch_close(st);
	db_close(st->db);
	free(st->trace_written);
	for (size_t i = 0; i < st->nstale; i++)
		free(st->stale[i].cgroup), free(st->stale[i].also);
	free(st->stale);
	free(st->path);
	free(st);
}

/* The oldest schema a reader can read without migrating it (one whose
 * store it cannot write to): runs then read as whole (no `lost`). */
#define OLDEST_READABLE_VERSION 4

/* Open the store at path; NULL with the reason in why, *unwritable set
 * when the writer cannot write to it, and *again when its server went away
 * during the open and is back (the open may be made again from the start).
 * Prints nothing but the wait for the server. */
static struct store *open_store(const char *path, bool readonly, char *why, size_t whysz, bool *unwritable,
                                bool *again)
{
	*unwritable = false;
	*again = false;
	if (!path || !*path) {
		snprintf(why, whysz, "empty path");
		return NULL;
	}
	const char *refused = readonly ? NULL : db_refuse_target(path, why, whysz);
	if (refused) {
		snprintf(why, whysz, "%s", refused);
		return NULL;
	}
	struct store *st = xcalloc(1, sizeof(*st));
	st->path = db_redact(path);   /* only ever printed */
	st->readonly = readonly;
	st->lost_t = -1;
	int rc = db_open(path, readonly, &st->db, why, whysz);
	if (rc < 0) {
		*unwritable = rc == DB_OPEN_UNWRITABLE;
		goto fail;
	}
	if (store_schema_check(st, &st->version, why, whysz) < 0)
		goto fail;
	if (!readonly) {
		if (db_setup_writer(st->db) != DB_OK) {
			snprintf(why, whysz, "%s", db_errmsg(st->db));
			goto fail;
		}
		/* room for the end of a run before anything else is written:
		 * a writer that has not the room writes nothing */
		if (db_keep_reserve(st->db, why, whysz) < 0)
			goto fail;
		if (store_schema_migrate(st, st->version, why, whysz) < 0 ||
		    store_batch_open(st, why, whysz) < 0)
			goto fail;
		st->version = store_schema_version();
	} else if (st->version < store_schema_version()) {
		/* An older schema: migrate it through a writable connection;
		 * one that cannot be written to is read as it is, when this
		 * build can. */
		char why2[PATH_MAX + 256];
		bool unwritable2, again2;
		struct store *w = open_store(path, false, why2, sizeof(why2), &unwritable2, &again2);
		if (w) {
			store_free(w);
			store_free(st);
			return open_store(path, true, why, whysz, unwritable, again);
		}
		if (!unwritable2 || st->version < OLDEST_READABLE_VERSION) {
			snprintf(why, whysz, "made by an older leakproof (schema version %lld) and cannot be"
			         " brought to version %lld: %s", (long long)st->version,
			         (long long)store_schema_version(), why2);
			goto fail;
		}
	}
	return st;
fail:
	*again = st->db && db_wait_back(st->db);
	store_free(st);
	return NULL;
}

/* How many times a writer opens again a store whose server went away in
 * the middle of an open (each time waiting for it to be back). */
#define OPEN_TRIES 3

static struct store *open_common(const char *path, bool readonly)
{
	char why[PATH_MAX + 512] = "";
	bool unwritable, again = true;
	struct store *st = NULL;
	for (int i = 0; !st && again && i < OPEN_TRIES; i++)
		st = open_store(path, readonly, why, sizeof(why), &unwritable, &again);
	if (st)
		return st;
	char *shown = db_redact(path ? path : "");   /* a URI's password as *** */
	if (unwritable)
		error("cannot write to store '%s': %s", shown, why);
	else
		error("cannot open store '%s': %s", shown, why);
	free(shown);
	return NULL;
}

int store_check_target(const char *path)
{
	char why[256] = "";
	const char *refused = path && *path ? db_refuse_target(path, why, sizeof(why)) : "empty path";
	if (refused)
		return error("cannot use store '%s': %s", path ? path : "", refused);
	return 0;
}

struct store *store_open(const char *path)
{
	struct store *st = open_common(path, false);
	if (st)
		store_mark_stale_runs(st);   /* runs whose supervisor was killed */
	return st;
}

struct store *store_open_readonly(const char *path)
{
	return open_common(path, true);
}

/* How long a closing writer tries again, once a second, to write the end
 * of its run on a server whose disk is full (PostgreSQL's 53100: space
 * may come back, a vacuum, an operator). A local disk is tried once more:
 * its reserve is spent. */
#define END_WAIT_S 30

/* The held rows written (batch.c), then a run's end that did not fit
 * before tried again (runs.c): each flush may find the room it lacked. */
int store_flush(struct store *st)
{
	int r = batch_flush(st);
	if (st && !st->readonly && st->pending_end.run_id)
		store_retry_run_end(st, false);
	return r;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	store_flush(st);
	if (st->pending_end.run_id) {
		bool wait = st->pending_end.full && st->db->drv->wait_back;   /* a server */
		int64_t until = mono_ns() + (wait ? END_WAIT_S * 1000000000LL : 0);
		if (until > mono_ns())
			warning("store '%s' is full: trying for up to %d s to write the end of run %lld",
			        st->path, END_WAIT_S, (long long)st->pending_end.run_id);
		while (store_retry_run_end(st, false) < 0 && mono_ns() < until)
			poll(NULL, 0, 1000);
		store_retry_run_end(st, true);
	}
	store_free(st);
}

int store_set_size_limit(struct store *st, uint64_t max_bytes)
{
	if (!st->db->drv->set_size_limit)
		return error("store '%s': no size limit with the %s backend", st->path, st->db->drv->name);
	if (st->db->drv->set_size_limit(st->db, max_bytes) != DB_OK)
		return error("store '%s': %s", st->path, db_errmsg(st->db));
	return 0;
}

size_t store_memory_used(void)
{
	return db_memory_used();
}
