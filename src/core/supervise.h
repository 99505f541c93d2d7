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

#include "core/sample.h"

struct supervise_opts {
	char **argv;               /* the command, NULL-terminated; not owned */
	int64_t interval_ns;       /* sampling interval */
	enum measure measure;      /* what the verdict judges */
	const char *step_regex;    /* PCRE2 pattern or NULL */
	const char *store_path;
	uint64_t max_mem_bytes;    /* the limit for projections; 0: cgroup's or machine's */
	bool use_cgroup;           /* put the job in a cgroup of its own when possible */
	bool quiet;                /* no end-of-run summary */
	int status_line;           /* 1 on, 0 off, -1 auto (stderr is a terminal) */
	int64_t leftover_grace_ns; /* SIGTERM to SIGKILL for processes left behind */
};
void supervise_opts_init(struct supervise_opts *o);

int supervise(const struct supervise_opts *o);

#endif
