/*
 * judge/sweep.h — a stored sweep, loaded once for every renderer: its row,
 * the names of its dimensions (from the sweep's file, when it still
 * parses), its trials joined with their runs, and each trial's memory
 * series, what the memory model predicted of each trial when it started
 * or was skipped, and the model fitted again on every finished trial (the
 * per-dimension effects). The table (report/sweep.c), the charts
 * (report/charts.c) and the JUnit verdicts read it. Units: bytes; x in
 * steps or seconds.
 */
#ifndef LP_MODEL_SWEEP_H
#define LP_MODEL_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "store/sweeps.h"
#include "sweep/memmodel.h"

/* Owns everything it points to; released with sweep_model_release(). */
struct sweep_model {
	struct sweep_row sw;
	bool have_spec;              /* the sweep's file still parses */
	char **dims;                 /* dimension names, in the file's order */
	size_t ndims;                /* 0 when !have_spec */
	struct trial_row *trials;    /* by idx then attempt */
	size_t ntrials;
	struct trial_prediction *pred;   /* one per trial, same order; NAN where none */
	bool have_pred;              /* some trial has a prediction */
	bool have_alloc;             /* trials ran with budgets of more than one size (on_oom resize) */
	uint64_t budget_bytes;       /* the file's memory.max; 0: none (or unknown) */
	struct memmodel mem;         /* fitted on every finished trial (have_spec) */
};

/* Load sweep sweep_id (0: the latest): 0, 1 when there is none, -1 on
 * error. Warns when the sweep's file no longer parses. *m is to be
 * released in every case. */
int sweep_model_load(struct store *st, int64_t sweep_id, struct sweep_model *m);
/* The same, with the message for a missing sweep: 0, or -1 after a
 * message (*m is then released). */
int sweep_model_open(struct store *st, int64_t sweep_id, struct sweep_model *m);
void sweep_model_release(struct sweep_model *m);

/* The value of dimension d of trial t, as a new string ("?" when it has
 * none). The caller frees it. */
char *sweep_trial_value(const struct trial_row *t, size_t d);
/* The dimension values of trial t as "name=value, ..." (dims in order; the
 * parameters' JSON when the file no longer parses). The caller frees it. */
char *sweep_trial_config(const struct sweep_model *m, const struct trial_row *t);

/* The memory series of the run of trial t under its run's measure: per
 * step (x the step, or its ordinal when steps do not increase), or per
 * sample when over_time (x in seconds); NAN where not measured. *x and *y
 * (n values; never NULL) are the caller's to free. A trial without a run
 * has none. 0, or -1 on error. */
int sweep_trial_series_load(struct store *st, const struct trial_row *t, bool over_time, double **x,
                            double **y, size_t *n);

#endif
