/*
 * sample.h — one measurement of a job's memory, and the measures a user can
 * judge by. Shared by the sampler (which fills it), the store (which keeps
 * it) and the reports (which read it back). All sizes in bytes.
 */
#ifndef LP_SAMPLE_H
#define LP_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

enum measure {
	MEASURE_PSS = 0,   /* proportional set size: shared pages split, the default */
	MEASURE_RSS,       /* resident set size, shared pages counted per process */
	MEASURE_USS,       /* unique set size: private pages only */
	MEASURE_CGROUP,    /* the job cgroup's usage (includes page cache) */
	MEASURE_GPU,       /* GPU memory of the tree's processes (NVML) */
	MEASURE_COUNT
};

struct mem_sample {
	double t;          /* seconds since the run started */
	int nprocs;        /* processes in the tree at this sample */
	uint64_t rss, pss, uss, swap;  /* sums over the tree */
	uint64_t cgroup;   /* valid when has_cgroup */
	uint64_t gpu;      /* valid when has_gpu */
	bool has_cgroup, has_gpu;
	bool pss_exact;    /* PSS/USS read from smaps_rollup at this sample, not estimated */
};

/* "pss", "rss", ...; NULL for an unknown value. */
const char *measure_name(enum measure m);
/* Returns 0 and sets *out, or -1 for an unknown name (no message printed). */
int measure_parse(const char *name, enum measure *out);
/* The sample's value under measure m; -1 when the sample lacks it. */
double mem_sample_value(const struct mem_sample *s, enum measure m);

#endif
