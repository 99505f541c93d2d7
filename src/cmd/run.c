/*
 * run.c — `leakproof run`: supervise one job. In phases: parse the options
 * into a struct supervise_opts, check them, then watch the job as `attach`
 * does (cmd_watch(), common.c): open the store, hand over to
 * core/supervise.c, judge the stored run (record its verdict), print the
 * summary on stderr and check the memory gate; the exit status is the job's.
 */
static const char usage_head[] =
"usage: leakproof run [options] -- COMMAND [ARGS...]\n"
"\n"
"Run COMMAND, sample the memory of its whole process tree, mark its training\n"
"steps, and say at the end whether its memory leaks. The job's stdout and\n"
"stderr pass through unchanged; the summary goes to stderr. Everything is\n"
"kept in the store, for `leakproof report` later.\n";

static const char usage_tail[] =
"steps come from the client (`import leakproof; leakproof.step()`, or\n"
"include/leakproof.h in C), from --step-regex, or from neither: then growth\n"
"is judged per second.\n"
"\n"
"exit status: the job's own (its last start's, with restarts); 128+N when it\n"
"was killed by signal N; 123 when the job exited 0 but broke an expectation\n"
"of --expect, --max-peak or --max-growth; 124 for a usage error; 125 when\n"
"leakproof itself fails; 126 when COMMAND cannot be executed; 127 when it is\n"
"not found.\n"
"\n"
"environment of the job: LEAKPROOF_FD (the client channel), LEAKPROOF_RUN\n"
"(the run id), LEAKPROOF_RESTART (0, then 1, 2, ... at each restart),\n"
"LEAKPROOF_STOP_SIGNAL (SIGTERM), PYTHONPATH (with the Python client\n"
"first), PYTHONUNBUFFERED=1 unless it is set.\n";

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "core/analyze.h"
#include "core/scan.h"
#include "core/supervise.h"
#include "judge/gate.h"
#include "judge/summary.h"
#include "report/report.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "util/util.h"

enum {
	OPT_STATUS_LINE = WATCH_OPT_OWN, OPT_MAX_GPU, OPT_RESTART, OPT_MAX_RESTARTS, OPT_STOP_SIGNAL,
	OPT_RESULT_REGEX, OPT_RESULT_NAME, OPT_TRIAL, OPT_TRACE, OPT_TRACE_MEAN, OPT_CENSUS, OPT_NO_CENSUS,
	OPT_EXPECT, OPT_MAX_PEAK, OPT_MAX_GROWTH, OPT_NO_PTY,
};

static const struct option_spec options[] = {
	OPT_VALUE('i', "interval", "DUR", "sampling interval: 100ms (default), 1ms, 0.5s, ..."),
	OPT_VALUE('m', "measure", "M", "what the verdict judges: pss (default; shared pages\n"
	                               "split between the processes that share them), rss,\n"
	                               "uss (private pages only), cgroup (the job cgroup's\n"
	                               "usage, page cache included), gpu (NVML)"),
	OPT_VALUE('r', "step-regex", "RE", "a line of output matching RE (PCRE2 syntax, e.g.\n"
	                                   "'^Epoch (\\d+)') ends a step; group 1, if any, is\n"
	                                   "the step number. Carriage returns end lines too.\n"
	                                   "Overrides step messages from the client."),
	OPT_VALUE(OPT_RESULT_REGEX, "result-regex", "RE", "a matching line of output reports a result: group 1\n"
	                                                  "(or the whole match) as a number, e.g.\n"
	                                                  "'val_loss=(\\S+)'; as the client's result() does"),
	OPT_VALUE(OPT_RESULT_NAME, "result-name", "NAME", "the name of that result (default \"result\")"),
	CMD_OPT_STORE,
	OPT_HIDDEN_VALUE(OPT_TRIAL, "trial"),   /* set by `leakproof sweep` */
	OPT_GROUP("budgets and restarts:"),
	OPT_VALUE(WATCH_OPT_MAX_MEM, "max-mem", "SIZE", "the job's memory budget: 512M, 12G, 80% (of the\n"
	                                                "enclosing cgroup's limit, else of the machine).\n"
	                                                "Enforced by the kernel in the job's cgroup (v2\n"
	                                                "memory.max with memory.high 5% below; v1\n"
	                                                "memory.limit_in_bytes), else by leakproof at each\n"
	                                                "sample (SIGKILL: cause budget-kill). leakproof says\n"
	                                                "which at the start. Without it, projections use the\n"
	                                                "cgroup's limit, else the machine's memory"),
	OPT_VALUE(OPT_MAX_GPU, "max-gpu", "SIZE", "GPU memory budget of the job's processes, enforced by\n"
	                                          "leakproof through NVML at every sample (at most 100\n"
	                                          "a second; otherwise NVML is read twice a second)"),
	OPT_VALUE(WATCH_OPT_SOFT_LIMIT, "soft-limit", "SIZE", "where --restart at-limit stops the job: 90% of the\n"
	                                                      "budget by default; SIZE or a percentage of --max-mem.\n"
	                                                      "Without at-limit, crossing it is a warning. Memory\n"
	                                                      "here is the tree's PSS (page cache not included)"),
	OPT_VALUE(OPT_RESTART, "restart", "POLICY", "start the job again (same run, LEAKPROOF_RESTART=N\n"
	                                            "in its environment, step numbers continuing) after:\n"
	                                            "  at-limit  the soft limit: stop signal, --grace,\n"
	                                            "            SIGKILL; also after an OOM kill\n"
	                                            "  every=N   N steps in one process (with\n"
	                                            "            --step-regex, N matched lines after the\n"
	                                            "            first: progress lines announce a step)\n"
	                                            "  on-oom    an out-of-memory end: oom-kill,\n"
	                                            "            budget-kill, cuda-oom, host-alloc-fail\n"
	                                            "comma-separated to combine; never (default)"),
	OPT_VALUE(OPT_MAX_RESTARTS, "max-restarts", "N", "at most N restarts (default 10). A job that ends\n"
	                                                 "within 10 s of starting waits 1 s, 2 s, 4 s ... (at\n"
	                                                 "most 30 s) before it is started again"),
	OPT_VALUE(OPT_STOP_SIGNAL, "stop-signal", "SIG", "what asks the job's main process to stop: TERM\n"
	                                                 "(default), INT, USR1, ... (LEAKPROOF_STOP_SIGNAL)"),
	OPT_VALUE(WATCH_OPT_GRACE, "grace", "DUR", "from the stop signal to SIGKILL (default 30s); also\n"
	                                           "after a SIGINT or SIGTERM forwarded to the job (a\n"
	                                           "second one kills at once)"),
	OPT_GROUP("allocation tracing:"),
	OPT_FLAG(OPT_TRACE, "trace", "find where growing memory is allocated: preload a\n"
	                             "sampling tracer into the job and its children (call\n"
	                             "site, library, Python line); `report RUN --trace`"),
	OPT_VALUE(OPT_TRACE_MEAN, "trace-mean", "SIZE", "sample one allocation per SIZE allocated, on average\n"
	                                                "(default 512K; smaller sees more, costs more)"),
	OPT_OPTIONAL(OPT_CENSUS, "census", "DUR", "count a Python job's live objects by type (tensors by\n"
	                                          "device, dtype and grad_fn) and the containers its code\n"
	                                          "holds by name, from the start, every DUR at most\n"
	                                          "(default 5s; under 1% of the job's time), and name\n"
	                                          "what holds what grows; loaded by a startup hook, no\n"
	                                          "import needed. Without it, the hook is dormant and\n"
	                                          "wakes when the job's memory turns to growth"),
	OPT_FLAG(OPT_NO_CENSUS, "no-census", "no census and no hook, not even in a job that imports\n"
	                                     "leakproof"),
	OPT_GROUP("a memory gate (for CI: checked after the job succeeded; exit 123 when broken):"),
	OPT_VALUE(OPT_EXPECT, "expect", "no-leak", "the verdict must not be leak (inconclusive passes,\n"
	                                           "and is said)"),
	OPT_VALUE(OPT_MAX_PEAK, "max-peak", "SIZE", "the peak under the measure must not exceed SIZE"),
	OPT_VALUE(OPT_MAX_GROWTH, "max-growth", "SIZE", "growth per step after warm-up must not exceed SIZE\n"
	                                                "(a run that marks no steps cannot be judged: broken)"),
	OPT_GROUP(""),
	OPT_FLAG(WATCH_OPT_NO_CGROUP, "no-cgroup", "do not put the job in a cgroup of its own"),
	OPT_FLAG(OPT_STATUS_LINE, "status-line", "draw the live status line even when stderr is not a\n"
	                                         "terminal; --no-status-line never draws it"),
	OPT_FLAG(WATCH_OPT_NO_STATUS_LINE, "no-status-line", NULL),   /* told in --status-line's help */
	OPT_FLAG(OPT_NO_PTY, "no-pty", "in a terminal, give the job pipes for its output as\n"
	                               "without one; a terminal on stdin it still reads, in\n"
	                               "the terminal's foreground (by default, when stdout or\n"
	                               "stderr is a terminal, the job gets a pseudo-terminal\n"
	                               "of its own: what is typed reaches it, Ctrl-C/Ctrl-Z/fg\n"
	                               "act on it, isatty() is true, and leakproof still scans\n"
	                               "its output)"),
	OPT_FLAG('q', "quiet", "no summary at the end (what leakproof does to the job,\n"
	                       "such as a restart, is still said)"),
	OPT_HELP(),
	OPT_END(),
};

const struct cmd_usage run_usage = { "run", usage_head, options, usage_tail, true };

#define usage_error(...) cmd_usage_error("run", __VA_ARGS__)

/* Whether sig can ask a job to stop gracefully: it can be caught, and left
 * to its default it ends the process. KILL cannot be caught; STOP, TSTP,
 * TTIN and TTOU pause the job instead; CONT, CHLD, WINCH and URG are
 * ignored by default, so a job that does not handle them never stops. */
static bool graceful_signal(int sig)
{
	static const int refused[] = { SIGKILL, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU,
	                               SIGCONT, SIGCHLD, SIGWINCH, SIGURG };
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (sig == refused[i])
			return false;
	return true;
}

/* "at-limit", "every=N", "on-oom", "never", comma-separated. */
static int parse_restart(const char *arg, struct supervise_opts *o)
{
	char buf[256];
	if (strlen(arg) >= sizeof(buf))
		return usage_error("--restart '%.40s...' is too long", arg);
	strcpy(buf, arg);
	o->restart = 0;
	for (char *save, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (!strcmp(p, "at-limit")) {
			o->restart |= RESTART_AT_LIMIT;
		} else if (!strcmp(p, "on-oom")) {
			o->restart |= RESTART_ON_OOM;
		} else if (!strcmp(p, "never")) {
			o->restart = 0;
		} else if (!strncmp(p, "every=", 6)) {
			long long n;
			if (cmd_parse_int(p + 6, 1, INT64_MAX, &n) < 0)
				return usage_error("--restart '%s': every=N needs a whole number of steps, at least 1", p);
			o->restart |= RESTART_EVERY;
			o->restart_every = n;
		} else {
			return usage_error("unknown --restart policy '%s' (use at-limit, every=N, on-oom or never)", p);
		}
	}
	return 0;
}

/* What `run` was asked: the supervisor's options and what becomes them. */
struct run_args {
	struct watch_args w;       /* what `attach` reads too */
	const char *result_regex;
	struct gate gate;          /* --expect, --max-peak, --max-growth */
};

/* One option c with its value: 0, or 124 after a usage error. */
static int take_option(void *ctx, int c, const struct options_parse *p)
{
	struct run_args *a = ctx;
	struct supervise_opts *o = &a->w.o;
	const char *arg = p->value;
	switch (c) {
	case OPT_EXPECT:
		if (strcmp(arg, "no-leak"))
			return usage_error("unknown --expect '%s' (use no-leak)", arg);
		a->gate.no_leak = true;
		break;
	case OPT_MAX_PEAK:
	case OPT_MAX_GROWTH: {
		uint64_t v;
		if (strchr(arg, '%'))
			return usage_error("--%s '%s' must be a size such as 512M, not a percentage",
			                   c == OPT_MAX_PEAK ? "max-peak" : "max-growth", arg);
		if (parse_size(arg, 0, &v) < 0)
			return LP_EXIT_USAGE;
		if (c == OPT_MAX_PEAK) {
			if (!v)
				return usage_error("--max-peak '%s' must be more than zero", arg);
			a->gate.has_max_peak = true;
			a->gate.max_peak_bytes = (double)v;
		} else {
			a->gate.has_max_growth = true;
			a->gate.max_growth_bytes = (double)v;
		}
		break;
	}
	case OPT_MAX_GPU:
		if (parse_size(arg, 0, &o->max_gpu_bytes) < 0)
			return LP_EXIT_USAGE;
		if (o->max_gpu_bytes < SIZE_BUDGET_MIN)
			return usage_error("--max-gpu '%s' is below 1M: no job fits in it (a unit is missing? 1G, 512M)", arg);
		break;
	case OPT_TRACE:
		o->trace = true;
		break;
	case OPT_CENSUS:
		o->census_hook = true;
		o->census_ns = CENSUS_ASKED_NS;
		if (arg && (parse_duration_ns(arg, &o->census_ns) < 0 || o->census_ns < 50000000LL ||
		            o->census_ns > 3600LL * 1000000000LL))
			return usage_error("--census '%s': give an interval between 50ms and 1h (5s by default)", arg);
		break;
	case OPT_NO_CENSUS:
		o->census_hook = false;
		o->census_ns = 0;
		break;
	case OPT_TRACE_MEAN: {
		uint64_t mean;
		if (parse_size(arg, 0, &mean) < 0)
			return LP_EXIT_USAGE;
		if (mean < 64 || mean > (1ULL << 40))
			return usage_error("--trace-mean '%s' must be between 64 bytes and 1T", arg);
		o->trace = true;
		o->trace_mean = (int64_t)mean;
		break;
	}
	case OPT_RESTART:
		if (parse_restart(arg, o) != 0)
			return LP_EXIT_USAGE;
		break;
	case OPT_MAX_RESTARTS: {
		long long v;
		if (cmd_parse_int(arg, 0, 1000000, &v) < 0)
			return usage_error("--max-restarts '%s' is not a number from 0 to 1000000", arg);
		o->max_restarts = (int)v;
		break;
	}
	case OPT_STOP_SIGNAL:
		if ((o->stop_signal = cmd_parse_signal(arg)) <= 0)
			return usage_error("--stop-signal '%s' is not a signal name (TERM, INT, USR1, ...) or number", arg);
		if (!graceful_signal(o->stop_signal))
			return usage_error("--stop-signal '%s' cannot ask the job to stop and save its work "
			                   "(use TERM, INT, HUP, USR1 or USR2)", arg);
		break;
	case OPT_RESULT_REGEX:
		a->result_regex = arg;
		break;
	case OPT_RESULT_NAME:
		o->result_name = arg;
		break;
	case OPT_TRIAL: {
		static const char *const part[3] = { "SWEEP", "INDEX", "ATTEMPT" };
		const char *at = arg;
		for (int i = 0; i < 3; i++) {
			char *end;
			errno = 0;
			long long v = isdigit((unsigned char)*at) ? strtoll(at, &end, 10) : -1;
			if (v < 0 || *end != (i < 2 ? ':' : '\0'))
				return usage_error("--trial '%s' is not SWEEP:INDEX:ATTEMPT", arg);
			if (errno == ERANGE)
				return usage_error("--trial '%s': its %s is out of range (at most %lld)", arg, part[i],
				                   LLONG_MAX);
			if (i == 0 && v < 1)
				return usage_error("--trial '%s': its SWEEP is at least 1", arg);
			o->trial[i] = v;
			at = end + 1;
		}
		break;
	}
	case OPT_STATUS_LINE:
		o->status_line = 1;
		break;
	case OPT_NO_PTY:
		o->no_pty = true;
		break;
	default:
		return cmd_watch_option("run", &a->w, c, arg);
	}
	return 0;
}

/* The options, up to the job's command (a->w.o.argv). -1 when they are
 * good, else the status to exit with: 0 after --help, 124 after a usage
 * error. */
static int parse_options(int argc, char **argv, struct run_args *a)
{
	struct options_parse p;
	memset(a, 0, sizeof(*a));
	supervise_opts_init(&a->w.o);
	/* run_usage stops at the first word that is not an option, so that
	 * the job's own options are its own */
	int status = cmd_options_read(&p, &run_usage, argc, argv, take_option, a);
	if (status >= 0)
		return status;
	if (!p.noperands)
		return usage_error("%s", "no command given: leakproof run [options] -- COMMAND [ARGS...]");
	a->w.o.argv = p.operands;
	return -1;
}

/* What depends on several options, the sizes given as percentages, and
 * the regular expressions compiled (freed by release_args()). 0, or 124
 * after a usage error. */
static int validate(struct run_args *a)
{
	struct supervise_opts *o = &a->w.o;
	int rc = cmd_watch_budgets("run", &a->w);
	if (rc)
		return rc;
	if ((o->restart & RESTART_AT_LIMIT) && !o->max_mem_bytes && !o->soft_limit_bytes && !o->max_gpu_bytes)
		return usage_error("%s", "--restart at-limit needs a budget: --max-mem, --soft-limit or --max-gpu");
	if (o->step_regex && !(o->step_re = step_regex_new(o->step_regex, "--step-regex")))
		return LP_EXIT_USAGE;
	if (a->result_regex && !(o->result_re = step_regex_new(a->result_regex, "--result-regex")))
		return LP_EXIT_USAGE;
	return 0;
}

static void release_args(struct run_args *a)
{
	step_regex_free(a->w.o.step_re);
	step_regex_free(a->w.o.result_re);
}

/* What a sweep's run_options may not set: the sweep owns where its runs
 * go, which trial each is and what a trial prints. NULL: allowed. */
static const char *owned_by_sweep(int c)
{
	switch (c) {
	case 's': return "the sweep sends its runs to its own store (use `leakproof sweep --store`)";
	case OPT_TRIAL: return "the sweep numbers its trials itself";
	case 'q': return "the sweep decides what its trials print (use `leakproof sweep --quiet`)";
	case OPT_STATUS_LINE:
	case WATCH_OPT_NO_STATUS_LINE: return "the sweep decides what its trials print";
	case 'h': return "--help runs nothing";
	default: return NULL;
	}
}

int cmd_run_check_options(char *const *opts, size_t n, size_t first, size_t *bad, char *why, size_t whysz)
{
	/* As a trial gets them: run OPTIONS -- COMMAND. */
	char **argv = xcalloc(n + 4, sizeof(char *));
	argv[0] = "run";
	for (size_t i = 0; i < n; i++)
		argv[1 + i] = opts[i];
	argv[n + 1] = "--";
	argv[n + 2] = "true";
	int argc = (int)n + 3, ours = argc - 2;   /* ours: the "--" added here */
	struct run_args a;
	memset(&a, 0, sizeof(a));
	supervise_opts_init(&a.w.o);
	struct options_parse p;
	options_parse_init(&p, run_usage.options, run_usage.stop_at_operand, argc, argv);
	int rc = 0, c;
	*bad = 0;
	while (!rc && (c = options_next(&p)) != OPTIONS_DONE) {
		const char *word = argv[p.at];
		*bad = (size_t)p.at - 1;
		const char *owned = c > 0 && *bad >= first ? owned_by_sweep(c) : NULL;
		if (c == OPTIONS_NEEDS_VALUE || (c == OPTIONS_VALUE_IS_END && p.end_at == ours))
			snprintf(why, whysz, "option '%s' needs a value", p.word);
		else if (c == OPTIONS_VALUE_IS_END)
			break;   /* the file's own "--": said below */
		else if (c == OPTIONS_UNKNOWN)
			snprintf(why, whysz, "'%s' is not a `leakproof run` option", p.word);
		else if (owned)
			snprintf(why, whysz, "'%s' is not allowed here: %s", word, owned);
		else if (take_option(&a, c, &p) != 0)
			snprintf(why, whysz, "`leakproof run` refuses '%s' (said above)", word);
		else
			continue;
		rc = -1;
	}
	if (!rc && p.end_at != ours) {
		/* the options ended early: at a word that is not an option (it
		 * would start the command), or at a "--" of the file's own */
		*bad = (size_t)p.end_at - 1;
		if (!strcmp(argv[p.end_at], "--"))
			snprintf(why, whysz, "'--' is not allowed here: it would end the options, and what follows "
			         "would replace the sweep's command");
		else
			snprintf(why, whysz, "'%s' is not an option (the command is the sweep's `command`)",
			         argv[p.end_at]);
		rc = -1;
	}
	if (!rc && validate(&a) != 0) {
		*bad = first;
		snprintf(why, whysz, "`leakproof run` refuses them (said above)");
		rc = -1;
	}
	release_args(&a);
	free(argv);
	return rc;
}

int cmd_run(int argc, char **argv)
{
	struct run_args a;
	int status = parse_options(argc, argv, &a);
	if (status >= 0)
		return status;
	status = validate(&a);
	if (status == 0)
		status = cmd_watch(&a.w, &a.gate);
	release_args(&a);
	return status;
}
