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
#include <stdio.h>
#include <stdlib.h>

#include "util/util.h"

#define DEFAULT_STORE_PATH ".leakproof/leakproof.db"

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
	store_batch_close(st);
	db_close(st->db);
	free(st->trace_written);
	free(st->path);
	free(st);
}

static struct store *open_common(const char *path, bool readonly)
{
	char why[PATH_MAX + 128] = "";

	if (!path || !*path) {
		error("cannot open store '': empty path");
		return NULL;
	}
	struct store *st = xcalloc(1, sizeof(*st));
	st->path = db_redact(path);   /* only ever printed */
	st->readonly = readonly;
	int64_t version = 0;
	if (db_open(path, readonly, &st->db, why, sizeof(why)) < 0 ||
	    store_schema_check(st, &version, why, sizeof(why)) < 0)
		goto fail;
	if (!readonly) {
		if (db_setup_writer(st->db) != DB_OK) {
			snprintf(why, sizeof(why), "%s", db_errmsg(st->db));
			goto fail;
		}
		if (store_schema_migrate(st, version, why, sizeof(why)) < 0 ||
		    store_batch_open(st, why, sizeof(why)) < 0)
			goto fail;
	} else if (version < store_schema_version()) {
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
	error("cannot open store '%s': %s", st->path, why);
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

void store_close(struct store *st)
{
	if (!st)
		return;
	store_flush(st);
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
