/*
 * supervise.h — run one job under supervision: start it in its own process
 * group (and its own cgroup where the machine allows), pass its output
 * through, read its channel, sample its memory, store everything, and at the
 * end print the judgment. Returns the exit status leakproof should exit with.
 */
#ifndef LP_SUPERVISE_H
#define LP_SUPERVISE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/sample.h"

struct supervise_opts {
	char **argv;               /* the command, NULL-terminated; not owned */
	int64_t interval_ns;       /* sampling interval */
	enum measure measure;      /* what the verdict judges */
	const char *step_regex;    /* PCRE2 pattern or NULL */
	const char *result_regex;  /* PCRE2: group 1 of a matching line is a result */
	const char *result_name;   /* ... named this ("result" by default) */
	int64_t trial[3];          /* sweep id, trial index, attempt; trial[0] 0: none */
	const char *store_path;
	uint64_t max_mem_bytes;    /* --max-mem: the budget (kernel-enforced where the
	                            * job has a memory cgroup, else polled); 0: none,
	                            * the cgroup's or machine's limit for projections */
	uint64_t max_gpu_bytes;    /* --max-gpu: polled through NVML; 0: none */
	uint64_t soft_limit_bytes; /* --soft-limit; 0: 90% of max_mem_bytes */
	uint64_t soft_gpu_bytes;   /* 90% of max_gpu_bytes unless set */
	int stop_signal;           /* sent to the main process at a requested stop */
	int64_t grace_ns;          /* from the stop signal to SIGKILL */
	unsigned restart;          /* RESTART_* bits */
	int64_t restart_every;     /* steps per process with RESTART_EVERY */
	int max_restarts;
	bool use_cgroup;           /* put the job in a cgroup of its own when possible */
	bool quiet;                /* no end-of-run summary */
	int status_line;           /* 1 on, 0 off, -1 auto (stderr is a terminal) */
	int64_t leftover_grace_ns; /* SIGTERM to SIGKILL for processes left behind */
	bool trace;                /* --trace: preload the allocation tracer */
	int64_t trace_mean;        /* its sampling mean, bytes; 0: the tracer's default */
};
enum {
	RESTART_AT_LIMIT = 1,      /* stop at the soft limit, start again */
	RESTART_EVERY = 2,         /* stop after restart_every steps, start again */
	RESTART_ON_OOM = 4,        /* start again after an out-of-memory end */
};
void supervise_opts_init(struct supervise_opts *o);

int supervise(const struct supervise_opts *o);

#endif
