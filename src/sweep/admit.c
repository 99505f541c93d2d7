/*
 * admit.c — memory-aware admission of a sweep's trials: a trial starts
 * beside others only when the memory it is expected to need (memory.expect,
 * else the peak of the most similar finished trial, with a margin; the
 * whole budget for one that looks like a trial that ran out of memory) is
 * available, less what the running trials are still expected to grow
 * into; and, where NVML sees GPUs, on the device with room for it. Once
 * enough trials finished, "expected" is the upper bound of the memory
 * model's prediction (memmodel.h), which also skips configurations that
 * clearly will not fit, picks the value an OOM'd trial is retried with
 * (retry_with: fit), and here too are the failure streaks that stop
 * handing trials to a machine or GPU (max_consecutive_failures). Part of
 * the sweep runner (runner-int.h); docs/internals/sweeps.md,
 * docs/internals/memory-model.md.
 *
 * Memory is bytes.
 */
#include <math.h>
#include <stdio.h>
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
#define MODEL_ROWS_MAX 1000        /* the most recent trials the memory model is fitted on */

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

/* Whether the values of a dominate those of b: every numeric value at
 * least b's, the others equal. */
static bool dominates(const struct runner *r, char **a, char **b)
{
	for (size_t d = 0; d < r->spec.ndims; d++) {
		if (!strcmp(a[d], b[d]))
			continue;
		double x = sweep_num_or_nan(a[d]), y = sweep_num_or_nan(b[d]);
		if (!(isfinite(x) && isfinite(y) && x >= y))
			return false;
	}
	return true;
}

/*
 * What a trial is expected to need: memory.expect when the file says;
 * else the upper bound of the memory model's prediction (at most the
 * budget), or before the model can tell, the peak of the finished trials
 * most like it (the most dimensions with equal values), with a margin;
 * unknown (-1) before any finished. A trial whose numeric values are all
 * at least those of a trial that ran out of memory (the rest equal) is
 * suspect: it is expected to need the whole budget (or that trial's peak).
 */
static double expected_memory(struct runner *r, char **values)
{
	double suspect = -1;
	int best_sim = -1;
	double best_peak = -1;
	size_t scanned = 0;
	/* the most recent trials for "most like it" (a bounded scan keeps a
	 * sweep of many thousands of trials linear), every OOM for suspicion */
	for (size_t i = r->nrows; i-- > 0;) {
		const struct trial_row *t = &r->rows[i];
		if (!trial_status_final(t->status) || !t->peak_bytes)
			continue;
		if (scanned >= SIMILAR_SCAN_MAX && t->status != TRIAL_OOM)
			continue;
		scanned++;
		char **tv = r->row_vals[i];
		if (!tv)
			continue;
		int sim = 0;
		for (size_t d = 0; d < r->spec.ndims; d++)
			sim += !strcmp(tv[d], values[d]);
		if (t->status == TRIAL_OOM && dominates(r, values, tv)) {
			double need = r->memory_max ? (double)r->memory_max : (double)t->peak_bytes;
			if (need > suspect)
				suspect = need;
		}
		if (t->status != TRIAL_OOM && (sim > best_sim || (sim == best_sim && (double)t->peak_bytes > best_peak))) {
			best_sim = sim;
			best_peak = (double)t->peak_bytes;
		}
	}
	if (r->memory_expect >= 0)
		return fmax(r->memory_expect, suspect);
	model_refresh(r);
	struct mem_pred p;
	if (memmodel_predict(&r->model, MEM_HOST, values, &p)) {
		double need = p.hi;
		if (r->memory_max && need > (double)r->memory_max)
			need = (double)r->memory_max;
		return fmax(need, suspect);
	}
	return fmax(best_peak > 0 ? best_peak * EXPECT_MARGIN : -1, suspect);
}

/* The GPU memory of the finished trial most like this one, with a margin;
 * -1 when none finished with a GPU. */
static double expected_gpu(struct runner *r, char **values)
{
	model_refresh(r);
	struct mem_pred p;
	if (memmodel_predict(&r->model, MEM_GPU, values, &p))
		return p.hi;
	int best_sim = -1;
	double best = -1;
	size_t scanned = 0;
	for (size_t i = r->nrows; i-- > 0 && scanned < SIMILAR_SCAN_MAX;) {
		const struct trial_row *t = &r->rows[i];
		char **tv = r->row_vals[i];
		if (!trial_status_final(t->status) || !t->gpu_peak_bytes || !tv)
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
		if ((d < r->ngpu_streak && r->gpu_stopped[d]) || nvml_device_memory(r->nvml, d, &used, &total) < 0)
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

/* ---- the memory model ---------------------------------------------------- */

void model_refresh(struct runner *r)
{
	if (!r->model_stale && r->model.ndims == r->spec.ndims)
		return;
	memmodel_build(&r->model, r->spec.ndims, r->rows, (char *const *const *)r->row_vals, r->nrows, r->memory_max,
	               MODEL_ROWS_MAX);
	r->model_stale = false;
}

void predict_trial(struct runner *r, struct trial *t)
{
	t->pred.idx = t->idx;
	t->pred.attempt = t->attempt;
	for (int i = 0; i < 3; i++)
		t->pred.peak[i] = t->pred.gpu[i] = NAN;
	t->pred.growth = NAN;
	model_refresh(r);
	struct mem_pred p;
	if (memmodel_predict(&r->model, MEM_HOST, t->values, &p)) {
		t->pred.peak[0] = p.point;
		t->pred.peak[1] = p.lo;
		t->pred.peak[2] = p.hi;
	}
	if (memmodel_predict(&r->model, MEM_GPU, t->values, &p)) {
		t->pred.gpu[0] = p.point;
		t->pred.gpu[1] = p.lo;
		t->pred.gpu[2] = p.hi;
	}
	if (memmodel_predict(&r->model, MEM_GROWTH, t->values, &p))
		t->pred.growth = p.point;
}

/* The most GPU memory of one device, 0 when none is known. */
static double largest_gpu(struct runner *r)
{
	double most = 0;
	for (int d = 0; r->nvml && d < nvml_device_count(r->nvml); d++) {
		uint64_t used, total;
		if (nvml_device_memory(r->nvml, d, &used, &total) == 0 && (double)total > most)
			most = (double)total;
	}
	return most;
}

#define ALLOC_ROUND (64.0 * 1024 * 1024)   /* resized allocations, in steps of */

uint64_t trial_allocation(struct runner *r, struct trial *t, uint64_t after_oom, char *why, size_t whysz)
{
	char a[32], b[32], c[32];
	why[0] = '\0';
	uint64_t base = r->memory_max, top = r->memory_max_mem;
	if (!r->spec.on_oom_resize || !base || !top)
		return after_oom ? 0 : base;
	if (after_oom >= top)
		return 0;
	predict_trial(r, t);
	double point = t->pred.peak[0], hi = t->pred.peak[2];
	double need = isfinite(hi) && hi > 0 ? hi * EXPECT_MARGIN : NAN;
	double floor_bytes = after_oom ? (double)after_oom : (double)base;
	if (!after_oom && !(need > floor_bytes))
		return base;
	bool doubled = !(need > floor_bytes);
	double want = ceil((doubled ? 2.0 * floor_bytes : need) / ALLOC_ROUND) * ALLOC_ROUND;
	bool capped = want > (double)top;
	if (capped)
		want = (double)top;
	fmt_bytes(a, sizeof(a), want);
	if (doubled)
		snprintf(why, whysz, "allocation %s: twice the %s it ran out of (%s)%s", a,
		         fmt_bytes(b, sizeof(b), floor_bytes),
		         isfinite(hi) ? "the model predicted less" : "the model cannot tell yet",
		         capped ? ", cut to memory.max_mem" : "");
	else
		snprintf(why, whysz, "allocation %s: predicted peak %s, at most %s, and %.0f%% more%s", a,
		         fmt_bytes(b, sizeof(b), point), fmt_bytes(c, sizeof(c), hi), (EXPECT_MARGIN - 1) * 100,
		         capped ? ", cut to memory.max_mem" : "");
	return (uint64_t)want;
}

uint64_t host_budget(const struct runner *r)
{
	return r->spec.on_oom_resize && r->memory_max_mem ? r->memory_max_mem : r->memory_max;
}

bool too_large(struct runner *r, struct trial *t, char *why, size_t whysz)
{
	char a[32], b[32], c[32];
	why[0] = '\0';
	predict_trial(r, t);
	struct mem_pred p;
	/* resized trials: what does not fit is what max_mem does not hold */
	double budget = (double)host_budget(r);
	if (budget > 0 && memmodel_predict(&r->model, MEM_HOST, t->values, &p) && p.lower_sound && p.lo > budget)
		snprintf(why, whysz, "predicted peak %s (at least %s) is over the budget of %s",
		         fmt_bytes(a, sizeof(a), p.point), fmt_bytes(b, sizeof(b), p.lo), fmt_bytes(c, sizeof(c), budget));
	/* at least as large as a trial that ran out of this budget */
	for (size_t i = r->nrows; budget > 0 && !why[0] && i-- > 0;) {
		const struct trial_row *u = &r->rows[i];
		if (u->status != TRIAL_OOM || u->cause == CAUSE_CUDA_OOM || !r->row_vals[i] ||
		    (u->limit_bytes && (double)u->limit_bytes < budget) || !dominates(r, t->values, r->row_vals[i]))
			continue;   /* (an OOM under a smaller allocation than the budget is resized, not final) */
		if (u->attempt)
			snprintf(a, sizeof(a), "%lld.%lld", (long long)u->idx + 1, (long long)u->attempt);
		else
			snprintf(a, sizeof(a), "%lld", (long long)u->idx + 1);
		snprintf(why, whysz, "at least as large as trial %s, which ran out of the budget of %s", a,
		         fmt_bytes(c, sizeof(c), budget));
		if (isfinite(t->pred.peak[0])) {
			size_t len = strlen(why);
			snprintf(why + len, whysz - len, "; predicted peak %s", fmt_bytes(a, sizeof(a), t->pred.peak[0]));
		}
	}
	double gpu = largest_gpu(r);
	if (!why[0] && gpu > 0 && memmodel_predict(&r->model, MEM_GPU, t->values, &p) && p.lower_sound && p.lo > gpu)
		snprintf(why, whysz, "predicted GPU peak %s (at least %s) is more than the largest GPU has (%s)",
		         fmt_bytes(a, sizeof(a), p.point), fmt_bytes(b, sizeof(b), p.lo), fmt_bytes(c, sizeof(c), gpu));
	if (!why[0])
		return false;
	if (r->o->no_skip) {
		size_t len = strlen(why);
		snprintf(why + len, whysz - len, "; run anyway (--no-skip)");
		return false;
	}
	return true;
}

bool retry_fit_value(struct runner *r, const struct trial *t, size_t d, enum end_cause cause, char *val, size_t valsz,
                     char *why, size_t whysz)
{
	model_refresh(r);
	bool on_gpu = cause == CAUSE_CUDA_OOM;
	enum mem_what w = on_gpu ? MEM_GPU : MEM_HOST;
	double budget = on_gpu ? largest_gpu(r) : (double)r->memory_max;
	const struct mem_fit *f = &r->model.fit[w];
	double cur = sweep_num_or_nan(t->values[d]);
	if (!f->ok || !(budget > 0) || !(cur > 0) || d >= MEMFIT_MAX_DIMS)
		return false;
	double x[MEMFIT_MAX_DIMS];
	memmodel_values(r->spec.ndims < MEMFIT_MAX_DIMS ? r->spec.ndims : MEMFIT_MAX_DIMS, t->values, x);
	const struct sweep_dim *dim = &r->spec.dims[d];
	bool is_int = !strpbrk(t->values[d], ".eE");
	double best = NAN;
	if (dim->kind == DIM_VALUES) {
		/* the largest listed value below this one that fits */
		for (size_t k = 0; k < dim->nvalues; k++) {
			double v = dim->values[k].num;
			struct mem_pred p;
			if (!dim->values[k].is_number || !(v > 0) || !(v < cur) || (isfinite(best) && v <= best))
				continue;
			x[d] = v;
			if (mem_fit_predict(f, x, &p) && p.hi <= budget)
				best = v;
		}
		if (isfinite(best)) {
			for (size_t k = 0; k < dim->nvalues; k++)
				if (dim->values[k].is_number && dim->values[k].num == best)
					snprintf(val, valsz, "%s", dim->values[k].text);
		}
	} else if (dim->kind == DIM_RANGE) {
		double lo = dim->min > 0 ? dim->min : (is_int ? 1 : cur / 1024);
		double hi = is_int ? cur - 1 : cur * (1 - 1e-9);
		best = hi >= lo ? mem_fit_largest(f, x, d, lo, hi, budget) : NAN;
		if (isfinite(best) && is_int)
			best = floor(best);
		if (isfinite(best) && best >= lo) {
			if (is_int)
				snprintf(val, valsz, "%lld", (long long)best);
			else
				snprintf(val, valsz, "%.6g", best);
		} else {
			best = NAN;
		}
	}
	if (!isfinite(best))
		return false;
	x[d] = best;
	struct mem_pred p;
	char a[32], b[32], c[32];
	if (mem_fit_predict(f, x, &p))
		snprintf(why, whysz, "predicted %speak %s, at most %s, within %s", on_gpu ? "GPU " : "",
		         fmt_bytes(a, sizeof(a), p.point), fmt_bytes(b, sizeof(b), p.hi), fmt_bytes(c, sizeof(c), budget));
	return true;
}

/* ---- failure streaks ----------------------------------------------------- */

bool note_outcome(struct runner *r, const struct trial *t, enum trial_status status, char *msg, size_t msgsz)
{
	int max = r->spec.max_consecutive_failures;
	bool bad = status == TRIAL_OOM || status == TRIAL_FAILED;
	if (!bad && status != TRIAL_OK)
		return false;                 /* interrupted, skipped, pruned: neither */
	if (r->nvml && !r->gpu_streak) {
		r->ngpu_streak = nvml_device_count(r->nvml);
		r->gpu_streak = xcalloc((size_t)r->ngpu_streak + 1, sizeof(int));
		r->gpu_stopped = xcalloc((size_t)r->ngpu_streak + 1, sizeof(bool));
	}
	r->host_streak = bad ? r->host_streak + 1 : 0;
	bool said = false;
	msg[0] = '\0';
	if (t->gpu >= 0 && t->gpu < r->ngpu_streak) {
		int *g = &r->gpu_streak[t->gpu];
		*g = bad ? *g + 1 : 0;
		if (max && *g >= max && !r->gpu_stopped[t->gpu]) {
			r->gpu_stopped[t->gpu] = true;
			snprintf(msg, msgsz, "%d trials in a row ran out of memory or failed on GPU %d: it gets no more trials",
			         *g, t->gpu);
			said = true;
			bool left = false;
			for (int d = 0; d < r->ngpu_streak; d++)
				left |= !r->gpu_stopped[d];
			if (!left)
				r->host_stopped = true;
		}
	}
	if (max && r->host_streak >= max && !r->host_stopped) {
		r->host_stopped = true;
		snprintf(msg, msgsz, "%d trials in a row ran out of memory or failed on this machine: it gets no more trials",
		         r->host_streak);
		said = true;
	}
	return said;
}

void admit_release(struct runner *r)
{
	free(r->gpu_streak);
	free(r->gpu_stopped);
	r->gpu_streak = NULL;
	r->gpu_stopped = NULL;
	r->ngpu_streak = 0;
}
