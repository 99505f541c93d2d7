/*
 * judge/sites.h — where a traced run's growing memory comes from: its
 * allocation sites, each judged for growth across steps by the same
 * statistics as the run (core/analyze), ranked, and rolled up by library.
 * report/trace.h renders them. Units: bytes; growth in bytes per x unit.
 */
#ifndef LP_MODEL_SITES_H
#define LP_MODEL_SITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/analyze.h"
#include "store/store.h"

struct trace_frame {
	char *function;            /* "" when unknown */
	char *library;             /* the object's file name, without its directory */
	char *source;              /* "file.c:12" or "" */
};

struct trace_pyframe {
	char *file, *function;
	int line;
};

/* A site's (or a library's) judgment. Undecided: its records are too few
 * (or too mixed) to judge on their own, and they do not carry the run's
 * growth either; never reported as flat. */
enum site_state {
	SITE_FLAT = 0,
	SITE_GROWING,
	SITE_UNDECIDED,
};
const char *site_state_name(enum site_state s);   /* "flat", "growing", "undecided" */

struct site_judgment {
	double growth, growth_low, growth_high;   /* bytes per x unit; NAN unknown */
	enum site_state state;
	char reason[256];          /* one sentence, lowercase, no full stop */
};

/* Judge one series y[i] at x[i] (the run's window, in order of x) with
 * analyze_series(), as a site sampled every mean bytes: growing when that
 * says leak. run (NULL: none) is the run's own judgment: when it says leak
 * and the series is too short or mixed to judge on its own, the series is
 * growing when it carries a share of the run's growth, and undecided when
 * it rises without carrying it. */
void trace_judge_series(const double *x, const double *y, size_t n, int64_t mean, const char *x_unit,
                        const struct analysis *run, struct site_judgment *out);

struct trace_site_report {
	int64_t site;
	char kind;                 /* 'm' heap, 'a' anonymous mmap */
	struct trace_frame *frames;   /* innermost first */
	size_t nframes;
	size_t blame;              /* the frame named for the site: the first that is
	                            * not an allocator (malloc, operator new, ...) */
	struct trace_pyframe *python; /* innermost first; none when not CPython */
	size_t npython;
	double growth, growth_low, growth_high;   /* bytes per x unit; NAN unknown */
	bool growing;              /* state == SITE_GROWING */
	enum site_state state;
	char reason[256];          /* why: the judgment's sentence */
	double live;               /* live bytes at the last record */
	int64_t allocs, frees;     /* sampled */
};

struct trace_lib_report {
	char *library;
	double growth;
	bool growing;              /* state == SITE_GROWING */
	enum site_state state;
	char reason[256];
	double live;
};

struct trace_report {
	int64_t mean_bytes;        /* sampling mean */
	const char *x_unit;        /* "step" or "s" */
	struct trace_site_report *sites;   /* by growth, largest first */
	size_t nsites, ngrowing, nundecided;
	struct trace_lib_report *libs;     /* by growth, largest first */
	size_t nlibs;
};

/* Load and judge the sites of run_id. by_step: x is the step (else seconds).
 * Records after until (seconds into the run; 0: none) are left out, such as
 * the job's teardown after its last step. run (NULL: none) is the run's own
 * judgment, on the same x: the sites are judged on its window (from its
 * warm-up's end) and against its growth (trace_judge_series). Returns 0, 1
 * when the run was not traced, -1 on error. */
int trace_report_load(struct store *st, int64_t run_id, bool by_step, double until, const struct analysis *run,
                      struct trace_report *out);
void trace_report_release(struct trace_report *r);

#endif
