/*
 * sweep.c — `leakproof sweep FILE`: every trial of a search in its own
 * supervised process (src/sweep/runner.c); at the end, the table of
 * trials (report/), or how to resume a sweep that was stopped.
 */
static const char usage[] =
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
"(.leakproof/sweeps/ID/trial-N.ATTEMPT.log). At the end, the table.\n"
"\n"
"options:\n"
"  -j, --parallel N       trials at a time (default: the file's `parallel`, 1);\n"
"                         a trial starts only when the memory it is expected\n"
"                         to need (memory.expect, else the peak of the most\n"
"                         similar finished trial) is available; with\n"
"                         executor slurm: the number of workers\n"
"      --resume[=ID]      finish the latest sweep of FILE (or sweep ID) after\n"
"                         it was stopped or killed: finished trials are kept,\n"
"                         interrupted ones run again (recorded as such)\n"
"  -r, --result-regex RE  a trial's output line matching RE gives its metric\n"
"                         (group 1); default: the file's, else the client's\n"
"                         leakproof.result(NAME=value)\n"
"  -n, --dry-run          list the trials and their commands; run nothing\n"
"      --prefork MODULES  import MODULES (comma-separated) once in a template\n"
"                         and fork each Python trial from it (replaces the\n"
"                         file's prefork:; --prefork= turns it off)\n"
"      --no-skip          run every trial, also those the memory model says\n"
"                         will not fit the budget (default: recorded as\n"
"                         skipped, with their predicted peak)\n"
"  -s, --store PATH       the store (default $LEAKPROOF_STORE, else\n"
"                         ./.leakproof/leakproof.db)\n"
"  -q, --quiet            no line per trial, no table at the end\n"
"  -h, --help             this help\n"
"\n"
"cluster mode (a shared store: --store postgresql://...):\n"
"      --executor local|slurm  where trials run (default: the file's `executor`,\n"
"                         else local). slurm: every trial is written to the\n"
"                         store as pending, and one job array of workers is\n"
"                         submitted (sbatch --array=0-(N-1), N the file's\n"
"                         slurm.workers, or -j); each worker claims trials\n"
"                         from the store until none is left. The sweep then\n"
"                         waits, printing progress, and shows the table\n"
"      --no-wait          executor slurm: exit once the workers are submitted;\n"
"                         --resume (from any shell) follows the sweep, and\n"
"                         submits new workers when trials are left and none is\n"
"      --worker ID        be a worker of sweep ID: claim its pending trials one\n"
"                         at a time (-j N: N at a time) and run each as\n"
"                         `leakproof run` (inside a SLURM job: as a job step,\n"
"                         srun), until none is pending nor held by another\n"
"                         worker. Start as many as you like, anywhere the\n"
"                         store is reachable; trials run in the directory the\n"
"                         sweep was started in\n"
"      --lease DURATION   a worker's hold on a trial, renewed while it runs\n"
"                         (default 60s); a worker gone silent that long loses\n"
"                         its trial, which is recorded interrupted and run again\n"
"\n"
"The file's slurm block: workers (array tasks), partition, time (SLURM's\n"
"syntax), mem (per worker: SLURM enforces it), gpus_per_task, sbatch_args.\n"
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

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "report/report.h"
#include "store/store.h"
#include "sweep/runner.h"
#include "util/util.h"

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

int cmd_sweep(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "parallel", required_argument, NULL, 'j' },
		{ "resume", optional_argument, NULL, 'R' },
		{ "result-regex", required_argument, NULL, 'r' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "no-skip", no_argument, NULL, 'S' },
		{ "prefork", required_argument, NULL, 'P' },
		{ "store", required_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "executor", required_argument, NULL, 'E' },
		{ "no-wait", no_argument, NULL, 'N' },
		{ "worker", required_argument, NULL, 'W' },
		{ "lease", required_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	struct sweep_opts o;
	memset(&o, 0, sizeof(o));
	const char *store_opt = NULL;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":j:r:ns:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': {
			long long v;
			if (cmd_parse_int(optarg, 1, 256, &v) < 0)
				return usage_error("--parallel '%s' is not a number from 1 to 256", optarg);
			o.parallel = (int)v;
			break;
		}
		case 'R':
			o.resume = true;
			if (optarg) {
				long long v;
				if (cmd_parse_int(optarg, 1, INT64_MAX, &v) < 0)
					return usage_error("--resume='%s': expected a sweep id", optarg);
				o.resume_id = v;
			}
			break;
		case 'r':
			o.result_regex = optarg;
			break;
		case 'n':
			o.dry_run = true;
			break;
		case 'S':
			o.no_skip = true;
			break;
		case 'P':
			o.prefork = optarg;
			break;
		case 's':
			store_opt = optarg;
			break;
		case 'q':
			o.quiet = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case 'E':
			if (strcmp(optarg, "local") && strcmp(optarg, "slurm"))
				return usage_error("--executor must be local or slurm, not '%s'", optarg);
			o.executor = optarg;
			break;
		case 'N':
			o.no_wait = true;
			break;
		case 'W': {
			long long v;
			if (cmd_parse_int(optarg, 1, INT64_MAX, &v) < 0)
				return usage_error("--worker '%s': expected a sweep id", optarg);
			o.worker_id = v;
			break;
		}
		case 'L': {
			int64_t ns;
			if (parse_duration_ns(optarg, &ns) < 0)
				return LP_EXIT_USAGE;
			if (ns < 3000000000LL)
				return usage_error("--lease '%s': at least 3s (it is renewed every third of it)", optarg);
			o.lease_s = (double)ns / 1e9;
			break;
		}
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (o.worker_id) {
		if (o.resume || o.dry_run || o.executor || o.no_wait || o.result_regex)
			return usage_error("%s", "--worker takes its sweep from the store: no --resume, --dry-run, "
			                   "--executor, --no-wait nor --result-regex");
		if (optind < argc)
			return usage_error("--worker %lld takes no sweep file ('%s')", (long long)o.worker_id, argv[optind]);
	} else if (optind >= argc) {
		return usage_error("%s", "no sweep file given: leakproof sweep FILE");
	} else {
		o.file = argv[optind++];
	}
	if (o.lease_s > 0 && !o.worker_id)
		return usage_error("%s", "--lease is a worker's: leakproof sweep --worker ID --lease DURATION");
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	o.store_path = store_default_path(store_opt);
	o.check_run_options = cmd_run_check_options;
	if (store_check_target(o.store_path) < 0)
		return LP_EXIT_USAGE;   /* a store that would lose the run */
	struct sweep_result res;
	int status = sweep_run(&o, &res);
	if (res.ended && !o.quiet && !res.worker && !(o.no_wait && res.submitted))
		print_end(&o, &res);
	return status;
}
