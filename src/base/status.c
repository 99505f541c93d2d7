/*
 * status.c — the names of run, sweep and trial statuses (status.h).
 */
#include "base/status.h"

#include <string.h>

static const char *const run_names[] = {
	[RUN_DONE] = "done",
	[RUN_RUNNING] = "running",
	[RUN_FAILED_TO_START] = "failed-to-start",
	[RUN_INTERRUPTED] = "interrupted",
	[RUN_DETACHED] = "detached",
	[RUN_ENDED] = "ended",
	[RUN_STATUS_UNKNOWN] = "unknown",
};

static const char *const sweep_names[] = {
	[SWEEP_RUNNING] = "running",
	[SWEEP_DONE] = "done",
	[SWEEP_INTERRUPTED] = "interrupted",
	[SWEEP_STATUS_UNKNOWN] = "unknown",
};

static const char *const trial_names[] = {
	[TRIAL_PENDING] = "pending",
	[TRIAL_RUNNING] = "running",
	[TRIAL_OK] = "ok",
	[TRIAL_FAILED] = "failed",
	[TRIAL_OOM] = "oom",
	[TRIAL_SKIPPED] = "skipped",
	[TRIAL_PRUNED] = "pruned",
	[TRIAL_INTERRUPTED] = "interrupted",
	[TRIAL_STATUS_UNKNOWN] = "unknown",
};

#define NAMES(a) (sizeof(a) / sizeof(a[0]))

static const char *name_of(const char *const *names, unsigned n, unsigned v)
{
	return v < n ? names[v] : names[n - 1];
}

/* The index of name among the first n - 1 names (the last is "unknown"),
 * else n - 1. */
static unsigned parse_in(const char *const *names, unsigned n, const char *name)
{
	for (unsigned i = 0; name && i + 1 < n; i++)
		if (!strcmp(name, names[i]))
			return i;
	return n - 1;
}

const char *run_status_name(enum run_status s) { return name_of(run_names, NAMES(run_names), s); }
const char *sweep_status_name(enum sweep_status s) { return name_of(sweep_names, NAMES(sweep_names), s); }
const char *trial_status_name(enum trial_status s) { return name_of(trial_names, NAMES(trial_names), s); }

enum run_status run_status_parse(const char *name)
{
	return (enum run_status)parse_in(run_names, NAMES(run_names), name);
}

enum sweep_status sweep_status_parse(const char *name)
{
	return (enum sweep_status)parse_in(sweep_names, NAMES(sweep_names), name);
}

enum trial_status trial_status_parse(const char *name)
{
	return (enum trial_status)parse_in(trial_names, NAMES(trial_names), name);
}

int trial_status_final(enum trial_status s)
{
	return s == TRIAL_OK || s == TRIAL_FAILED || s == TRIAL_OOM || s == TRIAL_SKIPPED || s == TRIAL_PRUNED;
}
