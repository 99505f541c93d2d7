/*
 * live.h — what `leakproof top` reads of the store while runs go on: which
 * runs are running or ended lately, the last samples of one, and its
 * processes at their latest per-process sample. Small, indexed queries
 * (samples and proc_samples by (run_id, t)), read while supervisors write:
 * the store is in WAL mode, so a reader never blocks the writer and sees
 * what was committed at its last flush (about once a second).
 *
 * Ownership: arrays returned are the caller's, freed with free().
 * Units: bytes; t in seconds since the run started; *_since Unix time.
 */
#ifndef LP_STORE_LIVE_H
#define LP_STORE_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* The runs still running and those that ended at or after ended_since,
 * newest first: id, and ended_at (Unix time; 0 while running). Only these
 * two columns: top reads the whole row (store_get_runs()) of the runs it
 * has not seen ended. 0, or -1 after a message. */
struct live_run {
	int64_t id;
	double ended_at;
};
int store_live_runs(struct store *st, double ended_since, struct live_run **out, size_t *n);

/* The samples of run_id taken after after_t (seconds into the run; -1:
 * all), the newest max of them, oldest first. 0, or -1 after a message. */
int store_live_tail(struct store *st, int64_t run_id, double after_t, size_t max,
                    struct mem_sample **out, size_t *n);

/* The processes of run_id at its latest per-process sample, the most PSS
 * first (none when the run has no per-process samples). 0, or -1 after a
 * message. */
int store_live_procs(struct store *st, int64_t run_id, struct proc_row **out, size_t *n);

#endif
