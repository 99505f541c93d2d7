/*
 * gate.h — a memory gate for CI: what a user expects of a run (no leak, a
 * peak below a size, growth per step below a size), checked against the
 * run's summary after the job itself succeeded. `leakproof run --expect`,
 * `--max-peak` and `--max-growth` (cmd/run.c) fail the run with
 * GATE_EXIT_STATUS when one is broken. Sizes in bytes.
 */
#ifndef LP_MODEL_GATE_H
#define LP_MODEL_GATE_H

#include <stdbool.h>

#include "judge/summary.h"
#include "util/util.h"

/* The exit status of a run whose job succeeded but broke an expectation:
 * neither the job's (it exited 0) nor one of leakproof's own (124-127). */
#define GATE_EXIT_STATUS 123

struct gate {
	bool no_leak;                 /* --expect no-leak: the verdict is not leak */
	bool has_max_peak;
	double max_peak_bytes;        /* --max-peak: peak under the run's measure */
	bool has_max_growth;
	double max_growth_bytes;      /* --max-growth: growth per step after warm-up */
};

/* Whether any expectation is set. */
bool gate_is_set(const struct gate *g);

/*
 * Check the summary against g. Appends to why one line per expectation
 * broken ("  expect    no-leak broken: ...\n"), saying by how much, and a
 * line for one that could not be judged and is therefore broken (growth per
 * step of a run that marked no steps). An inconclusive verdict does not
 * break --expect no-leak; it is said. Returns the number broken.
 */
int gate_check(const struct gate *g, const struct run_summary *s, struct strbuf *why);

#endif
