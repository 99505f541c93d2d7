/*
 * postgres.c — the PostgreSQL backend of the store's driver (store/db.h);
 * the only file that includes libpq-fe.h, and loads libpq when a store
 * needs it. A store string that begins with `postgresql://` or
 * `postgres://` is a libpq connection URI (db.c).
 *
 * The store's SQL is written once, for SQLite; this file translates what
 * PostgreSQL says otherwise (docs/internals/store.md has the list):
 *
 *   - `?NNN` and `?` placeholders become `$NNN`; `main.T` is T and
 *     `temp.T` is pg_temp.T; `rowid` is ctid (only ever a tie-break);
 *   - in DDL, INTEGER is BIGINT, REAL is DOUBLE PRECISION, TEXT sorts
 *     bytewise as in SQLite (COLLATE "C"), INTEGER PRIMARY KEY
 *     AUTOINCREMENT is an identity column, WITHOUT ROWID is dropped;
 *   - INSERT OR IGNORE is ON CONFLICT DO NOTHING, INSERT OR REPLACE is ON
 *     CONFLICT (the table's primary key) DO UPDATE of the other columns;
 *   - the last insert id is lastval(); the schema version is the table
 *     leakproof_schema, read under a transaction-scoped advisory lock when
 *     read inside a transaction (a migration), so that many writers
 *     creating the schema at once run each migration once;
 *   - the write path's TEMP staging tables (batch.c) are kept here, in
 *     memory, not on the server: they survive a lost connection.
 *
 * Parameters go as text (int64 in decimal, doubles with 17 digits, NaN as
 * NULL, text that is not UTF-8 escaped: db_pg_text_encode()); results come
 * back as text (decoded once) and are parsed on read. Persistent
 * statements are prepared on the server (PQprepare) at their first step on
 * a connection and reused; a new connection prepares them again. Inside a
 * transaction, their INSERT ... VALUES rows are deferred and sent as one
 * multi-row INSERT before the transaction's next statement (a flush's
 * per-process samples: one round trip, not one per row).
 *
 * A lost server (a restart, a network cut) never stalls the writer: a
 * call that needs the server while it is unreachable fails at once with
 * DB_BUSY, so the flush keeps its rows (batch.c moves the held samples into
 * the staging tables here). Writes outside a transaction (a segment's end,
 * the run's end) are queued and replayed in order. Reconnecting is
 * non-blocking (PQconnectStart, then PQconnectPoll for at most
 * RECONNECT_SLICE_MS per call), with a backoff from 100 ms to 2 s between
 * attempts; a silent network is given up on within seconds (conn_keys:
 * tcp_user_timeout, keepalives), so a query on a dead connection blocks
 * the flush that long at most, once. What is buffered is bounded by
 * BUFFER_MAX_BYTES ($LEAKPROOF_PG_BUFFER_BYTES, at least 4096, for tests):
 * rows beyond it are dropped, counted and said, and the store marks the
 * run partial (db_dropped, runs.lost). On close, what is still buffered is
 * written if the server comes back within DRAIN_S seconds.
 */
#include "store/db.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libpq-fe.h>

#include "util/util.h"

/*
 * libpq is loaded when a PostgreSQL store is first opened, not linked: it
 * brings some twenty libraries (TLS, Kerberos, LDAP, SASL) that every
 * command, every `leakproof run` on SQLite and every trial's supervisor
 * would otherwise map and relocate (docs/internals/dependencies.md). The
 * calls below go through pq, which pq_load() fills once.
 */
#define PQ_FUNCS(X) \
	X(PQclear) X(PQcmdTuples) X(PQconnectPoll) X(PQconnectStartParams) \
	X(PQconnectdbParams) X(PQerrorMessage) X(PQexec) X(PQexecParams) \
	X(PQexecPrepared) X(PQfinish) X(PQgetisnull) X(PQgetvalue) \
	X(PQnfields) X(PQntuples) X(PQprepare) X(PQresultErrorField) \
	X(PQresultErrorMessage) X(PQresultStatus) X(PQsetNoticeProcessor) X(PQsocket) \
	X(PQstatus) X(PQtransactionStatus)
static struct {
#define PQ_FIELD(f) __typeof__(f) *f;
	PQ_FUNCS(PQ_FIELD)
#undef PQ_FIELD
} pq;

/* 0, or -1 with the reason in why (libpq missing, or too old). */
static int pq_load(char *why, size_t whysz)
{
	static void *lib;
	if (lib)
		return 0;
	void *h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, whysz, "a PostgreSQL store needs libpq (libpq.so.5; Debian's package libpq5): %s",
		         e ? e : "cannot load it");
		return -1;
	}
	void *f;
#define PQ_SYM(name) \
	if (!(f = dlsym(h, #name))) { \
		snprintf(why, whysz, "the libpq found lacks %s: too old for a PostgreSQL store", #name); \
		dlclose(h); \
		return -1; \
	} \
	memcpy(&pq.name, &f, sizeof(f));
	PQ_FUNCS(PQ_SYM)
#undef PQ_SYM
	lib = h;
	return 0;
}

#define RECONNECT_SLICE_MS 20         /* the longest one call spends connecting */
#define BACKOFF_MIN_NS 100000000LL    /* 100 ms */
#define BACKOFF_MAX_NS 2000000000LL   /* 2 s */
#define BUFFER_MAX_BYTES (64u << 20)  /* staged rows and queued writes, while unreachable */
#define DRAIN_S 30                    /* close: how long to wait for the server */
#define ROWS_PER_INSERT 1000          /* staged rows per INSERT (parameters < 65536) */
#define MAX_PARAMS 999
/* pg_advisory_xact_lock key of a migration: 'LKPF' */
#define SCHEMA_LOCK_KEY 0x4c4b5046

/*
 * What every connection adds to the URI (which overrides them): give up on
 * a silent network within seconds, not the kernel's minutes, so a flush
 * never hangs long on a dead server; the name in pg_stat_activity.
 */
static const char *const conn_keys[] = { "connect_timeout", "tcp_user_timeout", "keepalives_idle",
                                         "keepalives_interval", "keepalives_count", "application_name",
                                         "dbname", NULL };
#define CONN_VALUES(uri) { "10", "5000", "5", "2", "2", "leakproof", uri, NULL }

/* ---- translation ------------------------------------------------------- */

static bool word_char(int c)
{
	return isalnum(c) || c == '_';
}

/* Whether s begins with word w (any case) followed by a non-word byte. */
static bool word_at(const char *s, const char *w)
{
	size_t n = strlen(w);
	return strncasecmp(s, w, n) == 0 && !word_char((unsigned char)s[n]);
}

static char *xstrndup(const char *s, size_t n)
{
	char *c = xmalloc(n + 1);
	memcpy(c, s, n);
	c[n] = '\0';
	return c;
}

static const char *skip_space(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return s;
}

char *db_pg_translate(const char *sql, bool ddl, int *nparams, enum db_pg_conflict *conflict)
{
	struct strbuf out = STRBUF_INIT;
	int maxp = 0;
	const char *p = skip_space(sql);
	*conflict = DB_PG_PLAIN;
	if (word_at(p, "INSERT")) {
		const char *q = skip_space(p + 6);
		if (word_at(q, "OR")) {
			q = skip_space(q + 2);
			if (word_at(q, "IGNORE"))
				*conflict = DB_PG_IGNORE, p = q + 6;
			else if (word_at(q, "REPLACE"))
				*conflict = DB_PG_REPLACE, p = q + 7;
			if (*conflict != DB_PG_PLAIN)
				strbuf_addstr(&out, "INSERT");
		}
	}
	while (*p) {
		if (*p == '\'' || *p == '"') {           /* a literal or quoted name, as it is */
			char quote = *p;
			const char *e = p + 1;
			while (*e && !(*e == quote && e[1] != quote))
				e += *e == quote ? 2 : 1;
			if (*e)
				e++;
			strbuf_add(&out, p, (size_t)(e - p));
			p = e;
		} else if (*p == '?') {
			char *end;
			long n = strtol(p + 1, &end, 10);
			if (end == p + 1)
				n = maxp + 1;
			if (n > maxp)
				maxp = (int)n;
			strbuf_addf(&out, "$%ld", n);
			p = end;
		} else if (word_char((unsigned char)*p) && (p == sql || !word_char((unsigned char)p[-1]))) {
			const char *e = p;
			while (word_char((unsigned char)*e))
				e++;
			if (word_at(p, "rowid"))
				strbuf_addstr(&out, "ctid");
			else if (word_at(p, "main") && *e == '.')
				e++;
			else if (word_at(p, "temp") && *e == '.') {
				strbuf_addstr(&out, "pg_temp.");
				e++;
			} else if (ddl && word_at(p, "INTEGER") &&
			           strncasecmp(skip_space(e), "PRIMARY KEY AUTOINCREMENT", 25) == 0) {
				strbuf_addstr(&out, "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
				e = skip_space(e) + 25;
			} else if (ddl && word_at(p, "INTEGER"))
				strbuf_addstr(&out, "BIGINT");
			else if (ddl && word_at(p, "REAL"))
				strbuf_addstr(&out, "DOUBLE PRECISION");
			else if (ddl && word_at(p, "TEXT"))
				strbuf_addstr(&out, "TEXT COLLATE \"C\"");
			else if (ddl && word_at(p, "WITHOUT") && word_at(skip_space(e), "ROWID")) {
				e = skip_space(e) + 5;
				while (out.len && out.buf[out.len - 1] == ' ')
					out.len--;
				out.buf[out.len] = '\0';
			} else
				strbuf_add(&out, p, (size_t)(e - p));
			p = e;
		} else
			strbuf_addch(&out, *p++);
	}
	if (*conflict == DB_PG_IGNORE)
		strbuf_addstr(&out, " ON CONFLICT DO NOTHING");
	*nparams = maxp;
	char *t = strbuf_detach(&out, NULL);
	return t ? t : xstrdup("");
}

/* ---- text that is not UTF-8 --------------------------------------------- */

#define ESC_LEAD0 0xf4   /* U+10FF00 + b: F4 8F BC..BF 80..BF (utf8_len: util.h) */
#define ESC_LEAD1 0x8f

static bool is_escape_range(const unsigned char *p, size_t n)
{
	return n == 4 && p[0] == ESC_LEAD0 && p[1] == ESC_LEAD1 && (p[2] & 0xfc) == 0xbc;
}

char *db_pg_text_encode(const char *v)
{
	const unsigned char *p = (const unsigned char *)v;
	size_t n;
	while (*p && (n = utf8_len(p)) && !is_escape_range(p, n))
		p += n;
	if (!*p)
		return NULL;   /* the common case: as it is */
	struct strbuf sb = STRBUF_INIT;
	strbuf_add(&sb, v, (size_t)((const char *)p - v));
	while (*p) {
		n = utf8_len(p);
		if (n && !is_escape_range(p, n)) {
			strbuf_add(&sb, (const char *)p, n);
			p += n;
			continue;
		}
		for (size_t k = 0; k < (n ? n : 1); k++, p++) {   /* U+10FF00 + the byte */
			char e[4] = { (char)ESC_LEAD0, (char)ESC_LEAD1, (char)(0xbc | (*p >> 6)), (char)(0x80 | (*p & 0x3f)) };
			/* (*p >> 6: 0..3, so BC..BF) */
			strbuf_add(&sb, e, 4);
		}
	}
	char *r = strbuf_detach(&sb, NULL);
	return r ? r : xstrdup("");
}

void db_pg_text_decode(char *v)
{
	unsigned char *p = (unsigned char *)strchr(v, (char)ESC_LEAD0);
	if (!p)
		return;
	unsigned char *w = p;
	while (*p) {
		if (p[0] == ESC_LEAD0 && p[1] == ESC_LEAD1 && (p[2] & 0xfc) == 0xbc && (p[3] & 0xc0) == 0x80) {
			unsigned char b = (unsigned char)(((p[2] & 3) << 6) | (p[3] & 0x3f));
			*w++ = b;   /* (b = 0 cannot be: no text holds a NUL) */
			p += 4;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
}

/* The ON CONFLICT clause of an INSERT OR REPLACE: pk are the primary key's
 * columns, cols those the statement sets (NULL: every column, from
 * all_cols). */
static void add_replace_clause(struct strbuf *sb, char **pk, int npk, char **cols, int ncols)
{
	strbuf_addstr(sb, " ON CONFLICT (");
	for (int i = 0; i < npk; i++)
		strbuf_addf(sb, "%s%s", i ? ", " : "", pk[i]);
	strbuf_addstr(sb, ")");
	int set = 0;
	for (int i = 0; i < ncols; i++) {
		bool key = false;
		for (int k = 0; k < npk; k++)
			key |= strcmp(cols[i], pk[k]) == 0;
		if (!key)
			strbuf_addf(sb, "%s%s = EXCLUDED.%s", set++ ? ", " : " DO UPDATE SET ", cols[i], cols[i]);
	}
	if (!set)
		strbuf_addstr(sb, " DO NOTHING");
}

/* ---- the connection ---------------------------------------------------- */

/* A TEMP staging table of batch.c, kept in memory: rows of text cells. */
struct stage {
	char *name;           /* "stage_samples" */
	char *table;          /* "samples" */
	char **cols;          /* from its INSERT's column list */
	int ncols;
	char ***rows;         /* ncols cells each, NULL cell for NULL */
	size_t nrows, cap;
	size_t copied;        /* rows sent by the open transaction's copy */
	bool cleared;         /* the open transaction emptied what it copied */
	bool replace;         /* copied with INSERT OR REPLACE */
	char **pk;            /* the table's primary key, for replace */
	int npk;
};

/* A write queued while the server was unreachable, replayed in order. */
struct queued {
	struct queued *next;
	char *sql;            /* translated */
	int nparams;
	char **vals;
};

struct pg_db {
	struct db base;
	char *conninfo;
	char *shown;          /* the store string, password redacted */
	bool readonly;
	PGconn *conn;         /* NULL: lost, or never reconnected */
	bool connecting;      /* conn is a PQconnectStart in progress */
	PostgresPollingStatusType poll_state;
	unsigned gen;         /* connections made: statements prepare again when it moves */
	unsigned next_stmt;   /* statement names */
	int64_t retry_at_ns, backoff_ns;
	bool lost;            /* unreachable since the last success: said once */
	bool tx;              /* the caller's transaction: from a BEGIN that
	                       * succeeded to its COMMIT or ROLLBACK, even when
	                       * the server dropped it on the way */
	char lost_why[400];   /* libpq's first line when it was lost */
	int64_t changes;
	enum db_rc err;
	char errmsg[512];
	bool savepoint_local; /* a SAVEPOINT outside a transaction (batch.c's staging) */
	struct stage **stages;
	size_t nstages;
	struct queued *queue, **queue_tail;
	size_t buffered_bytes;
	uint64_t dropped_rows;  /* beyond BUFFER_MAX_BYTES, since the last report */
	uint64_t dropped_total; /* since it opened (db_dropped) */
	size_t buffer_max;      /* BUFFER_MAX_BYTES, or $LEAKPROOF_PG_BUFFER_BYTES */
	struct pg_stmt *deferred;   /* statements holding rows for the open transaction */
	bool said_dropping;
};

enum stmt_kind { K_PLAIN, K_STAGE_INSERT, K_STAGE_COPY, K_STAGE_CLEAR };

struct pg_stmt {
	struct db_stmt base;
	struct pg_db *d;
	enum stmt_kind kind;
	struct stage *stage;
	char *sql;            /* translated */
	char name[16];
	unsigned prepared_gen;  /* 0: not prepared yet */
	int nparams;
	char **vals;          /* nparams bound values (owned), NULL for NULL */
	bool is_write;        /* INSERT, UPDATE, DELETE: may be queued */
	bool persistent;      /* prepared on the server; else sent with each step */
	PGresult *res;
	int row, nrows;
	/* A persistent INSERT ... VALUES stepped inside a transaction is
	 * deferred: its rows go as one multi-row INSERT before the next thing
	 * the transaction does (a flush's per-process samples: one round trip,
	 * not one per row). */
	bool deferrable;
	char ***rows;
	size_t nrows_deferred, cap_deferred;
	struct pg_stmt *next_deferred;
};

static void stages_end_tx(struct pg_db *d, bool committed);
static void drop_deferred(struct pg_db *d);

static struct pg_db *pgdb(struct db *db)
{
	return (struct pg_db *)db;
}

static void set_error(struct pg_db *d, enum db_rc rc, const char *msg)
{
	d->err = rc;
	snprintf(d->errmsg, sizeof(d->errmsg), "%s", msg);
	size_t n = strlen(d->errmsg);
	while (n && (d->errmsg[n - 1] == '\n' || d->errmsg[n - 1] == ' '))
		d->errmsg[--n] = '\0';
}

static void conn_finish(struct pg_db *d)
{
	if (d->conn)
		pq.PQfinish(d->conn);
	d->conn = NULL;
	d->connecting = false;
}

/* The server went away: drop the connection, retry later, fail at once. */
static enum db_rc unreachable(struct pg_db *d, const char *reason)
{
	char msg[400];   /* libpq's first line: the rest is advice */
	snprintf(msg, sizeof(msg), "%.*s", (int)strcspn(reason && *reason ? reason : "no connection", "\n"),
	         reason && *reason ? reason : "no connection");
	snprintf(d->lost_why, sizeof(d->lost_why), "%s", msg);
	conn_finish(d);
	stages_end_tx(d, false);   /* the server dropped the transaction */
	drop_deferred(d);
	if (!d->lost)
		d->backoff_ns = BACKOFF_MIN_NS;
	d->lost = true;
	d->retry_at_ns = mono_ns() + d->backoff_ns;
	d->backoff_ns = d->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : d->backoff_ns * 2;
	char full[512];
	snprintf(full, sizeof(full), "store unreachable, buffering until it is back (%s)", msg);
	set_error(d, DB_BUSY, full);
	return DB_BUSY;
}

static enum db_rc map_result(struct pg_db *d, PGresult *res)
{
	ExecStatusType st = res ? pq.PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY)
		return DB_OK;
	const char *state = res ? pq.PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? pq.PQresultErrorMessage(res) : pq.PQerrorMessage(d->conn);
	if (!d->conn || pq.PQstatus(d->conn) == CONNECTION_BAD || (state && strncmp(state, "08", 2) == 0) ||
	    (state && strncmp(state, "57P", 3) == 0))
		return unreachable(d, msg);
	enum db_rc rc = DB_ERROR;
	if (state && (strcmp(state, "53100") == 0 || strcmp(state, "53200") == 0))
		rc = DB_FULL;
	else if (state && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
	                   strcmp(state, "55P03") == 0 || strcmp(state, "57014") == 0))
		rc = DB_BUSY;
	set_error(d, rc, msg);
	return rc;
}

/* Run sql without parameters on the connection: DB_OK or the failure. */
static enum db_rc run_sql(struct pg_db *d, const char *sql)
{
	PGresult *res = pq.PQexec(d->conn, sql);
	enum db_rc rc = map_result(d, res);
	if (rc == DB_OK)
		d->changes = atoll(pq.PQcmdTuples(res));
	pq.PQclear(res);
	return rc;
}

/* Run with text parameters; the result (NULL on failure, after the
 * error is set) is the caller's. */
static PGresult *run_params(struct pg_db *d, const char *sql, int n, char *const *vals, enum db_rc *rc)
{
	PGresult *res = pq.PQexecParams(d->conn, sql, n, NULL, (const char *const *)vals, NULL, NULL, 0);
	*rc = map_result(d, res);
	if (*rc != DB_OK) {
		pq.PQclear(res);
		return NULL;
	}
	d->changes = atoll(pq.PQcmdTuples(res));
	return res;
}

static bool in_tx(struct pg_db *d)
{
	if (!d->conn || d->connecting)
		return false;
	PGTransactionStatusType t = pq.PQtransactionStatus(d->conn);
	return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

static void replay_queue(struct pg_db *d);
static void say_back(struct pg_db *d);

/* A connection made: what every connection needs. */
static enum db_rc conn_ready(struct pg_db *d)
{
	pq.PQsetNoticeProcessor(d->conn, NULL, NULL);
	/* No JIT: the store's queries are index lookups whose planned cost
	 * (a correlated subquery per trial) crosses jit_above_cost, and
	 * compiling them took 0.7 s of a sweep table's 1.4 s at 100,000
	 * trials (BENCHMARKS.md §9). A server without JIT (before 11) refuses
	 * the setting: nothing lost. */
	pq.PQclear(pq.PQexec(d->conn, "SET jit = off"));
	if (run_sql(d, "SET client_min_messages = warning") != DB_OK ||
	    (d->readonly && run_sql(d, "SET default_transaction_read_only = on") != DB_OK))
		return d->err;
	d->gen++;
	return DB_OK;
}

/*
 * Connected, or DB_BUSY at once: a lost connection is made again without
 * blocking, RECONNECT_SLICE_MS at most per call (slice_ms longer at close),
 * no sooner than the backoff allows.
 */
static enum db_rc ensure_connected(struct pg_db *d, int slice_ms)
{
	if (d->conn && !d->connecting)
		return DB_OK;
	int64_t now = mono_ns();
	if (!d->connecting) {
		if (now < d->retry_at_ns) {
			d->err = DB_BUSY;
			return DB_BUSY;
		}
		const char *const vals[] = CONN_VALUES(d->conninfo);
		d->conn = pq.PQconnectStartParams(conn_keys, vals, 1);
		if (!d->conn || pq.PQstatus(d->conn) == CONNECTION_BAD)
			return unreachable(d, d->conn ? pq.PQerrorMessage(d->conn) : "out of memory");
		d->connecting = true;
		d->poll_state = PGRES_POLLING_WRITING;
	}
	int64_t deadline = now + (int64_t)slice_ms * 1000000;
	for (;;) {
		if (d->poll_state == PGRES_POLLING_READING || d->poll_state == PGRES_POLLING_WRITING) {
			int64_t left_ms = (deadline - mono_ns()) / 1000000;
			struct pollfd pfd = { pq.PQsocket(d->conn),
			                      d->poll_state == PGRES_POLLING_READING ? POLLIN : POLLOUT, 0 };
			int r = left_ms > 0 ? poll(&pfd, 1, (int)left_ms) : 0;
			if (r == 0) {
				d->err = DB_BUSY;
				return DB_BUSY;   /* still connecting: go on at the next call */
			}
			if (r < 0 && errno != EINTR)
				return unreachable(d, strerror(errno));
		}
		d->poll_state = pq.PQconnectPoll(d->conn);
		if (d->poll_state == PGRES_POLLING_FAILED)
			return unreachable(d, pq.PQerrorMessage(d->conn));
		if (d->poll_state == PGRES_POLLING_OK)
			break;
	}
	d->connecting = false;
	if (conn_ready(d) != DB_OK)
		return d->err;
	if (d->lost) {
		d->lost = false;
		say_back(d);
		replay_queue(d);
	}
	return d->conn ? DB_OK : d->err;
}

/* ---- buffering while unreachable ---------------------------------------- */

static char **copy_vals(char *const *vals, int n, size_t *bytes)
{
	char **c = xcalloc((size_t)(n ? n : 1), sizeof(*c));
	*bytes = sizeof(*c) * (size_t)n + 64;
	for (int i = 0; i < n; i++)
		if (vals[i]) {
			c[i] = xstrdup(vals[i]);
			*bytes += strlen(vals[i]) + 1 + 16;
		}
	return c;
}

static void free_vals(char **vals, int n)
{
	if (!vals)
		return;
	for (int i = 0; i < n; i++)
		free(vals[i]);
	free(vals);
}

/* Whether bytes more may be buffered; counts and says what is dropped. */
static bool buffer_room(struct pg_db *d, size_t bytes)
{
	if (d->buffered_bytes + bytes <= d->buffer_max) {
		d->buffered_bytes += bytes;
		return true;
	}
	d->dropped_rows++;
	d->dropped_total++;   /* the store marks the run partial (pg_dropped) */
	if (!d->said_dropping) {
		d->said_dropping = true;
		char cap[32];
		warning("store '%s': %s buffered while unreachable: newer rows are dropped until it is back"
		        " (the run will be marked partial)", d->shown, fmt_bytes(cap, sizeof(cap), (double)d->buffer_max));
	}
	return false;
}

static void say_back(struct pg_db *d)
{
	size_t rows = 0;
	for (size_t i = 0; i < d->nstages; i++)
		rows += d->stages[i]->nrows;
	for (struct queued *q = d->queue; q; q = q->next)
		rows++;
	warning("store '%s' is reachable again: writing %zu buffered rows", d->shown, rows);
	if (d->dropped_rows)
		warning("store '%s': %llu rows were dropped while it was unreachable", d->shown,
		        (unsigned long long)d->dropped_rows);
	d->dropped_rows = 0;
	d->said_dropping = false;
}

static void queue_write(struct pg_db *d, struct pg_stmt *s)
{
	size_t bytes;
	char **vals = copy_vals(s->vals, s->nparams, &bytes);
	bytes += strlen(s->sql) + sizeof(struct queued);
	if (!buffer_room(d, bytes)) {
		free_vals(vals, s->nparams);
		return;
	}
	struct queued *q = xcalloc(1, sizeof(*q));
	q->sql = xstrdup(s->sql);
	q->nparams = s->nparams;
	q->vals = vals;
	*d->queue_tail = q;
	d->queue_tail = &q->next;
}

static void replay_queue(struct pg_db *d)
{
	while (d->queue && d->conn) {
		struct queued *q = d->queue;
		enum db_rc rc;
		PGresult *res = run_params(d, q->sql, q->nparams, q->vals, &rc);
		pq.PQclear(res);
		if (rc == DB_BUSY && !d->conn)
			return;   /* lost again: keep it */
		if (rc != DB_OK)
			warning("store '%s': a write queued while unreachable failed: %s", d->shown, d->errmsg);
		d->queue = q->next;
		if (!d->queue)
			d->queue_tail = &d->queue;
		free(q->sql);
		free_vals(q->vals, q->nparams);
		free(q);
	}
	if (!d->queue)
		d->buffered_bytes = 0;
}

/* ---- the staging tables ------------------------------------------------ */

static struct stage *find_stage(struct pg_db *d, const char *name, size_t len)
{
	for (size_t i = 0; i < d->nstages; i++)
		if (strlen(d->stages[i]->name) == len && strncmp(d->stages[i]->name, name, len) == 0)
			return d->stages[i];
	return NULL;
}

/* "CREATE TEMP TABLE stage_T AS SELECT * FROM main.T ...": a stage in
 * memory. 1 if sql is one, else 0. */
static int create_stage(struct pg_db *d, const char *sql)
{
	const char *p = skip_space(sql);
	if (strncasecmp(p, "CREATE TEMP TABLE ", 18) != 0)
		return 0;
	p += 18;
	size_t n = 0;
	while (word_char((unsigned char)p[n]))
		n++;
	const char *from = strstr(p, " FROM main.");
	if (!from)
		return 0;
	from += 11;
	size_t tn = 0;
	while (word_char((unsigned char)from[tn]))
		tn++;
	if (find_stage(d, p, n))
		return 1;
	struct stage *g = xcalloc(1, sizeof(*g));
	g->name = xstrndup(p, n);
	g->table = xstrndup(from, tn);
	d->stages = xrealloc(d->stages, (d->nstages + 1) * sizeof(*d->stages));
	d->stages[d->nstages++] = g;
	return 1;
}

/* The stage a statement writes, reads or empties, and its kind. */
static struct stage *stage_of(struct pg_db *d, const char *sql, enum stmt_kind *kind)
{
	const char *p = strstr(sql, "temp.stage_");
	*kind = K_PLAIN;
	if (!p)
		return NULL;
	p += 5;
	size_t n = 0;
	while (word_char((unsigned char)p[n]))
		n++;
	struct stage *g = find_stage(d, p, n);
	if (!g)
		return NULL;
	const char *s = skip_space(sql);
	if (strncasecmp(s, "DELETE", 6) == 0)
		*kind = K_STAGE_CLEAR;
	else if (strstr(sql, "SELECT"))
		*kind = K_STAGE_COPY;
	else
		*kind = K_STAGE_INSERT;
	return g;
}

/* The column names of "INSERT INTO x (a, b, c) VALUES ...". */
static char **insert_columns(const char *sql, int *n)
{
	const char *p = strchr(sql, '(');
	const char *e = p ? strchr(p, ')') : NULL;
	char **cols = NULL;
	*n = 0;
	for (p = p ? p + 1 : NULL; p && p < e; ) {
		p = skip_space(p);
		size_t len = 0;
		while (word_char((unsigned char)p[len]))
			len++;
		cols = xrealloc(cols, (size_t)(*n + 1) * sizeof(*cols));
		cols[(*n)++] = xstrndup(p, len);
		p = strchr(p + len, ',');
		if (!p || p > e)
			break;
		p++;
	}
	return cols;
}

/* The primary key of table, in *pk (the caller frees it with free_vals). */
static enum db_rc primary_key(struct pg_db *d, const char *table, char ***pk, int *npk)
{
	*pk = NULL;
	*npk = 0;
	enum db_rc rc = ensure_connected(d, RECONNECT_SLICE_MS);
	if (rc != DB_OK)
		return rc;
	char *vals[1] = { (char *)table };
	PGresult *res = run_params(d, "SELECT a.attname FROM pg_index i JOIN pg_attribute a"
	                              " ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
	                              " WHERE i.indrelid = to_regclass($1) AND i.indisprimary", 1, vals, &rc);
	if (!res)
		return rc;
	*npk = pq.PQntuples(res);
	*pk = xcalloc((size_t)(*npk ? *npk : 1), sizeof(**pk));
	for (int i = 0; i < *npk; i++)
		(*pk)[i] = xstrdup(pq.PQgetvalue(res, i, 0));
	pq.PQclear(res);
	return DB_OK;
}

static void stage_append(struct pg_db *d, struct stage *g, struct pg_stmt *s)
{
	size_t bytes;
	char **row = copy_vals(s->vals, s->nparams, &bytes);
	if (!buffer_room(d, bytes)) {
		free_vals(row, s->nparams);
		return;
	}
	if (g->nrows == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 64;
		g->rows = xrealloc(g->rows, g->cap * sizeof(*g->rows));
	}
	g->rows[g->nrows++] = row;
}

/* Whether rows a and b of a stage have the same primary key. */
static bool same_key(const struct stage *g, char **a, char **b)
{
	for (int k = 0; k < g->npk; k++)
		for (int c = 0; c < g->ncols; c++)
			if (strcmp(g->cols[c], g->pk[k]) == 0 &&
			    (!a[c] != !b[c] || (a[c] && strcmp(a[c], b[c]) != 0)))
				return false;
	return true;
}

/* The stage's rows into its table, oldest first, ROWS_PER_INSERT at a
 * time; a replaced key is written once, with its last value. */
static enum db_rc stage_copy(struct pg_db *d, struct stage *g)
{
	size_t n = g->nrows;
	char ***rows = xmalloc((n ? n : 1) * sizeof(*rows));
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		bool later = false;
		for (size_t j = i + 1; g->replace && j < n && !later; j++)
			later = same_key(g, g->rows[i], g->rows[j]);
		if (!later)
			rows[m++] = g->rows[i];
	}
	enum db_rc rc = DB_OK;
	struct strbuf sql = STRBUF_INIT;
	char **vals = xmalloc((size_t)ROWS_PER_INSERT * (size_t)g->ncols * sizeof(*vals));
	for (size_t i = 0; i < m && rc == DB_OK; i += ROWS_PER_INSERT) {
		size_t k = m - i < ROWS_PER_INSERT ? m - i : ROWS_PER_INSERT;
		strbuf_reset(&sql);
		strbuf_addf(&sql, "INSERT INTO %s (", g->table);
		for (int c = 0; c < g->ncols; c++)
			strbuf_addf(&sql, "%s%s", c ? ", " : "", g->cols[c]);
		strbuf_addstr(&sql, ") VALUES ");
		int np = 0;
		for (size_t r = 0; r < k; r++) {
			strbuf_addstr(&sql, r ? ",(" : "(");
			for (int c = 0; c < g->ncols; c++) {
				vals[np++] = rows[i + r][c];
				strbuf_addf(&sql, "%s$%d", c ? "," : "", np);
			}
			strbuf_addch(&sql, ')');
		}
		if (g->replace)
			add_replace_clause(&sql, g->pk, g->npk, g->cols, g->ncols);
		PGresult *res = run_params(d, strbuf_str(&sql), np, vals, &rc);
		pq.PQclear(res);
	}
	free(vals);
	free(rows);
	strbuf_release(&sql);
	if (rc == DB_OK)
		g->copied = n;
	return rc;
}

/* After COMMIT: what was copied and emptied goes. After ROLLBACK: it
 * stays. */
static void stages_end_tx(struct pg_db *d, bool committed)
{
	for (size_t i = 0; i < d->nstages; i++) {
		struct stage *g = d->stages[i];
		if (committed && g->cleared && g->copied) {
			for (size_t r = 0; r < g->copied; r++)
				free_vals(g->rows[r], g->ncols);
			memmove(g->rows, g->rows + g->copied, (g->nrows - g->copied) * sizeof(*g->rows));
			g->nrows -= g->copied;
		}
		g->copied = 0;
		g->cleared = false;
	}
	bool empty = !d->queue;
	for (size_t i = 0; i < d->nstages; i++)
		empty &= d->stages[i]->nrows == 0;
	if (empty)
		d->buffered_bytes = 0;
}

/* ---- deferred inserts -------------------------------------------------- */

static void drop_deferred(struct pg_db *d)
{
	while (d->deferred) {
		struct pg_stmt *s = d->deferred;
		for (size_t r = 0; r < s->nrows_deferred; r++)
			free_vals(s->rows[r], s->nparams);
		s->nrows_deferred = 0;
		d->deferred = s->next_deferred;
		s->next_deferred = NULL;
	}
}

static void defer_row(struct pg_db *d, struct pg_stmt *s)
{
	size_t bytes;
	if (s->nrows_deferred == s->cap_deferred) {
		s->cap_deferred = s->cap_deferred ? s->cap_deferred * 2 : 64;
		s->rows = xrealloc(s->rows, s->cap_deferred * sizeof(*s->rows));
	}
	if (!s->nrows_deferred) {   /* at the end: statements go in the order first stepped */
		struct pg_stmt **tail = &d->deferred;
		while (*tail)
			tail = &(*tail)->next_deferred;
		s->next_deferred = NULL;
		*tail = s;
	}
	s->rows[s->nrows_deferred++] = copy_vals(s->vals, s->nparams, &bytes);
}

/* The deferred rows to the server, statement by statement, in as few
 * INSERTs as the parameter limit allows: the tuple after VALUES repeated,
 * its $N renumbered. DB_OK, or the failure (all of them dropped: the
 * transaction fails). */
static enum db_rc send_deferred(struct pg_db *d)
{
	enum db_rc rc = DB_OK;
	struct strbuf sql = STRBUF_INIT;
	for (struct pg_stmt *s = d->deferred; s && rc == DB_OK; s = s->next_deferred) {
		const char *tuple = strstr(s->sql, " VALUES ") + 8;
		size_t per = 60000 / (size_t)(s->nparams ? s->nparams : 1);
		char **vals = xmalloc((per * (size_t)s->nparams + 1) * sizeof(*vals));
		for (size_t i = 0; i < s->nrows_deferred && rc == DB_OK; i += per) {
			size_t k = s->nrows_deferred - i < per ? s->nrows_deferred - i : per;
			strbuf_reset(&sql);
			strbuf_add(&sql, s->sql, (size_t)(tuple - s->sql));
			for (size_t r = 0; r < k; r++) {
				if (r)
					strbuf_addch(&sql, ',');
				for (const char *p = tuple; *p; p++) {
					if (*p == '$' && isdigit((unsigned char)p[1])) {
						long n = strtol(p + 1, (char **)&p, 10);
						strbuf_addf(&sql, "$%ld", n + (long)r * s->nparams);
						p--;
					} else
						strbuf_addch(&sql, *p);
				}
				memcpy(vals + r * (size_t)s->nparams, s->rows[i + r], (size_t)s->nparams * sizeof(*vals));
			}
			PGresult *res = run_params(d, strbuf_str(&sql), (int)(k * (size_t)s->nparams), vals, &rc);
			pq.PQclear(res);
		}
		free(vals);
	}
	strbuf_release(&sql);
	drop_deferred(d);
	return rc;
}

/* Before anything else the transaction does. */
static enum db_rc before_next(struct pg_db *d)
{
	return d->deferred ? send_deferred(d) : DB_OK;
}

/* ---- the driver --------------------------------------------------------- */

static void pg_close(struct db *db)
{
	struct pg_db *d = pgdb(db);
	bool pending = d->queue != NULL;
	for (size_t i = 0; i < d->nstages; i++)
		pending |= d->stages[i]->nrows > 0;
	if (pending) {
		/* The last rows of a run that ended while the server was away. */
		if (in_tx(d))
			run_sql(d, "ROLLBACK");
		int64_t until = mono_ns() + DRAIN_S * 1000000000LL;
		while (ensure_connected(d, 100) != DB_OK && mono_ns() < until)
			if (!d->connecting && d->retry_at_ns > mono_ns())
				poll(NULL, 0, 50);
		bool ok = d->conn && !d->connecting && !d->queue && run_sql(d, "BEGIN") == DB_OK;
		for (size_t i = 0; ok && i < d->nstages; i++)
			if (d->stages[i]->nrows && d->stages[i]->table)
				ok = stage_copy(d, d->stages[i]) == DB_OK;
		if (ok && run_sql(d, "COMMIT") == DB_OK) {
			for (size_t i = 0; i < d->nstages; i++)
				d->stages[i]->cleared = true;
			stages_end_tx(d, true);
		} else {
			size_t rows = 0;
			for (size_t i = 0; i < d->nstages; i++)
				rows += d->stages[i]->nrows;
			for (struct queued *q = d->queue; q; q = q->next)
				rows++;
			if (d->conn && !d->connecting && d->err != DB_BUSY)   /* there, and it said no */
				error("store '%s' refused %zu buffered rows after the run: they are lost (%s)", d->shown,
				      rows, d->errmsg);
			else
				error("store '%s' unreachable for %d s after the run: %zu buffered rows are lost (%s)",
				      d->shown, DRAIN_S, rows, d->errmsg);
		}
	}
	conn_finish(d);
	for (size_t i = 0; i < d->nstages; i++) {
		struct stage *g = d->stages[i];
		for (size_t r = 0; r < g->nrows; r++)
			free_vals(g->rows[r], g->ncols);
		free(g->rows);
		free_vals(g->cols, g->ncols);
		free_vals(g->pk, g->npk);
		free(g->name);
		free(g->table);
		free(g);
	}
	free(d->stages);
	while (d->queue) {
		struct queued *q = d->queue;
		d->queue = q->next;
		free(q->sql);
		free_vals(q->vals, q->nparams);
		free(q);
	}
	free(d->conninfo);
	free(d->shown);
	free(d);
}

/* libpq's reason a connection failed, on one line, into why: "the
 * PostgreSQL server cannot be reached (connection to server at ... failed:
 * Connection refused; Is the server running ...?)". Runs being recorded
 * meanwhile keep their rows (up to the buffer) and write them when it is
 * back: said so to a reader, since `ls` and `report` are what one runs to
 * look. */
static void unreachable_why(const char *msg, bool reader, char *why, size_t whysz)
{
	char line[400];
	size_t n = 0;
	for (const char *p = msg; *p && n + 1 < sizeof(line); p++) {
		if (*p == '\n' || *p == '\t') {
			while (p[1] == '\n' || p[1] == '\t' || p[1] == ' ')
				p++;
			if (p[1] && n + 2 < sizeof(line)) {
				line[n++] = ';';
				line[n++] = ' ';
			}
			continue;
		}
		line[n++] = *p;
	}
	line[n] = '\0';
	bool refused = strstr(msg, "Connection refused") || strstr(msg, "No such file") ||
	               strstr(msg, "timeout expired") || strstr(msg, "could not connect") ||
	               strstr(msg, "the database system is") || strstr(msg, "No route") ||
	               strstr(msg, "could not translate host");
	if (refused)
		snprintf(why, whysz, "the PostgreSQL server cannot be reached (%s)%s", line,
		         reader ? "; runs being recorded keep their rows and write them when it is back" : "");
	else
		snprintf(why, whysz, "%s", line);
}

/* Whether a failed connection may succeed if tried again: the server is
 * restarting, starting, or not listening yet, or it ended the connection
 * while it was being made (a fast shutdown ends the backend that was
 * answering it: "terminating connection due to administrator command"),
 * or its connection slots are full for now (SQLSTATE 53300,
 * too_many_connections: "sorry, too many clients already", "remaining
 * connection slots are reserved ...", a database's or a role's CONNECTION
 * LIMIT: "too many connections for database ..."); not a wrong password or
 * database. (A failed connection has no SQLSTATE in libpq: the words.) */
static bool transient_failure(const char *msg)
{
	static const char *const signs[] = { "shutting down", "starting up", "accepting connections",
		"Connection refused", "No such file or directory", "in recovery", "timeout expired",
		"could not connect", "server closed the connection", "terminating connection",
		"Connection reset", "could not receive data", "could not send data", "no connection to the server",
		"too many clients", "too many connections", "remaining connection slots" };
	for (size_t i = 0; msg && i < sizeof(signs) / sizeof(signs[0]); i++)
		if (strstr(msg, signs[i]))
			return true;
	return false;
}

/* How long a writer waits for a server that is away when it opens the
 * store or begins a run: $LEAKPROOF_PG_CONNECT_WAIT seconds (default 30;
 * 0: not at all). */
static double connect_wait_s(void)
{
	const char *env = getenv("LEAKPROOF_PG_CONNECT_WAIT");
	if (env && *env) {
		char *end;
		double v = strtod(env, &end);
		if (!*end && v >= 0 && v <= 86400)
			return v;
	}
	return 30;
}

static void say_waiting(struct pg_db *d, const char *reason, double wait_s)
{
	warning("the PostgreSQL server of %s cannot be reached (%.*s): trying again for up to %.0f s",
	        d->shown, (int)strcspn(reason, "\n"), reason, wait_s);
}

/* A writer (a run, a worker) opening the store while the server restarts
 * waits for it with a backoff, saying so once, rather than refusing the
 * job. */
static void wait_for_server(struct pg_db *d, const char *const *vals)
{
	double wait_s = connect_wait_s();
	int64_t deadline = mono_ns() + (int64_t)(wait_s * 1e9), backoff = BACKOFF_MIN_NS;
	bool said = false;
	while (d->conn && pq.PQstatus(d->conn) != CONNECTION_OK && transient_failure(pq.PQerrorMessage(d->conn)) &&
	       mono_ns() + backoff < deadline) {
		if (!said)
			say_waiting(d, pq.PQerrorMessage(d->conn), wait_s);
		said = true;
		poll(NULL, 0, (int)(backoff / 1000000));
		backoff = backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : backoff * 2;
		pq.PQfinish(d->conn);
		d->conn = pq.PQconnectdbParams(conn_keys, vals, 1);
	}
}

/* The server went away under a call of the open or of a run's beginning
 * (it stopped between two statements): connect again, with the backoff
 * of the lost connection, for as long as an open waits. */
static bool pg_wait_back(struct db *db)
{
	struct pg_db *d = pgdb(db);
	if (!d->lost || d->readonly)
		return false;
	double wait_s = connect_wait_s();
	int64_t deadline = mono_ns() + (int64_t)(wait_s * 1e9);
	bool said = false;
	for (;;) {
		enum db_rc rc = ensure_connected(d, RECONNECT_SLICE_MS);
		if (rc == DB_OK)
			return true;
		int64_t now = mono_ns();
		if (rc != DB_BUSY || !d->lost || now >= deadline)
			return false;
		if (!said)
			say_waiting(d, d->lost_why, wait_s);
		said = true;
		int64_t until = d->connecting || d->retry_at_ns < now ? now + RECONNECT_SLICE_MS * 1000000LL
		                                                     : d->retry_at_ns;
		poll(NULL, 0, (int)(((until < deadline ? until : deadline) - now) / 1000000) + 1);
	}
}

static int pg_open(const char *target, bool readonly, struct db **out, char *why, size_t whysz)
{
	*out = NULL;
	if (pq_load(why, whysz) < 0)
		return -1;
	struct pg_db *d = xcalloc(1, sizeof(*d));
	d->base.drv = &db_postgresql_driver;
	d->conninfo = xstrdup(target);
	for (char *p = d->conninfo; *p && *p != ':'; p++)   /* libpq knows the scheme in lower case */
		*p = (char)tolower((unsigned char)*p);
	d->shown = db_redact(target);
	d->readonly = readonly;
	d->queue_tail = &d->queue;
	d->buffer_max = BUFFER_MAX_BYTES;
	const char *cap = getenv("LEAKPROOF_PG_BUFFER_BYTES");   /* tests, tuning */
	if (cap && *cap) {
		char *end;
		unsigned long long v = strtoull(cap, &end, 10);
		if (!*end && v >= 4096 && v <= (1ULL << 40))
			d->buffer_max = (size_t)v;
	}
	const char *const vals[] = CONN_VALUES(d->conninfo);
	d->conn = pq.PQconnectdbParams(conn_keys, vals, 1);
	if (!readonly)
		wait_for_server(d, vals);
	if (!d->conn || pq.PQstatus(d->conn) != CONNECTION_OK) {
		unreachable_why(d->conn ? pq.PQerrorMessage(d->conn) : "out of memory", readonly, why, whysz);
		pg_close(&d->base);
		return -1;
	}
	/* A server that goes away right after the handshake (a fast shutdown
	 * ends the new backend) is waited for as one that was not there. */
	if (conn_ready(d) != DB_OK && !pg_wait_back(&d->base)) {
		snprintf(why, whysz, "%s", d->errmsg);
		pg_close(&d->base);
		return -1;
	}
	*out = &d->base;
	return 0;
}

static enum db_rc pg_exec(struct db *db, const char *sql)
{
	struct pg_db *d = pgdb(db);
	const char *p = skip_space(sql);
	if (word_at(p, "SAVEPOINT") && !in_tx(d)) {
		d->savepoint_local = true;   /* staging only: nothing on the server */
		return DB_OK;
	}
	if (word_at(p, "RELEASE") && d->savepoint_local) {
		d->savepoint_local = false;
		return DB_OK;
	}
	if (create_stage(d, sql))
		return DB_OK;
	enum db_rc rc = ensure_connected(d, RECONNECT_SLICE_MS);
	if (rc == DB_OK)
		rc = before_next(d);
	if (rc != DB_OK)
		return rc;
	int np;
	enum db_pg_conflict conflict;
	char *t = db_pg_translate(sql, true, &np, &conflict);
	rc = run_sql(d, t);
	free(t);
	return rc;
}

static enum db_rc pg_prepare(struct db *db, const char *sql, bool persistent, struct db_stmt **out)
{
	struct pg_db *d = pgdb(db);
	*out = NULL;
	struct pg_stmt *s = xcalloc(1, sizeof(*s));
	s->base.drv = &db_postgresql_driver;
	s->d = d;
	s->row = -1;
	s->persistent = persistent;
	enum db_pg_conflict conflict;
	s->sql = db_pg_translate(sql, false, &s->nparams, &conflict);
	s->stage = stage_of(d, sql, &s->kind);
	const char *p = skip_space(sql);
	s->is_write = word_at(p, "INSERT") || word_at(p, "UPDATE") || word_at(p, "DELETE");
	s->deferrable = persistent && s->kind == K_PLAIN && conflict == DB_PG_PLAIN && word_at(p, "INSERT") &&
	                strstr(s->sql, " VALUES (") && !strcasestr(s->sql, "RETURNING") && s->nparams > 0;
	if (s->nparams > MAX_PARAMS * 10) {
		set_error(d, DB_ERROR, "too many parameters");
		goto fail;
	}
	s->vals = xcalloc((size_t)(s->nparams ? s->nparams : 1), sizeof(*s->vals));
	snprintf(s->name, sizeof(s->name), "lp%u", ++d->next_stmt);
	if (s->kind == K_STAGE_INSERT && !s->stage->cols)
		s->stage->cols = insert_columns(sql, &s->stage->ncols);
	if (conflict == DB_PG_REPLACE) {
		/* INSERT OR REPLACE INTO t [(cols)] ...: the key from the server */
		const char *q = strcasestr(sql, "INTO ");
		q = q ? skip_space(q + 5) : sql;
		if (strncmp(q, "main.", 5) == 0)
			q += 5;
		size_t tn = 0;
		while (word_char((unsigned char)q[tn]))
			tn++;
		char *table = xstrndup(q, tn);
		char **pk;
		int npk;
		enum db_rc rc = primary_key(d, table, &pk, &npk);
		free(table);
		if (rc != DB_OK)
			goto fail;
		if (s->kind == K_STAGE_COPY) {
			s->stage->replace = true;
			free_vals(s->stage->pk, s->stage->npk);
			s->stage->pk = pk;
			s->stage->npk = npk;
		} else {
			int ncols;
			char **cols = insert_columns(sql, &ncols);
			struct strbuf sb = STRBUF_INIT;
			strbuf_addstr(&sb, s->sql);
			add_replace_clause(&sb, pk, npk, cols, ncols);
			free(s->sql);
			s->sql = strbuf_detach(&sb, NULL);
			free_vals(cols, ncols);
			free_vals(pk, npk);
		}
	}
	*out = &s->base;
	return DB_OK;
fail:
	free(s->sql);
	free(s->vals);
	free(s);
	return d->err ? d->err : DB_ERROR;
}

static void pg_reset(struct db_stmt *st)
{
	struct pg_stmt *s = (struct pg_stmt *)st;
	pq.PQclear(s->res);
	s->res = NULL;
	s->row = -1;
	s->nrows = 0;
}

static void pg_finalize(struct db_stmt *st)
{
	struct pg_stmt *s = (struct pg_stmt *)st;
	pg_reset(st);
	if (s->nrows_deferred)
		drop_deferred(s->d);   /* finalized inside a transaction: its rows go */
	free(s->rows);
	free_vals(s->vals, s->nparams);
	free(s->sql);
	free(s);
}

static void set_val(struct db_stmt *st, int i, char *v)
{
	struct pg_stmt *s = (struct pg_stmt *)st;
	if (i < 1 || i > s->nparams) {
		free(v);
		return;
	}
	free(s->vals[i - 1]);
	s->vals[i - 1] = v;
}

static void pg_bind_int64(struct db_stmt *s, int i, int64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%lld", (long long)v);
	set_val(s, i, xstrdup(buf));
}

static void pg_bind_double(struct db_stmt *s, int i, double v)
{
	char buf[32];
	if (isnan(v)) {
		set_val(s, i, NULL);
		return;
	}
	if (isinf(v))
		snprintf(buf, sizeof(buf), "%sInfinity", v < 0 ? "-" : "");
	else
		snprintf(buf, sizeof(buf), "%.17g", v);
	set_val(s, i, xstrdup(buf));
}

static void pg_bind_text(struct db_stmt *s, int i, const char *v)
{
	char *e = v ? db_pg_text_encode(v) : NULL;
	set_val(s, i, e ? e : v ? xstrdup(v) : NULL);
}

static void pg_bind_null(struct db_stmt *s, int i)
{
	set_val(s, i, NULL);
}

static enum db_rc pg_step(struct db_stmt *st)
{
	struct pg_stmt *s = (struct pg_stmt *)st;
	struct pg_db *d = s->d;
	if (s->res || s->row >= 0) {
		if (++s->row < s->nrows)
			return DB_ROW;
		return DB_DONE;
	}
	switch (s->kind) {
	case K_STAGE_INSERT:
		stage_append(d, s->stage, s);
		s->row = 0;
		d->changes = 1;
		return DB_DONE;
	case K_STAGE_CLEAR:
		s->row = 0;
		if (in_tx(d))
			s->stage->cleared = true;
		else
			stages_end_tx(d, false);   /* never outside a flush */
		return DB_DONE;
	case K_STAGE_COPY: {
		enum db_rc rc = ensure_connected(d, RECONNECT_SLICE_MS);
		if (rc == DB_OK)
			rc = before_next(d);
		if (rc == DB_OK)
			rc = stage_copy(d, s->stage);
		s->row = 0;
		return rc == DB_OK ? DB_DONE : rc;
	}
	case K_PLAIN:
		break;
	}
	enum db_rc rc = ensure_connected(d, RECONNECT_SLICE_MS);
	if (rc == DB_OK && s->deferrable && in_tx(d)) {
		defer_row(d, s);
		s->row = 0;
		d->changes = 1;
		return DB_DONE;
	}
	if (rc == DB_OK)
		rc = before_next(d);
	if (rc == DB_OK && s->persistent && s->prepared_gen != d->gen) {
		PGresult *res = pq.PQprepare(d->conn, s->name, s->sql, 0, NULL);
		rc = map_result(d, res);
		pq.PQclear(res);
		if (rc == DB_OK)
			s->prepared_gen = d->gen;
	}
	if (rc == DB_OK) {
		const char *const *vals = (const char *const *)s->vals;
		PGresult *res = s->persistent ? pq.PQexecPrepared(d->conn, s->name, s->nparams, vals, NULL, NULL, 0)
		                              : pq.PQexecParams(d->conn, s->sql, s->nparams, NULL, vals, NULL, NULL, 0);
		rc = map_result(d, res);
		if (rc != DB_OK) {
			pq.PQclear(res);
		} else {
			d->changes = atoll(pq.PQcmdTuples(res));
			s->res = res;
			/* text back as it was bound (db_pg_text_encode()), in the
			 * result's own memory, once: decoding twice would not do */
			for (int r = 0, nf = pq.PQnfields(res), nt = pq.PQntuples(res); r < nt; r++)
				for (int c = 0; c < nf; c++)
					if (!pq.PQgetisnull(res, r, c))
						db_pg_text_decode(pq.PQgetvalue(res, r, c));
			s->nrows = pq.PQntuples(res);
			s->row = 0;
			return s->nrows > 0 ? DB_ROW : DB_DONE;
		}
	}
	bool away = !d->conn || d->connecting;
	if (rc == DB_BUSY && away && s->is_write && !d->tx) {
		/* A write on its own while the server is away: later, in order.
		 * One of a transaction the server dropped fails, as the
		 * transaction does. */
		queue_write(d, s);
		s->row = 0;
		d->changes = 1;
		return DB_DONE;
	}
	if (rc == DB_BUSY && away && !d->errmsg[0])
		set_error(d, DB_BUSY, "store unreachable");
	return rc;
}

static const char *cell(struct db_stmt *st, int col)
{
	struct pg_stmt *s = (struct pg_stmt *)st;
	if (!s->res || s->row < 0 || s->row >= s->nrows || col >= pq.PQnfields(s->res) ||
	    pq.PQgetisnull(s->res, s->row, col))
		return NULL;
	return pq.PQgetvalue(s->res, s->row, col);
}

static bool pg_column_is_null(struct db_stmt *s, int col)
{
	return cell(s, col) == NULL;
}

static double pg_column_double(struct db_stmt *s, int col)
{
	const char *v = cell(s, col);
	if (!v)
		return 0;
	if (*v == 't' || *v == 'f')
		return *v == 't';
	return strtod(v, NULL);
}

static int64_t pg_column_int64(struct db_stmt *s, int col)
{
	const char *v = cell(s, col);
	if (!v)
		return 0;
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (*end == '\0' && errno == 0)
		return n;
	double x = pg_column_double(s, col);   /* a real, as SQLite would convert */
	if (isnan(x))
		return 0;
	return x >= 9.2e18 ? INT64_MAX : x <= -9.2e18 ? INT64_MIN : (int64_t)x;
}

static const char *pg_column_text(struct db_stmt *s, int col)
{
	return cell(s, col);
}

static int64_t pg_changes(struct db *db)
{
	return pgdb(db)->changes;
}

static int64_t pg_last_insert_id(struct db *db)
{
	struct pg_db *d = pgdb(db);
	if (!d->conn || d->connecting || before_next(d) != DB_OK)
		return 0;
	PGresult *res = pq.PQexec(d->conn, "SELECT lastval()");
	int64_t id = 0;
	if (map_result(d, res) == DB_OK && pq.PQntuples(res) == 1)
		id = atoll(pq.PQgetvalue(res, 0, 0));
	pq.PQclear(res);
	return id;
}

/* BEGIN for both: PostgreSQL's writers do not lock each other out; where
 * SQLite's lock is needed (a migration) get_version takes one. */
static enum db_rc pg_begin(struct db *db, bool immediate)
{
	struct pg_db *d = pgdb(db);
	(void)immediate;
	enum db_rc rc = ensure_connected(d, RECONNECT_SLICE_MS);
	if (rc == DB_OK)
		rc = run_sql(d, "BEGIN");
	d->tx = rc == DB_OK;
	return rc;
}

static enum db_rc pg_commit(struct db *db)
{
	struct pg_db *d = pgdb(db);
	d->tx = false;
	if (!d->conn || d->connecting)
		return unreachable(d, "lost during the transaction");
	if (before_next(d) != DB_OK)
		return d->err;   /* the caller rolls back */
	bool failed = pq.PQtransactionStatus(d->conn) == PQTRANS_INERROR;
	enum db_rc rc = run_sql(d, "COMMIT");
	if (rc == DB_OK && failed) {   /* COMMIT of a failed transaction rolls back */
		set_error(d, DB_ERROR, "transaction rolled back");
		rc = DB_ERROR;
	}
	stages_end_tx(d, rc == DB_OK);
	return rc;
}

static enum db_rc pg_rollback(struct db *db)
{
	struct pg_db *d = pgdb(db);
	d->tx = false;
	stages_end_tx(d, false);
	drop_deferred(d);
	if (!d->conn || d->connecting)
		return DB_OK;   /* the server dropped it */
	char keep[sizeof(d->errmsg)];
	enum db_rc keep_rc = d->err;
	memcpy(keep, d->errmsg, sizeof(keep));
	enum db_rc rc = run_sql(d, "ROLLBACK");
	if (rc == DB_OK) {   /* the reason stays the failure's */
		memcpy(d->errmsg, keep, sizeof(keep));
		d->err = keep_rc;
	}
	return rc;
}

static bool pg_in_transaction(struct db *db)
{
	struct pg_db *d = pgdb(db);
	return d->tx || in_tx(d);   /* one the server dropped too: the caller ends it */
}

static enum db_rc pg_errcode(struct db *db)
{
	return pgdb(db)->err;
}

static const char *pg_errmsg(struct db *db)
{
	struct pg_db *d = pgdb(db);
	return d->errmsg[0] ? d->errmsg : "unknown error";
}

/* The version in leakproof_schema; a schema with tables but without it is
 * something else's. Inside a transaction (a migration) the advisory lock
 * first: another writer's migration is seen whole, after its COMMIT. */
static enum db_rc pg_get_version(struct db *db, int64_t *version, bool *foreign)
{
	struct pg_db *d = pgdb(db);
	*version = 0;
	*foreign = false;
	enum db_rc rc = ensure_connected(d, RECONNECT_SLICE_MS);
	if (rc != DB_OK)
		return rc;
	char sql[160];
	if (in_tx(d)) {
		snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%d)", SCHEMA_LOCK_KEY);
		if ((rc = run_sql(d, sql)) != DB_OK)
			return rc;
	}
	PGresult *res = pq.PQexec(d->conn, "SELECT to_regclass('leakproof_schema') IS NOT NULL,"
	                                " (SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema())");
	if ((rc = map_result(d, res)) != DB_OK) {
		pq.PQclear(res);
		return rc;
	}
	bool has = strcmp(pq.PQgetvalue(res, 0, 0), "t") == 0;
	int64_t ntables = atoll(pq.PQgetvalue(res, 0, 1));
	pq.PQclear(res);
	if (!has) {
		*foreign = ntables > 0;
		return DB_OK;
	}
	res = pq.PQexec(d->conn, "SELECT coalesce(max(version), 0) FROM leakproof_schema");
	if ((rc = map_result(d, res)) == DB_OK)
		*version = atoll(pq.PQgetvalue(res, 0, 0));
	pq.PQclear(res);
	return rc;
}

static enum db_rc pg_set_version(struct db *db, int64_t version)
{
	struct pg_db *d = pgdb(db);
	char sql[200];
	snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS leakproof_schema (version BIGINT NOT NULL);"
	         " DELETE FROM leakproof_schema; INSERT INTO leakproof_schema VALUES (%lld)", (long long)version);
	enum db_rc rc = ensure_connected(d, RECONNECT_SLICE_MS);
	return rc == DB_OK ? run_sql(d, sql) : rc;
}

static uint64_t pg_dropped(struct db *db, char *why, size_t whysz)
{
	struct pg_db *d = pgdb(db);
	if (d->dropped_total) {
		char cap[32];
		snprintf(why, whysz, "the server was unreachable past the %s buffer, and rows were dropped",
		         fmt_bytes(cap, sizeof(cap), (double)d->buffer_max));
	}
	return d->dropped_total;
}

const struct db_driver db_postgresql_driver = {
	.name = "postgresql",
	.open = pg_open,
	.close = pg_close,
	.exec = pg_exec,
	.prepare = pg_prepare,
	.finalize = pg_finalize,
	.bind_int64 = pg_bind_int64,
	.bind_double = pg_bind_double,
	.bind_text = pg_bind_text,
	.bind_null = pg_bind_null,
	.step = pg_step,
	.reset = pg_reset,
	.column_is_null = pg_column_is_null,
	.column_int64 = pg_column_int64,
	.column_double = pg_column_double,
	.column_text = pg_column_text,
	.changes = pg_changes,
	.last_insert_id = pg_last_insert_id,
	.begin = pg_begin,
	.commit = pg_commit,
	.rollback = pg_rollback,
	.in_transaction = pg_in_transaction,
	.errcode = pg_errcode,
	.errmsg = pg_errmsg,
	.get_version = pg_get_version,
	.set_version = pg_set_version,
	.dropped = pg_dropped,
	.wait_back = pg_wait_back,
};
