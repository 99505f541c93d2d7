/*
 * sweep.c — `leakproof sweep FILE`: every trial of a search in its own
 * supervised process (src/sweep/runner.c); at the end, the table of
 * trials (report/), or how to resume a sweep that was stopped.
 */
static const char usage_head[] =
"usage: leakproof sweep FILE [options]\n"
"       leakproof sweep --worker ID [options]\n"
"\n"
"Run every trial of the search described in FILE (YAML, W&B sweep style:\n"
"command, method grid|random|optuna, metric, parameters, env, run_cap,\n"
"parallel, memory, on_oom) as a `leakproof run` of its own: memory sampled,\n"
"steps marked, leak judged, budgets enforced, and a trial that runs out of\n"
"memory recorded as `oom`, never the end of the sweep. Parameter values\n"
"reach the program as arguments of their own, never through a shell.\n"
"Each trial's output goes to a log beside the store\n"
"(.leakproof/sweeps/ID/trial-N.ATTEMPT.log). At the end, the table.\n";

static const char usage_tail[] =
"The file's slurm block: workers (array tasks), partition, time (SLURM's\n"
"syntax), mem (per worker: SLURM enforces it), max_mem (on_oom resize: workers\n"
"up to this size, an array per size the trials need), gpus_per_task,\n"
"sbatch_args.\n"
"A trial killed by SLURM's memory enforcement is `oom` (oom-kill, with\n"
"slurmstepd's words); one whose worker was cancelled, preempted or reached\n"
"its time limit is `interrupted` (cause cancelled, time-limit) and runs again.\n"
"\n"
"method optuna asks and tells one long-lived Optuna process (python3-optuna;\n"
"the file's optuna: {sampler, sampler_kwargs, pruner, pruner_kwargs}); its\n"
"study lives in optuna.db beside the store, named leakproof-sweep-ID. Failed\n"
"and out-of-memory trials are told as `fail`. With a pruner, a trial's values\n"
"of the sweep metric (the client's metric(NAME=...), at its steps) are its\n"
"intermediate values; a trial the pruner stops is ended and recorded `pruned`.\n"
"\n"
"Trials see LEAKPROOF_TRIAL=SWEEP:INDEX:ATTEMPT and the env dimensions.\n"
"Where NVML sees GPUs, each trial gets one with room for what similar trials\n"
"needed (CUDA_VISIBLE_DEVICES), unless you set CUDA_VISIBLE_DEVICES yourself.\n"
"Once a few trials finished, a memory model of the sweep (peak against the\n"
"numeric parameters, with an interval) packs parallel trials by their\n"
"predicted peak, skips a configuration whose peak is clearly over the budget\n"
"(status `skipped`, with the prediction), retries an OOM with the largest\n"
"value predicted to fit (on_oom: {retry_with: {batch_size: fit}}), and after\n"
"max_consecutive_failures (default 5) OOMs or failures in a row on this\n"
"machine (or a GPU) hands it no more trials.\n"
"`leakproof report` right after a sweep shows its table (also sweep:ID,\n"
"--format md|csv|json, --by DIMS).\n"
"\n"
"exit status: 0 when every trial ran (whatever their outcome); 1 when the\n"
"sweep could not go on; 124 for a bad file or option (with FILE:LINE:COLUMN);\n"
"125 when leakproof failed; 128+N when stopped by signal N.\n";

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "report/report.h"
#include "store/store.h"
#include "sweep/runner.h"
#include "util/util.h"

enum {
	OPT_RESUME = 256, OPT_PREFORK, OPT_NO_SKIP, OPT_EXECUTOR, OPT_NO_WAIT, OPT_WORKER, OPT_LEASE,
	OPT_WORKER_MEM,
};

static const struct option_spec options[] = {
	OPT_VALUE('j', "parallel", "N", "trials at a time (default: the file's `parallel`, 1);\n"
	                                "a trial starts only when the memory it is expected\n"
	                                "to need (memory.expect, else the peak of the most\n"
	                                "similar finished trial) is available; with\n"
	                                "executor slurm: the number of workers"),
	OPT_OPTIONAL(OPT_RESUME, "resume", "ID", "finish the latest sweep of FILE (or sweep ID) after\n"
	                                         "it was stopped or killed: finished trials are kept,\n"
	                                         "interrupted ones run again (recorded as such)"),
	OPT_VALUE('r', "result-regex", "RE", "a trial's output line matching RE gives its metric\n"
	                                     "(group 1); default: the file's, else the client's\n"
	                                     "leakproof.result(NAME=value)"),
	OPT_FLAG('n', "dry-run", "list the trials and their commands; run nothing"),
	OPT_VALUE(OPT_PREFORK, "prefork", "MODULES", "import MODULES (comma-separated) once in a template\n"
	                                             "and fork each Python trial from it (replaces the\n"
	                                             "file's prefork:; --prefork= turns it off)"),
	OPT_FLAG(OPT_NO_SKIP, "no-skip", "run every trial, also those the memory model says\n"
	                                 "will not fit the budget (default: recorded as\n"
	                                 "skipped, with their predicted peak)"),
	CMD_OPT_STORE,
	OPT_FLAG('q', "quiet", "no line per trial, no table at the end"),
	OPT_HELP(),
	OPT_GROUP("cluster mode (a shared store: --store postgresql://...):"),
	OPT_VALUE(OPT_EXECUTOR, "executor", "local|slurm", "where trials run (default: the file's `executor`,\n"
	                                                   "else local). slurm: every trial is written to the\n"
	                                                   "store as pending, and one job array of workers is\n"
	                                                   "submitted (sbatch --array=0-(N-1), N the file's\n"
	                                                   "slurm.workers, or -j); each worker claims trials\n"
	                                                   "from the store until none is left. The sweep then\n"
	                                                   "waits, printing progress, and shows the table"),
	OPT_FLAG(OPT_NO_WAIT, "no-wait", "executor slurm: exit once the workers are submitted;\n"
	                                 "--resume (from any shell) follows the sweep, and\n"
	                                 "submits new workers when trials are left and none is"),
	OPT_VALUE(OPT_WORKER, "worker", "ID", "be a worker of sweep ID: claim its pending trials one\n"
	                                      "at a time (-j N: N at a time) and run each as\n"
	                                      "`leakproof run` (inside a SLURM job: as a job step,\n"
	                                      "srun), until none is pending nor held by another\n"
	                                      "worker. Start as many as you like, anywhere the\n"
	                                      "store is reachable; trials run in the directory the\n"
	                                      "sweep was started in"),
	OPT_VALUE(OPT_LEASE, "lease", "DURATION", "a worker's hold on a trial, renewed while it runs\n"
	                                          "(default 60s); a worker gone silent that long loses\n"
	                                          "its trial, which is recorded interrupted and run again"),
	OPT_HIDDEN_VALUE(OPT_WORKER_MEM, "worker-mem"),   /* a worker's size class, set by the batch script */
	OPT_END(),
};

const struct cmd_usage sweep_usage = { "sweep", usage_head, options, usage_tail, false };

#define usage_error(...) cmd_usage_error("sweep", __VA_ARGS__)

/* The end of a sweep that ran: its table on stderr, or how to resume it. */
static void print_end(const struct sweep_opts *o, const struct sweep_result *res)
{
	if (!res->complete) {
		fprintf(stderr, "leakproof: sweep %lld stopped; finish it with: leakproof sweep %s --resume\n",
		        (long long)res->sweep_id, o->file);
		return;
	}
	struct store *st = store_open(o->store_path);
	if (!st)
		return;
	sweep_report_write(st, res->sweep_id, REPORT_TEXT, NULL, stderr);
	store_close(st);
}

/* The number a worker's option gives (--worker, --worker-mem), 1 or more,
 * into *out. */
static int worker_number(const struct options_parse *p, const char *what, int64_t *out)
{
	long long v = 0;
	if (cmd_parse_int(p->value, 1, INT64_MAX, &v) < 0)
		return usage_error("--%s '%s': expected %s", p->opt->long_name, p->value, what);
	*out = v;
	return 0;
}

static int take_option(void *ctx, int c, const struct options_parse *p)
{
	struct sweep_opts *o = ctx;
	switch (c) {
	case 'j': {
		long long v;
		if (cmd_parse_int(p->value, 1, 256, &v) < 0)
			return usage_error("--parallel '%s' is not a number from 1 to 256", p->value);
		o->parallel = (int)v;
		break;
	}
	case OPT_RESUME:
		o->resume = true;
		if (p->value) {
			long long v;
			if (cmd_parse_int(p->value, 1, INT64_MAX, &v) < 0)
				return usage_error("--resume='%s': expected a sweep id", p->value);
			o->resume_id = v;
		}
		break;
	case 'r':
		o->result_regex = p->value;
		break;
	case 'n':
		o->dry_run = true;
		break;
	case OPT_NO_SKIP:
		o->no_skip = true;
		break;
	case OPT_PREFORK:
		o->prefork = p->value;
		break;
	case 's':
		o->store_path = p->value;   /* as given, until the default is known below */
		break;
	case 'q':
		o->quiet = true;
		break;
	case OPT_EXECUTOR:
		if (strcmp(p->value, "local") && strcmp(p->value, "slurm"))
			return usage_error("--executor must be local or slurm, not '%s'", p->value);
		o->executor = p->value;
		break;
	case OPT_NO_WAIT:
		o->no_wait = true;
		break;
	case OPT_WORKER:
		return worker_number(p, "a sweep id", &o->worker_id);
	case OPT_WORKER_MEM: {
		int64_t v = 0;
		int rc = worker_number(p, "bytes", &v);
		o->worker_mem_bytes = (uint64_t)v;
		return rc;
	}
	case OPT_LEASE: {
		int64_t ns;
		if (parse_duration_ns(p->value, &ns) < 0)
			return LP_EXIT_USAGE;
		if (ns < 3000000000LL)
			return usage_error("--lease '%s': at least 3s (it is renewed every third of it)", p->value);
		o->lease_s = (double)ns / 1e9;
		break;
	}
	}
	return 0;
}

int cmd_sweep(int argc, char **argv)
{
	struct sweep_opts o;
	memset(&o, 0, sizeof(o));
	struct options_parse p;
	int status = cmd_options_read(&p, &sweep_usage, argc, argv, take_option, &o);
	if (status >= 0)
		return status;
	int next = 0;
	if (o.worker_id) {
		if (o.resume || o.dry_run || o.executor || o.no_wait || o.result_regex)
			return usage_error("%s", "--worker takes its sweep from the store: no --resume, --dry-run, "
			                   "--executor, --no-wait nor --result-regex");
		if (p.noperands)
			return usage_error("--worker %lld takes no sweep file ('%s')", (long long)o.worker_id, p.operands[0]);
	} else if (!p.noperands) {
		return usage_error("%s", "no sweep file given: leakproof sweep FILE");
	} else {
		o.file = p.operands[next++];
	}
	if (o.lease_s > 0 && !o.worker_id)
		return usage_error("%s", "--lease is a worker's: leakproof sweep --worker ID --lease DURATION");
	if (o.worker_mem_bytes && !o.worker_id)
		return usage_error("%s", "--worker-mem is a worker's: leakproof sweep --worker ID --worker-mem BYTES");
	if (next < p.noperands)
		return usage_error("unexpected argument '%s'", p.operands[next]);
	o.store_path = store_default_path(o.store_path);
	o.check_run_options = cmd_run_check_options;
	if (store_check_target(o.store_path) < 0)
		return LP_EXIT_USAGE;   /* a store that would lose the run */
	struct sweep_result res;
	status = sweep_run(&o, &res);
	if (res.ended && !o.quiet && !res.worker && !(o.no_wait && res.submitted))
		print_end(&o, &res);
	return status;
}
