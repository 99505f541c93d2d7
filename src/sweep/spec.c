/*
 * spec.c — sweep files, parsed: the YAML loaded with libyaml's document
 * loader and checked key by key into a struct sweep_spec. What a checked
 * spec expands to (the trials) is expand.c. The contract is spec.h.
 *
 * Messages. Every complaint about the file is one error() line
 * "FILE:LINE:COLUMN: what is wrong", 1-based (libyaml's marks count from 0,
 * columns in characters), pointing at the node at fault: the key for an
 * unknown or duplicate key, the value for a wrong value. Checks that need
 * the whole file (placeholders, grid against ranges, run_cap for random,
 * on_oom names) run after it has been read, so the first message is the
 * first problem in the file except for those.
 *
 * Values. Scalars are kept as the text written: "1e-3" reaches the program
 * as "1e-3". A plain (unquoted) scalar in decimal syntax with a finite value
 * is a number; a quoted one is a string, as in YAML. Environment values are
 * strings whatever they look like.
 *
 * Defaults: method grid, parallel 1, seed 0, no run_cap, no metric.
 *
 * Caps: the file is at most SPEC_MAX_BYTES, at most SPEC_MAX_DIMS
 * dimensions; user text quoted in messages is cut at 80 characters.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "sweep/spec.h"
#include "sweep/spec-int.h"

#include <errno.h>
#include <inttypes.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "core/scan.h"
#include "util/json.h"
#include "util/jsonw.h"
#include "util/util.h"

#define SPEC_MAX_BYTES (1024 * 1024)    /* a sweep file is a page of YAML */
#define SPEC_MAX_DIMS 1024
#define INT_BOUND_LL 9007199254740992LL /* 2^53: the integers a double holds exactly */
#define COMMAND_EXAMPLE "[python3, train.py, \"${args}\"]"

/* The state of one parse: the file, its document and the spec being filled. */
struct ctx {
	const char *path;
	const char *text;
	size_t len;
	yaml_document_t *doc;
	struct sweep_spec *s;
	yaml_node_t *root;
	yaml_node_t *command;       /* checked against the parameters at the end */
	const yaml_node_t *method;  /* where the method was written, if it was */
	yaml_node_t *retry_with;    /* on_oom.retry_with, names checked at the end */
	const yaml_node_t *on_oom_resize;   /* where on_oom said resize (or not); NULL: the default */
	const yaml_node_t *max;     /* memory.max, checked against max_mem */
	const yaml_node_t *max_mem; /* memory.max_mem, checked at the end */
	const yaml_node_t *slurm_max_mem;   /* slurm.max_mem, checked at the end */
	const yaml_node_t *slurm_mem;       /* slurm.mem */
	const yaml_node_t *executor;   /* where executor: was written, if it was */
	yaml_node_t *metric_name;   /* metric.name, checked at the end */
};

/* ---- messages ---------------------------------------------------------- */

static int vfail_at(const struct ctx *c, size_t line, size_t column, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
static int vfail_at(const struct ctx *c, size_t line, size_t column, const char *fmt, va_list ap)
{
	struct strbuf sb = STRBUF_INIT, clean = STRBUF_INIT;
	strbuf_vaddf(&sb, fmt, ap);
	/* The file's text quoted in a message stays on one line. */
	for (const unsigned char *p = (const unsigned char *)strbuf_str(&sb); *p; p++) {
		if (*p == '\n')
			strbuf_addstr(&clean, "\\n");
		else if (*p == '\t')
			strbuf_addstr(&clean, "\\t");
		else if (*p < 0x20 || *p == 0x7f)
			strbuf_addf(&clean, "\\x%02x", *p);
		else
			strbuf_addch(&clean, *p);
	}
	error("%s:%zu:%zu: %s", c->path, line, column, strbuf_str(&clean));
	strbuf_release(&sb);
	strbuf_release(&clean);
	return -1;
}

/* A message at a 1-based position; always returns -1. */
static int fail_at(const struct ctx *c, size_t line, size_t column, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail_at(const struct ctx *c, size_t line, size_t column, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail_at(c, line, column, fmt, ap);
	va_end(ap);
	return -1;
}

/* A message at the start of node n; always returns -1. */
static int fail(const struct ctx *c, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(const struct ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail_at(c, n->start_mark.line + 1, n->start_mark.column + 1, fmt, ap);
	va_end(ap);
	return -1;
}

static size_t line_of(const yaml_node_t *n) { return n->start_mark.line + 1; }
static size_t col_of(const yaml_node_t *n) { return n->start_mark.column + 1; }

static const char *text(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

/* What the user wrote, for "..., not %s": "'bayes'", "a list", "a mapping". */
static const char *shown(const yaml_node_t *n, char *buf, size_t bufsz)
{
	if (n->type == YAML_SEQUENCE_NODE)
		return "a list";
	if (n->type == YAML_MAPPING_NODE)
		return "a mapping";
	snprintf(buf, bufsz, "'%.80s'", text(n));
	return buf;
}
/* In a function with a local char shown_buf[100]. */
#define SHOWN(n) shown((n), shown_buf, sizeof(shown_buf))

static yaml_node_t *node(const struct ctx *c, int index)
{
	return yaml_document_get_node(c->doc, index);
}

#define for_each_pair(map, p) \
	for (yaml_node_pair_t *p = (map)->data.mapping.pairs.start; p < (map)->data.mapping.pairs.top; p++)
#define for_each_item(seq, it) \
	for (yaml_node_item_t *it = (seq)->data.sequence.items.start; it < (seq)->data.sequence.items.top; it++)

static size_t seq_len(const yaml_node_t *n)
{
	return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

/* An empty value, "~" or "null" written plainly: YAML's null. */
static bool is_null(const yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *t = text(n);
	return !*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL");
}

/*
 * The index of mapping key k in keys[], after checking that it is a
 * string, one of keys[] and not met before in this mapping (seen[] holds
 * the key nodes met so far). where: NULL at the top level, else " in ...".
 * Returns -1 after a message.
 */
static int key_index(const struct ctx *c, const yaml_node_t *k, const char *const *keys, size_t nkeys,
                     const char *where, const yaml_node_t **seen)
{
	char shown_buf[100];
	if (k->type != YAML_SCALAR_NODE)
		return fail(c, k, "keys must be strings, not %s", SHOWN(k));
	for (size_t i = 0; i < nkeys; i++) {
		if (strcmp(text(k), keys[i]))
			continue;
		if (seen[i])
			return fail(c, k, "duplicate key '%s' (first at %zu:%zu)", keys[i], line_of(seen[i]), col_of(seen[i]));
		seen[i] = k;
		return (int)i;
	}
	struct strbuf known = STRBUF_INIT;
	for (size_t i = 0; i < nkeys; i++)
		strbuf_addf(&known, "%s%s", i ? ", " : "", keys[i]);
	fail(c, k, "unknown key '%.80s'%s (known: %s)", text(k), where ? where : "", strbuf_str(&known));
	strbuf_release(&known);
	return -1;
}

/* The index of scalar v among the n names, v kept in *where (unless NULL);
 * else -1 after "WHAT must be A, B or C, not V". */
static int one_of(const struct ctx *c, const yaml_node_t *v, const char *what, const char *const *names, size_t n,
                  const yaml_node_t **where)
{
	char shown_buf[100];
	for (size_t i = 0; i < n; i++) {
		if (v->type == YAML_SCALAR_NODE && !strcmp(text(v), names[i])) {
			if (where)
				*where = v;
			return (int)i;
		}
	}
	struct strbuf list = STRBUF_INIT;
	for (size_t i = 0; i < n; i++)
		strbuf_addf(&list, "%s%s", !i ? "" : i + 1 < n ? ", " : " or ", names[i]);
	fail(c, v, "%s must be %s, not %s", what, strbuf_str(&list), SHOWN(v));
	strbuf_release(&list);
	return -1;
}

/* A section that may be left out (null: nothing to read), else a mapping
 * (NAME must be SHAPE) of keys[] (at most 8), each met once: take(c, i,
 * value) for each pair, i its key's index. 0; -1 after a message. */
static int read_section(struct ctx *c, const yaml_node_t *v, const char *name, const char *shape,
                        const char *const *keys, size_t nkeys, int (*take)(struct ctx *, int, yaml_node_t *))
{
	const yaml_node_t *seen[8] = { NULL };
	char shown_buf[100], where[64];
	if (is_null(v))
		return 0;
	if (v->type != YAML_MAPPING_NODE)
		return fail(c, v, "%s must be %s, not %s", name, shape, SHOWN(v));
	snprintf(where, sizeof(where), " in %s", name);
	for_each_pair(v, p) {
		int i = key_index(c, node(c, p->key), keys, nkeys, where, seen);
		if (i < 0 || take(c, i, node(c, p->value)) != 0)
			return -1;
	}
	return 0;
}

/* ---- numbers ----------------------------------------------------------- */

/* Decimal syntax: [+-] digits [. digits] [e [+-] digits], digits on at
 * least one side of the point. *is_int: no point and no exponent. */
static bool number_syntax(const char *t, bool *is_int)
{
	const char *p = t;
	size_t digits = 0;
	bool integer = true;
	if (*p == '+' || *p == '-')
		p++;
	for (; *p >= '0' && *p <= '9'; p++)
		digits++;
	if (*p == '.') {
		integer = false;
		for (p++; *p >= '0' && *p <= '9'; p++)
			digits++;
	}
	if (!digits)
		return false;
	if (*p == 'e' || *p == 'E') {
		size_t exp_digits = 0;
		integer = false;
		p++;
		if (*p == '+' || *p == '-')
			p++;
		for (; *p >= '0' && *p <= '9'; p++)
			exp_digits++;
		if (!exp_digits)
			return false;
	}
	if (*p)
		return false;
	if (is_int)
		*is_int = integer;
	return true;
}

/* A number in decimal syntax with a finite value. */
bool sweep_parse_number(const char *t, double *v, bool *is_int)
{
	bool integer;
	if (!number_syntax(t, &integer))
		return false;
	double d = strtod(t, NULL);
	if (!isfinite(d))
		return false;
	*v = d;
	if (is_int)
		*is_int = integer;
	return true;
}

/* The shortest "%.Ng" (N <= 17) that reads back as v. */
void sweep_format_double(char *buf, size_t bufsz, double v)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, bufsz, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

/* A whole number in [lo, hi] written as one (no point, no exponent). */
static bool parse_whole(const yaml_node_t *n, long long lo, long long hi, long long *out)
{
	bool integer;
	if (n->type != YAML_SCALAR_NODE || !number_syntax(text(n), &integer) || !integer)
		return false;
	errno = 0;
	long long v = strtoll(text(n), NULL, 10);
	if (errno || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/*
 * A size as parse_size() reads it, checked here so that a bad one gets a
 * located message; parse_size() then reads it for real (and agrees).
 * what: "memory.max". percent_ok: "80%" (of the machine's memory, which
 * the runner knows) is allowed. min_bytes: the smallest accepted, 1 or
 * SIZE_BUDGET_MIN.
 */
static int check_size(const struct ctx *c, const yaml_node_t *n, const char *what, bool percent_ok,
                      uint64_t min_bytes)
{
	static const char *const units[] = { "", "b", "k", "kb", "kib", "m", "mb", "mib",
	                                     "g", "gb", "gib", "t", "tb", "tib" };
	static const double mult[] = { 1, 1, 0x1p10, 0x1p10, 0x1p10, 0x1p20, 0x1p20, 0x1p20,
	                               0x1p30, 0x1p30, 0x1p30, 0x1p40, 0x1p40, 0x1p40 };
	char shown_buf[100];
	if (n->type != YAML_SCALAR_NODE)
		return fail(c, n, "%s must be a size such as 512M or 12G, not %s", what, SHOWN(n));
	const char *s = text(n);
	double v = 0;
	const char *end = scan_decimal(s, &v);
	if (!end)
		return fail(c, n, "%s: invalid size '%.80s': expected a number with an optional unit, such as 512M or 12G",
		            what, s);
	if (*end == 'x' || *end == 'X' || ((*end == 'e' || *end == 'E') && end[1] && strchr("0123456789+-", end[1])))
		return fail(c, n, "%s: invalid size '%.80s': write a plain decimal number, such as 512M or 1.5G "
		            "(no hexadecimal or exponent)", what, s);
	while (*end == ' ')
		end++;
	if (*end == '%') {
		if (!percent_ok)
			return fail(c, n, "%s: invalid size '%.80s': a percentage is not allowed here", what, s);
		if (end[1])
			return fail(c, n, "%s: invalid size '%.80s': nothing may follow '%%'", what, s);
		if (v <= 0 || v > 100)
			return fail(c, n, "%s: invalid size '%.80s': a percentage must be in (0, 100]", what, s);
	} else {
		size_t i;
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcasecmp(end, units[i]))
				break;
		if (i == sizeof(units) / sizeof(units[0]))
			return fail(c, n, "%s: invalid size '%.80s': unknown unit '%.80s' (use K, M, G or T)", what, s, end);
		if (v * mult[i] >= 18446744073709551615.0)
			return fail(c, n, "%s: invalid size '%.80s': too large", what, s);
		if (v * mult[i] < (double)min_bytes)
			return fail(c, n, "%s: invalid size '%.80s': must be at least %s", what, s,
			            min_bytes == SIZE_BUDGET_MIN ? "1M" : "1 byte");
	}
	uint64_t bytes;
	return parse_size(s, UINT64_C(1) << 40, &bytes) != 0 ? -1 : 0;
}

/* ---- the sections ------------------------------------------------------ */

/* A list of strings into *out (NULL-terminated) and *nout. what: "command". */
static int string_list(struct ctx *c, const yaml_node_t *v, const char *what, const char *example,
                       char ***out, size_t *nout)
{
	char shown_buf[100];
	if (v->type == YAML_SCALAR_NODE)
		return fail(c, v, "%s must be a list such as %s, not one string: there is no shell to split it",
		            what, example);
	if (v->type != YAML_SEQUENCE_NODE)
		return fail(c, v, "%s must be a list such as %s, not %s", what, example, SHOWN(v));
	*out = xcalloc(seq_len(v) + 1, sizeof(char *));
	*nout = 0;
	for_each_item(v, it) {
		const yaml_node_t *a = node(c, *it);
		if (a->type != YAML_SCALAR_NODE)
			return fail(c, a, "the items of %s must be strings, not %s", what, SHOWN(a));
		(*out)[(*nout)++] = xstrdup(text(a));
	}
	return 0;
}

/* run_options: strings, each with its place in the file (the runner has
 * `leakproof run` check them, and a message points at the one at fault). */
static int parse_run_options(struct ctx *c, yaml_node_t *v)
{
	struct sweep_spec *s = c->s;
	if (string_list(c, v, "run_options", "[--interval, 50ms]", &s->run_options, &s->nrun_options) != 0)
		return -1;
	s->run_option_line = xcalloc(s->nrun_options + 1, sizeof(size_t));
	s->run_option_col = xcalloc(s->nrun_options + 1, sizeof(size_t));
	size_t i = 0;
	for_each_item(v, it) {
		const yaml_node_t *a = node(c, *it);
		s->run_option_line[i] = line_of(a);
		s->run_option_col[i] = col_of(a);
		i++;
	}
	return 0;
}

static int parse_command(struct ctx *c, yaml_node_t *v)
{
	if (string_list(c, v, "command", COMMAND_EXAMPLE, &c->s->command, &c->s->ncommand) != 0)
		return -1;
	if (!c->s->ncommand)
		return fail(c, v, "command must be a non-empty list such as %s", COMMAND_EXAMPLE);
	if (!*c->s->command[0])
		return fail(c, node(c, *v->data.sequence.items.start), "the program (the first item of command) is empty");
	c->command = v;
	return 0;
}

static const char *const method_names[] = { [SWEEP_GRID] = "grid", [SWEEP_RANDOM] = "random",
                                            [SWEEP_OPTUNA] = "optuna" };
static const char *const executor_names[] = { [SWEEP_LOCAL] = "local", [SWEEP_SLURM] = "slurm" };

static bool all_digits(const char *p, const char *end, size_t max)
{
	if (p >= end || (size_t)(end - p) > max)
		return false;
	for (; p < end; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

bool sweep_slurm_time_ok(const char *t)
{
	if (!strcasecmp(t, "INFINITE") || !strcasecmp(t, "UNLIMITED"))
		return true;
	const char *dash = strchr(t, '-'), *p = t;
	if (dash) {
		if (!all_digits(t, dash, 5))
			return false;
		p = dash + 1;
	}
	/* up to three colon-separated fields of digits */
	int fields = 0;
	while (*p) {
		const char *e = strchr(p, ':');
		if (!e)
			e = p + strlen(p);
		if (!all_digits(p, e, 9) || ++fields > 3)
			return false;
		p = *e ? e + 1 : e;
		if (*e && !*p)
			return false;
	}
	return fields > 0;
}

const char *sweep_slurm_owned_arg(const char *arg)
{
	static const char *const owned[] = { "--array", "-a", "--output", "-o", "--error", "-e", "--wrap",
	                                     "--parsable", "--wait", "-W", "--chdir", "-D", "--export", NULL };
	for (size_t i = 0; owned[i]; i++) {
		size_t n = strlen(owned[i]);
		if (!strncmp(arg, owned[i], n) && (arg[n] == '\0' || arg[n] == '=' || (owned[i][1] != '-' && arg[n])))
			return owned[i];
	}
	return NULL;
}

/* A whole number of slurm: from lo to hi into *out. */
static int take_whole(struct ctx *c, const yaml_node_t *val, const char *what, int lo, int hi, int *out)
{
	char shown_buf[100];
	long long n;
	if (!parse_whole(val, lo, hi, &n))
		return fail(c, val, "%s must be a whole number from %d to %d, not %s", what, lo, hi, SHOWN(val));
	*out = (int)n;
	return 0;
}

/* A size of slurm: into *out, and where it was written into *where. */
static int take_bytes(struct ctx *c, const yaml_node_t *val, const char *what, uint64_t *out,
                      const yaml_node_t **where)
{
	if (check_size(c, val, what, false, SIZE_BUDGET_MIN) != 0 || parse_size(text(val), 0, out) < 0)
		return -1;
	*where = val;
	return 0;
}

/* slurm: {workers, partition, time, mem, gpus_per_task, sbatch_args, max_mem} */
static const char *const slurm_keys[] = { "workers", "partition", "time", "mem", "gpus_per_task", "sbatch_args",
                                          "max_mem" };

static int take_slurm(struct ctx *c, int key, yaml_node_t *val)
{
	struct sweep_slurm *sl = &c->s->slurm;
	char shown_buf[100];
	switch (key) {
	case 0:
		return take_whole(c, val, "slurm.workers", 1, 100000, &sl->workers);
	case 1:
		if (val->type != YAML_SCALAR_NODE || !*text(val) || strpbrk(text(val), " \t\n"))
			return fail(c, val, "slurm.partition must be a partition name, not %s", SHOWN(val));
		sl->partition = xstrdup(text(val));
		break;
	case 2:
		if (val->type != YAML_SCALAR_NODE || !sweep_slurm_time_ok(text(val)))
			return fail(c, val, "slurm.time must be a SLURM time limit such as \"04:00:00\", \"90\" (minutes) "
			            "or \"1-12:00:00\", not %s", SHOWN(val));
		sl->time = xstrdup(text(val));
		break;
	case 3:
		return take_bytes(c, val, "slurm.mem", &sl->mem_bytes, &c->slurm_mem);
	case 4:
		return take_whole(c, val, "slurm.gpus_per_task", 0, 1024, &sl->gpus_per_task);
	case 6:
		return take_bytes(c, val, "slurm.max_mem", &sl->max_mem_bytes, &c->slurm_max_mem);
	default:
		if (string_list(c, val, "slurm.sbatch_args", "[\"--account=ml\"]", &sl->sbatch_args,
		                &sl->nsbatch_args) != 0)
			return -1;
		for_each_item(val, it) {
			const yaml_node_t *a = node(c, *it);
			const char *owned = sweep_slurm_owned_arg(text(a));
			if (text(a)[0] != '-')
				return fail(c, a, "slurm.sbatch_args: '%.80s' is not an option (they start with -)", text(a));
			if (owned)
				return fail(c, a, "slurm.sbatch_args: %s is set by the sweep itself", owned);
		}
		break;
	}
	return 0;
}

static int parse_slurm(struct ctx *c, const yaml_node_t *v)
{
	return read_section(c, v, "slurm", "a mapping {workers: N, partition: NAME, time: TIME, mem: SIZE, "
	                    "max_mem: SIZE, gpus_per_task: N, sbatch_args: [...]}", slurm_keys, 7, take_slurm);
}

static int parse_metric(struct ctx *c, const yaml_node_t *v)
{
	static const char *const keys[] = { "name", "goal" };
	static const char *const goals[] = { "minimize", "maximize" };
	const yaml_node_t *seen[2] = { NULL, NULL };
	char shown_buf[100];
	if (v->type != YAML_MAPPING_NODE)
		return fail(c, v, "metric must be a mapping {name: NAME, goal: minimize or maximize}, not %s", SHOWN(v));
	for_each_pair(v, p) {
		const yaml_node_t *k = node(c, p->key), *val = node(c, p->value);
		int i = key_index(c, k, keys, 2, " in metric", seen);
		if (i < 0)
			return -1;
		if (i == 0) {
			if (val->type != YAML_SCALAR_NODE || !*text(val))
				return fail(c, val, "metric.name must be a non-empty string, not %s", SHOWN(val));
			c->s->metric_name = xstrdup(text(val));
			c->metric_name = (yaml_node_t *)val;
		} else {
			int goal = one_of(c, val, "metric.goal", goals, 2, NULL);
			if (goal < 0)
				return -1;
			c->s->maximize = goal == 1;
		}
	}
	if (!c->s->metric_name)
		return fail(c, v, "metric needs a name");
	return 0;
}

static bool valid_param_name(const char *t)
{
	if (!*t || *t == '-')
		return false;
	for (; *t; t++)
		if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') ||
		      *t == '_' || *t == '.' || *t == '-'))
			return false;
	return true;
}

static bool valid_env_name(const char *t)
{
	if (!*t || (*t >= '0' && *t <= '9'))
		return false;
	for (; *t; t++)
		if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') || *t == '_'))
			return false;
	return true;
}

/* For the duplicate check of a dimension's values: text, then file order. */
struct value_ref {
	const char *text;
	const yaml_node_t *n;
	size_t index;
};

static int value_ref_cmp(const void *a, const void *b)
{
	const struct value_ref *x = a, *y = b;
	int r = strcmp(x->text, y->text);
	if (r)
		return r;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* Refuse a value written twice in one dimension, naming the occurrence
 * that comes second earliest in the file. */
static int check_duplicate_values(const struct ctx *c, const struct sweep_dim *d, const yaml_node_t *list)
{
	struct value_ref *refs = xcalloc(d->nvalues, sizeof(*refs));
	size_t i = 0;
	for_each_item(list, it) {
		refs[i].text = d->values[i].text;
		refs[i].n = node(c, *it);
		refs[i].index = i;
		i++;
	}
	qsort(refs, d->nvalues, sizeof(*refs), value_ref_cmp);
	const struct value_ref *first = NULL, *second = NULL;
	for (i = 1; i < d->nvalues; i++)
		if (!strcmp(refs[i - 1].text, refs[i].text) && (!second || refs[i].index < second->index)) {
			first = &refs[i - 1];
			second = &refs[i];
		}
	int rc = 0;
	if (second)
		rc = fail(c, second->n, "duplicate value '%.80s' (first at %zu:%zu)", second->text,
		          line_of(first->n), col_of(first->n));
	free(refs);
	return rc;
}

static void value_init(struct sweep_value *val, const yaml_node_t *n, bool is_env)
{
	val->text = xstrdup(text(n));
	val->is_number = !is_env && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	                 sweep_parse_number(val->text, &val->num, &val->is_int);
	if (!val->is_number) {
		val->is_int = false;
		val->num = 0;
	}
}

/* An integer's text within ±2^53, judged on the text: a double rounds
 * 9007199254740993 down to 2^53. */
static bool int_bound_ok(const char *t)
{
	errno = 0;
	long long v = strtoll(t, NULL, 10);
	return !errno && v >= -INT_BOUND_LL && v <= INT_BOUND_LL;
}

static int parse_bound(const struct ctx *c, const yaml_node_t *n, const char *which, double *v, bool *is_int)
{
	char shown_buf[100];
	if (n->type != YAML_SCALAR_NODE || !sweep_parse_number(text(n), v, is_int))
		return fail(c, n, "%s must be a number, not %s", which, SHOWN(n));
	return 0;
}

enum { DK_VALUES, DK_VALUE, DK_MIN, DK_MAX, DK_DISTRIBUTION, DK_N };
static const char *const dim_keys[DK_N] = { "values", "value", "min", "max", "distribution" };

/* One dimension, name: {values: [...]} | {min: a, max: b [, distribution: d]} | {value: x}. */
static int parse_dim(struct ctx *c, const yaml_node_t *k, const yaml_node_t *v, bool is_env, struct sweep_dim *d)
{
	const char *kind = is_env ? "environment variable" : "parameter";
	const char *name = d->name;
	const yaml_node_t *seen[DK_N] = { NULL }, *val[DK_N] = { NULL };
	char shown_buf[100], where[128];

	d->line = (int)line_of(k);
	d->column = (int)col_of(k);
	if (v->type != YAML_MAPPING_NODE)
		return fail(c, v, "%s '%s' must be a mapping: {values: [...]}, {min: ..., max: ...} or {value: ...}",
		            kind, name);
	snprintf(where, sizeof(where), " in %s '%s'", kind, name);
	for_each_pair(v, p) {
		int i = key_index(c, node(c, p->key), dim_keys, DK_N, where, seen);
		if (i < 0)
			return -1;
		val[i] = node(c, p->value);
	}
	int kinds = !!val[DK_VALUES] + !!val[DK_VALUE] + !!(val[DK_MIN] || val[DK_MAX]);
	if (kinds != 1)
		return fail(c, v, "%s '%s' needs %s of: values, min and max, or value", kind, name,
		            kinds ? "only one" : "one");
	if (val[DK_DISTRIBUTION] && !val[DK_MIN] && !val[DK_MAX])
		return fail(c, seen[DK_DISTRIBUTION], "'distribution' goes with min and max, not with values or value");

	if (val[DK_VALUES]) {
		const yaml_node_t *list = val[DK_VALUES];
		if (list->type != YAML_SEQUENCE_NODE || !seq_len(list))
			return fail(c, list, "'values' must be a non-empty list");
		d->kind = DIM_VALUES;
		d->values = xcalloc(seq_len(list), sizeof(*d->values));
		d->nvalues = seq_len(list);
		size_t i = 0;
		for_each_item(list, it) {
			const yaml_node_t *item = node(c, *it);
			if (item->type != YAML_SCALAR_NODE)
				return fail(c, item, "values must be strings or numbers, not %s", SHOWN(item));
			value_init(&d->values[i++], item, is_env);
		}
		return check_duplicate_values(c, d, list);
	}
	if (val[DK_VALUE]) {
		const yaml_node_t *one = val[DK_VALUE];
		if (one->type != YAML_SCALAR_NODE)
			return fail(c, one, "'value' must be a string or a number, not %s", SHOWN(one));
		d->kind = DIM_CONST;
		d->values = xcalloc(1, sizeof(*d->values));
		d->nvalues = 1;
		value_init(&d->values[0], one, is_env);
		return 0;
	}

	const yaml_node_t *mn = val[DK_MIN], *mx = val[DK_MAX];
	bool min_int, max_int;
	if (!mn)
		return fail(c, v, "%s '%s' has max but no min", kind, name);
	if (!mx)
		return fail(c, v, "%s '%s' has min but no max", kind, name);
	if (parse_bound(c, mn, "min", &d->min, &min_int) || parse_bound(c, mx, "max", &d->max, &max_int))
		return -1;
	d->kind = DIM_RANGE;
	if (d->min > d->max)
		return fail(c, mn, "min %s is more than max %s", text(mn), text(mx));
	d->integer = min_int && max_int;
	if (d->integer && (!int_bound_ok(text(mn)) || !int_bound_ok(text(mx))))
		return fail(c, int_bound_ok(text(mn)) ? mx : mn,
		            "integer bounds must lie within -2^53 and 2^53 (9007199254740992)");
	if (val[DK_DISTRIBUTION]) {
		const yaml_node_t *dist = val[DK_DISTRIBUTION];
		const char *t = dist->type == YAML_SCALAR_NODE ? text(dist) : "";
		if (!strcmp(t, "log_uniform") || !strcmp(t, "log_uniform_values"))
			d->log = true;
		else if (strcmp(t, "uniform"))
			return fail(c, dist, "distribution must be uniform or log_uniform, not %s", SHOWN(dist));
	}
	if (d->log && d->min <= 0)
		return fail(c, mn, "log_uniform needs min above 0, not %s", text(mn));
	return 0;
}

/* The parameters: or env: section, appended to s->dims. */
static int parse_dims(struct ctx *c, const yaml_node_t *v, bool is_env)
{
	const char *section = is_env ? "env" : "parameters";
	char shown_buf[100];
	struct sweep_spec *s = c->s;

	if (is_null(v))
		return 0;
	if (v->type != YAML_MAPPING_NODE)
		return fail(c, v, "%s must be a mapping of %s: {values: [...]}, {min: ..., max: ...} or {value: ...}, not %s",
		            section, is_env ? "NAME" : "name", SHOWN(v));
	for_each_pair(v, p) {
		const yaml_node_t *k = node(c, p->key);
		if (k->type != YAML_SCALAR_NODE)
			return fail(c, k, "keys must be strings, not %s", SHOWN(k));
		const char *name = text(k);
		if (!is_env && !valid_param_name(name))
			return fail(c, k, "invalid parameter name '%.80s': use letters, digits, '_', '.' and '-' (not first)",
			            name);
		if (is_env && !valid_env_name(name))
			return fail(c, k, "invalid environment variable name '%.80s': use letters, digits and '_' "
			            "(not a digit first)", name);
		for (size_t i = 0; i < s->ndims; i++)
			if (s->dims[i].is_env == is_env && !strcmp(s->dims[i].name, name))
				return fail(c, k, "duplicate %s '%s' (first at %d:%d)", is_env ? "environment variable" : "parameter",
				            name, s->dims[i].line, s->dims[i].column);
		if (s->ndims == SPEC_MAX_DIMS)
			return fail(c, k, "too many dimensions (at most %d)", SPEC_MAX_DIMS);
		s->dims = xrealloc(s->dims, (s->ndims + 1) * sizeof(*s->dims));
		struct sweep_dim *d = &s->dims[s->ndims++];
		memset(d, 0, sizeof(*d));
		d->name = xstrdup(name);
		d->is_env = is_env;
		if (parse_dim(c, k, node(c, p->value), is_env, d) != 0)
			return -1;
	}
	return 0;
}

/* at-limit, on-oom, every=N, never: a comma-separated list, as --restart. */
static int parse_restart(const struct ctx *c, const yaml_node_t *v)
{
	char shown_buf[100];
	if (v->type != YAML_SCALAR_NODE)
		return fail(c, v, "memory.restart must be at-limit, on-oom, every=N or never (comma-separated), not %s",
		            SHOWN(v));
	char *buf = xstrdup(text(v));
	int rc = 0;
	const char *p = buf;
	for (;;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		long long n;
		char *end;
		if (!strcmp(p, "at-limit") || !strcmp(p, "on-oom") || !strcmp(p, "never")) {
			/* fine */
		} else if (!strncmp(p, "every=", 6)) {
			errno = 0;
			n = strtoll(p + 6, &end, 10);
			if (errno || end == p + 6 || *end || n < 1 || p[6] == '+' || p[6] == ' ') {
				rc = fail(c, v, "memory.restart '%.80s': every=N needs a whole number of steps, at least 1", p);
				break;
			}
		} else {
			rc = fail(c, v, "memory.restart: unknown policy '%.80s' (use at-limit, every=N, on-oom or never)", p);
			break;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	free(buf);
	return rc;
}

static const char *const memory_keys[] = { "max", "restart", "expect", "max_mem" };

static int take_memory(struct ctx *c, int key, yaml_node_t *val)
{
	switch (key) {
	case 0:
		if (check_size(c, val, "memory.max", true, SIZE_BUDGET_MIN) != 0)
			return -1;
		c->s->memory_max = xstrdup(text(val));
		c->max = val;
		break;
	case 1:
		if (parse_restart(c, val) != 0)
			return -1;
		c->s->memory_restart = xstrdup(text(val));
		break;
	case 2:
		if (check_size(c, val, "memory.expect", false, 1) != 0)
			return -1;
		c->s->memory_expect = xstrdup(text(val));
		break;
	default:
		if (check_size(c, val, "memory.max_mem", false, SIZE_BUDGET_MIN) != 0)
			return -1;
		c->s->memory_max_mem = xstrdup(text(val));
		c->max_mem = val;
		break;
	}
	return 0;
}

static int parse_memory(struct ctx *c, const yaml_node_t *v)
{
	if (read_section(c, v, "memory", "a mapping {max: SIZE, max_mem: SIZE, restart: POLICY, expect: SIZE}",
	                 memory_keys, 4, take_memory) != 0)
		return -1;
	const yaml_node_t *max = c->max, *max_mem = c->max_mem;
	uint64_t lo = 0, hi = 0;
	if (max_mem && !max)
		return fail(c, max_mem, "memory.max_mem is the most a trial is given when memory.max is not enough: "
		            "give memory.max too (the allocation trials start with)");
	/* (checked sizes; a percentage of the machine is compared by the runner) */
	if (max_mem && !strchr(text(max), '%') && parse_size(text(max), 0, &lo) == 0 &&
	    parse_size(text(max_mem), 0, &hi) == 0 && hi < lo)
		return fail(c, max_mem, "memory.max_mem (%.40s) is less than memory.max (%.40s)", text(max_mem),
		            text(max));
	return 0;
}

/* on_oom: resize, or {retry_with: {name: half|fit, ...}, resize: BOOL}; the
 * names are checked at the end. */
static const char *const on_oom_keys[] = { "retry_with", "resize" };

static int take_on_oom(struct ctx *c, int key, yaml_node_t *rw)
{
	char shown_buf[100];
	struct sweep_spec *s = c->s;
	if (key == 1) {
		static const char *const bools[] = { "true", "false" };
		int t = one_of(c, rw, "on_oom.resize", bools, 2, &c->on_oom_resize);
		if (t < 0)
			return -1;
		s->on_oom_resize = t == 0;
		return 0;
	}
	if (rw->type != YAML_MAPPING_NODE)
		return fail(c, rw, "on_oom.retry_with must be a mapping {PARAMETER: half|fit}, not %s", SHOWN(rw));
	size_t n = (size_t)(rw->data.mapping.pairs.top - rw->data.mapping.pairs.start);
	s->retry_names = xcalloc(n + 1, sizeof(char *));
	s->retry_rules = xcalloc(n + 1, sizeof(char *));
	for_each_pair(rw, q) {
		const yaml_node_t *k = node(c, q->key), *rule = node(c, q->value);
		if (k->type != YAML_SCALAR_NODE)
			return fail(c, k, "keys must be strings, not %s", SHOWN(k));
		for (yaml_node_pair_t *e = rw->data.mapping.pairs.start; e < q; e++) {
			const yaml_node_t *ek = node(c, e->key);
			if (!strcmp(text(ek), text(k)))
				return fail(c, k, "duplicate key '%.80s' (first at %zu:%zu)", text(k), line_of(ek), col_of(ek));
		}
		if (rule->type != YAML_SCALAR_NODE || (strcmp(text(rule), "half") && strcmp(text(rule), "fit")))
			return fail(c, rule, "on_oom.retry_with rule for '%.80s' must be half or fit, not %s", text(k),
			            SHOWN(rule));
		s->retry_names[s->nretry] = xstrdup(text(k));
		s->retry_rules[s->nretry] = xstrdup(text(rule));
		s->nretry++;
	}
	c->retry_with = rw;
	return 0;
}

static int parse_on_oom(struct ctx *c, const yaml_node_t *v)
{
	if (v->type == YAML_SCALAR_NODE && !strcmp(text(v), "resize")) {
		c->s->on_oom_resize = true;
		c->on_oom_resize = v;
		return 0;
	}
	return read_section(c, v, "on_oom", "resize or a mapping {retry_with: {PARAMETER: half|fit}, resize: "
	                    "true|false}", on_oom_keys, 2, take_on_oom);
}

/* A YAML value as JSON, written with jw as the member key of the object
 * open now, or (key NULL) as the next item of the array open now or the
 * whole document: plain scalars that read as numbers, true/false or null
 * as those, other scalars as strings, mappings as objects (string keys),
 * sequences as arrays. For Optuna's keyword arguments. -1 after a message. */
static int yaml_json(struct ctx *c, const yaml_node_t *v, struct json_writer *jw, const char *key, int depth)
{
	char shown_buf[100];
	if (depth > 16)
		return fail(c, v, "nested too deeply");
	if (v->type == YAML_SCALAR_NODE) {
		const char *t = text(v);
		bool integer;
		bool plain = v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		bool as_is = plain && (is_null(v) || !strcmp(t, "true") || !strcmp(t, "false") ||
		                       (number_syntax(t, &integer) && t[0] != '+'));
		if (key)
			jw_object_key(jw, key);
		else
			jw_array_item(jw);
		if (!as_is)
			strbuf_add_json_str(jw->sb, t);
		else
			strbuf_addstr(jw->sb, is_null(v) ? "null" : t);
		return 0;
	}
	if (v->type == YAML_SEQUENCE_NODE) {
		if (key)
			jw_object_array(jw, key, false);
		else
			jw_array_begin(jw, false);
		for_each_item(v, it)
			if (yaml_json(c, node(c, *it), jw, NULL, depth + 1))
				return -1;
		jw_end(jw);
		return 0;
	}
	if (key)
		jw_object_object(jw, key, false);
	else
		jw_object_begin(jw, false);
	for_each_pair(v, p) {
		const yaml_node_t *k = node(c, p->key);
		if (k->type != YAML_SCALAR_NODE)
			return fail(c, k, "keys must be strings, not %s", SHOWN(k));
		if (yaml_json(c, node(c, p->value), jw, text(k), depth + 1))
			return -1;
	}
	jw_end(jw);
	return 0;
}

/* optuna: {sampler: NAME, sampler_kwargs: {...}, pruner: NAME, pruner_kwargs: {...}} */
static const char *const optuna_keys[] = { "sampler", "sampler_kwargs", "pruner", "pruner_kwargs" };

static int take_optuna(struct ctx *c, int i, yaml_node_t *val)
{
	char shown_buf[100];
	struct sweep_spec *s = c->s;
	char **dst = i == 0 ? &s->optuna_sampler : i == 1 ? &s->optuna_sampler_kwargs :
	             i == 2 ? &s->optuna_pruner : &s->optuna_pruner_kwargs;
	if (i == 0 || i == 2) {
		const char *t = val->type == YAML_SCALAR_NODE ? text(val) : "";
		bool ok = *t != '\0';
		for (const char *q = t; *q; q++)
			ok &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_';
		if (!ok)
			return fail(c, val, "optuna.%s must be the name of a class of optuna.%s, such as %s, not %s",
			            optuna_keys[i], i == 0 ? "samplers" : "pruners", i == 0 ? "TPESampler" : "MedianPruner",
			            SHOWN(val));
		*dst = xstrdup(t);
	} else {
		if (val->type != YAML_MAPPING_NODE)
			return fail(c, val, "optuna.%s must be a mapping of keyword arguments, not %s", optuna_keys[i],
			            SHOWN(val));
		struct strbuf sb = STRBUF_INIT;
		struct json_writer jw;
		jw_init(&jw, &sb);
		if (yaml_json(c, val, &jw, NULL, 0)) {
			strbuf_release(&sb);
			return -1;
		}
		*dst = strbuf_detach(&sb, NULL);
	}
	return 0;
}

static int parse_optuna(struct ctx *c, const yaml_node_t *v)
{
	return read_section(c, v, "optuna", "a mapping {sampler: TPESampler, sampler_kwargs: {...}, "
	                    "pruner: MedianPruner, pruner_kwargs: {...}}", optuna_keys, 4, take_optuna);
}

/* prefork: [torch, numpy]: module names, dotted */
static int parse_prefork(struct ctx *c, const yaml_node_t *v)
{
	struct sweep_spec *s = c->s;
	if (is_null(v))
		return 0;
	if (string_list(c, v, "prefork", "[torch, numpy]", &s->prefork, &s->nprefork) != 0)
		return -1;
	size_t i = 0;
	for_each_item(v, it) {
		const char *m = s->prefork[i++];
		bool ok = *m && *m != '.';
		for (const char *q = m; *q; q++)
			ok &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
			      *q == '_' || (*q == '.' && q[1] && q[1] != '.');
		if (!ok)
			return fail(c, node(c, *it), "prefork: '%.80s' is not a Python module name", m);
	}
	return 0;
}

static int parse_result_regex(struct ctx *c, const yaml_node_t *v)
{
	char shown_buf[100];
	if (v->type != YAML_SCALAR_NODE || !*text(v))
		return fail(c, v, "result_regex must be a regular expression such as '^val_loss=(\\S+)', not %s", SHOWN(v));
	int errcode;
	PCRE2_SIZE erroff;
	pcre2_code *code = pcre2_compile((PCRE2_SPTR)text(v), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_MATCH_INVALID_UTF,
	                                 &errcode, &erroff, NULL);
	if (!code) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(errcode, msg, sizeof(msg));
		return fail(c, v, "invalid result_regex '%.80s' at offset %zu: %s", text(v), (size_t)erroff, (char *)msg);
	}
	uint32_t groups = 0;
	pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &groups);
	pcre2_code_free(code);
	if (groups > STEP_REGEX_MAX_GROUPS)
		return fail(c, v, "invalid result_regex '%.80s': %u capture groups, at most %d (group 1 is the result)",
		            text(v), (unsigned)groups, STEP_REGEX_MAX_GROUPS);
	c->s->result_regex = xstrdup(text(v));
	return 0;
}

/* ---- checks that need the whole file ------------------------------------ */

size_t sweep_find_param(const struct sweep_spec *s, const char *name, size_t len)
{
	for (size_t i = 0; i < s->ndims; i++)
		if (!s->dims[i].is_env && strlen(s->dims[i].name) == len && !memcmp(s->dims[i].name, name, len))
			return i;
	return SIZE_MAX;
}

/* Every "{name}" in the command names a parameter; braces balance. */
static int check_placeholders(const struct ctx *c)
{
	const struct sweep_spec *s = c->s;
	size_t i = 0;
	for_each_item(c->command, it) {
		const yaml_node_t *n = node(c, *it);
		const char *arg = s->command[i++];
		if (!strcmp(arg, "${args}"))
			continue;
		for (const char *p = arg; *p; p++) {
			if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
				p++;
				continue;
			}
			if (*p == '}')
				return fail(c, n, "unmatched '}' in command argument '%.80s' (write '}}' for a literal brace)", arg);
			if (*p != '{')
				continue;
			const char *close = strchr(p + 1, '}');
			const char *open = strchr(p + 1, '{');
			if (!close || (open && open < close))
				return fail(c, n, "unmatched '{' in command argument '%.80s' (write '{{' for a literal brace)", arg);
			size_t len = (size_t)(close - p - 1);
			if (!len)
				return fail(c, n, "empty placeholder '{}' in command argument '%.80s'", arg);
			if (sweep_find_param(s, p + 1, len) == SIZE_MAX) {
				struct strbuf names = STRBUF_INIT;
				for (size_t d = 0; d < s->ndims; d++)
					if (!s->dims[d].is_env)
						strbuf_addf(&names, "%s%s", names.len ? ", " : "", s->dims[d].name);
				fail(c, n, "placeholder '{%.*s}' names no parameter (%s%s)", (int)(len > 80 ? 80 : len), p + 1,
				     names.len ? "parameters: " : "there are no parameters", strbuf_str(&names));
				strbuf_release(&names);
				return -1;
			}
			p = close;
		}
	}
	return 0;
}

/* Whether the clients send name as it is: the Python and C clients (and
 * the channel, clients.md) give a result's name as a letter or _, then
 * letters, digits and _ . : / -, 63 bytes at most; any other byte becomes
 * _ on the way, and the name is cut. */
static bool client_name_ok(const char *t)
{
	if (!*t || strlen(t) > 63 || !(isalpha((unsigned char)*t) || *t == '_'))
		return false;
	for (const char *p = t + 1; *p; p++)
		if (!(isalnum((unsigned char)*p) || strchr("_.:/-", *p)))
			return false;
	return true;
}

static int check_whole(struct ctx *c)
{
	struct sweep_spec *s = c->s;
	const char *method = s->method == SWEEP_GRID ? "grid" : s->method == SWEEP_RANDOM ? "random" : "optuna";

	/* A metric the clients report: a name they would change (val loss ->
	 * val_loss) is found in no trial, and every trial would fail ("no
	 * result reported"). With result_regex the name is only a label. */
	if (s->metric_name && !s->result_regex && c->metric_name && !client_name_ok(s->metric_name))
		return fail(c, c->metric_name,
		            "metric.name '%.80s' is not a name a client can report: a letter or _, then letters, "
		            "digits and _ . : / - (63 bytes at most; leakproof.result() would send it changed, "
		            "and no trial would have it)", s->metric_name);

	if (!s->command)
		return fail(c, c->root, "command is missing: a list such as %s", COMMAND_EXAMPLE);
	if (check_placeholders(c) != 0)
		return -1;
	if (s->method == SWEEP_GRID) {
		uint64_t size = 1;
		for (size_t i = 0; i < s->ndims; i++) {
			const struct sweep_dim *d = &s->dims[i];
			if (d->kind == DIM_RANGE)
				return fail_at(c, (size_t)d->line, (size_t)d->column, "%s '%s' has a range; grid needs values",
				               d->is_env ? "environment variable" : "parameter", d->name);
			if (size > UINT64_MAX / d->nvalues)
				return fail_at(c, (size_t)d->line, (size_t)d->column, "the grid has more than 2^64 trials");
			size *= d->nvalues;
		}
	} else if (!s->run_cap) {
		return fail(c, c->method, "run_cap is required with method %s", method);
	}
	if (s->executor == SWEEP_SLURM && s->method == SWEEP_OPTUNA)
		return fail(c, c->executor, "executor slurm runs grid and random sweeps; method optuna runs locally");
	/* on_oom: resize grows a trial's allocation up to memory.max_mem, or
	 * with executor slurm from slurm.mem up to slurm.max_mem (workers of
	 * more than one size: docs/internals/sweeps.md); the default when
	 * max_mem is given */
	bool slurm = s->executor == SWEEP_SLURM;
	if (c->slurm_max_mem && !c->slurm_mem)
		return fail(c, c->slurm_max_mem, "slurm.max_mem is the largest worker when slurm.mem is not enough: "
		            "it needs slurm.mem, the size workers start with");
	if (c->slurm_max_mem && s->slurm.max_mem_bytes < s->slurm.mem_bytes)
		return fail(c, c->slurm_max_mem, "slurm.max_mem (%.40s) is less than slurm.mem (%.40s)",
		            text(c->slurm_max_mem), text(c->slurm_mem));
	if (slurm && s->memory_max_mem)
		return fail(c, c->max_mem, "memory.max_mem sizes the trials of a local sweep; with executor slurm "
		            "the workers are sized: slurm: {mem: SIZE, max_mem: SIZE}");
	bool has_max = slurm ? s->slurm.max_mem_bytes != 0 : s->memory_max_mem != NULL;
	if (!c->on_oom_resize)
		s->on_oom_resize = has_max;
	else if (s->on_oom_resize && !has_max)
		return fail(c, c->on_oom_resize, slurm ? "on_oom: resize needs slurm: {mem: SIZE, max_mem: SIZE}: the "
		            "memory workers start with, and the most one is given" : "on_oom: resize needs memory: "
		            "{max: SIZE, max_mem: SIZE}: the allocation trials start with, and the most one is given");
	if (c->retry_with) {
		size_t r = 0;
		for_each_pair(c->retry_with, p) {
			const yaml_node_t *k = node(c, p->key);
			size_t i = sweep_find_param(s, s->retry_names[r], strlen(s->retry_names[r]));
			r++;
			if (i == SIZE_MAX)
				return fail(c, k, "on_oom.retry_with names '%.80s', which is not a parameter", text(k));
			const struct sweep_dim *d = &s->dims[i];
			for (size_t j = 0; j < d->nvalues; j++)
				if (!d->values[j].is_number)
					return fail(c, k, "on_oom.retry_with: parameter '%s' has a value that is not a number ('%.80s'); "
					            "%s needs numbers", d->name, d->values[j].text, s->retry_rules[r - 1]);
		}
	}
	return 0;
}

/* Parameters first, then env, each in file order. */
static void order_dims(struct sweep_spec *s)
{
	struct sweep_dim *sorted = xcalloc(s->ndims ? s->ndims : 1, sizeof(*sorted));
	size_t n = 0;
	for (int env = 0; env <= 1; env++)
		for (size_t i = 0; i < s->ndims; i++)
			if (s->dims[i].is_env == (bool)env)
				sorted[n++] = s->dims[i];
	free(s->dims);
	s->dims = sorted;
}

/* ---- loading ------------------------------------------------------------ */

enum { K_COMMAND, K_METHOD, K_METRIC, K_PARAMETERS, K_ENV, K_RUN_CAP, K_PARALLEL, K_SEED, K_MEMORY, K_ON_OOM,
       K_RESULT_REGEX, K_RUN_OPTIONS, K_EXECUTOR, K_SLURM, K_OPTUNA, K_PREFORK,
       K_MAX_FAILURES, K_N };
static const char *const top_keys[K_N] = { "command", "method", "metric", "parameters", "env", "run_cap",
                                           "parallel", "seed", "memory", "on_oom", "result_regex", "run_options",
                                           "executor", "slurm", "optuna", "prefork",
                                           "max_consecutive_failures" };

static int parse_top(struct ctx *c)
{
	const yaml_node_t *seen[K_N] = { NULL };
	struct sweep_spec *s = c->s;
	char shown_buf[100];
	long long n;

	/* Strings become C strings and argv: no NUL inside. */
	for (yaml_node_t *sc = c->doc->nodes.start; sc < c->doc->nodes.top; sc++)
		if (sc->type == YAML_SCALAR_NODE && strlen(text(sc)) != sc->data.scalar.length)
			return fail(c, sc, "a string may not contain a NUL character");

	if (!c->root)
		return fail_at(c, 1, 1, "the file is empty: expected command, parameters and the other keys of a sweep");
	if (c->root->type != YAML_MAPPING_NODE)
		return fail(c, c->root, "expected a mapping of keys (command, method, parameters, ...), not %s",
		            SHOWN(c->root));
	for_each_pair(c->root, p) {
		yaml_node_t *v = node(c, p->value);
		int rc = 0;
		switch (key_index(c, node(c, p->key), top_keys, K_N, NULL, seen)) {
		case K_COMMAND: rc = parse_command(c, v); break;
		case K_METHOD:
			if ((rc = one_of(c, v, "method", method_names, 3, &c->method)) >= 0)
				s->method = (enum sweep_method)rc;
			break;
		case K_METRIC: rc = parse_metric(c, v); break;
		case K_PARAMETERS: rc = parse_dims(c, v, false); break;
		case K_ENV: rc = parse_dims(c, v, true); break;
		case K_RUN_CAP:
			if (!parse_whole(v, LLONG_MIN, LLONG_MAX, &n))
				return fail(c, v, "run_cap must be a whole number, not %s", SHOWN(v));
			if (n < 0)
				return fail(c, v, "run_cap must be 0 (no cap) or more, not %s", SHOWN(v));
			s->run_cap = n;
			break;
		case K_MAX_FAILURES:
			if (!parse_whole(v, LLONG_MIN, LLONG_MAX, &n) || n < 0 || n > INT_MAX)
				return fail(c, v, "max_consecutive_failures must be a whole number, 0 (never stop) or more, not %s",
				            SHOWN(v));
			s->max_consecutive_failures = (int)n;
			break;
		case K_PARALLEL:
			if (!parse_whole(v, LLONG_MIN, LLONG_MAX, &n) || n < 1 || n > INT_MAX)
				return fail(c, v, "parallel must be a whole number, at least 1, not %s", SHOWN(v));
			s->parallel = (int)n;
			break;
		case K_SEED: {
			bool integer;
			if (v->type != YAML_SCALAR_NODE || !number_syntax(text(v), &integer) || !integer ||
			    text(v)[0] == '-' || text(v)[0] == '+')
				return fail(c, v, "seed must be a whole number from 0 to 18446744073709551615, not %s", SHOWN(v));
			errno = 0;
			unsigned long long seed = strtoull(text(v), NULL, 10);
			if (errno)
				return fail(c, v, "seed must be a whole number from 0 to 18446744073709551615, not %s", SHOWN(v));
			s->seed = seed;
			break;
		}
		case K_MEMORY: rc = parse_memory(c, v); break;
		case K_ON_OOM: rc = parse_on_oom(c, v); break;
		case K_RESULT_REGEX: rc = parse_result_regex(c, v); break;
		case K_RUN_OPTIONS:
			if (!is_null(v))
				rc = parse_run_options(c, v);
			break;
		case K_EXECUTOR:
			if ((rc = one_of(c, v, "executor", executor_names, 2, &c->executor)) >= 0)
				s->executor = (enum sweep_executor)rc;
			break;
		case K_SLURM: rc = parse_slurm(c, v); break;
		case K_OPTUNA: rc = parse_optuna(c, v); break;
		case K_PREFORK: rc = parse_prefork(c, v); break;
		default:
			return -1;
		}
		if (rc < 0)
			return -1;
	}
	return check_whole(c);
}

/* A syntax error as libyaml reports it, located. */
static int yaml_fail(const struct ctx *c, const yaml_parser_t *parser)
{
	if (parser->error == YAML_MEMORY_ERROR)
		return error("%s: out of memory reading the YAML", c->path);
	if (parser->error == YAML_READER_ERROR) {
		/* Bad encoding: libyaml gives a byte offset, not a mark. */
		size_t line = 1, column = 1;
		for (size_t i = 0; i < parser->problem_offset && i < c->len; i++) {
			unsigned char ch = (unsigned char)c->text[i];
			if (ch == '\n') {
				line++;
				column = 1;
			} else if ((ch & 0xc0) != 0x80) {
				column++;
			}
		}
		if (parser->problem_value != -1)
			return fail_at(c, line, column, "%s (byte 0x%02x)", parser->problem, (unsigned)parser->problem_value);
		return fail_at(c, line, column, "%s", parser->problem);
	}
	const char *problem = parser->problem ? parser->problem : "invalid YAML";
	if (parser->context)
		return fail_at(c, parser->problem_mark.line + 1, parser->problem_mark.column + 1, "%s (%s at %zu:%zu)",
		               problem, parser->context, parser->context_mark.line + 1, parser->context_mark.column + 1);
	return fail_at(c, parser->problem_mark.line + 1, parser->problem_mark.column + 1, "%s", problem);
}

int sweep_spec_parse(const char *text_, size_t len, const char *path, struct sweep_spec *out)
{
	struct ctx c = { .path = path, .text = text_, .len = len, .s = out };
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	out->path = xstrdup(path);
	out->parallel = 1;
	out->max_consecutive_failures = SWEEP_MAX_FAILURES_DEFAULT;
	if (!yaml_parser_initialize(&parser)) {
		sweep_spec_free(out);
		return error("%s: out of memory reading the YAML", path);
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text_, len);
	if (!yaml_parser_load(&parser, &doc)) {
		yaml_fail(&c, &parser);
		yaml_parser_delete(&parser);
		sweep_spec_free(out);
		return -1;
	}
	c.doc = &doc;
	c.root = yaml_document_get_root_node(&doc);
	if (c.root) {
		/* One document only: a second one would be ignored silently. */
		if (!yaml_parser_load(&parser, &extra)) {
			yaml_fail(&c, &parser);
			goto out;
		}
		yaml_node_t *second = yaml_document_get_root_node(&extra);
		if (second) {
			fail(&c, second, "only one YAML document is allowed");
			yaml_document_delete(&extra);
			goto out;
		}
		yaml_document_delete(&extra);
	}
	rc = parse_top(&c);
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	if (rc == 0) {
		order_dims(out);
	} else {
		sweep_spec_free(out);
	}
	return rc;
}

int sweep_spec_load(const char *path, struct sweep_spec *out)
{
	char *buf = xmalloc(SPEC_MAX_BYTES + 2);
	memset(out, 0, sizeof(*out));
	ssize_t n = read_file_buf(path, buf, SPEC_MAX_BYTES + 2);
	if (n < 0) {
		free(buf);
		return error_errno("cannot read sweep file '%s'", path);
	}
	if (n > SPEC_MAX_BYTES) {
		free(buf);
		return error("sweep file '%s' is larger than %d KiB", path, SPEC_MAX_BYTES / 1024);
	}
	int rc = sweep_spec_parse(buf, (size_t)n, path, out);
	free(buf);
	return rc;
}

void sweep_spec_free(struct sweep_spec *s)
{
	if (!s)
		return;
	free(s->path);
	free_strings(s->command, s->ncommand);
	free(s->metric_name);
	for (size_t i = 0; i < s->ndims; i++) {
		for (size_t j = 0; j < s->dims[i].nvalues; j++)
			free(s->dims[i].values[j].text);
		free(s->dims[i].values);
		free(s->dims[i].name);
	}
	free(s->dims);
	free(s->memory_max);
	free(s->memory_max_mem);
	free(s->memory_restart);
	free(s->memory_expect);
	free_strings(s->retry_names, s->nretry);
	free_strings(s->retry_rules, s->nretry);
	free(s->result_regex);
	free_strings(s->run_options, s->nrun_options);
	free(s->run_option_line);
	free(s->run_option_col);
	free(s->slurm.partition);
	free(s->slurm.time);
	free_strings(s->slurm.sbatch_args, s->slurm.nsbatch_args);
	free(s->optuna_sampler);
	free(s->optuna_sampler_kwargs);
	free(s->optuna_pruner);
	free(s->optuna_pruner_kwargs);
	free_strings(s->prefork, s->nprefork);
	memset(s, 0, sizeof(*s));
}
