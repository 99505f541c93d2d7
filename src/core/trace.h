/*
 * trace.h — what the allocation tracer in the job says, gathered: the wire
 * lines of libleakproof-trace (see docs/internals/tracer.md) turned into
 * sites shared across processes, each with its live sampled bytes.
 *
 * A site is one allocation stack: native frames as (object file, address in
 * that file) plus the Python frames above them. Processes name their sites
 * and object files with small numbers of their own; two processes running
 * the same code (forked workers, a restarted job) share the site. The
 * per-process live bytes add up to the site's.
 */
#ifndef LP_TRACE_H
#define LP_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/trace_site.h"


struct trace_in;

struct trace_in *trace_in_new(void);
void trace_in_free(struct trace_in *ti);

/* One line of the tracer's pipe (no end of line). Returns 0, or -1 for a
 * line that does not parse (counted, never fatal). */
int trace_in_line(struct trace_in *ti, const char *line, size_t len);

/* A process is gone: what it held is freed. */
void trace_in_forget(struct trace_in *ti, pid_t pid);
/* Forget every process that no longer exists. */
void trace_in_forget_dead(struct trace_in *ti);

/* The sites whose live bytes differ from what the last call that returned
 * them said (from 0 for a site never returned), in id order; *n of them.
 * A site that holds nothing whenever this is called is never returned:
 * most sites are a step's temporaries, and they would be most of the
 * store. Clears the dirty marks. The array is valid until the next call. */
struct trace_site **trace_take_dirty(struct trace_in *ti, size_t *n);

/* Site id (1..sites), or NULL. */
const struct trace_site *trace_in_site(const struct trace_in *ti, int64_t id);

/* The tracer's default sampling mean, as jemalloc's and tcmalloc's. */
#define TRACE_DEFAULT_MEAN (512 * 1024)

struct trace_counts {
	size_t sites, processes;
	int64_t bad_lines;         /* lines that did not parse */
	int64_t dropped_lines;     /* lines the tracers dropped: the pipe was full */
	int64_t mean_bytes;        /* sampling mean, as the tracer announced it */
};
void trace_in_counts(const struct trace_in *ti, struct trace_counts *out);

#endif
