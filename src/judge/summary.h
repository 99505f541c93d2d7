/*
 * judge/summary.h — what a stored run's numbers mean, from the store alone:
 * the leak judgment (core/analyze) on the run's step series, its rates,
 * peak, limit and projection, and the allocation sites of a traced run.
 * Loaded and judged here; rendered by src/report/.
 */
#ifndef LP_MODEL_SUMMARY_H
#define LP_MODEL_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "core/analyze.h"
#include "store/store.h"

struct trace_report;
struct census_report;
struct gpu_report;
struct run_kinds;

/* The narrowest time bin of a run judged over time, in seconds. */
#define RUN_SUMMARY_MIN_BIN_SECONDS 1.0

/* Everything a report says about one run. Owns everything it points to,
 * freed by run_summary_release(). */
struct run_summary {
	struct run_row run;
	char **argv;                   /* the command, parsed from run.command_json */
	size_t argc;
	enum measure measure;          /* what the judgment used */
	bool measure_shm;              /* ... plus the shared memory no process maps
	                                * (files in /dev/shm, tmpfs; segments): the
	                                * job held a MiB or more of it */
	bool measure_gpu;              /* ... plus the job's GPU memory (NVML): it held a
	                                * MiB or more of it, and the measure was not
	                                * asked for by name (report --measure) */
	bool kinds_unread;             /* memory grew too fast for its kinds to be read:
	                                * judged inconclusive, not leak */
	const char *x_unit;            /* "step" or "s" (judged over time: no steps) */
	double bin_seconds;            /* width of the time bins when x_unit is "s" */
	struct analysis a;             /* the judgment */
	char reason[256];              /* the verdict in one sentence, in x_unit's words */
	size_t steps;                  /* step markers recorded */
	double steps_per_second;       /* median rate; 0 when no steps */
	double duration_s;
	uint64_t peak_bytes;           /* under the measure, over all samples and steps */
	int max_processes;             /* the most processes in the tree at one sample */
	double limit_bytes;            /* limit used for the projection; 0 none */
	const char *limit_source;      /* "max-mem", "cgroup", "machine", "" */
	double warmup_steps;           /* x where the judged window starts */
	double projected_seconds;      /* time until the limit at this rate; <0 none */
	int64_t judged_seq;            /* with restarts: the segment judged (the one
	                                * with the most steps); -1: the whole run */
	struct proc_row top_proc;      /* the process that held the most */
	int has_top_proc;

	/* The rows behind it. */
	struct step_rec *step_recs;    /* steps of them */
	struct mem_sample *samples;
	size_t nsamples;
	struct result_row *results;
	size_t nresults;
	struct event_row *events;
	size_t nevents;
	struct segment_row *segments;
	size_t nsegments;
	struct trace_report *trace;    /* allocation sites (--trace); NULL: not traced */
	struct census_report *census;  /* the object census (judge/census.h); NULL: none */
	struct gpu_report *gpu;        /* PyTorch's CUDA allocator beside NVML; NULL: none */
	struct run_kinds *kinds;       /* growth kinds, diagnosis, OOM flight recorder
	                                * (judge/kinds.h); never NULL after a load */
	enum verdict verdict_judged;   /* the statistics' verdict; a.verdict differs when
	                                * the diagnosis found the growth is not a leak */
	double *segment_start_bytes;   /* per segment: the measure at its first
	                                * sample (-1: none), to show the reset */

	/* The series the judgment read: x in x_unit (a step's number, or a
	 * time bin's middle), the measure's bytes, each point's time since
	 * the start, and with steps the index in step_recs of each point
	 * (NULL over time). judged_n points. */
	double *judged_x, *judged_y, *judged_t;
	size_t *judged_rec;
	size_t judged_n;
};

/* Build the summary of run_id (0: latest). measure_override < 0 keeps the
 * run's own measure. Returns 0, 1 when the run does not exist, -1 on error. */
int run_summary_load(struct store *st, int64_t run_id, int measure_override,
                     struct run_summary *out);
void run_summary_release(struct run_summary *s);

/* The measure judged in words: "pss", or "pss+shm" when it counts the
 * shared memory no process maps. A static string. */
const char *run_summary_measure_label(const struct run_summary *s);

/* Parse a JSON array of strings (runs.command) into *argv (*argc strings,
 * NULL-terminated); something else becomes one string, the text itself.
 * The caller frees it with run_argv_free(). */
void run_command_parse(const char *json, char ***argv, size_t *argc);
void run_argv_free(char **argv, size_t argc);

#endif
