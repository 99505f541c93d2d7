/*
 * admit.c — memory-aware admission of a sweep's trials: a trial starts
 * beside others only when the memory it is expected to need (memory.expect,
 * else the peak of the most similar finished trial, with a margin; the
 * whole budget for one that looks like a trial that ran out of memory) is
 * available, less what the running trials are still expected to grow
 * into; and, where NVML sees GPUs, on the device with room for it. Part of
 * the sweep runner (runner-int.h); docs/internals/sweeps.md.
 *
 * Memory is bytes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "platform/cgroup.h"
#include "platform/nvml.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "sweep/runner-int.h"
#include "util/util.h"

#define EXPECT_MARGIN 1.15         /* learned peaks are taken 15% larger */
#define SIMILAR_SCAN_MAX 1000      /* finished trials looked at for "most like it" */

/* A trial status that will not change: ok, failed, oom, skipped. */
static bool final_status(const char *s)
{
	return !strcmp(s, "ok") || !strcmp(s, "failed") || !strcmp(s, "oom") || !strcmp(s, "skipped");
}

/* The number s is, whole; NAN when it is not one. */
double sweep_num_or_nan(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	return end != s && !*end ? v : NAN;
}

/* Memory available to new trials now: the kernel's MemAvailable, and no
 * more than what our own cgroup's limit leaves beside the running trials
 * (in_use: their memory now; they are in our cgroup or below it). */
static double available_memory(double in_use)
{
	char buf[4096];
	double avail = -1;
	if (read_file_buf("/proc/meminfo", buf, sizeof(buf)) > 0) {
		const char *p = strstr(buf, "MemAvailable:");
		if (p)
			avail = strtod(p + 13, NULL) * 1024;
	}
	uint64_t limit = cgroup_self_limit();
	if (limit && (avail < 0 || (double)limit - in_use < avail))
		avail = (double)limit - in_use;
	return avail;
}

/*
 * What a trial is expected to need: memory.expect when the file says;
 * else the peak of the finished trials most like it (the most dimensions
 * with equal values), with a margin; unknown (-1) before any finished.
 * A trial whose numeric values are all at least those of a trial that ran
 * out of memory (the rest equal) is suspect: it is expected to need the
 * whole budget (or that trial's peak).
 */
static double expected_memory(struct runner *r, char **values)
{
	double expect = r->memory_expect;
	int best_sim = -1;
	double best_peak = -1;
	size_t scanned = 0;
	/* the most recent trials for "most like it" (a bounded scan keeps a
	 * sweep of many thousands of trials linear), every OOM for suspicion */
	for (size_t i = r->nrows; i-- > 0;) {
		const struct trial_row *t = &r->rows[i];
		if (!final_status(t->status) || !t->peak_bytes)
			continue;
		if (scanned >= SIMILAR_SCAN_MAX && strcmp(t->status, "oom"))
			continue;
		scanned++;
		char **tv = r->row_vals[i];
		if (!tv)
			continue;
		int sim = 0;
		bool dominated = !strcmp(t->status, "oom");
		for (size_t d = 0; d < r->spec.ndims; d++) {
			if (!strcmp(tv[d], values[d])) {
				sim++;
				continue;
			}
			double a = sweep_num_or_nan(values[d]), b = sweep_num_or_nan(tv[d]);
			if (!(isfinite(a) && isfinite(b) && a >= b))
				dominated = false;
		}
		if (dominated) {
			double need = r->memory_max ? (double)r->memory_max : (double)t->peak_bytes;
			if (need > expect)
				expect = need;
		}
		if (strcmp(t->status, "oom") && (sim > best_sim || (sim == best_sim && (double)t->peak_bytes > best_peak))) {
			best_sim = sim;
			best_peak = (double)t->peak_bytes;
		}
	}
	if (r->memory_expect < 0 && best_peak > 0 && best_peak * EXPECT_MARGIN > expect)
		expect = best_peak * EXPECT_MARGIN;
	return expect;
}

/* The GPU memory of the finished trial most like this one, with a margin;
 * -1 when none finished with a GPU. */
static double expected_gpu(struct runner *r, char **values)
{
	int best_sim = -1;
	double best = -1;
	size_t scanned = 0;
	for (size_t i = r->nrows; i-- > 0 && scanned < SIMILAR_SCAN_MAX;) {
		const struct trial_row *t = &r->rows[i];
		char **tv = r->row_vals[i];
		if (!final_status(t->status) || !t->gpu_peak_bytes || !tv)
			continue;
		scanned++;
		int sim = 0;
		for (size_t d = 0; d < r->spec.ndims; d++)
			sim += !strcmp(tv[d], values[d]);
		if (sim > best_sim || (sim == best_sim && (double)t->gpu_peak_bytes > best)) {
			best_sim = sim;
			best = (double)t->gpu_peak_bytes;
		}
	}
	return best > 0 ? best * EXPECT_MARGIN : -1;
}

/*
 * The device for t: the one with the most free memory (NVML's total less
 * used, less what the trials already placed there are still expected to
 * grow into) that has room for what t is expected to need. A device
 * holding a trial of unknown needs is taken only when nothing else is
 * free. -1: none has room (or there are no GPUs to place on).
 */
int place_gpu(struct runner *r, struct trial *t)
{
	if (!r->nvml)
		return -1;
	t->expected_gpu = expected_gpu(r, t->values);
	int best = -1;
	double best_free = -1;
	bool best_shared = true;
	for (int d = 0; d < nvml_device_count(r->nvml); d++) {
		uint64_t used, total;
		if (nvml_device_memory(r->nvml, d, &used, &total) < 0)
			continue;
		double free_b = (double)total - (double)used;
		bool shared = false;
		for (size_t i = 0; i < r->nrunning; i++) {
			const struct trial *u = &r->running[i];
			if (u->gpu != d)
				continue;
			if (u->expected_gpu < 0) {
				shared = true;
				continue;
			}
			int64_t run = store_trial_run(r->st, r->sweep_id, u->idx, u->attempt);
			double now = run > 0 ? store_run_last_memory(r->st, run, MEASURE_GPU) : -1;
			double more = u->expected_gpu - (now > 0 ? now : 0);
			if (more > 0)
				free_b -= more;
		}
		if (t->expected_gpu > 0 && free_b < t->expected_gpu)
			continue;
		if (best < 0 || (best_shared && !shared) || (shared == best_shared && free_b > best_free)) {
			best = d;
			best_free = free_b;
			best_shared = shared;
		}
	}
	return best;
}

/* Whether t may start now. Nothing running: always. Else its expected
 * memory must be known and fit in what is available, less what the
 * running trials are still expected to grow into. */
bool admit(struct runner *r, struct trial *t)
{
	if (r->nrunning == 0)
		return true;
	if ((int)r->nrunning >= r->parallel)
		return false;
	if (!t->expected_known) {
		t->expected = expected_memory(r, t->values);
		t->expected_known = true;
	}
	if (t->expected < 0)
		return false;
	double reserve = 0, in_use = 0;
	for (size_t i = 0; i < r->nrunning; i++) {
		struct trial *u = &r->running[i];
		if (!u->expected_known) {
			u->expected = expected_memory(r, u->values);
			u->expected_known = true;
		}
		if (u->expected < 0)
			return false;          /* learn from it first */
		int64_t run = store_trial_run(r->st, r->sweep_id, u->idx, u->attempt);
		double now = run > 0 ? store_run_last_memory(r->st, run, MEASURE_PSS) : -1;
		double more = u->expected - (now > 0 ? now : 0);
		if (more > 0)
			reserve += more;
		if (now > 0)
			in_use += now;
	}
	double avail = available_memory(in_use);
	if (avail >= 0 && avail - reserve < t->expected)
		return false;
	return !r->nvml || (t->gpu = place_gpu(r, t)) >= 0;
}
