/*
 * optuna.c — `leakproof sweep` method optuna, through Optuna's command line.
 *
 * Three parts: a runner that starts one `optuna` command (fork/execvpe, no
 * shell, stdin from /dev/null, stdout and stderr through pipes read by one
 * poll loop, a time limit, PYTHONWARNINGS=ignore to silence Optuna's
 * ExperimentalWarning); a small strict JSON reader for what those commands
 * print; and the mapping between a sweep spec's dimensions and Optuna's
 * distributions. See optuna.h for the API and docs/internals/optuna.md for
 * the commands and the measured costs (about 1.3 s per command).
 */
#include "sweep/optuna.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/spawn.h"
#include "util/json.h"
#include "util/util.h"

#define OPTUNA_TIMEOUT_MS 120000
#define OUT_CAP_BYTES (4 << 20)        /* stdout of one command */
#define ERR_KEEP_BYTES 16384           /* the tail of stderr kept for messages */
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
/* Running one optuna command */

static const char *optuna_prog(const struct optuna_study *st)
{
	return st->optuna && *st->optuna ? st->optuna : "optuna";
}

/*
 * The line of stderr that says what went wrong, escape sequences (colours)
 * removed, at most 1000 bytes; "" when there is none. The caller frees.
 * After a Python traceback that is the exception's line, the first
 * unindented one after the last "Traceback (most recent call last):" (the
 * last line can be SQLAlchemy's "(Background on this error at: URL)" or the
 * "[SQL: ...]" of a long message); otherwise (argparse's "optuna tell:
 * error: ...", a traceback cut off by the tail) the last non-empty line.
 */
static char *error_line(const struct strbuf *err)
{
	static const char tb[] = "Traceback (most recent call last):";
	struct strbuf clean = STRBUF_INIT;
	const char *s = strbuf_str(err);
	for (size_t i = 0; i < err->len; i++) {
		if (s[i] == '\033' && i + 1 < err->len && s[i + 1] == '[') {
			i += 2;
			while (i < err->len && !(s[i] >= '@' && s[i] <= '~'))
				i++;
			continue;
		}
		strbuf_addch(&clean, s[i]);
	}
	const char *c = strbuf_str(&clean), *last = NULL, *exc = NULL;
	size_t last_len = 0, exc_len = 0;
	bool in_tb = false;
	for (const char *line = c; *line; ) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' ||
				   line[len - 1] == '\t'))
			len--;
		if (len == sizeof(tb) - 1 && !memcmp(line, tb, len)) {
			in_tb = true;
			exc = NULL;
		} else if (len > 0 && in_tb && line[0] != ' ' && line[0] != '\t') {
			in_tb = false;
			exc = line;
			exc_len = len;
		}
		if (len > 0) {
			last = line;
			last_len = len;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	const char *pick = exc ? exc : last;
	size_t pick_len = exc ? exc_len : last_len;
	if (pick_len > 1000)
		pick_len = 1000;
	char *out = xmalloc(pick_len + 1);
	if (pick_len)
		memcpy(out, pick, pick_len);
	out[pick_len] = '\0';
	strbuf_release(&clean);
	return out;
}

/* The optuna command line: prog, then args (NULL-terminated). The caller
 * frees the array (not its strings). */
static const char **optuna_argv(const char *prog, const char *const *args)
{
	size_t nargs = 0;
	while (args[nargs])
		nargs++;
	const char **argv = xcalloc(nargs + 2, sizeof(*argv));
	argv[0] = prog;
	for (size_t i = 0; i < nargs; i++)
		argv[i + 1] = args[i];
	return argv;
}

/* Say why prog did not run (rc from spawn_capture(), errno its cause). */
static void report_not_run(const char *prog, const char *what, int rc, const struct spawn *sp)
{
	if (rc == SPAWN_NOT_FOUND)
		error("cannot run '%s': %s (is Optuna installed? Debian and Ubuntu: "
		      "apt install python3-optuna; else pip install optuna)",
		      prog, strerror(errno));
	else if (rc == SPAWN_CANNOT_EXEC)
		error_errno("cannot run '%s'", prog);
	else if (sp->pid > 0)
		error_errno("'%s': %s", what, sp->why);   /* waiting for it failed */
	else
		error_errno("cannot run '%s': %s", prog, sp->why);
}

/* 0 when the command ran and exited 0; else -1 after saying how it ended. */
static int judge_end(const char *what, int timeout_ms, const struct spawn_capture *cap)
{
	if (cap->timed_out) {
		error("'%s' did not finish within %d s (killed)", what, (timeout_ms + 999) / 1000);
		return -1;
	}
	if (cap->too_big) {
		error("'%s' printed more than %d MiB (killed)", what, OUT_CAP_BYTES >> 20);
		return -1;
	}
	int status = cap->wait_status;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	char *line = error_line(&cap->err);
	char how[64];
	if (WIFEXITED(status))
		snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(status));
	else
		snprintf(how, sizeof(how), "killed by signal %d", WTERMSIG(status));
	error("'%s' failed (%s): %s", what, how, *line ? line : "no message on stderr");
	free(line);
	return -1;
}

/*
 * Run `optuna ARGS...` (args NULL-terminated; what names the command in
 * messages, "optuna ask") through platform/spawn.h: no shell, stdin from
 * /dev/null, Python's default signal actions, PYTHONWARNINGS=ignore to
 * silence Optuna's ExperimentalWarning, a time limit. Its stdout goes to
 * *out; it must exit 0. Returns 0, or -1 after printing a message.
 */
static int run_optuna(const struct optuna_study *st, const char *what,
		      const char *const *args, struct strbuf *out)
{
	static const char *const env[] = { "PYTHONWARNINGS=ignore", NULL };
	const char *prog = optuna_prog(st);
	int timeout_ms = st->timeout_ms > 0 ? st->timeout_ms : OPTUNA_TIMEOUT_MS;
	const char **argv = optuna_argv(prog, args);
	struct spawn sp = {
		.argv = argv, .path_lookup = true, .env = env, .in.how = SPAWN_NULL, .reset_signals = true,
	};
	struct spawn_capture cap = SPAWN_CAPTURE_INIT;
	cap.timeout_ms = timeout_ms;
	cap.out_cap_bytes = OUT_CAP_BYTES;
	cap.err_tail_bytes = ERR_KEEP_BYTES;

	int rc = spawn_capture(&sp, &cap);
	if (rc)
		report_not_run(prog, what, rc, &sp);
	else
		rc = judge_end(what, timeout_ms, &cap);
	strbuf_release(out);
	*out = cap.out;   /* what it printed, also on failure */
	strbuf_release(&cap.err);
	free(argv);
	return rc ? -1 : 0;
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
	strbuf_addch(&sb, '{');
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
		if (i)
			strbuf_addstr(&sb, ", ");
		strbuf_add_json_str(&sb, name);
		strbuf_addstr(&sb, ": ");
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
			strbuf_addf(&sb, "{\"name\": \"IntDistribution\", \"attributes\": "
				    "{\"log\": %s, \"step\": 1, \"low\": %.0f, \"high\": %.0f}}",
				    d->log ? "true" : "false", d->min, d->max);
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
			strbuf_addstr(&sb, "{\"name\": \"FloatDistribution\", \"attributes\": "
				      "{\"step\": null, \"low\": ");
			add_json_number(&sb, d->min, true);
			strbuf_addstr(&sb, ", \"high\": ");
			add_json_number(&sb, d->max, true);
			strbuf_addf(&sb, ", \"log\": %s}}", d->log ? "true" : "false");
		} else {
			bool numbers = choices_are_numbers(d);
			if (d->nvalues == 0) {
				where(spec, d, &msg);
				strbuf_addf(&msg, "'%s': no values", name);
				goto fail;
			}
			strbuf_addstr(&sb, "{\"name\": \"CategoricalDistribution\", "
				      "\"attributes\": {\"choices\": [");
			for (size_t k = 0; k < d->nvalues; k++) {
				if (k)
					strbuf_addstr(&sb, ", ");
				if (numbers)
					add_json_number(&sb, d->values[k].num, !d->values[k].is_int);
				else
					strbuf_add_json_str(&sb, d->values[k].text);
			}
			strbuf_addstr(&sb, "]}}");
		}
		free(name);
		continue;
fail:
		error("%s", strbuf_str(&msg));
		free(name);
		strbuf_release(&msg);
		strbuf_release(&sb);
		return NULL;
	}
	strbuf_addch(&sb, '}');
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
/* The commands */

uint32_t optuna_ask_seed(uint64_t seed, uint64_t seq)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (seq + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (uint32_t)(z >> 32);
}

/* "--NAME=VALUE" as one argument (the caller frees). The '=' form keeps
 * argparse from taking a value that starts with '-' ("-1e-05", "-inf") for
 * an option. */
static char *opt(const char *name, const char *value)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "--%s=%s", name, value);
	return strbuf_detach(&sb, NULL);
}

static int check_study(const struct optuna_study *st)
{
	if (!st->storage || !*st->storage || !st->name || !*st->name)
		return error("optuna: no storage or study name");
	return 0;
}

int optuna_create(const struct optuna_study *st)
{
	if (check_study(st))
		return -1;
	const char *dir = st->maximize ? "maximize" : "minimize";
	char *storage = opt("storage", st->storage), *name = opt("study-name", st->name);
	char *direction = opt("direction", dir);
	const char *create[] = { "create-study", "-q", storage, name, direction,
				 "--skip-if-exists", NULL };
	const char *studies[] = { "studies", "-q", storage, "-f", "json", NULL };
	struct strbuf out = STRBUF_INIT;
	struct jval root = { 0 };
	int rc = -1;

	if (run_optuna(st, "optuna create-study", create, &out) ||
	    run_optuna(st, "optuna studies", studies, &out) ||
	    json_parse(strbuf_str(&out), "optuna studies", &root))
		goto done;
	if (root.type != J_ARR) {
		error("unexpected output from 'optuna studies': not a list");
		goto done;
	}
	for (size_t i = 0; i < root.n; i++) {
		const struct jval *s = &root.items[i], *n = jval_get(s, "name"), *d = jval_get(s, "direction");
		if (!n || n->type != J_STR || strcmp(n->s, st->name))
			continue;
		/* ["MINIMIZE"] in 3.1; a bare string is taken too. */
		if (d && d->type == J_ARR && d->n == 1)
			d = &d->items[0];
		if (!d || d->type != J_STR) {
			error("study '%s' in '%s' has %zu objectives; a leakproof sweep has one",
			      st->name, st->storage, d && d->type == J_ARR ? d->n : (size_t)0);
			goto done;
		}
		if (strcasecmp(d->s, dir)) {
			error("study '%s' in '%s' is to %s, but the sweep's goal is to %s "
			      "(give the sweep another study name or storage)",
			      st->name, st->storage, st->maximize ? "minimize" : "maximize", dir);
			goto done;
		}
		rc = 0;
		goto done;
	}
	error("study '%s' is not in '%s' after 'optuna create-study'", st->name, st->storage);
done:
	jval_release(&root);
	strbuf_release(&out);
	free(storage);
	free(name);
	free(direction);
	return rc;
}

int optuna_ask(const struct optuna_study *st, const struct sweep_spec *spec,
	       uint64_t seq, int64_t *number, struct sweep_assign *out)
{
	out->values = NULL;
	if (check_study(st))
		return -1;
	char *space = optuna_search_space_json(spec);
	if (!space)
		return -1;
	char kwargs[64];
	snprintf(kwargs, sizeof(kwargs), "{\"seed\": %u}", (unsigned)optuna_ask_seed(st->seed, seq));
	char *storage = opt("storage", st->storage), *name = opt("study-name", st->name);
	char *sampler = opt("sampler", st->sampler && *st->sampler ? st->sampler : "TPESampler");
	char *skw = opt("sampler-kwargs", kwargs), *ss = opt("search-space", space);
	const char *args[] = { "ask", "-q", storage, name, sampler, skw, ss, "-f", "json", NULL };
	struct strbuf outb = STRBUF_INIT;
	int rc = -1;
	if (run_optuna(st, "optuna ask", args, &outb) == 0)
		rc = optuna_parse_ask(strbuf_str(&outb), spec, number, out);
	strbuf_release(&outb);
	free(space);
	free(storage);
	free(name);
	free(sampler);
	free(skw);
	free(ss);
	return rc;
}

int optuna_tell(const struct optuna_study *st, int64_t number, bool ok, double value)
{
	if (check_study(st))
		return -1;
	if (number < 0)
		return error("optuna tell: bad trial number %lld", (long long)number);
	char buf[40];
	bool complete = ok && !isnan(value);
	char *storage = opt("storage", st->storage), *name = opt("study-name", st->name);
	snprintf(buf, sizeof(buf), "%lld", (long long)number);
	char *trial = opt("trial-number", buf);
	fmt_shortest(buf, sizeof(buf), value);
	char *values = complete ? opt("values", buf) : NULL;
	const char *args[] = { "tell", "-q", storage, name, trial,
			       complete ? "--state=complete" : "--state=fail",
			       "--skip-if-finished", values, NULL };
	struct strbuf out = STRBUF_INIT;
	int rc = run_optuna(st, "optuna tell", args, &out);
	strbuf_release(&out);
	free(storage);
	free(name);
	free(trial);
	free(values);
	return rc;
}

char *optuna_default_storage(const char *store_path)
{
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
