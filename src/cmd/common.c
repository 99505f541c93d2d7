/*
 * common.c — what the subcommands share: reading their options with
 * their tables, their --help, the usage-error message, whole numbers and
 * signals from the command line; and what `run` and `attach` do alike:
 * the options they both read, and the watching of a job once they are
 * checked (the store, the supervisor, the judgment and the summary).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "base/sample.h"
#include "core/analyze.h"
#include "judge/gate.h"
#include "judge/summary.h"
#include "platform/cgroup.h"
#include "report/report.h"
#include "store/store.h"
#include "store/sweeps.h"
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

int cmd_listing_option(const char *cmd, struct listing_args *l, int id, const char *value)
{
	switch (id) {
	case 'f':
		l->format = value;
		return cmd_parse_text_or_json(cmd, value, &l->json);
	case 's':
		l->store_opt = value;
		return 0;
	default:
		return 0;
	}
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

/* The next option: its id (> 0); 0 at the end of the options; or -1 when
 * the command is to return *status at once (0 after --help, 124 after a
 * usage error). */
static int option_next(struct options_parse *p, const struct cmd_usage *u, int *status)
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

int cmd_options_read(struct options_parse *p, const struct cmd_usage *u, int argc, char **argv,
                     cmd_take_option_fn *take, void *ctx)
{
	struct options_parse no_operands;
	int c, status;
	if (!p)
		p = &no_operands;
	options_parse_init(p, u->options, u->stop_at_operand, argc, argv);
	while ((c = option_next(p, u, &status)) > 0)
		if ((status = take(ctx, c, p)))
			return status;
	if (c < 0)
		return status;
	if (p == &no_operands && p->noperands)
		return cmd_usage_error(u->name, "unexpected argument '%s'", p->operands[0]);
	return -1;
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
	case 'q':
		w->quiet = true;
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
		return 0;
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

/*
 * The job has ended: judge its run from the store (the model of a run,
 * loaded once), record the verdict with the end supervise() recorded, and
 * print the summary unless quiet, then check the memory gate (printed even
 * when quiet). A run that cannot be loaded stays recorded unjudged, without
 * a summary. Returns how many expectations of the gate broke (all of them
 * when the run could not be judged).
 */
static int judge_and_print(struct store *st, const struct supervise_result *res, bool quiet,
                           const struct gate *gate)
{
	bool gated = gate && gate_is_set(gate);
	struct run_summary sum;
	if (run_summary_load(st, res->run_id, -1, &sum) != 0) {
		if (gated)
			error("run %lld could not be judged: its memory expectations count as broken",
			      (long long)res->run_id);
		return gated;
	}
	struct run_end re = res->end;
	re.verdict = verdict_name(sum.a.verdict);
	re.judge_version = JUDGE_VERSION;
	re.growth_bytes_per_step = sum.a.slope;
	store_run_end(st, res->run_id, &re);
	double q[5];
	for (int i = 0; i < 5; i++)
		q[i] = sum.a.points >= 2 ? sum.a.q[i] : NAN;
	store_run_set_summary(st, res->run_id, q, sum.steps_per_second);
	store_flush(st);
	if (!quiet)
		report_write(&sum, REPORT_TEXT, stderr);
	int broken = 0;
	if (gated) {
		struct strbuf out = STRBUF_INIT;
		broken = gate_check(gate, &sum, &out);
		fputs(out.buf, stderr);
		strbuf_release(&out);
	}
	run_summary_release(&sum);
	return broken;
}

int cmd_watch(struct watch_args *w, const struct gate *gate)
{
	const char *store_path = store_default_path(w->store_opt);
	if (store_check_target(store_path) < 0)
		return LP_EXIT_USAGE;   /* a store that would lose the run */
	supervise_std_fds();
	struct store *st = store_open(store_path);
	if (!st)
		return LP_EXIT_FAILURE;
	struct supervise_result res;
	int status = supervise(st, &w->o, &res);
	if (res.outcome == SUPERVISE_ENDED) {
		int broken = judge_and_print(st, &res, w->quiet, gate);
		if (broken && status == 0) {
			error("run %lld: the job succeeded but broke %d memory expectation%s (exit %d)",
			      (long long)res.run_id, broken, broken == 1 ? "" : "s", GATE_EXIT_STATUS);
			status = GATE_EXIT_STATUS;
		}
	}
	store_close(st);
	return status;
}
