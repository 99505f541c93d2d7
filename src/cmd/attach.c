/*
 * attach.c — `leakproof attach PID`: watch a job that is already running,
 * one leakproof did not start, as `run` watches its own: the same sampler,
 * budgets, store and summary (core/supervise.c driven with the pid; what
 * differs is core/attach.c). In phases: parse the options, check the pid
 * (or find the SLURM job), then watch as `run` does (cmd_watch(),
 * common.c): open the store, watch, judge the stored run and print the
 * summary.
 */
static const char usage_head[] =
"usage: leakproof attach [options] PID\n"
"       leakproof attach [options] --slurm-job JOBID[.STEP]\n"
"\n"
"Watch the job whose main process is PID, already running (started from a\n"
"notebook, a scheduler, another shell), as `leakproof run` watches its own:\n"
"sample the memory of its process tree (and of its cgroup when it has one of\n"
"its own), mark its steps, enforce a budget, and say at the end whether its\n"
"memory leaks. Nothing is stopped or traced: all it reads is /proc, the\n"
"cgroup tree and the job's log file. The run is stored like any other, for\n"
"`leakproof ls` and `report`, marked attached.\n"
"\n"
"With --slurm-job, the job is a SLURM job running on this node (or one of\n"
"its steps: 12.batch, 12.0; an array task: 10_3): everything in its cgroup,\n"
"which SLURM's proctrack/cgroup made, found through `scontrol listpids`\n"
"and the cgroup its processes are in; its end is its cgroup holding none of\n"
"its processes any more. A job without such a cgroup is refused (watch its\n"
"batch script's pid instead).\n";

static const char usage_tail[] =
"Ctrl-C, SIGINT or SIGTERM to leakproof ends the watching, never the job\n"
"(unless a budget asked it to stop: then it is killed): the run is stored as\n"
"detached, with everything seen until then. When the job ends, its exit\n"
"status cannot be known (leakproof is not its parent): the end is recorded\n"
"from evidence, an OOM kill in its cgroup's memory.events or the kernel's\n"
"log, else as \"ended, status unknown\". A pid used again by another program\n"
"while attached is noticed (its start time is checked at each sample) and\n"
"never followed.\n"
"\n"
"Restart options (--restart, --max-restarts) and --trace, --census are\n"
"refused: leakproof did not start the job, and does not know its environment.\n"
"\n"
"exit status: 0 once the run is stored (whatever the job did); 124 for a\n"
"usage error, or a pid that cannot be watched (none, a zombie, PID 1,\n"
"leakproof itself or its ancestor), or a SLURM job that cannot (none, not\n"
"running, not on this node, without a cgroup); 125 when leakproof itself\n"
"fails (SLURM cannot be asked), or may not read the process or the job\n"
"(another user's).\n";

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "core/analyze.h"
#include "core/scan.h"
#include "core/supervise.h"
#include "judge/summary.h"
#include "platform/cgroup.h"
#include "platform/slurmjob.h"
#include "report/report.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "util/util.h"

enum { OPT_STOP_SIGNAL = WATCH_OPT_OWN, OPT_LOG, OPT_SLURM_JOB, OPT_REFUSED };

#define usage_error(...) cmd_usage_error("attach", __VA_ARGS__)

static const struct option_spec options[] = {
	OPT_VALUE(OPT_SLURM_JOB, "slurm-job", "ID", "watch SLURM job ID (JOBID, JOBID.STEP, ARRAYID_TASK)\n"
	                                            "instead of a PID"),
	OPT_VALUE('i', "interval", "DUR", "sampling interval: 100ms (default), 1ms, 0.5s, ..."),
	OPT_VALUE('m', "measure", "M", "what the verdict judges: pss (default), rss, uss,\n"
	                               "cgroup (only when the job has a cgroup of its own), gpu"),
	OPT_VALUE(OPT_LOG, "log", "FILE", "a log file the job writes: followed as `tail -F`\n"
	                                  "does (from its end; a new file at the path, or one\n"
	                                  "truncated, is read from its start); with"),
	OPT_VALUE('r', "step-regex", "RE", "a line of it matching RE ends a step; group 1, if\n"
	                                   "any, is the step number. Without steps, growth is\n"
	                                   "judged per second"),
	CMD_OPT_STORE,
	OPT_VALUE(WATCH_OPT_MAX_MEM, "max-mem", "SIZE", "the job's memory budget: 512M, 12G, 80%; enforced by\n"
	                                                "leakproof at each sample (the job's cgroup is not\n"
	                                                "leakproof's to limit): at the soft limit the stop\n"
	                                                "signal, SIGKILL after --grace; past the budget\n"
	                                                "SIGKILL (cause budget-kill)"),
	OPT_VALUE(WATCH_OPT_SOFT_LIMIT, "soft-limit", "SIZE", "where the stop signal is sent: 90% of the budget by\n"
	                                                      "default; SIZE or a percentage of --max-mem"),
	OPT_VALUE(OPT_STOP_SIGNAL, "stop-signal", "SIG", "what asks the job to stop: TERM (default), INT, ...;\n"
	                                                 "a SLURM job's processes all get it (never scancel)"),
	OPT_VALUE(WATCH_OPT_GRACE, "grace", "DUR", "from the stop signal to SIGKILL (default 30s)"),
	OPT_FLAG(WATCH_OPT_NO_CGROUP, "no-cgroup", "do not measure the job's cgroup even when it is its own"),
	OPT_FLAG(WATCH_OPT_NO_STATUS_LINE, "no-status-line", "no live status line (drawn on stderr when it is a\n"
	                                                     "terminal: step, steps/s, memory, growth per step)"),
	OPT_FLAG('q', "quiet", "no summary at the end"),
	OPT_HELP(),
	/* `run`'s options that make no sense for a job leakproof did not start */
	OPT_HIDDEN_VALUE(OPT_REFUSED, "restart"),
	OPT_HIDDEN_VALUE(OPT_REFUSED, "max-restarts"),
	OPT_HIDDEN_FLAG(OPT_REFUSED, "trace"),
	OPT_HIDDEN_VALUE(OPT_REFUSED, "trace-mean"),
	OPT_HIDDEN_OPTIONAL(OPT_REFUSED, "census"),
	OPT_END(),
};

const struct cmd_usage attach_usage = { "attach", usage_head, options, usage_tail, false };

struct attach_args {
	struct watch_args w;       /* what `run` reads too */
	const char *slurm_spec;    /* --slurm-job; NULL: a pid */
	struct slurm_job slurm;    /* what it names, once found */
};

static int take_option(void *ctx, int c, const struct options_parse *p)
{
	struct attach_args *a = ctx;
	struct supervise_opts *o = &a->w.o;
	const char *arg = p->value;
	switch (c) {
	case OPT_LOG:
		o->follow_log = arg;
		break;
	case OPT_STOP_SIGNAL:
		o->stop_signal = cmd_parse_signal(arg);
		if (o->stop_signal <= 0 || o->stop_signal == SIGKILL || o->stop_signal == SIGSTOP)
			return usage_error("--stop-signal '%s' is not a signal that can ask a job to stop (TERM, INT, USR1, ...)",
			                   arg);
		break;
	case OPT_SLURM_JOB:
		a->slurm_spec = arg;
		break;
	case OPT_REFUSED:
		return usage_error("'--%s' is not for `leakproof attach`: leakproof did not start the job, and does not "
		                   "know the environment it was started with (use `leakproof run` for that)",
		                   p->opt->long_name);
	default:
		return cmd_watch_option("attach", &a->w, c, arg);
	}
	return 0;
}

/* The options and the pid. -1 when they are good, else the status to exit
 * with: 0 after --help, 124 after a usage error. */
static int parse_options(int argc, char **argv, struct attach_args *a)
{
	struct options_parse p;
	memset(a, 0, sizeof(*a));
	supervise_opts_init(&a->w.o);
	a->w.o.no_pty = true;
	int status = cmd_options_read(&p, &attach_usage, argc, argv, take_option, a);
	if (status >= 0)
		return status;
	if (a->slurm_spec) {
		if (p.noperands)
			return usage_error("--slurm-job '%s' and a pid ('%s'): one or the other", a->slurm_spec,
			                   p.operands[0]);
		if (!a->w.o.use_cgroup)
			return usage_error("--no-cgroup and --slurm-job: a SLURM job is what is in its cgroup");
		return -1;
	}
	if (!p.noperands)
		return usage_error("%s", "no pid given: leakproof attach [options] PID (or --slurm-job JOBID)");
	if (p.noperands > 1)
		return usage_error("one pid only: '%s' after '%s'", p.operands[1], p.operands[0]);
	long long pid;
	if (cmd_parse_int(p.operands[0], 1, 0x7fffffff, &pid) < 0)
		return usage_error("'%s' is not a process id", p.operands[0]);
	a->w.o.attach_pid = (pid_t)pid;
	return -1;
}

static int validate(struct attach_args *a)
{
	struct supervise_opts *o = &a->w.o;
	int rc = cmd_watch_budgets("attach", &a->w);
	if (rc)
		return rc;
	if (o->step_regex && !o->follow_log)
		return usage_error("%s", "--step-regex needs --log FILE: leakproof does not see an attached job's output");
	if (o->follow_log && !o->step_regex)
		return usage_error("%s", "--log needs --step-regex RE: the lines that end a step");
	if (o->step_regex && !(o->step_re = step_regex_new(o->step_regex, "--step-regex")))
		return LP_EXIT_USAGE;
	return 0;
}

/* The SLURM job --slurm-job names, on this node, with its cgroup; not one
 * that holds leakproof itself. 0 or an exit status after a message. */
static int find_slurm_job(struct attach_args *a)
{
	char why[1200];
	enum slurm_find f = slurm_job_find(a->slurm_spec, &a->slurm, why, sizeof(why));
	if (f == SLURM_FIND_REFUSED)
		return usage_error("cannot attach: %s", why);
	if (f != SLURM_FIND_OK) {
		error("cannot attach: %s", why);
		return LP_EXIT_FAILURE;
	}
	struct job_cgroup self;
	size_t len = strlen(a->slurm.cg.dir);
	if (cgroup_of_process(getpid(), &self, why, sizeof(why)) == 0 && !strncmp(self.dir, a->slurm.cg.dir, len) &&
	    (self.dir[len] == '/' || !self.dir[len]))
		return usage_error("cannot attach: leakproof runs inside SLURM job %s itself (its cgroup '%s'): watch it "
		                   "from outside, or start the job's command with `leakproof run`",
		                   a->slurm.job_id, a->slurm.cg.dir);
	a->w.o.attach_slurm = &a->slurm;
	return 0;
}

/* The pid to watch: one that can be (not a zombie, not PID 1, neither
 * leakproof itself nor its ancestor) and may be read. 0 or an exit status
 * after a message. */
static int check_pid(pid_t pid)
{
	bool denied;
	char why[400];
	if (supervise_attach_check(pid, &denied, why, sizeof(why)) == 0)
		return 0;
	if (!denied)
		return usage_error("cannot attach: %s", why);
	error("cannot attach: %s", why);
	return LP_EXIT_FAILURE;
}

int cmd_attach(int argc, char **argv)
{
	struct attach_args a;
	int status = parse_options(argc, argv, &a);
	if (status >= 0)
		return status;
	status = validate(&a);
	if (status == 0)
		status = a.slurm_spec ? find_slurm_job(&a) : check_pid(a.w.o.attach_pid);
	if (status == 0)
		status = cmd_watch(&a.w, NULL);
	step_regex_free(a.w.o.step_re);
	return status;
}
