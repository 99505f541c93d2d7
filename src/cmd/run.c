/*
 * run.c — `leakproof run`: supervise one job. Parses options into a
 * struct supervise_opts and hands over to core/supervise.c.
 */
static const char usage[] =
"usage: leakproof run [options] -- COMMAND [ARGS...]\n"
"\n"
"Run COMMAND, sample the memory of its whole process tree, mark its training\n"
"steps, and say at the end whether its memory leaks. The job's stdout and\n"
"stderr pass through unchanged; the summary goes to stderr. Everything is\n"
"kept in the store, for `leakproof report` later.\n"
"\n"
"options:\n"
"  -i, --interval DUR     sampling interval: 100ms (default), 1ms, 0.5s, ...\n"
"  -m, --measure M        what the verdict judges: pss (default; shared pages\n"
"                         split between the processes that share them), rss,\n"
"                         uss (private pages only), cgroup (the job cgroup's\n"
"                         usage, page cache included), gpu (NVML)\n"
"  -r, --step-regex RE    a line of output matching RE (PCRE2 syntax, e.g.\n"
"                         '^Epoch (\\d+)') ends a step; group 1, if any, is\n"
"                         the step number. Carriage returns end lines too.\n"
"                         Overrides step messages from the client.\n"
"  -s, --store PATH       the store (default $LEAKPROOF_STORE, else\n"
"                         ./.leakproof/leakproof.db)\n"
"      --max-mem SIZE     the job's memory limit, for \"reaches its limit in N\n"
"                         steps\": 512M, 12G, 80%% (of the machine). Default:\n"
"                         the cgroup's limit, else the machine's memory\n"
"      --no-cgroup        do not put the job in a cgroup of its own\n"
"      --status-line      draw the live status line even when stderr is not a\n"
"                         terminal; --no-status-line never draws it\n"
"  -q, --quiet            no summary at the end\n"
"  -h, --help             this help\n"
"\n"
"steps come from the client (`import leakproof; leakproof.step()`, or\n"
"include/leakproof.h in C), from --step-regex, or from neither: then growth\n"
"is judged per second.\n"
"\n"
"exit status: the job's own; 128+N when it was killed by signal N; 124 for a\n"
"usage error; 125 when leakproof itself fails; 126 when COMMAND cannot be\n"
"executed; 127 when it is not found.\n"
"\n"
"environment of the job: LEAKPROOF_FD (the client channel), LEAKPROOF_RUN\n"
"(the run id), LEAKPROOF_RESTART (0), PYTHONPATH (with the Python client\n"
"first), PYTHONUNBUFFERED=1 unless it is set.\n";

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "core/supervise.h"
#include "store/store.h"
#include "util/util.h"

enum { OPT_MAX_MEM = 256, OPT_NO_CGROUP, OPT_STATUS_LINE, OPT_NO_STATUS_LINE };

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("leakproof: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'leakproof run --help' for more information.\n", stderr);
	return LP_EXIT_USAGE;
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "measure", required_argument, NULL, 'm' },
		{ "step-regex", required_argument, NULL, 'r' },
		{ "store", required_argument, NULL, 's' },
		{ "max-mem", required_argument, NULL, OPT_MAX_MEM },
		{ "no-cgroup", no_argument, NULL, OPT_NO_CGROUP },
		{ "status-line", no_argument, NULL, OPT_STATUS_LINE },
		{ "no-status-line", no_argument, NULL, OPT_NO_STATUS_LINE },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct supervise_opts o;
	const char *store_opt = NULL, *max_mem = NULL;
	int c;

	supervise_opts_init(&o);
	opterr = 0;
	optind = 1;
	/* "+": stop at the first non-option, so the job's own options are its own. */
	while ((c = getopt_long(argc, argv, "+:i:m:r:s:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (parse_duration_ns(optarg, &o.interval_ns) < 0)
				return LP_EXIT_USAGE;
			if (o.interval_ns < 100000 || o.interval_ns > 3600LL * 1000000000LL)
				return usage_error("--interval '%s' is out of range (100us to 1h)", optarg);
			break;
		case 'm':
			if (measure_parse(optarg, &o.measure) < 0)
				return usage_error("unknown --measure '%s' (use pss, rss, uss, cgroup or gpu)", optarg);
			break;
		case 'r':
			o.step_regex = optarg;
			break;
		case 's':
			store_opt = optarg;
			break;
		case OPT_MAX_MEM:
			max_mem = optarg;
			break;
		case OPT_NO_CGROUP:
			o.use_cgroup = false;
			break;
		case OPT_STATUS_LINE:
			o.status_line = 1;
			break;
		case OPT_NO_STATUS_LINE:
			o.status_line = 0;
			break;
		case 'q':
			o.quiet = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("%s", "no command given: leakproof run [options] -- COMMAND [ARGS...]");
	if (max_mem) {
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		uint64_t total = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
		if (parse_size(max_mem, total, &o.max_mem_bytes) < 0)
			return LP_EXIT_USAGE;
		if (!o.max_mem_bytes)
			return usage_error("--max-mem '%s' must be more than zero", max_mem);
	}
	o.store_path = store_default_path(store_opt);
	o.argv = argv + optind;
	return supervise(&o);
}
