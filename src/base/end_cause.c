/*
 * end_cause.c — the names of the causes of a job's end (end_cause.h).
 */
#include "base/end_cause.h"

#include <string.h>

static const char *const names[CAUSE_COUNT] = {
	[CAUSE_NONE] = "",
	[CAUSE_EXIT] = "exit",
	[CAUSE_ERROR] = "error",
	[CAUSE_OOM_KILL] = "oom-kill",
	[CAUSE_BUDGET_KILL] = "budget-kill",
	[CAUSE_STOP_REQUESTED] = "stop-requested",
	[CAUSE_CUDA_OOM] = "cuda-oom",
	[CAUSE_HOST_ALLOC_FAIL] = "host-alloc-fail",
	[CAUSE_CRASH] = "crash",
	[CAUSE_SIGNAL] = "signal",
	[CAUSE_FAILED_TO_START] = "failed-to-start",
	[CAUSE_INTERRUPTED] = "interrupted",
	[CAUSE_DETACHED] = "detached",
	[CAUSE_ENDED] = "ended",
	[CAUSE_TIME_LIMIT] = "time-limit",
	[CAUSE_PREEMPTED] = "preempted",
	[CAUSE_NODE_FAIL] = "node-fail",
	[CAUSE_CANCELLED] = "cancelled",
	[CAUSE_UNKNOWN] = "unknown",
};

const char *cause_name(enum end_cause c)
{
	return (unsigned)c < CAUSE_COUNT ? names[c] : "?";
}

int cause_parse(const char *name, enum end_cause *out)
{
	if (!name)
		return -1;
	for (int i = CAUSE_NONE + 1; i < CAUSE_UNKNOWN; i++)
		if (!strcmp(name, names[i])) {
			*out = (enum end_cause)i;
			return 0;
		}
	return -1;
}

enum end_cause cause_read(const char *name)
{
	enum end_cause c = CAUSE_UNKNOWN;
	if (!name || !*name)
		return CAUSE_NONE;
	cause_parse(name, &c);
	return c;
}

bool cause_is_oom(enum end_cause c)
{
	return c == CAUSE_OOM_KILL || c == CAUSE_BUDGET_KILL || c == CAUSE_CUDA_OOM || c == CAUSE_HOST_ALLOC_FAIL;
}
