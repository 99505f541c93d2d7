/*
 * end_cause.h — why a job's process ended, named from one vocabulary: the
 * causes core/cause.c classifies from how the process ended, and those
 * leakproof learns elsewhere (a run's end status, attach, SLURM's
 * accounting). Segments and trials keep the names in the store
 * (segments.cause, trials.cause); everything between the store and the
 * output holds the enum. docs/internals/causes.md tells what each means.
 */
#ifndef LP_END_CAUSE_H
#define LP_END_CAUSE_H

#include <stdbool.h>

enum end_cause {
	CAUSE_NONE = 0,        /* "": not ended, or ended before causes were kept */
	/* classified by cause_classify() (core/cause.h), in its precedence */
	CAUSE_EXIT,            /* "exit": exited with status 0 */
	CAUSE_ERROR,           /* "error": non-zero status, nothing more specific */
	CAUSE_OOM_KILL,        /* "oom-kill": the kernel OOM killer */
	CAUSE_BUDGET_KILL,     /* "budget-kill": leakproof killed it to enforce a budget by polling */
	CAUSE_STOP_REQUESTED,  /* "stop-requested": leakproof asked it to stop and it ended */
	CAUSE_CUDA_OOM,        /* "cuda-oom": the GPU (or another accelerator) ran out of memory */
	CAUSE_HOST_ALLOC_FAIL, /* "host-alloc-fail": an allocation in host memory failed */
	CAUSE_CRASH,           /* "crash": SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE, or core dumped */
	CAUSE_SIGNAL,          /* "signal": any other signal */
	/* a run's end (its status) */
	CAUSE_FAILED_TO_START, /* "failed-to-start": the command could not be run */
	CAUSE_INTERRUPTED,     /* "interrupted": its supervisor or sweep stopped first */
	/* leakproof attach: not the job's parent */
	CAUSE_DETACHED,        /* "detached": leakproof stopped watching; the job went on */
	CAUSE_ENDED,           /* "ended": it ended, its exit status unknown */
	/* SLURM's accounting of the job (sweeps on a cluster) */
	CAUSE_TIME_LIMIT,      /* "time-limit": the job's time limit */
	CAUSE_PREEMPTED,       /* "preempted" */
	CAUSE_NODE_FAIL,       /* "node-fail" */
	CAUSE_CANCELLED,       /* "cancelled": scancel */
	CAUSE_UNKNOWN,         /* "unknown": a name this leakproof does not know */
};
#define CAUSE_COUNT (CAUSE_UNKNOWN + 1)

/* The name above, a static string ("" for CAUSE_NONE); "?" for a value
 * outside the enum. */
const char *cause_name(enum end_cause c);
/* The cause named exactly name (as cause_name writes it, "" and "unknown"
 * excepted): 0 and *out set, or -1 with *out untouched. Prints nothing. */
int cause_parse(const char *name, enum end_cause *out /* out */);
/* A stored name read back: CAUSE_NONE for NULL or "", CAUSE_UNKNOWN for a
 * name cause_parse() does not know. */
enum end_cause cause_read(const char *name);
/* An end for memory: oom-kill, budget-kill, cuda-oom, host-alloc-fail. */
bool cause_is_oom(enum end_cause c);

#endif
