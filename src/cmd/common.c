/*
 * common.c — what the subcommands share: reading their options with
 * their tables, their --help, the usage-error message, whole numbers and
 * signals from the command line; and what `run` and `attach` read alike.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "base/sample.h"
#include "platform/cgroup.h"
#include "util/util.h"

int cmd_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fputs("leakproof: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'leakproof %s --help' for more information.\n", cmd);
	return LP_EXIT_USAGE;
}

int cmd_parse_text_or_json(const char *cmd, const char *value, bool *json)
{
	if (strcmp(value, "text") && strcmp(value, "json"))
		return cmd_usage_error(cmd, "unknown --format '%s' (use text or json)", value);
	*json = !strcmp(value, "json");
	return 0;
}

int cmd_parse_int(const char *s, long long min, long long max, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

void cmd_usage_print(const struct cmd_usage *u, FILE *out)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s\n", u->head);
	options_help(&sb, u->options);
	strbuf_addf(&sb, "\n%s", u->tail);
	fputs(strbuf_str(&sb), out);
	strbuf_release(&sb);
}

void cmd_options_init(struct options_parse *p, const struct cmd_usage *u, int argc, char **argv)
{
	options_parse_init(p, u->options, u->stop_at_operand, argc, argv);
}

int cmd_option_next(struct options_parse *p, const struct cmd_usage *u, int *status)
{
	int c = options_next(p);
	switch (c) {
	case 'h':
		cmd_usage_print(u, stdout);
		*status = 0;
		return -1;
	case OPTIONS_UNKNOWN:
		*status = cmd_usage_error(u->name, "unknown option '%s'", p->word);
		return -1;
	case OPTIONS_NEEDS_VALUE:
		*status = cmd_usage_error(u->name, "option '%s' needs a value", p->word);
		return -1;
	case OPTIONS_VALUE_IS_END:
		*status = cmd_usage_error(u->name, "option '%s' needs a value before '--'", p->word);
		return -1;
	default:
		return c;
	}
}

int cmd_parse_signal(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end != s && !*end)
		return v > 0 && v < NSIG ? (int)v : -1;
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (int i = 1; i < NSIG; i++) {
		const char *name = sigabbrev_np(i);
		if (name && !strcasecmp(name, s))
			return i;
	}
	return -1;
}

int cmd_watch_option(const char *cmd, struct watch_args *w, int id, const char *arg)
{
	struct supervise_opts *o = &w->o;
	switch (id) {
	case 'i':
		if (parse_duration_ns(arg, &o->interval_ns) < 0)
			return LP_EXIT_USAGE;
		if (o->interval_ns < 100000 || o->interval_ns > 3600LL * 1000000000LL)
			return cmd_usage_error(cmd, "--interval '%s' is out of range (100us to 1h)", arg);
		return 0;
	case 'm':
		if (measure_parse(arg, &o->measure) < 0)
			return cmd_usage_error(cmd, "unknown --measure '%s' (use pss, rss, uss, cgroup or gpu)", arg);
		return 0;
	case 'r':
		o->step_regex = arg;
		return 0;
	case 's':
		w->store_opt = arg;
		return 0;
	case WATCH_OPT_MAX_MEM:
		w->max_mem = arg;
		return 0;
	case WATCH_OPT_SOFT_LIMIT:
		w->soft = arg;
		return 0;
	case WATCH_OPT_GRACE:
		return parse_duration_ns(arg, &o->grace_ns) < 0 ? LP_EXIT_USAGE : 0;
	case WATCH_OPT_NO_CGROUP:
		o->use_cgroup = false;
		return 0;
	case WATCH_OPT_NO_STATUS_LINE:
		o->status_line = 0;
		return 0;
	default:
		return -1;
	}
}

int cmd_watch_budgets(const char *cmd, struct watch_args *w)
{
	struct supervise_opts *o = &w->o;
	if (w->max_mem) {
		/* a percentage of what the job can have: the enclosing cgroup's
		 * limit where there is one, else the machine's memory */
		uint64_t whole = cgroup_self_limit();
		if (!whole) {
			long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
			whole = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
		}
		if (parse_size(w->max_mem, whole, &o->max_mem_bytes) < 0)
			return LP_EXIT_USAGE;
		if (o->max_mem_bytes < SIZE_BUDGET_MIN)
			return cmd_usage_error(cmd, "--max-mem '%s' is below 1M: no job fits in it (a unit is missing? "
			                       "1G, 512M)", w->max_mem);
	}
	if (w->soft) {
		if (strchr(w->soft, '%') && !o->max_mem_bytes)
			return cmd_usage_error(cmd, "--soft-limit '%s' is a percentage of --max-mem, which is not set",
			                       w->soft);
		if (parse_size(w->soft, o->max_mem_bytes, &o->soft_limit_bytes) < 0)
			return LP_EXIT_USAGE;
		if (o->soft_limit_bytes < SIZE_BUDGET_MIN || (o->max_mem_bytes && o->soft_limit_bytes > o->max_mem_bytes))
			return cmd_usage_error(cmd, "--soft-limit '%s' must be at least 1M and at most --max-mem", w->soft);
	}
	return 0;
}
