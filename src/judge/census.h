/*
 * judge/census.h — who holds it, and whose GPU memory it is: the object
 * census of a Python job (the client's `census` lines, store table census)
 * judged type by type, and PyTorch's CUDA allocator figures (the client's
 * `gpu` lines) judged beside NVML's as three series. Loaded and judged
 * here; rendered by src/report/. docs/internals/census.md.
 *
 * Units: counts of objects, bytes, seconds; growth per step (or per second
 * when the run marked no steps: x_unit).
 */
#ifndef LP_MODEL_CENSUS_H
#define LP_MODEL_CENSUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/analyze.h"
#include "store/store.h"

/* A census type is judged with core/analyze on its counts; growth must
 * reach both figures over the judged window to matter. */
#define CENSUS_MIN_GROWTH_OBJECTS 8.0
#define CENSUS_MIN_GROWTH_FRACTION 0.05
#define CENSUS_MIN_POINTS 8
/* On fewer censuses (CENSUS_FEW_POINTS to CENSUS_MIN_POINTS - 1), a type
 * grows when the exact Mann–Kendall test finds its rise with the step this
 * unlikely from noise: 6 censuses all rising (1/720), or 7 with one pair
 * out of order. About 40 series are judged per run. */
#define CENSUS_FEW_POINTS 6
#define CENSUS_FEW_ALPHA 0.0015
#define CENSUS_EXACT_MAX 12
/* A container's key: "held#N/CONTAINER/ELEMENT" (N the client's number for
 * it, ELEMENT the key of what it holds); its count is its length, its
 * bytes an estimate of what it holds, its holder its name. */
#define CENSUS_HELD_PREFIX "held#"
/* A container grows as a finding when each item it gains holds this many
 * bytes or more (its estimate): a list of floats (24 bytes each, the
 * loss.item() of each step) is no leak to speak of; a dict, an array, a
 * tensor, a list of a few values are. */
#define CENSUS_HELD_MIN_ITEM_BYTES 64.0

/* One type of the census that grows. */
struct census_type {
	char type[128];            /* the client's key: "torch.Tensor/cpu/float32/grad_fn",
	                            * "numpy.ndarray/float64", "list" */
	struct analysis a;         /* its counts judged against x */
	double growth;             /* objects per x unit (a.slope) */
	double bytes_growth;       /* bytes per x unit; NAN: unknown */
	int64_t last_count;
	int64_t last_bytes;        /* -1: unknown */
	char *holder;              /* the last holder named; NULL: none (owned) */
};

/* A type whose count rose over the flight recorder's last seconds. */
struct census_change {
	char type[128];
	int64_t from, to;          /* its count at the two censuses (0: absent) */
	int64_t bytes_from, bytes_to;   /* -1: unknown */
	char *holder;              /* at the later census; NULL: none (owned) */
};

/* Everything the report says about a run's census. Owns what it points to;
 * freed by census_report_release(). */
struct census_report {
	const char *x_unit;        /* "step" or "s" (static) */
	size_t censuses;           /* censuses stored */
	size_t types;              /* types with enough censuses to be judged */
	double objects_last;       /* objects the last census looked at */
	double cost_total_s;       /* time the job spent in censuses */
	double cost_mean_s, cost_max_s;
	double interval_median_s;  /* between two censuses */
	double cost_per_step_s;    /* cost_total_s / steps; NAN without steps */
	double cost_fraction;      /* cost_total_s / the run's duration; NAN unknown */
	struct census_type *growing;   /* verdict leak, the largest growth first */
	size_t ngrowing;

	/* the last seconds before an out-of-memory end (census_report_window()) */
	bool has_window;           /* two censuses were found to compare */
	double window_from_t, window_to_t;   /* their times, seconds since the start */
	struct census_change *recent;   /* rose by CENSUS_MIN_GROWTH_OBJECTS or more,
	                                 * the most first; at most CENSUS_RECENT_MAX */
	size_t nrecent;
};
#define CENSUS_RECENT_MAX 8

/* Load and judge the census of run_id; steps and duration_s are the run's
 * (for the cost per step and share of the run). 0, 1 when the run has no
 * census, -1 after a message. */
int census_report_load(struct store *st, int64_t run_id, size_t steps, double duration_s,
                       struct census_report *out);
void census_report_release(struct census_report *r);

/* Compare, into r, the last census at or before t_to (seconds since the
 * run began) with the last one at or before t_from (none: the first after
 * it), or, when that is the same, with the census before it: what Python objects grew in the
 * flight recorder's window. 0 (r->has_window false when there were not two
 * censuses), -1 after a message. */
int census_report_window(struct store *st, int64_t run_id, double t_from, double t_to,
                         struct census_report *r);
/* The flight recorder's sentence about the census, into buf: what grew
 * between the two censuses of the window, with its holder; else the
 * types growing over the run; else that none grew. Ends with a full stop.
 * x_word: "step" or "second". Returns buf. */
char *census_flight_words(const struct census_report *r, const char *x_word, char *buf, size_t bufsz);

/* The exact one-sided p-value of Mann–Kendall's S for y rising with x, n
 * points (3 to CENSUS_EXACT_MAX; 1 otherwise), ties counted against the
 * rise. Pure; for tests. */
double census_mk_exact_p(const double *x, const double *y, size_t n);
/* Whether a series of n (CENSUS_FEW_POINTS to CENSUS_EXACT_MAX) censuses
 * grows: census_mk_exact_p() at most CENSUS_FEW_ALPHA (into *p, may be
 * NULL) and a rise of CENSUS_MIN_GROWTH_* from the first to the last. */
bool census_few_rising(const double *x, const double *y, size_t n, double *p);
/* Whether a census key is a container's ("held#N/..."). */
bool census_type_is_held(const char *type);

/* "Tensor (cpu, float32) with grad_fn", "numpy.ndarray (float64)", "list":
 * a census type in words, into buf. Returns buf. */
char *census_type_words(char *buf, size_t bufsz, const char *type);

/* One of the three GPU series. */
struct gpu_series {
	const char *name;          /* "allocated", "cached", "other" (static; set
	                            * even when the series is not present) */
	struct analysis a;         /* judged against x, in bytes */
	double last_bytes;
	bool present;
};

/* PyTorch's allocator beside NVML, from the `gpu` lines the client sends
 * (gpu.allocated, gpu.reserved, gpu.inactive_split, gpu.alloc_retries,
 * gpu.ooms) and NVML's usage of the job's processes at each step. */
struct gpu_report {
	const char *x_unit;        /* "step" or "s" (static) */
	size_t points;
	struct gpu_series allocated;   /* tensors: a tensor leak */
	struct gpu_series cached;      /* reserved - allocated: the caching allocator */
	struct gpu_series other;       /* NVML - reserved: NCCL, cuBLAS workspaces, ... */
	double inactive_split_bytes;   /* last; NAN unknown */
	double alloc_retries, ooms;    /* last; NAN unknown */
	char diagnosis[320];       /* one sentence; "" when nothing grows */
};

/* 0, 1 when the run sent no allocator figures, -1 after a message. steps
 * (nsteps of them, in order) give NVML's figure at each step. */
int gpu_report_load(struct store *st, int64_t run_id, const struct step_rec *steps, size_t nsteps,
                    struct gpu_report *out);
/* Judge recorded series (n points: x, allocated, reserved, NVML (NULL or
 * NAN where unknown), retries (NULL: unknown)) into out. Pure; for tests. */
void gpu_report_judge(const double *x, const double *allocated, const double *reserved,
                      const double *nvml, const double *retries, size_t n, const char *x_unit,
                      struct gpu_report *out);

#endif
