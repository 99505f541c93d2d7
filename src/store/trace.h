/*
 * store/trace.h — allocation sites of traced runs in the store: each site's
 * stacks, and its live sampled bytes each time they changed. Implemented in
 * store/trace.c.
 */
#ifndef LP_STORE_TRACE_H
#define LP_STORE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/trace_site.h"
#include "store/store.h"

/* Mark the run as traced with this sampling mean. */
int store_trace_begin(struct store *st, int64_t run_id, int64_t mean_bytes);

/* In one transaction: the sites never written before, and a live row for
 * each of the n sites at time t (seconds into the run) and step (has_step
 * false: none yet). The store remembers which sites of the run it has
 * written; the sites are not changed. */
int store_trace_write(struct store *st, int64_t run_id, double t, bool has_step, int64_t step,
                      struct trace_site **sites, size_t n);

/* Final counts of n sites, at the end of the run, in one transaction. */
int store_trace_sites_end(struct store *st, int64_t run_id, const struct trace_site *const *sites, size_t n);

struct trace_site_row {
	int64_t site;
	char kind;
	char *frames, *python, *symbols;   /* python, symbols: NULL when none */
	int64_t live, allocs, frees;
};
struct trace_live_row {
	double t;
	int64_t site;
	bool has_step;
	int64_t step;
	int64_t live;
};
/* The run's sampling mean (0: not traced), sites by id, and live rows by
 * time. Free with trace_site_rows_free() and free(). */
int store_trace_mean(struct store *st, int64_t run_id, int64_t *mean_bytes);
int store_trace_load_sites(struct store *st, int64_t run_id, struct trace_site_row **out, size_t *n);
void trace_site_rows_free(struct trace_site_row *rows, size_t n);
int store_trace_load_live(struct store *st, int64_t run_id, struct trace_live_row **out, size_t *n);

/* Keep the symbolized frames of n sites, in one transaction. */
int store_trace_set_symbols(struct store *st, int64_t run_id, const int64_t *sites, char *const *symbols, size_t n);

#endif
