/*
 * db.c — the table of the store's backends, keyed by the store string: a
 * `postgresql://` or `postgres://` URI names a PostgreSQL server, anything
 * else is the path of an SQLite file (the scheme in any case, as in URIs). Adding a backend is a file that fills
 * a struct db_driver (store/db.h) and its entry here.
 */
#include "store/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"

static const struct {
	const char *prefix;            /* "" matches every string: the default */
	const struct db_driver *drv;   /* NULL: not built in */
	const char *what;
} backends[] = {
	{ "postgresql://", &db_postgresql_driver, "PostgreSQL" },
	{ "postgres://", &db_postgresql_driver, "PostgreSQL" },
	{ "", &db_sqlite_driver, "SQLite" },
};
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

const struct db_driver *db_driver_for(const char *target, char *why, size_t whysz)
{
	for (size_t i = 0; i < NBACKENDS; i++) {
		if (strncasecmp(target, backends[i].prefix, strlen(backends[i].prefix)) != 0)
			continue;
		if (!backends[i].drv)
			snprintf(why, whysz, "%s support is not built in", backends[i].what);
		return backends[i].drv;
	}
	snprintf(why, whysz, "no backend for this store");
	return NULL;
}

const char *db_refuse_target(const char *target, char *why, size_t whysz)
{
	const struct db_driver *drv = db_driver_for(target, why, whysz);
	if (!drv)
		return NULL;   /* said when it is opened */
	return drv->refuse_target ? drv->refuse_target(target) : NULL;
}

int db_open(const char *target, bool readonly, struct db **out, char *why, size_t whysz)
{
	*out = NULL;
	const struct db_driver *drv = db_driver_for(target, why, whysz);
	return drv ? drv->open(target, readonly, out, why, whysz) : DB_OPEN_FAILED;
}

size_t db_memory_used(void)
{
	size_t n = 0;
	for (size_t i = 0; i < NBACKENDS; i++)
		if (backends[i].drv && backends[i].drv->memory_used &&
		    (i == 0 || backends[i].drv != backends[i - 1].drv))
			n += backends[i].drv->memory_used();
	return n;
}
