/*
 * optuna.c — `leakproof sweep` method optuna, through one long-lived
 * Optuna process.
 *
 * Four parts: a small strict JSON reader for what Optuna answers; the
 * mapping between a sweep spec's dimensions and Optuna's distributions;
 * the study's storage (an SQLite file beside the store, or a PostgreSQL
 * store's own database); and the Optuna process, a Python script on
 * Optuna's API (python/leakproof/_optuna_worker.py) behind JSON lines on a
 * socketpair, restarted when it dies.
 * See optuna.h for the API and docs/internals/optuna.md for the protocol
 * and the measured costs.
 */
#include "sweep/optuna.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/spawn.h"
#include "util/json.h"
#include "util/jsonw.h"
#include "util/util.h"

#define OPTUNA_TIMEOUT_MS 120000
#define OPTUNA_PG_SCHEMA "optuna"     /* Optuna's tables in a PostgreSQL store's database */
#define MAX_INT_BOUND 9007199254740992.0 /* 2^53: integers a double holds exactly */

/* ------------------------------------------------------------------ */
/* Numbers as text */

/* The shortest "%.Ng" that reads back to the same double. */
static void fmt_shortest(char *buf, size_t n, double v)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

/* ------------------------------------------------------------------ */
/* The optuna program */

static const char *optuna_prog(const struct optuna_study *st)
{
	return st->optuna && *st->optuna ? st->optuna : "optuna";
}

/* A short printable excerpt of text for messages; the caller frees. */
static char *excerpt(const char *text)
{
	struct strbuf sb = STRBUF_INIT;
	size_t len = strlen(text);
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
		len--;
	for (size_t i = 0; i < len && i < 200; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c < 0x20 || c == 0x7f)
			strbuf_addf(&sb, "\\x%02x", c);
		else
			strbuf_addch(&sb, c);
	}
	if (len > 200)
		strbuf_addstr(&sb, "...");
	return strbuf_detach(&sb, NULL);
}

/* Parse the whole of text (one value, surrounding white space allowed).
 * Returns 0, or -1 after printing "unexpected output from 'WHAT': ...". */
static int json_parse(const char *text, const char *what, struct jval *v)
{
	const char *err;
	size_t err_at;
	if (jval_parse(text, v, &err, &err_at) == 0)
		return 0;
	char *ex = excerpt(text);
	if (!*text)
		error("unexpected output from '%s': nothing", what);
	else
		error("unexpected output from '%s': %s at byte %zu of '%s'", what, err,
		      err_at, ex);
	free(ex);
	return -1;
}

/* ------------------------------------------------------------------ */
/* The search space */

/* The name Optuna knows a dimension by; the caller frees. */
static char *dim_optuna_name(const struct sweep_dim *d)
{
	struct strbuf sb = STRBUF_INIT;
	if (d->is_env)
		strbuf_addstr(&sb, "env:");
	strbuf_addstr(&sb, d->name);
	return strbuf_detach(&sb, NULL);
}

/* Whether a choice dimension goes to Optuna as numbers. */
static bool choices_are_numbers(const struct sweep_dim *d)
{
	if (d->is_env)
		return false;
	for (size_t i = 0; i < d->nvalues; i++)
		if (!d->values[i].is_number || !isfinite(d->values[i].num))
			return false;
	return true;
}

static void add_json_number(struct strbuf *sb, double v, bool as_float)
{
	char buf[40];
	fmt_shortest(buf, sizeof(buf), v);
	strbuf_addstr(sb, buf);
	/* "2" would come back from Python as the int 2. */
	if (as_float && !strpbrk(buf, ".eEn"))
		strbuf_addstr(sb, ".0");
}

/* "FILE:LINE:COLUMN: " of a dimension, for messages. */
static void where(const struct sweep_spec *spec, const struct sweep_dim *d, struct strbuf *sb)
{
	if (d->line > 0)
		strbuf_addf(sb, "%s:%d:%d: ", spec->path ? spec->path : "sweep", d->line, d->column);
}

static bool exact_int(double v)
{
	return isfinite(v) && floor(v) == v && fabs(v) <= MAX_INT_BOUND;
}

char *optuna_search_space_json(const struct sweep_spec *spec)
{
	struct strbuf sb = STRBUF_INIT, msg = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &sb);
	jw_object_begin(&jw, false);
	for (size_t i = 0; i < spec->ndims; i++) {
		const struct sweep_dim *d = &spec->dims[i];
		char *name = dim_optuna_name(d);
		for (size_t j = 0; j < i; j++) {
			char *other = dim_optuna_name(&spec->dims[j]);
			bool same = !strcmp(name, other);
			free(other);
			if (same) {
				where(spec, d, &msg);
				strbuf_addf(&msg, "dimension '%s' twice in the optuna search space", name);
				goto fail;
			}
		}
		jw_object_object(&jw, name, false);
		if (d->kind == DIM_RANGE && d->integer) {
			if (!exact_int(d->min) || !exact_int(d->max)) {
				where(spec, d, &msg);
				strbuf_addf(&msg, "'%s': integer bounds must be integers within +-2^53", name);
				goto fail;
			}
			if (d->log && d->min < 1) {
				where(spec, d, &msg);
				strbuf_addf(&msg, "'%s': a log_uniform integer range needs min >= 1 (optuna)", name);
				goto fail;
			}
			jw_object_string(&jw, "name", "IntDistribution");
			jw_object_object(&jw, "attributes", false);
			jw_object_bool(&jw, "log", d->log);
			jw_object_intmax(&jw, "step", 1);
			jw_object_intmax(&jw, "low", (intmax_t)d->min);
			jw_object_intmax(&jw, "high", (intmax_t)d->max);
		} else if (d->kind == DIM_RANGE) {
			if (!isfinite(d->min) || !isfinite(d->max) || d->min > d->max) {
				where(spec, d, &msg);
				strbuf_addf(&msg, "'%s': range bounds must be finite, min <= max", name);
				goto fail;
			}
			if (d->log && d->min <= 0) {
				where(spec, d, &msg);
				strbuf_addf(&msg, "'%s': a log_uniform range needs min > 0", name);
				goto fail;
			}
			jw_object_string(&jw, "name", "FloatDistribution");
			jw_object_object(&jw, "attributes", false);
			jw_object_null(&jw, "step");
			jw_object_key(&jw, "low");
			add_json_number(&sb, d->min, true);
			jw_object_key(&jw, "high");
			add_json_number(&sb, d->max, true);
			jw_object_bool(&jw, "log", d->log);
		} else {
			bool numbers = choices_are_numbers(d);
			if (d->nvalues == 0) {
				where(spec, d, &msg);
				strbuf_addf(&msg, "'%s': no values", name);
				goto fail;
			}
			jw_object_string(&jw, "name", "CategoricalDistribution");
			jw_object_object(&jw, "attributes", false);
			jw_object_array(&jw, "choices", false);
			for (size_t k = 0; k < d->nvalues; k++) {
				if (numbers) {
					jw_array_item(&jw);
					add_json_number(&sb, d->values[k].num, !d->values[k].is_int);
				} else {
					jw_array_string(&jw, d->values[k].text);
				}
			}
			jw_end(&jw);
		}
		jw_end(&jw);   /* attributes */
		jw_end(&jw);   /* the distribution */
		free(name);
		continue;
fail:
		error("%s", strbuf_str(&msg));
		free(name);
		strbuf_release(&msg);
		strbuf_release(&sb);
		return NULL;
	}
	jw_end(&jw);
	return strbuf_detach(&sb, NULL);
}

/* ------------------------------------------------------------------ */
/* Parsing an ask */

/* The value v of dimension d as the program receives it; NULL after
 * setting *why (static text) when v is not in d's space. */
static char *map_value(const struct sweep_dim *d, const struct jval *v, const char **why)
{
	char buf[40];
	if (d->kind == DIM_RANGE && d->integer) {
		if (v->type != J_NUM || !v->is_int) {
			*why = "not an integer";
			return NULL;
		}
		if (v->num < d->min || v->num > d->max) {
			*why = "outside the range";
			return NULL;
		}
		snprintf(buf, sizeof(buf), "%.0f", v->num);
		return xstrdup(buf);
	}
	if (d->kind == DIM_RANGE) {
		double slack = 1e-9 * (fabs(d->max - d->min) + fabs(d->max));
		if (v->type != J_NUM || !isfinite(v->num)) {
			*why = "not a finite number";
			return NULL;
		}
		if (v->num < d->min - slack || v->num > d->max + slack) {
			*why = "outside the range";
			return NULL;
		}
		fmt_shortest(buf, sizeof(buf), v->num);
		return xstrdup(buf);
	}
	bool numbers = choices_are_numbers(d);
	if (numbers ? v->type != J_NUM : v->type != J_STR) {
		*why = numbers ? "not a number" : "not a string";
		return NULL;
	}
	for (size_t k = 0; k < d->nvalues; k++)
		if (numbers ? d->values[k].num == v->num : !strcmp(d->values[k].text, v->s))
			return xstrdup(d->values[k].text);
	*why = "not one of the choices";
	return NULL;
}

int optuna_parse_ask(const char *text, const struct sweep_spec *spec,
		     int64_t *number, struct sweep_assign *out)
{
	struct jval root;
	const char *what = "optuna ask";
	out->values = NULL;
	if (json_parse(text, what, &root))
		return -1;

	struct strbuf msg = STRBUF_INIT;
	char **values = xcalloc(spec->ndims + 1, sizeof(*values));  /* NULL-terminated */
	const struct jval *num = jval_get(&root, "number"), *params = jval_get(&root, "params");
	if (root.type != J_OBJ) {
		strbuf_addstr(&msg, "not an object");
		goto fail;
	}
	for (size_t i = 0; i < root.n; i++) {
		if (strcmp(root.keys[i], "number") && strcmp(root.keys[i], "params")) {
			strbuf_addf(&msg, "unknown key '%s'", root.keys[i]);
			goto fail;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(root.keys[i], root.keys[j])) {
				strbuf_addf(&msg, "key '%s' twice", root.keys[i]);
				goto fail;
			}
	}
	if (!num || num->type != J_NUM || !num->is_int || num->num < 0 || num->num > MAX_INT_BOUND) {
		strbuf_addstr(&msg, num ? "'number' is not a trial number" : "no 'number'");
		goto fail;
	}
	if (!params || params->type != J_OBJ) {
		strbuf_addstr(&msg, params ? "'params' is not an object" : "no 'params'");
		goto fail;
	}
	for (size_t i = 0; i < params->n; i++) {
		size_t k;
		for (k = 0; k < spec->ndims; k++) {
			char *name = dim_optuna_name(&spec->dims[k]);
			bool same = !strcmp(name, params->keys[i]);
			free(name);
			if (same)
				break;
		}
		if (k == spec->ndims) {
			strbuf_addf(&msg, "parameter '%s' is not in the sweep", params->keys[i]);
			goto fail;
		}
		if (values[k]) {
			strbuf_addf(&msg, "parameter '%s' twice", params->keys[i]);
			goto fail;
		}
		const char *why = NULL;
		values[k] = map_value(&spec->dims[k], &params->items[i], &why);
		if (!values[k]) {
			char *ex = params->items[i].s ? excerpt(params->items[i].s) : xstrdup("?");
			strbuf_addf(&msg, "parameter '%s': %s '%s' %s", params->keys[i],
				    params->items[i].type == J_STR ? "string" : "value", ex, why);
			free(ex);
			goto fail;
		}
	}
	for (size_t k = 0; k < spec->ndims; k++)
		if (!values[k]) {
			char *name = dim_optuna_name(&spec->dims[k]);
			strbuf_addf(&msg, "no value for parameter '%s'", name);
			free(name);
			goto fail;
		}
	*number = (int64_t)num->num;
	out->values = values;
	jval_release(&root);
	return 0;
fail:
	{
		char *ex = excerpt(text);
		error("unexpected output from '%s': %s (in '%s')", what, strbuf_str(&msg), ex);
		free(ex);
	}
	for (size_t k = 0; k < spec->ndims; k++)
		free(values[k]);
	free(values);
	strbuf_release(&msg);
	jval_release(&root);
	return -1;
}

/* ------------------------------------------------------------------ */
/* Seeds, studies and storage */

uint32_t optuna_ask_seed(uint64_t seed, uint64_t seq)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (seq + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (uint32_t)(z >> 32);
}

static int check_study(const struct optuna_study *st)
{
	if (!st->storage || !*st->storage || !st->name || !*st->name)
		return error("optuna: no storage or study name");
	return 0;
}

/* The scheme's length when uri is a PostgreSQL URI ("postgresql://",
 * "postgres://"), else 0. */
static size_t pg_scheme(const char *uri)
{
	if (!strncmp(uri, "postgresql://", 13))
		return 13;
	if (!strncmp(uri, "postgres://", 11))
		return 11;
	return 0;
}

/* The end of the userinfo of a URI's authority (its '@'), or NULL. */
static const char *userinfo_end(const char *auth)
{
	const char *end = auth + strcspn(auth, "/?#");
	const char *at = memchr(auth, '@', (size_t)(end - auth));
	while (at) {       /* the last '@' before the host */
		const char *next = memchr(at + 1, '@', (size_t)(end - at - 1));
		if (!next)
			break;
		at = next;
	}
	return at;
}

char *optuna_storage_password(const char *store_path)
{
	size_t k = pg_scheme(store_path);
	if (!k)
		return NULL;
	const char *auth = store_path + k, *at = userinfo_end(auth);
	const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
	if (!colon)
		return NULL;
	struct strbuf sb = STRBUF_INIT;
	for (const char *q = colon + 1; q < at; q++) {
		if (*q == '%' && q + 2 < at && isxdigit((unsigned char)q[1]) && isxdigit((unsigned char)q[2])) {
			char hex[3] = { q[1], q[2], '\0' };
			strbuf_addch(&sb, (char)strtol(hex, NULL, 16));
			q += 2;
		} else {
			strbuf_addch(&sb, *q);
		}
	}
	return strbuf_detach(&sb, NULL);
}

char *optuna_default_storage(const char *store_path)
{
	size_t k = pg_scheme(store_path);
	if (k) {
		/* the same server and database through SQLAlchemy and psycopg2,
		 * the password left out (optuna_storage_password()) */
		struct strbuf sb = STRBUF_INIT;
		const char *auth = store_path + k, *at = userinfo_end(auth);
		const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
		strbuf_addstr(&sb, "postgresql+psycopg2://");
		if (colon) {
			strbuf_add(&sb, auth, (size_t)(colon - auth));
			strbuf_addstr(&sb, at);
		} else {
			strbuf_addstr(&sb, auth);
		}
		/* Optuna's tables (trials, studies, ...) in a schema of their
		 * own: the store has a "trials" table too */
		strbuf_addstr(&sb, strchr(auth, '?') ? "&" : "?");
		strbuf_addstr(&sb, "options=-csearch_path%3D" OPTUNA_PG_SCHEMA);
		return strbuf_detach(&sb, NULL);
	}
	struct strbuf dir = STRBUF_INIT, url = STRBUF_INIT;
	const char *slash = strrchr(store_path, '/');
	if (!slash)
		strbuf_addstr(&dir, ".");
	else if (slash == store_path)
		strbuf_addstr(&dir, "/");
	else
		strbuf_add(&dir, store_path, (size_t)(slash - store_path));

	char *real = realpath(strbuf_str(&dir), NULL);
	if (real) {
		strbuf_reset(&dir);
		strbuf_addstr(&dir, real);
		free(real);
	} else if (dir.buf[0] != '/') {
		char *cwd = getcwd(NULL, 0);
		if (!cwd) {
			error_errno("cannot make '%s' absolute: getcwd", store_path);
			strbuf_release(&dir);
			return NULL;
		}
		struct strbuf abs = STRBUF_INIT;
		strbuf_addf(&abs, "%s/%s", strcmp(cwd, "/") ? cwd : "", strbuf_str(&dir));
		free(cwd);
		strbuf_release(&dir);
		dir = abs;
	}
	if (strchr(strbuf_str(&dir), '?')) {
		error("cannot use '%s' for the optuna storage: SQLAlchemy reads '?' in a URL as "
		      "the start of a query (give a storage URL)", strbuf_str(&dir));
		strbuf_release(&dir);
		return NULL;
	}
	while (dir.len > 1 && dir.buf[dir.len - 1] == '/')
		dir.buf[--dir.len] = '\0';
	/* "sqlite:///" + "/abs/dir" + "/optuna.db"; the root gives no "//". */
	strbuf_addf(&url, "sqlite:///%s/optuna.db",
		    strcmp(strbuf_str(&dir), "/") ? strbuf_str(&dir) : "");
	strbuf_release(&dir);
	return strbuf_detach(&url, NULL);
}

/* ------------------------------------------------------------------ */
/* The long-lived Optuna process */

/*
 * The Optuna process runs leakproof/_optuna_worker.py of the Python
 * client's directory (st->client_dir): Optuna's own Python API behind one
 * JSON request per line on stdin, one JSON reply per line on stdout, in
 * order (open, ask, tell, report; {"error": "Type: message"} for a request
 * that failed); it ends at the end of its input. The module's docstring
 * and docs/internals/optuna.md have the protocol.
 */
#define COPROC_TAG "leakproof-optuna"   /* in its argv, to be found in ps */
#define COPROC_RESTARTS 3              /* deaths in a row without a reply */
#define REPLY_CAP_BYTES (4 << 20)

/* A request sent and not yet answered. */
enum pend_kind { PEND_ASK, PEND_TELL, PEND_REPORT };
struct pending {
	char *line;            /* the request, "...\n" (resent after a restart) */
	enum pend_kind kind;
	int64_t number;        /* a tell's or a report's trial; -1 for an ask */
};

struct optuna_proc {
	struct optuna_study st;        /* pointers the caller's */
	char *space;                   /* the search space JSON */
	uint64_t seq;                  /* asks before the first start */
	pid_t pid;                     /* 0: not running (or reaped by the caller) */
	int wait_status;               /* how it ended, when reaped by the caller */
	bool reaped;
	int fd;                        /* our end of its stdin and stdout; -1 */
	struct strbuf in;              /* what it wrote, not yet taken as a line */
	struct pending *pend;          /* requests after the open, in order */
	size_t npend, cappend;
	struct strbuf ready_ask;       /* an ask's reply read before it was wanted */
	bool have_ready_ask;
	struct prune_said { int64_t number, step; double value; } *prune;   /* pruner said prune, not yet taken */
	size_t nprune, capprune;
	int starts;                    /* how many times it was started */
	char *argv0, *argv1;           /* its interpreter (and the shebang's argument) */
	char *password;                /* st.password, owned */
};

/* The interpreter of the optuna program on PATH ("#!/usr/bin/python3",
 * "#!/usr/bin/env python3"), so that the Python with Optuna is the one run;
 * "python3" when there is none to read. */
static void find_python(struct optuna_proc *p)
{
	const char *prog = optuna_prog(&p->st);
	char path[PATH_MAX] = "";
	if (strchr(prog, '/')) {
		snprintf(path, sizeof(path), "%s", prog);
	} else {
		const char *env = getenv("PATH");
		for (const char *d = env ? env : "/usr/bin:/bin"; *d; ) {
			const char *colon = strchr(d, ':');
			size_t len = colon ? (size_t)(colon - d) : strlen(d);
			snprintf(path, sizeof(path), "%.*s/%s", (int)len, len ? d : ".", prog);
			if (access(path, X_OK) == 0)
				break;
			path[0] = '\0';
			if (!colon)
				break;
			d = colon + 1;
		}
	}
	char line[PATH_MAX] = "";
	FILE *f = path[0] ? fopen(path, "re") : NULL;
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	line[strcspn(line, "\r\n")] = '\0';
	if (strncmp(line, "#!", 2)) {
		p->argv0 = xstrdup("python3");
		return;
	}
	char *s = line + 2;
	s += strspn(s, " \t");
	char *sp = s + strcspn(s, " \t");
	if (*sp) {
		*sp++ = '\0';
		sp += strspn(sp, " \t");
		sp[strcspn(sp, " \t")] = '\0';
		if (*sp)
			p->argv1 = xstrdup(sp);
	}
	p->argv0 = xstrdup(*s ? s : "python3");
}

/* Append v as a JSON number: Python's json reads Infinity and -Infinity. */
static void add_json_value(struct strbuf *sb, double v)
{
	char buf[40];
	if (isinf(v)) {
		strbuf_addstr(sb, v > 0 ? "Infinity" : "-Infinity");
		return;
	}
	fmt_shortest(buf, sizeof(buf), v);
	strbuf_addstr(sb, buf);
}

/* Member key holding json, a JSON text already (null when NULL). */
static void object_raw(struct json_writer *jw, const char *key, const char *json)
{
	jw_object_key(jw, key);
	strbuf_addstr(jw->sb, json ? json : "null");
}

/* A request line to the co-process about trial number: {"op": OP,
 * "number": N, ...}\n, its members between the two. -1 after a message
 * when number is not a trial's. */
static int request_begin(struct json_writer *jw, struct strbuf *sb, const char *op, int64_t number)
{
	if (number < 0)
		return error("optuna %s: bad trial number %lld", op, (long long)number);
	jw_init(jw, sb);
	jw_object_begin(jw, false);
	jw_object_string(jw, "op", op);
	jw_object_intmax(jw, "number", number);
	return 0;
}

static void request_end(struct json_writer *jw)
{
	jw_end(jw);
	strbuf_addch(jw->sb, '\n');
}

/* {"op": "ask"}: the next trial's values, please. */
static char *ask_request(void)
{
	struct strbuf req = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &req);
	jw_object_begin(&jw, false);
	jw_object_string(&jw, "op", "ask");
	request_end(&jw);
	return strbuf_detach(&req, NULL);
}

static void proc_kill(struct optuna_proc *p, int *status)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	strbuf_reset(&p->in);
	*status = -1;
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		while (waitpid(p->pid, status, 0) < 0 && errno == EINTR)
			;
	} else if (p->reaped) {
		*status = p->wait_status;
	}
	p->pid = 0;
	p->reaped = false;
}

/* "exit status 1", "killed by signal 9", or "" when unknown. */
static void describe_status(int status, char *buf, size_t n)
{
	if (status == -1)
		snprintf(buf, n, "its end unknown");
	else if (WIFEXITED(status))
		snprintf(buf, n, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, n, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, n, "status %d", status);
}

/* Write all of line; false when the process is gone. */
static bool send_line(struct optuna_proc *p, const char *line)
{
	size_t len = strlen(line), off = 0;
	while (off < len) {
		ssize_t w = send(p->fd, line + off, len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		off += (size_t)w;
	}
	return true;
}

/* One line of its output into *line (without the newline). 0; 1 when it
 * ended or broke the protocol (*why says how); -1 past the time limit. */
static int read_line(struct optuna_proc *p, struct strbuf *line, const char **why)
{
	int timeout_ms = p->st.timeout_ms > 0 ? p->st.timeout_ms : OPTUNA_TIMEOUT_MS;
	int64_t end = mono_ns() + (int64_t)timeout_ms * 1000000;
	for (;;) {
		char *nl = memchr(p->in.buf ? p->in.buf : "", '\n', p->in.len);
		if (nl) {
			size_t n = (size_t)(nl - p->in.buf);
			strbuf_reset(line);
			strbuf_add(line, p->in.buf, n);
			memmove(p->in.buf, nl + 1, p->in.len - n - 1);
			p->in.len -= n + 1;
			p->in.buf[p->in.len] = '\0';
			return 0;
		}
		if (p->in.len > REPLY_CAP_BYTES) {
			*why = "a reply longer than 4 MiB";
			return 1;
		}
		int64_t left = (end - mono_ns()) / 1000000;
		if (left <= 0)
			return -1;
		struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
		int rc = poll(&pfd, 1, (int)left);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			continue;
		char buf[8192];
		ssize_t r = read(p->fd, buf, sizeof(buf));
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			*why = "it ended";
			return 1;
		}
		strbuf_add(&p->in, buf, (size_t)r);
	}
}

/* The "error" of a reply, or NULL when it has none; the caller frees. */
static char *reply_error(const char *text)
{
	struct jval v;
	const char *err;
	size_t at;
	if (jval_parse(text, &v, &err, &at))
		return NULL;
	const struct jval *e = jval_get(&v, "error");
	char *out = e && e->type == J_STR ? xstrdup(e->s) : NULL;
	jval_release(&v);
	return out;
}

/* Start the process and open the study. 0, or -1 after a message. */
static int proc_start(struct optuna_proc *p)
{
	if (!p->st.client_dir)
		return error("cannot start the Optuna process: leakproof's Python client (its "
		             "leakproof/_optuna_worker.py) is not beside the binary nor where it was installed");
	struct strbuf script = STRBUF_INIT;
	strbuf_addf(&script, "%s/leakproof/_optuna_worker.py", p->st.client_dir);
	if (access(strbuf_str(&script), R_OK) != 0) {
		error_errno("cannot start the Optuna process: cannot read '%s'", strbuf_str(&script));
		strbuf_release(&script);
		return -1;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		strbuf_release(&script);
		return error_errno("optuna: socketpair");
	}
	const char *argv[5];
	size_t n = 0;
	argv[n++] = p->argv0;
	if (p->argv1)
		argv[n++] = p->argv1;
	argv[n++] = strbuf_str(&script);
	argv[n++] = COPROC_TAG;
	argv[n] = NULL;
	static const char *const env[] = { "PYTHONWARNINGS=ignore", "PYTHONUNBUFFERED=1", NULL };
	struct spawn sp = {
		.argv = argv, .path_lookup = true, .env = env, .reset_signals = true,
		.in = { SPAWN_FD, sv[1] }, .out = { SPAWN_FD, sv[1] },
		.new_group = true,          /* a ^C at the terminal is the sweep's to handle */
		.death_signal = SIGTERM,
	};
	int rc = spawn_start(&sp);
	int e = errno;
	strbuf_release(&script);
	close(sv[1]);
	if (rc) {
		close(sv[0]);
		errno = e;
		if (rc == SPAWN_NOT_FOUND)
			return error("cannot run '%s' for Optuna: %s (is Optuna installed? Debian and Ubuntu: "
			             "apt install python3-optuna; else pip install optuna)", p->argv0, strerror(e));
		return error_errno("cannot run '%s' for Optuna", p->argv0);
	}
	p->pid = sp.pid;
	p->reaped = false;
	p->fd = sv[0];
	p->starts++;

	/* open: the first start seeds the sampler with the sweep's seed at
	 * seq; each restart with the next one, so it does not repeat itself */
	struct strbuf req = STRBUF_INIT, line = STRBUF_INIT;
	struct json_writer jw;
	jw_init(&jw, &req);
	jw_object_begin(&jw, false);
	jw_object_string(&jw, "op", "open");
	jw_object_string(&jw, "storage", p->st.storage);
	jw_object_string(&jw, "study", p->st.name);
	jw_object_string(&jw, "direction", p->st.maximize ? "maximize" : "minimize");
	jw_object_string(&jw, "sampler", p->st.sampler && *p->st.sampler ? p->st.sampler : "TPESampler");
	object_raw(&jw, "sampler_kwargs", p->st.sampler_kwargs);   /* JSON already: the sweep file's mapping */
	jw_object_string(&jw, "pruner", p->st.pruner);
	if (p->st.password)
		jw_object_string(&jw, "password", p->st.password);
	object_raw(&jw, "pruner_kwargs", p->st.pruner_kwargs);
	jw_object_intmax(&jw, "seed",
	                 optuna_ask_seed(p->st.seed, p->seq + (uint64_t)(p->starts - 1) * 1000003));
	object_raw(&jw, "space", p->space);
	jw_end(&jw);
	strbuf_addch(&req, '\n');
	const char *why = "it ended";
	int got = send_line(p, strbuf_str(&req)) ? read_line(p, &line, &why) : 1;
	strbuf_release(&req);
	rc = 0;
	if (got) {
		int status;
		char how[64];
		proc_kill(p, &status);
		describe_status(status, how, sizeof(how));
		if (got < 0)
			rc = error("the Optuna process did not open study '%s' within %d s (killed)", p->st.name,
			           (p->st.timeout_ms > 0 ? p->st.timeout_ms : OPTUNA_TIMEOUT_MS) / 1000);
		else
			rc = error("the Optuna process (%s .../_optuna_worker.py) ended before it opened study '%s' (%s; %s): "
			           "its message is above (is Optuna installed for that Python? Debian and Ubuntu: "
			           "apt install python3-optuna; else pip install optuna)",
			           p->argv0, p->st.name, why, how);
	} else {
		char *err = reply_error(strbuf_str(&line));
		if (err) {
			int status;
			proc_kill(p, &status);
			rc = error("optuna: %s", err);
			free(err);
		}
	}
	strbuf_release(&line);
	return rc;
}

/* Queue a request and send it (a dead process is found when its reply is
 * read). */
static void proc_send(struct optuna_proc *p, char *line, enum pend_kind kind, int64_t number)
{
	if (p->npend == p->cappend) {
		p->cappend = p->cappend ? 2 * p->cappend : 8;
		p->pend = xrealloc(p->pend, p->cappend * sizeof(*p->pend));
	}
	p->pend[p->npend++] = (struct pending){ line, kind, number };
	if (p->fd >= 0 && !send_line(p, line)) {
		/* left for settle() to find and restart */
	}
}

/* Whether an ask is among the requests not yet answered, or its reply
 * waits to be taken. */
static bool ask_pending(const struct optuna_proc *p)
{
	if (p->have_ready_ask)
		return true;
	for (size_t i = 0; i < p->npend; i++)
		if (p->pend[i].kind == PEND_ASK)
			return true;
	return false;
}

/* Tell fail the trial of an ask's reply that no trial will take. */
static void fail_unwanted_ask(struct optuna_proc *p, const char *reply)
{
	struct jval v;
	const char *err;
	size_t at;
	if (jval_parse(reply, &v, &err, &at) == 0) {
		const struct jval *n = jval_get(&v, "number");
		if (n && n->type == J_NUM && n->is_int && n->num >= 0)
			optuna_proc_tell(p, (int64_t)n->num, false, 0);
		jval_release(&v);
	}
}

/*
 * Read replies in order. Until what is wanted: SETTLE_ASK, the first
 * ask's reply (into *out); SETTLE_ALL, every request's (an ask's reply
 * then is not wanted: its trial is told fail). Replies to tells and
 * reports with an error are warnings; a report's "prune" is noted for
 * optuna_proc_take_prune(). When the process died, it is started again (the study
 * re-opened from its storage) and everything not yet answered is sent
 * again: tells are idempotent (skip_if_finished), an ask lost with the
 * process leaves at most one RUNNING trial in the study. 0, or -1 after a
 * message.
 */
enum settle_until { SETTLE_ASK, SETTLE_ALL, SETTLE_NONE };

/* The reply line to the oldest request, taken off the queue. true when it
 * is the ask's reply wanted (SETTLE_ASK: into *out); an ask's reply not
 * wanted is kept for the next ask (SETTLE_NONE) or its trial told fail
 * (SETTLE_ALL). */
static bool take_reply(struct optuna_proc *p, const struct strbuf *line, enum settle_until until,
                       struct strbuf *out)
{
	struct pending done = p->pend[0];
	memmove(p->pend, p->pend + 1, (p->npend - 1) * sizeof(*p->pend));
	p->npend--;
	free(done.line);
	if (done.kind == PEND_TELL || done.kind == PEND_REPORT) {
		char *err = reply_error(strbuf_str(line));
		if (err) {
			warning("optuna: %s trial %lld: %s", done.kind == PEND_TELL ? "telling" : "reporting",
			        (long long)done.number, err);
		} else if (done.kind == PEND_REPORT) {
			struct jval v;
			const char *perr;
			size_t at;
			if (jval_parse(strbuf_str(line), &v, &perr, &at) == 0) {
				const struct jval *pr = jval_get(&v, "prune"), *st = jval_get(&v, "step"),
				                  *val = jval_get(&v, "value");
				if (pr && pr->type == J_BOOL && pr->b) {
					if (p->nprune == p->capprune) {
						p->capprune = p->capprune ? 2 * p->capprune : 8;
						p->prune = xrealloc(p->prune, p->capprune * sizeof(*p->prune));
					}
					p->prune[p->nprune++] = (struct prune_said){
						done.number, st && st->type == J_NUM ? (int64_t)st->num : -1,
						val && val->type == J_NUM ? val->num : NAN };
				}
				jval_release(&v);
			}
		}
		free(err);
		return false;
	}
	if (until == SETTLE_ASK) {
		strbuf_reset(out);
		strbuf_add(out, strbuf_str(line), line->len);
		return true;
	}
	if (until == SETTLE_NONE) {
		strbuf_reset(&p->ready_ask);
		strbuf_add(&p->ready_ask, strbuf_str(line), line->len);
		p->have_ready_ask = true;
	} else {
		/* an ask asked ahead and not wanted: its trial is failed */
		fail_unwanted_ask(p, strbuf_str(line));
	}
	return false;
}

static int settle(struct optuna_proc *p, enum settle_until until, struct strbuf *out)
{
	int deaths = 0;
	if (until == SETTLE_ASK && p->have_ready_ask) {
		strbuf_reset(out);
		strbuf_add(out, strbuf_str(&p->ready_ask), p->ready_ask.len);
		p->have_ready_ask = false;
		return 0;
	}
	struct strbuf line = STRBUF_INIT;
	while (p->npend) {
		const char *why = "it ended";
		int got = p->fd >= 0 ? read_line(p, &line, &why) : 1;
		if (got < 0) {
			int status;
			proc_kill(p, &status);
			strbuf_release(&line);
			return error("the Optuna process did not answer within %d s (killed)",
			             (p->st.timeout_ms > 0 ? p->st.timeout_ms : OPTUNA_TIMEOUT_MS) / 1000);
		}
		if (got > 0) {
			int status;
			char how[64];
			bool was_running = p->fd >= 0;
			proc_kill(p, &status);
			describe_status(status, how, sizeof(how));
			if (++deaths > COPROC_RESTARTS) {
				strbuf_release(&line);
				return error("the Optuna process ended %d times in a row (%s); giving up", deaths - 1, how);
			}
			if (was_running)
				warning("the Optuna process ended (%s, %s); starting it again", why, how);
			if (proc_start(p) < 0) {
				strbuf_release(&line);
				return -1;
			}
			for (size_t i = 0; i < p->npend; i++)
				if (!send_line(p, p->pend[i].line))
					break;
			continue;
		}
		if (take_reply(p, &line, until, out))
			break;
	}
	strbuf_release(&line);
	return 0;
}

struct optuna_proc *optuna_proc_open(const struct optuna_study *st, const struct sweep_spec *spec, uint64_t seq)
{
	if (check_study(st))
		return NULL;
	char *space = optuna_search_space_json(spec);
	if (!space)
		return NULL;
	struct optuna_proc *p = xcalloc(1, sizeof(*p));
	p->st = *st;
	p->password = st->password ? xstrdup(st->password) : NULL;
	p->st.password = p->password;
	p->space = space;
	p->seq = seq;
	p->fd = -1;
	p->in = (struct strbuf)STRBUF_INIT;
	p->ready_ask = (struct strbuf)STRBUF_INIT;
	find_python(p);
	if (proc_start(p) < 0) {
		optuna_proc_close(p);
		return NULL;
	}
	return p;
}

int optuna_proc_ask(struct optuna_proc *p, const struct sweep_spec *spec, int64_t *number,
                    struct sweep_assign *out)
{
	out->values = NULL;
	if (!ask_pending(p))
		proc_send(p, ask_request(), PEND_ASK, -1);
	struct strbuf reply = STRBUF_INIT;
	int rc = settle(p, SETTLE_ASK, &reply);
	if (rc == 0) {
		char *err = reply_error(strbuf_str(&reply));
		if (err)
			rc = error("optuna: ask: %s", err);
		else
			rc = optuna_parse_ask(strbuf_str(&reply), spec, number, out);
		free(err);
	}
	strbuf_release(&reply);
	return rc;
}

void optuna_proc_ask_ahead(struct optuna_proc *p)
{
	if (p && !ask_pending(p))
		proc_send(p, ask_request(), PEND_ASK, -1);
}

int optuna_proc_tell(struct optuna_proc *p, int64_t number, bool ok, double value)
{
	return optuna_proc_tell_state(p, number, ok ? OPTUNA_COMPLETE : OPTUNA_FAIL, value);
}

int optuna_proc_tell_state(struct optuna_proc *p, int64_t number, enum optuna_state state, double value)
{
	struct strbuf req = STRBUF_INIT;
	struct json_writer jw;
	if (request_begin(&jw, &req, "tell", number) < 0)
		return -1;
	if (state == OPTUNA_PRUNED) {
		jw_object_string(&jw, "state", "pruned");
	} else if (state == OPTUNA_COMPLETE && !isnan(value)) {
		jw_object_string(&jw, "state", "complete");
		jw_object_key(&jw, "value");
		add_json_value(&req, value);
	} else {
		jw_object_string(&jw, "state", "fail");
	}
	request_end(&jw);
	proc_send(p, strbuf_detach(&req, NULL), PEND_TELL, number);
	return 0;
}

int optuna_proc_tell_memory(struct optuna_proc *p, int64_t number, bool skipped, double predicted_peak_bytes,
                            double budget_bytes)
{
	struct strbuf req = STRBUF_INIT;
	struct json_writer jw;
	if (request_begin(&jw, &req, "tell", number) < 0)
		return -1;
	jw_object_string(&jw, "state", "memory");
	jw_object_string(&jw, "outcome", skipped ? "skipped" : "oom");
	if (predicted_peak_bytes > 0 && isfinite(predicted_peak_bytes))
		jw_object_double(&jw, "predicted_peak_bytes", round(predicted_peak_bytes));
	if (budget_bytes > 0 && isfinite(budget_bytes))
		jw_object_double(&jw, "budget_bytes", round(budget_bytes));
	request_end(&jw);
	proc_send(p, strbuf_detach(&req, NULL), PEND_TELL, number);
	return 0;
}

int optuna_proc_report(struct optuna_proc *p, int64_t number, const int64_t *steps, const double *values,
                       size_t n)
{
	struct strbuf req = STRBUF_INIT;
	struct json_writer jw;
	if (request_begin(&jw, &req, "report", number) < 0)
		return -1;
	jw_object_array(&jw, "values", false);
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(values[i]))
			continue;       /* Optuna's report refuses NaN; an infinity is no help to a median */
		jw_array_array(&jw, false);
		jw_array_intmax(&jw, steps[i]);
		jw_array_item(&jw);
		add_json_value(&req, values[i]);
		jw_end(&jw);
	}
	jw_end(&jw);
	request_end(&jw);
	proc_send(p, strbuf_detach(&req, NULL), PEND_REPORT, number);
	return 0;
}

void optuna_proc_poll(struct optuna_proc *p)
{
	if (!p || p->fd < 0)
		return;
	for (;;) {
		struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
		if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLIN))
			break;
		char buf[8192];
		ssize_t r = read(p->fd, buf, sizeof(buf));
		if (r <= 0)
			break;          /* ended: the next settle() finds it, and starts it again */
		strbuf_add(&p->in, buf, (size_t)r);
	}
	struct strbuf line = STRBUF_INIT;
	while (p->npend && p->in.len && memchr(p->in.buf, '\n', p->in.len)) {
		const char *why;
		if (read_line(p, &line, &why) != 0)
			break;
		take_reply(p, &line, SETTLE_NONE, NULL);
	}
	strbuf_release(&line);
}

bool optuna_proc_take_prune(struct optuna_proc *p, int64_t number, int64_t *step, double *value)
{
	for (size_t i = 0; p && i < p->nprune; i++)
		if (p->prune[i].number == number) {
			*step = p->prune[i].step;
			*value = p->prune[i].value;
			p->prune[i] = p->prune[--p->nprune];
			return true;
		}
	return false;
}

bool optuna_proc_reaped(struct optuna_proc *p, pid_t pid, int wait_status)
{
	if (!p || pid <= 0 || pid != p->pid)
		return false;
	p->pid = 0;
	p->reaped = true;
	p->wait_status = wait_status;
	return true;
}

pid_t optuna_proc_pid(const struct optuna_proc *p)
{
	return p ? p->pid : 0;
}

int optuna_proc_close(struct optuna_proc *p)
{
	if (!p)
		return 0;
	int rc = p->npend && p->fd >= 0 ? settle(p, SETTLE_ALL, NULL) : 0;
	if (p->have_ready_ask) {   /* asked ahead, read early, never taken */
		p->have_ready_ask = false;
		fail_unwanted_ask(p, strbuf_str(&p->ready_ask));
		if (p->fd >= 0 && settle(p, SETTLE_ALL, NULL) < 0)
			rc = -1;
	}
	if (p->fd >= 0) {
		/* the end of its input ends it; a moment's grace, then SIGKILL */
		shutdown(p->fd, SHUT_WR);
		struct strbuf rest = STRBUF_INIT;
		const char *why;
		int timeout = p->st.timeout_ms;
		p->st.timeout_ms = 5000;
		while (read_line(p, &rest, &why) == 0)
			;
		p->st.timeout_ms = timeout;
		strbuf_release(&rest);
	}
	int status;
	proc_kill(p, &status);
	for (size_t i = 0; i < p->npend; i++)
		free(p->pend[i].line);
	free(p->pend);
	strbuf_release(&p->in);
	strbuf_release(&p->ready_ask);
	free(p->prune);
	free(p->space);
	free(p->argv0);
	free(p->argv1);
	if (p->password)
		memset(p->password, 0, strlen(p->password));
	free(p->password);
	free(p);
	return rc;
}
