/*
 * judge/job.h — one training job spread over ranks (srun's tasks,
 * torchrun's workers), each rank a run of its own sharing the placement's
 * job_key (base/placement.h): the ranks loaded and each judged as
 * `report RUN` judges it, and which of them grows. Rendered by
 * report/job.c. Units: bytes; growth per step (per second when a rank
 * marked no steps).
 */
#ifndef LP_MODEL_JOB_H
#define LP_MODEL_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "core/analyze.h"
#include "store/store.h"

struct job_rank {
	struct run_row run;          /* owned */
	enum verdict verdict;        /* judged again, as `report RUN` */
	char reason[256];
	const char *x_unit;          /* "step" or "s" (static) */
	double growth;               /* slope, bytes per x unit; NAN unknown */
	uint64_t peak_bytes;         /* under the run's measure */
	size_t steps;
	char measure[16];
};

/* Owns everything; released with job_model_release(). */
struct job_model {
	char key[160];
	struct job_rank *ranks;      /* by rank, then run id */
	size_t nranks;
	size_t growing;              /* ranks judged leak */
	size_t worst;                /* the leaking rank that grows fastest; valid
	                              * when growing > 0 */
};

/*
 * Load the job whose key is key_or_run: a job key ("slurm:12.0"), or a run
 * id whose placement names one, or "" for the latest run's job. Each rank
 * judged under measure (-1: its own). 0; 1 when there is no such job (a
 * message said why); -1 on a read error (after a message). *m is to be
 * released in every case.
 */
int job_model_load(struct store *st, const char *key_or_run, int measure, struct job_model *m);
void job_model_release(struct job_model *m);
/* The job key of run run_id (0: the latest run) into key (cap bytes; "" when
 * the run is not a rank of a job). 0, or -1 when there is no such run. */
int job_key_of_run(struct store *st, int64_t run_id, char *key, size_t cap);

#endif
