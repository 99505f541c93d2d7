/*
 * claim_rate.c — the claimer of bench/claim_cost: one worker's loop of
 * store claims without the trials, to measure what claiming costs the
 * store (docs/internals/sweeps.md, "Workers and claims").
 *
 *   claim_rate STORE SWEEP_ID OUT
 *
 * Opens STORE (a path or a postgresql:// URI) as `sweep --worker` does,
 * then until no trial is pending: claims the next one
 * (store_trial_claim, a 60 s lease) and records it ended, status ok
 * (store_trial_put, the write a worker makes when its trial ends). Writes
 * to OUT one line per claim, "IDX ATTEMPT", then "done N SECONDS" (N
 * claims in SECONDS of CLOCK_MONOTONIC from the first claim's start).
 * Exit status 0, or 1 when a claim or a write failed.
 *
 * Built by bench/claim_cost against leakproof's own objects (make
 * build/bench/claim_rate).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "store/store.h"
#include "store/sweeps.h"
#include "util/util.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: claim_rate STORE SWEEP_ID OUT\n");
		return 2;
	}
	struct store *st = store_open(argv[1]);
	if (!st)
		return 1;
	int64_t sweep = atoll(argv[2]);
	FILE *out = fopen(argv[3], "w");
	if (!out)
		return 1;
	char name[64];
	snprintf(name, sizeof(name), "bench:%d", (int)getpid());
	struct trial_claimer who = { .worker = name, .slurm_job = 0, .slurm_task = -1 };
	int64_t t0 = mono_ns(), n = 0;
	int rc = 0;
	for (;;) {
		struct trial_row t;
		int c = store_trial_claim(st, sweep, &who, wall_seconds(), 60, &t);
		if (c > 0)
			break;
		if (c < 0) {
			rc = 1;
			break;
		}
		fprintf(out, "%lld %lld\n", (long long)t.idx, (long long)t.attempt);
		free(t.status);
		t.status = xstrdup("ok");
		t.ended_at = wall_seconds();
		t.lease_until = 0;
		if (store_trial_put(st, &t) < 0)
			rc = 1;
		trial_row_release(&t);
		n++;
	}
	fprintf(out, "done %lld %.6f\n", (long long)n, (double)(mono_ns() - t0) / 1e9);
	fclose(out);
	store_close(st);
	return rc;
}
