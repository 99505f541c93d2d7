/*
 * tracing.c — the supervisor's side of --trace: find the tracer library
 * (libleakproof-trace.so) to preload, share the step counter with the
 * tracers (a memfd), feed what they say on their pipe to core/trace.c, and
 * write the allocation sites to the store as the run goes and at its end,
 * with their frames named. The pipe is made, and the preload environment
 * set, where the job is started (supervise.c). Part of the supervisor
 * (supervise-int.h); docs/internals/tracer.md.
 *
 * Times are CLOCK_MONOTONIC nanoseconds; sizes are bytes.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/supervise-int.h"
#include "core/trace.h"
#include "core/symbolize.h"
#include "store/store.h"
#include "store/trace.h"

#define TRACE_RECORDS 300                  /* --trace: site records over a run, at least ... */
#define TRACE_WRITE_MIN_NS (NS_PER_S / 5)  /* ... written no more often than this */
#define TRACE_WRITE_STEP_NS (NS_PER_S / 50) /* ... or this, when a step was marked since */
#define TRACE_WRITE_MAX_NS (5 * NS_PER_S)  /* ... and no less often than this */


/* The tracer library, found as the Python client is (find_beside_binary). */
static const char *tracer_library(void)
{
	static char path[PATH_MAX];
	static const char *const rel[] = { "", "/../lib/leakproof" };
	return find_beside_binary(rel, 2, "libleakproof-trace.so", LP_TRACEDIR, false, path, sizeof(path)) ? path : NULL;
}

/* One line from the tracers (core/trace.c reads it). A linebuf callback. */
void sv_on_trace_line(void *ctx, const char *line, size_t len, bool truncated)
{
	struct sv *sv = ctx;
	if (truncated)
		sv->trace_long_lines++;
	else if (len)
		trace_in_line(sv->trace, line, len);
}

/* The sites whose live bytes changed since the last write, as of now.
 * A worker that ended freed what it held; the job's own end is not a
 * release to record (the sites keep their last values). */
static void trace_write(struct sv *sv, int64_t now_ns)
{
	if (!sv->trace)
		return;
	sv->last_trace_ns = now_ns;
	sv->last_trace_steps = sv->steps;
	if (!sv->child_exited)
		trace_in_forget_dead(sv->trace);
	size_t n;
	struct trace_site **d = trace_take_dirty(sv->trace, &n);
	store_trace_write(sv->st, sv->run_id, sv_now_t(sv, now_ns), sv->steps > 0, sv->last_step, d, n);
}

/*
 * Write the sites when due: at each step (the tracers flush when the step
 * counter moves) or every TRACE_WRITE_MIN_NS at first, then less often as
 * the run grows old, so that any run has a few hundred records per site to
 * judge, even one of a few seconds, and an hour-long one stays small (a
 * record every 5 s).
 */
void sv_trace_maybe_write(struct sv *sv, int64_t now_ns)
{
	int64_t every = (now_ns - sv->t0_ns) / TRACE_RECORDS;
	int64_t least = sv->steps != sv->last_trace_steps ? TRACE_WRITE_STEP_NS : TRACE_WRITE_MIN_NS;
	if (every < least)
		every = least;
	if (every > TRACE_WRITE_MAX_NS)
		every = TRACE_WRITE_MAX_NS;
	if (now_ns - sv->last_trace_ns >= every)
		trace_write(sv, now_ns);
}

/*
 * The step counter the tracers read (LEAKPROOF_TRACE_STEPS_FD): 8 bytes of
 * a memfd shared with every traced process, the number of steps marked so
 * far. A tracer flushes its changed sites once it sees the number move, so
 * the records follow the steps however they are marked (client or regex),
 * with nothing sent to the job. Without it (no memfd), the tracers flush on
 * their interval alone.
 */
static void start_trace_steps(struct sv *sv)
{
	sv->stepfd = memfd_create("leakproof-steps", MFD_CLOEXEC);
	if (sv->stepfd < 0)
		return;
	void *m = MAP_FAILED;
	if (ftruncate(sv->stepfd, sizeof(uint64_t)) == 0)
		m = mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, sv->stepfd, 0);
	if (m == MAP_FAILED) {
		close(sv->stepfd);
		sv->stepfd = -1;
		return;
	}
	sv->step_word = m;
}

static void stop_trace_steps(struct sv *sv)
{
	if (sv->step_word)
		munmap(sv->step_word, sizeof(uint64_t));
	if (sv->stepfd >= 0)
		close(sv->stepfd);
}

/* The job is over: the last changes, each site's totals, and its frames
 * named while the libraries are surely still there. */
void sv_trace_finish(struct sv *sv)
{
	if (!sv->trace)
		return;
	trace_write(sv, mono_ns());
	struct trace_counts tc;
	trace_in_counts(sv->trace, &tc);
	if (tc.mean_bytes > 0)
		store_trace_begin(sv->st, sv->run_id, tc.mean_bytes);
	const struct trace_site **all = xcalloc(tc.sites + 1, sizeof(*all));
	for (size_t i = 0; i < tc.sites; i++)
		all[i] = trace_in_site(sv->trace, (int64_t)i + 1);
	store_trace_sites_end(sv->st, sv->run_id, all, tc.sites);
	free(all);
	if (tc.dropped_lines || tc.bad_lines || sv->trace_long_lines) {
		char d[200];
		snprintf(d, sizeof(d), "tracer: %lld lines dropped (pipe full), %lld malformed, %lld too long",
		         (long long)tc.dropped_lines, (long long)tc.bad_lines, (long long)sv->trace_long_lines);
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "warning", d);
	}
	if (!tc.processes)
		warning("--trace: no traced process reported (a statically linked job, or one that clears LD_PRELOAD?)");
	trace_symbolize_run(sv->st, sv->run_id);
	store_flush(sv->st);
}

/* --trace: the library to preload, the tracers' state, the step counter,
 * and the run's tracing parameters in the store. 0, or -1 after a message
 * (the library is not there). Nothing to do without --trace. */
int sv_trace_prepare(struct sv *sv)
{
	if (!sv->o->trace)
		return 0;
	if (!(sv->tracer = tracer_library()))
		return error("--trace: cannot find the tracer library libleakproof-trace.so (looked beside %s and in %s)",
		             "the leakproof binary", LP_TRACEDIR);
	sv->trace = trace_in_new();
	linebuf_init(&sv->trace_lb, false);
	start_trace_steps(sv);
	store_trace_begin(sv->st, sv->run_id, sv->o->trace_mean > 0 ? sv->o->trace_mean : TRACE_DEFAULT_MEAN);
	return 0;
}

/* Free what sv_trace_prepare() made (the pipe is closed with the job's). */
void sv_trace_release(struct sv *sv)
{
	trace_in_free(sv->trace);
	sv->trace = NULL;
	stop_trace_steps(sv);
}
