/*
 * supervise.c — the supervisor: one process, one poll loop, no threads.
 *
 * The job is forked into its own process group and, where the machine
 * allows, its own cgroup; leakproof makes itself a child subreaper so that
 * workers orphaned by the job are reparented to it and can be found and
 * ended. One poll() set carries every event source:
 *
 *   signalfd   SIGCHLD (reap), SIGINT/SIGTERM/SIGHUP/SIGQUIT (forward)
 *   timerfd    the sampling tick
 *   stdout/err the job's output, passed through unchanged and scanned
 *   channel    the client protocol on $LEAKPROOF_FD
 *
 * States (see docs/internals/design.md):
 *
 *   RUNNING   --main process exits-->  ENDING (SIGTERM to leftovers)
 *   ENDING    --grace elapses------->  KILLING (SIGKILL to leftovers)
 *   ENDING/KILLING --no process left and output drained--> DONE
 *   KILLING   --1 s more------------>  DONE (whatever is left)
 *
 * Times are CLOCK_MONOTONIC nanoseconds; memory is bytes.
 */
#include "core/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/analyze.h"
#include "core/cause.h"
#include "core/channel.h"
#include "core/sampler.h"
#include "core/scan.h"
#include "core/trace.h"
#include "platform/cgroup.h"
#include "platform/nvml.h"
#include "platform/spawn.h"
#include "report/report.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "store/trace.h"
#include "core/symbolize.h"
#include "util/util.h"

#define NS_PER_S 1000000000LL
#define FLUSH_EVERY_NS NS_PER_S            /* commit the store this often */
#define PROC_SAMPLE_EVERY_NS NS_PER_S      /* per-process rows this often */
#define STATUS_EVERY_NS (NS_PER_S / 4)     /* live status line redraws */
#define STEP_RESAMPLE_NS 200000LL          /* steps closer than this share a sample */
#define READ_CHUNK 65536
#define LIVE_RING 64                       /* steps kept for the live growth estimate */
#define QUICK_DEATH_NS (10 * NS_PER_S)     /* a process that ends sooner, before a step, */
#define BACKOFF_FIRST_NS NS_PER_S          /* made no progress: wait before starting it again, */
#define BACKOFF_MAX_NS (30 * NS_PER_S)     /* doubling up to this */
#define TRACE_RECORDS 300                  /* --trace: site records over a run, at least ... */
#define TRACE_WRITE_MIN_NS (NS_PER_S / 5)  /* ... written no more often than this */
#define TRACE_WRITE_STEP_NS (NS_PER_S / 50) /* ... or this, when a step was marked since */
#define TRACE_WRITE_MAX_NS (5 * NS_PER_S)  /* ... and no less often than this */

enum sv_state { SV_RUNNING, SV_ENDING, SV_KILLING, SV_DONE };

struct sv {
	const struct supervise_opts *o;
	enum sv_state state;
	int64_t state_deadline_ns;

	struct store *st;
	int64_t run_id;
	struct sampler *sampler;
	struct nvml *nvml;
	struct job_cgroup cg;
	bool have_cg;
	struct step_regex *re;
	struct step_regex *result_re;

	pid_t child;
	bool child_exited;
	int exit_code, exit_signal;
	bool core_dumped;

	/* the current segment: one start of the job's main process */
	int64_t seg;                           /* its seq in the store */
	int64_t seg_start_ns;
	int64_t seg_steps;                     /* step markers in it */
	struct cause_scan scan;                /* out-of-memory lines in its output */
	uint64_t oom_kills_at_start;           /* the cgroup's counter when it started */
	bool stop_sent, budget_killed;
	int64_t stop_deadline_ns;              /* SIGKILL then; 0: no stop pending */
	const char *restart_why;               /* the policy that stopped it, to start it again */
	char why_stopped[160];                 /* what leakproof saw when it stopped or killed it */
	bool soft_warned;

	struct rlimit nofile;                  /* the job's own limit on open files */
	bool raised_nofile;

	/* across segments */
	int restarts;
	bool interrupted;                      /* leakproof was told to stop: no restart */
	bool kernel_budget;                    /* --max-mem is the cgroup's limit */
	uint64_t soft_bytes, soft_gpu_bytes;

	int64_t t0_ns;
	int sigfd, timerfd, outfd, errfd, chanfd, tracefd;
	int64_t tick0_ns, next_tick_ns;        /* the timer's grid, and its next expiry */
	struct linebuf out_lb, err_lb, chan_lb, trace_lb;
	struct trace_in *trace;                /* --trace: what the tracers said */
	const char *tracer;                    /* the library preloaded */
	bool out_broken, err_broken;           /* our stdout/stderr went away */

	int64_t steps, last_step, epoch;
	int64_t ignored_channel_steps;
	enum step_source step_source;
	int64_t bad_lines, long_lines, trace_long_lines;
	int64_t last_trace_ns;                 /* sites last written */
	int64_t last_trace_steps;              /* sv->steps then */
	int stepfd;                            /* --trace: the step counter the tracers read, */
	uint64_t *step_word;                   /* ... mapped (see start_trace_steps) */

	struct mem_sample last;
	bool have_last;
	int64_t last_sample_ns;
	double peak;

	int64_t last_flush_ns, last_proc_ns, last_status_ns;
	double proc_level;                     /* the measure at the last per-process rows */
	bool tty, status_drawn;
	double ring_x[LIVE_RING], ring_y[LIVE_RING];
	size_t ring_n;
	double first_step_t;
};

void supervise_opts_init(struct supervise_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->interval_ns = 100 * 1000000LL;
	o->measure = MEASURE_PSS;
	o->use_cgroup = true;
	o->status_line = -1;
	o->leftover_grace_ns = NS_PER_S;
	o->stop_signal = SIGTERM;
	o->grace_ns = 30 * NS_PER_S;
	o->max_restarts = 10;
}

static double sv_now_t(const struct sv *sv, int64_t now_ns)
{
	return (double)(now_ns - sv->t0_ns) / 1e9;
}

/* ---- output ---------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd pfd = { .fd = fd, .events = POLLOUT };
				poll(&pfd, 1, 100);
				continue;
			}
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void status_clear(struct sv *sv)
{
	if (sv->status_drawn) {
		write_all(STDERR_FILENO, "\r\033[K", 4);
		sv->status_drawn = false;
	}
}

static void status_draw(struct sv *sv, int64_t now_ns)
{
	char line[256], mem[32], growth[32];
	int n;

	if (!sv->tty || !sv->have_last || now_ns - sv->last_status_ns < STATUS_EVERY_NS)
		return;
	sv->last_status_ns = now_ns;
	double v = mem_sample_value(&sv->last, sv->o->measure);
	fmt_bytes(mem, sizeof(mem), v < 0 ? 0 : v);
	if (sv->steps > 0) {
		double rate = 0;
		double el = sv_now_t(sv, now_ns) - sv->first_step_t;
		if (sv->steps > 1 && el > 0)
			rate = (double)(sv->steps - 1) / el;
		strcpy(growth, "?");
		if (sv->ring_n >= 8) {
			double lo, hi, slope = theil_sen(sv->ring_x, sv->ring_y, sv->ring_n, &lo, &hi);
			fmt_bytes(growth, sizeof(growth), slope);
		}
		n = snprintf(line, sizeof(line), "[leakproof] step %lld | %.2f steps/s | %s %s | %s%s/step | %d procs",
		             (long long)sv->last_step, rate, measure_name(sv->o->measure), mem,
		             growth[0] == '-' || growth[0] == '?' ? "" : "+", growth, sv->last.nprocs);
	} else {
		n = snprintf(line, sizeof(line), "[leakproof] %.0f s | %s %s | %d procs | no steps yet",
		             sv_now_t(sv, now_ns), measure_name(sv->o->measure), mem, sv->last.nprocs);
	}
	struct winsize ws;
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10 && n >= ws.ws_col)
		n = ws.ws_col - 1;
	if (n < 0)
		return;
	write_all(STDERR_FILENO, "\r\033[K", 4);
	write_all(STDERR_FILENO, line, (size_t)n);
	sv->status_drawn = true;
}

/* ---- budgets and requested stops -------------------------------------- */

static void signal_job(struct sv *sv, int sig);

static void say(struct sv *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line from leakproof on stderr, clear of the status line. --quiet
 * silences the summary, not these: they say what leakproof did to the job. */
static void say(struct sv *sv, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	status_clear(sv);
	fprintf(stderr, "leakproof: %s\n", line);
}

/*
 * Ask the job to stop: the stop signal to its main process only (as a
 * container runtime does: the main process is the one that checkpoints and
 * shuts its workers down), SIGKILL to everything after the grace period.
 */
static void request_stop(struct sv *sv, int64_t now, const char *restart_why, const char *reason)
{
	if (sv->stop_sent || sv->child_exited)
		return;
	sv->stop_sent = true;
	sv->restart_why = restart_why;
	sv->stop_deadline_ns = now + sv->o->grace_ns;
	snprintf(sv->why_stopped, sizeof(sv->why_stopped), "%s", reason);
	kill(sv->child, sv->o->stop_signal);
	store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "stop-requested", reason);
	char grace[32];
	report_fmt_duration(grace, sizeof(grace), (double)sv->o->grace_ns / 1e9);
	say(sv, "%s: sending SIG%s to the job (SIGKILL in %s if it is still running)",
	    reason, sigabbrev_np(sv->o->stop_signal), grace);
}

static void budget_kill(struct sv *sv, int64_t now, const char *what, uint64_t used, uint64_t max)
{
	char u[32], m[32], d[160];
	snprintf(d, sizeof(d), "%s %s over the budget of %s", what, fmt_bytes(u, sizeof(u), (double)used),
	         fmt_bytes(m, sizeof(m), (double)max));
	sv->budget_killed = true;
	snprintf(sv->why_stopped, sizeof(sv->why_stopped), "%s", d);
	signal_job(sv, SIGKILL);
	store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "budget-kill", d);
	say(sv, "%s: killing the job", d);
}

/* One budget: soft limit (stop and restart, or a warning), hard (polled). */
static void check_one(struct sv *sv, int64_t now, const char *what, uint64_t used, uint64_t soft,
                      uint64_t max, bool polled)
{
	char u[32], l[32], reason[160];
	if (max && polled && used > max) {
		budget_kill(sv, now, what, used, max);
		return;
	}
	if (!soft || used < soft || sv->stop_sent)
		return;
	snprintf(reason, sizeof(reason), "%s %s reached the soft limit of %s", what,
	         fmt_bytes(u, sizeof(u), (double)used), fmt_bytes(l, sizeof(l), (double)soft));
	if (sv->o->restart & RESTART_AT_LIMIT) {
		request_stop(sv, now, "at-limit", reason);
	} else if (!sv->soft_warned) {
		sv->soft_warned = true;
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "soft-limit", reason);
		say(sv, "warning: %s (--restart at-limit would restart the job here)", reason);
	}
}

static void check_budgets(struct sv *sv, const struct mem_sample *s, int64_t now)
{
	if (sv->child_exited || sv->budget_killed)
		return;
	check_one(sv, now, "memory", s->pss, sv->soft_bytes, sv->o->max_mem_bytes, !sv->kernel_budget);
	if (s->has_gpu && !sv->budget_killed)
		check_one(sv, now, "GPU memory", s->gpu, sv->soft_gpu_bytes, sv->o->max_gpu_bytes, true);
}

/* ---- sampling -------------------------------------------------------- */

/*
 * A file that ships with leakproof: leaf in one of the directories rel[],
 * relative to the binary's own (a build tree, or an installed tree moved
 * as a whole), else in the directory it was installed to. out gets the
 * real path of the file, or with want_dir of the directory it was found
 * in. False when none has it.
 */
static bool find_beside_binary(const char *const *rel, size_t nrel, const char *leaf, const char *installed,
                               bool want_dir, char *out, size_t outsz)
{
	char exe[PATH_MAX], probe[2 * PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash = NULL;
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
	}
	for (size_t i = 0; i <= nrel; i++) {
		if (i == nrel)
			snprintf(probe, sizeof(probe), "%s", installed);
		else if (slash)
			snprintf(probe, sizeof(probe), "%.*s%s", (int)(slash - exe), exe, rel[i]);
		else
			continue;
		size_t dirlen = strlen(probe);
		snprintf(probe + dirlen, sizeof(probe) - dirlen, "/%s", leaf);
		if (access(probe, R_OK) != 0)
			continue;
		if (want_dir)
			probe[dirlen] = '\0';
		char *real = realpath(probe, NULL);
		bool fits = real && strlen(real) < outsz;
		if (fits)
			memcpy(out, real, strlen(real) + 1);
		free(real);
		if (fits)
			return true;
	}
	return false;
}

/* ---- allocation tracing (--trace) ------------------------------------ */

/* The tracer library, found as the Python client is (find_beside_binary). */
static const char *tracer_library(void)
{
	static char path[PATH_MAX];
	static const char *const rel[] = { "", "/../lib/leakproof" };
	return find_beside_binary(rel, 2, "libleakproof-trace.so", LP_TRACEDIR, false, path, sizeof(path)) ? path : NULL;
}

static void on_trace_line(void *ctx, const char *line, size_t len, bool truncated)
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
static void trace_maybe_write(struct sv *sv, int64_t now_ns)
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
static void trace_finish(struct sv *sv)
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

static void take_sample(struct sv *sv, int64_t now_ns)
{
	struct mem_sample s;
	memset(&s, 0, sizeof(s));
	if (sampler_sample(sv->sampler, now_ns, false, &s) <= 0)
		return;  /* the tree is empty: between the exit and the reaping */
	s.t = sv_now_t(sv, now_ns);
	sv->last = s;
	sv->have_last = true;
	sv->last_sample_ns = now_ns;
	double v = mem_sample_value(&s, sv->o->measure);
	if (v > sv->peak)
		sv->peak = v;
	store_add_sample(sv->st, sv->run_id, &s);
	check_budgets(sv, &s, now_ns);

	/* per-process rows once a second, and sooner while memory climbs, so
	 * that "which process held the most" sees a job that dies fast */
	if (now_ns - sv->last_proc_ns >= PROC_SAMPLE_EVERY_NS || v > sv->proc_level * 1.1) {
		sv->proc_level = v;
		const struct proc_mem *pm;
		size_t n = sampler_procs(sv->sampler, &pm);
		for (size_t i = 0; i < n; i++)
			store_add_proc_sample(sv->st, sv->run_id, s.t, pm[i].pid, pm[i].ppid, pm[i].name,
			                      pm[i].rss, pm[i].pss, pm[i].uss, pm[i].swap, pm[i].gpu);
		sv->last_proc_ns = now_ns;
	}
	if (now_ns - sv->last_flush_ns >= FLUSH_EVERY_NS) {
		store_flush(sv->st);
		sv->last_flush_ns = now_ns;
	}
}

/* Store step `step`, ended now, with the memory just sampled. */
static void record_step(struct sv *sv, int64_t step, int64_t now)
{
	struct step_rec rec;
	rec.step = step;
	rec.epoch = sv->epoch;
	rec.mem = sv->last;
	rec.mem.t = sv_now_t(sv, now);
	store_add_step(sv->st, sv->run_id, &rec);
	if (sv->steps == 0)
		sv->first_step_t = rec.mem.t;
	sv->steps++;
	sv->last_step = rec.step;
	if (sv->step_word)
		__atomic_store_n(sv->step_word, (uint64_t)sv->steps, __ATOMIC_RELAXED);

	if (sv->ring_n == LIVE_RING) {
		memmove(sv->ring_x, sv->ring_x + 1, (LIVE_RING - 1) * sizeof(double));
		memmove(sv->ring_y, sv->ring_y + 1, (LIVE_RING - 1) * sizeof(double));
		sv->ring_n--;
	}
	sv->ring_x[sv->ring_n] = (double)rec.step;
	sv->ring_y[sv->ring_n] = mem_sample_value(&rec.mem, sv->o->measure);
	sv->ring_n++;
}

/* A step ended: measure now and record it. */
static void on_step(struct sv *sv, bool has_n, int64_t n, enum step_source src)
{
	int64_t now = mono_ns();

	if (sv->o->step_regex && src == STEP_SOURCE_CHANNEL) {
		sv->ignored_channel_steps++;   /* --step-regex chooses the source */
		return;
	}
	sv->step_source = src;
	if (!sv->have_last || now - sv->last_sample_ns >= STEP_RESAMPLE_NS)
		take_sample(sv, now);
	if (!sv->have_last)
		return;

	/* A step announced again with the number it had (a restarted job
	 * printing "Epoch 3/10" once more as it resumes) is not a new step. */
	if (!(has_n && sv->steps > 0 && n == sv->last_step))
		record_step(sv, has_n ? n : sv->last_step + 1, now);

	/* The schedule. A client marks the end of a step; a matched line is
	 * usually a progress line that announces the next one (Keras prints
	 * "Epoch 2/10" as epoch 2 starts), so the first line a process prints
	 * opens its count rather than closing a step. */
	sv->seg_steps++;
	int64_t done = src == STEP_SOURCE_REGEX ? sv->seg_steps - 1 : sv->seg_steps;
	if ((sv->o->restart & RESTART_EVERY) && done >= sv->o->restart_every) {
		char reason[96];
		snprintf(reason, sizeof(reason), "%lld step%s done in this process (--restart every=%lld)",
		         (long long)done, done == 1 ? "" : "s", (long long)sv->o->restart_every);
		request_stop(sv, now, "every", reason);
	}
}

/* ---- the channel ----------------------------------------------------- */

static void on_channel_line(void *ctx, const char *line, size_t len, bool truncated)
{
	struct sv *sv = ctx;
	struct chan_msg m;
	char err[160];
	double t = sv_now_t(sv, mono_ns());

	if (truncated) {
		sv->long_lines++;
		return;
	}
	int rc = channel_parse(line, len, &m, err, sizeof(err));
	if (rc < 0) {
		if (sv->bad_lines++ < 5) {
			char detail[256];
			snprintf(detail, sizeof(detail), "bad channel line: %s", err);
			store_add_event(sv->st, sv->run_id, t, "channel-error", detail);
		}
		return;
	}
	if (rc == 0)
		return;
	switch (m.type) {
	case CHAN_STEP:
		on_step(sv, m.has_n, m.n, STEP_SOURCE_CHANNEL);
		break;
	case CHAN_EPOCH: {
		char d[32];
		sv->epoch = m.has_n ? m.n : sv->epoch + 1;
		snprintf(d, sizeof(d), "%lld", (long long)sv->epoch);
		store_add_event(sv->st, sv->run_id, t, "epoch", d);
		break;
	}
	case CHAN_METRIC:
		for (int i = 0; i < m.nkv; i++)
			store_add_metric(sv->st, sv->run_id, sv->last_step, t, m.kv[i].name, m.kv[i].value);
		break;
	case CHAN_GPU:
		for (int i = 0; i < m.nkv; i++) {
			char name[80];
			snprintf(name, sizeof(name), "gpu.%s", m.kv[i].name);
			store_add_metric(sv->st, sv->run_id, sv->last_step, t, name, m.kv[i].value);
		}
		break;
	case CHAN_RESULT:
		for (int i = 0; i < m.nkv; i++)
			store_add_result(sv->st, sv->run_id, m.kv[i].name, m.kv[i].value);
		break;
	case CHAN_MARK: {
		char text[CHANNEL_LINE_MAX + 1];
		memcpy(text, m.text, m.text_len);
		text[m.text_len] = '\0';
		store_add_event(sv->st, sv->run_id, t, "mark", text);
		break;
	}
	}
}

static void on_output_line(void *ctx, const char *line, size_t len, bool truncated)
{
	struct sv *sv = ctx;
	bool has_n;
	int64_t n;
	(void)truncated;   /* a cut line is matched on its first CHANNEL_LINE_MAX bytes */
	char value[64];
	cause_scan_line(&sv->scan, line, len);
	if (sv->result_re && step_regex_capture(sv->result_re, line, len, value, sizeof(value))) {
		char *end;
		double v = strtod(value, &end);
		if (end != value && isfinite(v))
			store_add_result(sv->st, sv->run_id, sv->o->result_name ? sv->o->result_name : "result", v);
	}
	if (sv->re && step_regex_match(sv->re, line, len, &has_n, &n))
		on_step(sv, has_n, n, STEP_SOURCE_REGEX);
}

/* Read what is there on fd (at most a few chunks, so sampling is not
 * starved by a flood). Returns false at end of file. */
static bool pump(struct sv *sv, int *fdp, int out_fd, bool *broken, struct linebuf *lb, line_fn fn)
{
	char buf[READ_CHUNK];
	for (int rounds = 0; rounds < 4; rounds++) {
		ssize_t n = read(*fdp, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return true;
			n = 0;
		}
		if (n == 0) {
			linebuf_finish(lb, fn, sv);
			close(*fdp);
			*fdp = -1;
			return false;
		}
		if (out_fd >= 0 && !*broken) {
			status_clear(sv);
			if (write_all(out_fd, buf, (size_t)n) < 0)
				*broken = true;   /* keep draining so the job never blocks */
		}
		linebuf_feed(lb, buf, (size_t)n, fn, sv);
		if ((size_t)n < sizeof(buf))
			return true;
	}
	return true;
}

/* ---- processes ------------------------------------------------------- */

static void signal_job(struct sv *sv, int sig)
{
	/* The job's process group, once; it may outlive the main process. */
	kill(-sv->child, sig);
	/* Then what left the group: in the cgroup, or reparented to us. */
	if (sv->have_cg)
		cgroup_signal_all(&sv->cg, sig, sv->child);
	if (sv->child_exited) {
		struct mem_sample s;
		const struct proc_mem *pm;
		sampler_sample(sv->sampler, mono_ns(), false, &s);
		size_t n = sampler_procs(sv->sampler, &pm);
		for (size_t i = 0; i < n; i++)
			if (sig == SIGKILL || getpgid(pm[i].pid) != sv->child)
				kill(pm[i].pid, sig);
	}
}

/* Reap every child that ended; true when none is left at all. */
static bool reap(struct sv *sv)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid == 0)
			return false;
		if (pid < 0)
			return errno == ECHILD;
		if (pid == sv->child && !sv->child_exited) {
			sv->child_exited = true;
			if (WIFSIGNALED(status)) {
				sv->exit_code = -1;
				sv->exit_signal = WTERMSIG(status);
				sv->core_dumped = WCOREDUMP(status);
			} else {
				sv->exit_code = WEXITSTATUS(status);
				sv->exit_signal = 0;
			}
		}
	}
}

static void enter_state(struct sv *sv, enum sv_state st, int64_t now)
{
	sv->state = st;
	if (st == SV_ENDING) {
		signal_job(sv, SIGTERM);
		sv->state_deadline_ns = now + sv->o->leftover_grace_ns;
	} else if (st == SV_KILLING) {
		signal_job(sv, SIGKILL);
		sv->state_deadline_ns = now + NS_PER_S;
	}
}

static void on_signal(struct sv *sv, int64_t now)
{
	struct signalfd_siginfo si;
	while (read(sv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGCHLD)
			continue;
		/* Forward to the whole job; a second one while ending kills. */
		if (sv->state == SV_RUNNING) {
			sv->interrupted = true;   /* the user's stop: no restart after it */
			signal_job(sv, sig);
			char d[32];
			snprintf(d, sizeof(d), "%s forwarded", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "signal", d);
		} else if (sv->state == SV_ENDING) {
			enter_state(sv, SV_KILLING, now);
		}
	}
	bool none_left = reap(sv);
	if (sv->child_exited && sv->state == SV_RUNNING) {
		char d[64];
		if (sv->exit_signal)
			snprintf(d, sizeof(d), "killed by SIG%s", sigabbrev_np(sv->exit_signal));
		else
			snprintf(d, sizeof(d), "exited %d", sv->exit_code);
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "exit", d);
		if (none_left)
			sv->state = SV_ENDING, sv->state_deadline_ns = now + sv->o->leftover_grace_ns;
		else
			enter_state(sv, SV_ENDING, now);
	}
}

/* ---- start ----------------------------------------------------------- */

/* The directory holding the Python client package, or NULL. */
static const char *python_client_dir(void)
{
	static char dir[PATH_MAX];
	static const char *const rel[] = { "/../python", "/../lib/leakproof/python" };
	return find_beside_binary(rel, 2, "leakproof/__init__.py", LP_PYDIR, true, dir, sizeof(dir)) ? dir : NULL;
}

/* Add VAR=FD and, when fd can be looked at, VAR_INODE=DEV:INO to env at k;
 * the next free index. */
static size_t env_add_pinned_fd(char **env, size_t k, const char *var, int fd)
{
	struct strbuf sb = STRBUF_INIT;
	struct stat st;
	strbuf_addf(&sb, "%s=%d", var, fd);
	env[k++] = strbuf_detach(&sb, NULL);
	if (fstat(fd, &st) == 0) {
		strbuf_addf(&sb, "%s_INODE=%llu:%llu", var, (unsigned long long)st.st_dev,
		            (unsigned long long)st.st_ino);
		env[k++] = strbuf_detach(&sb, NULL);
	}
	return k;
}

/* The job's environment overlay (see struct spawn): ours less our own
 * variables, plus LEAKPROOF_*, PYTHONPATH, PYTHONUNBUFFERED. The caller
 * frees the array and its strings with free_env(). */
static char **build_env(const struct sv *sv, int chan_fd, int trace_fd)
{
	static const char *const unset[] = { "LEAKPROOF_FD", "LEAKPROOF_RUN", "LEAKPROOF_RESTART", "PYTHONPATH",
	                                     "LEAKPROOF_STOP_SIGNAL", "LEAKPROOF_TRIAL", "LEAKPROOF_TRACE_*" };
	size_t nunset = sizeof(unset) / sizeof(unset[0]);
	char **env = xcalloc(nunset + 16, sizeof(char *));
	size_t k = 0;
	const char *pypath = getenv("PYTHONPATH");
	for (size_t i = 0; i < nunset; i++)
		env[k++] = xstrdup(unset[i]);
	if (sv->tracer)
		env[k++] = xstrdup("LD_PRELOAD");
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "LEAKPROOF_FD=%d", chan_fd);
	env[k++] = strbuf_detach(&sb, NULL);
	strbuf_addf(&sb, "LEAKPROOF_RUN=%lld", (long long)sv->run_id);
	env[k++] = strbuf_detach(&sb, NULL);
	strbuf_addf(&sb, "LEAKPROOF_RESTART=%d", sv->restarts);
	env[k++] = strbuf_detach(&sb, NULL);
	strbuf_addf(&sb, "LEAKPROOF_STOP_SIGNAL=SIG%s", sigabbrev_np(sv->o->stop_signal));
	env[k++] = strbuf_detach(&sb, NULL);
	if (sv->o->trial[0]) {
		strbuf_addf(&sb, "LEAKPROOF_TRIAL=%lld:%lld:%lld", (long long)sv->o->trial[0],
		            (long long)sv->o->trial[1], (long long)sv->o->trial[2]);
		env[k++] = strbuf_detach(&sb, NULL);
	}
	const char *client = python_client_dir();
	if (client || pypath) {
		strbuf_addstr(&sb, "PYTHONPATH=");
		if (client)
			strbuf_addstr(&sb, client);
		if (client && pypath && *pypath)
			strbuf_addch(&sb, ':');
		if (pypath)
			strbuf_addstr(&sb, pypath);
		env[k++] = strbuf_detach(&sb, NULL);
	}
	if (!getenv("PYTHONUNBUFFERED"))
		env[k++] = xstrdup("PYTHONUNBUFFERED=1");
	if (sv->tracer) {
		/* the tracer first: it hands every call on to the C library's
		 * own allocator (see docs/internals/tracer.md) */
		const char *pre = getenv("LD_PRELOAD");
		strbuf_addf(&sb, "LD_PRELOAD=%s%s%s", sv->tracer, pre && *pre ? ":" : "", pre && *pre ? pre : "");
		env[k++] = strbuf_detach(&sb, NULL);
		/* each descriptor pinned by inode: a job that closes one and opens
		 * a file that gets its number must not have it taken for ours */
		k = env_add_pinned_fd(env, k, "LEAKPROOF_TRACE_FD", trace_fd);
		if (sv->stepfd >= 0)
			k = env_add_pinned_fd(env, k, "LEAKPROOF_TRACE_STEPS_FD", sv->stepfd);
		if (sv->o->trace_mean > 0) {
			strbuf_addf(&sb, "LEAKPROOF_TRACE_MEAN=%lld", (long long)sv->o->trace_mean);
			env[k++] = strbuf_detach(&sb, NULL);
		}
	}
	env[k] = NULL;
	return env;
}

static void free_env(char **env)
{
	for (char **p = env; *p; p++)
		free(*p);
	free(env);
}

static void command_json(struct strbuf *sb, char **argv)
{
	strbuf_addch(sb, '[');
	for (int i = 0; argv[i]; i++) {
		if (i)
			strbuf_addstr(sb, ", ");
		strbuf_add_json_str(sb, argv[i]);
	}
	strbuf_addch(sb, ']');
}

/* Make sure fds 0-2 are open, so pipes never land on them. */
static void ensure_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0) {
			int nfd = open("/dev/null", O_RDWR);
			if (nfd >= 0 && nfd != fd) {
				dup2(nfd, fd);
				close(nfd);
			}
		}
}

/* In the job's child before exec (async-signal-safe): its cgroup, and the
 * descriptor limit it had before we raised ours. */
static void job_child_setup(void *data)
{
	const struct sv *sv = data;
	if (sv->have_cg)
		cgroup_enter(&sv->cg, 0);
	if (sv->raised_nofile)
		setrlimit(RLIMIT_NOFILE, &sv->nofile);   /* the job gets the limit it had */
}

/*
 * Start the job (platform/spawn.h): its own process group and cgroup,
 * SIGTERM when we die, stdout and stderr through pipes, the channel and
 * trace descriptors kept open. Returns 0, or the exit status for a job
 * that could not start (126/127) after printing why.
 */
static int start_job(struct sv *sv, sigset_t *oldmask)
{
	int chanp[2], tracep[2] = { -1, -1 };
	if (pipe2(chanp, O_CLOEXEC) || (sv->tracer && pipe2(tracep, O_CLOEXEC)))
		return error_errno("cannot create pipes"), LP_EXIT_FAILURE;
	if (tracep[0] >= 0)
		fcntl(tracep[0], F_SETPIPE_SZ, 1 << 20);   /* room for bursts; best effort */

	char **env = build_env(sv, chanp[1], tracep[1]);
	int keep[3];
	size_t nkeep = 0;
	keep[nkeep++] = chanp[1];
	if (tracep[1] >= 0)
		keep[nkeep++] = tracep[1];
	if (sv->stepfd >= 0)
		keep[nkeep++] = sv->stepfd;
	struct spawn sp = {
		.argv = (const char *const *)sv->o->argv, .path_lookup = true, .env = (const char *const *)env,
		.out.how = SPAWN_PIPE, .err.how = SPAWN_PIPE, .keep_fds = keep, .nkeep = nkeep,
		.new_group = true, .death_signal = SIGTERM, .sigmask = oldmask,
		.child_hook = job_child_setup, .hook_data = sv,
	};
	int rc = spawn_start(&sp);
	int e = errno;
	free_env(env);
	close(chanp[1]);
	if (tracep[1] >= 0)
		close(tracep[1]);
	if (rc) {
		close(chanp[0]);
		if (tracep[0] >= 0)
			close(tracep[0]);
		errno = e;
		if (rc == SPAWN_NOT_FOUND) {
			error("cannot run '%s': command not found", sp.argv[0]);
			return LP_EXIT_NOT_FOUND;
		}
		if (rc == SPAWN_CANNOT_EXEC) {
			error_errno("cannot run '%s'", sp.argv[0]);
			return LP_EXIT_CANNOT_EXEC;
		}
		return error_errno(!strcmp(sp.why, "fork") ? "cannot fork" : "cannot create pipes"), LP_EXIT_FAILURE;
	}
	sv->child = sp.pid;
	sv->outfd = sp.out.fd;
	sv->errfd = sp.err.fd;
	sv->chanfd = chanp[0];
	fcntl(sv->outfd, F_SETFL, O_NONBLOCK);
	fcntl(sv->errfd, F_SETFL, O_NONBLOCK);
	fcntl(sv->chanfd, F_SETFL, O_NONBLOCK);
	sv->tracefd = tracep[0];
	if (sv->tracefd >= 0)
		fcntl(sv->tracefd, F_SETFL, O_NONBLOCK);
	return 0;
}

static uint64_t machine_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

/* ---- the loop -------------------------------------------------------- */

/* The sampling tick fires on a grid from tick0_ns, every interval. */
static int arm_timer(struct sv *sv, int64_t first_ns)
{
	int64_t iv = sv->o->interval_ns;
	struct itimerspec its = {
		.it_interval = { iv / NS_PER_S, iv % NS_PER_S },
		.it_value = { first_ns / NS_PER_S, first_ns % NS_PER_S },
	};
	if (timerfd_settime(sv->timerfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		return error_errno("cannot start timer");
	sv->next_tick_ns = first_ns;
	return 0;
}

static int setup_timer(struct sv *sv)
{
	sv->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (sv->timerfd < 0)
		return error_errno("cannot create timer");
	sv->tick0_ns = mono_ns();
	return arm_timer(sv, sv->tick0_ns + sv->o->interval_ns);
}

/*
 * After a tick: sleep through the ticks that would only repeat the last
 * sample. The sampler knows when it next has something to read; the
 * once-a-second flush and per-process rows, and the status line on a
 * terminal, bound the sleep. The next expiry stays on the tick grid, so
 * samples keep their spacing once memory moves again. This is what puts
 * a steady job's sampling cost below that of a bare timer.
 */
static void sleep_until_due(struct sv *sv, int64_t now)
{
	int64_t iv = sv->o->interval_ns;
	int64_t due = sampler_next_due(sv->sampler);
	if (due > sv->last_flush_ns + FLUSH_EVERY_NS)
		due = sv->last_flush_ns + FLUSH_EVERY_NS;
	if (due > sv->last_proc_ns + PROC_SAMPLE_EVERY_NS)
		due = sv->last_proc_ns + PROC_SAMPLE_EVERY_NS;
	if (sv->tty && due > sv->last_status_ns + STATUS_EVERY_NS)
		due = sv->last_status_ns + STATUS_EVERY_NS;
	int64_t next = sv->tick0_ns + ((now - sv->tick0_ns) / iv + 1) * iv;   /* the next tick */
	if (due > next)
		next = sv->tick0_ns + (due - sv->tick0_ns + iv - 1) / iv * iv;  /* the first one due */
	if (next != sv->next_tick_ns && (next > now + iv || sv->next_tick_ns > now + iv))
		arm_timer(sv, next);      /* a sleep begins, or ends early */
	else
		sv->next_tick_ns = next;  /* the timer's own period gets there */
}

static void loop(struct sv *sv)
{
	for (;;) {
		int64_t now = mono_ns();
		if (sv->state == SV_RUNNING && sv->stop_deadline_ns && now >= sv->stop_deadline_ns) {
			sv->stop_deadline_ns = 0;
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "stop-timeout", "grace period over: SIGKILL");
			say(sv, "the job did not stop within the grace period: SIGKILL");
			signal_job(sv, SIGKILL);
		}
		if (sv->state != SV_RUNNING) {
			bool none_left = reap(sv);
			bool drained = sv->outfd < 0 && sv->errfd < 0 && sv->chanfd < 0 && sv->tracefd < 0;
			if (none_left && drained)
				break;
			if (now >= sv->state_deadline_ns) {
				if (sv->state == SV_ENDING)
					enter_state(sv, SV_KILLING, now);
				else
					break;   /* pipes held by something we cannot end */
			}
		}

		struct pollfd pfd[6];
		int nfd = 0;
		pfd[nfd++] = (struct pollfd){ .fd = sv->sigfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->timerfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->outfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->errfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->chanfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->tracefd, .events = POLLIN };
		int timeout = -1;
		if (sv->state == SV_RUNNING && sv->stop_deadline_ns) {
			int64_t left = sv->stop_deadline_ns - now;
			timeout = left <= 0 ? 0 : (int)(left / 1000000) + 1;
		}
		if (sv->state != SV_RUNNING) {
			int64_t left = sv->state_deadline_ns - now;
			timeout = left <= 0 ? 0 : (int)(left / 1000000) + 1;
			if (timeout > 50)
				timeout = 50;  /* re-check for leftovers reaped without SIGCHLD news */
		}
		int rc = poll(pfd, (nfds_t)nfd, timeout);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			error_errno("poll failed");
			enter_state(sv, SV_KILLING, now);
			continue;
		}
		now = mono_ns();
		if (pfd[0].revents & POLLIN)
			on_signal(sv, now);
		if (pfd[1].revents & POLLIN) {
			uint64_t ticks;
			if (read(sv->timerfd, &ticks, sizeof(ticks)) > 0 && !sv->child_exited) {
				take_sample(sv, now);
				status_draw(sv, now);
				sleep_until_due(sv, now);
			}
		}
		if (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))
			pump(sv, &sv->outfd, STDOUT_FILENO, &sv->out_broken, &sv->out_lb, on_output_line);
		if (pfd[3].revents & (POLLIN | POLLHUP | POLLERR))
			pump(sv, &sv->errfd, STDERR_FILENO, &sv->err_broken, &sv->err_lb, on_output_line);
		if (pfd[4].revents & (POLLIN | POLLHUP | POLLERR)) {
			bool dummy = false;
			pump(sv, &sv->chanfd, -1, &dummy, &sv->chan_lb, on_channel_line);
		}
		if (pfd[5].revents & (POLLIN | POLLHUP | POLLERR)) {
			bool dummy = false;
			pump(sv, &sv->tracefd, -1, &dummy, &sv->trace_lb, on_trace_line);
			trace_maybe_write(sv, now);
		}
	}
}

static int setup_signals(struct sv *sv, sigset_t *oldmask)
{
	static const int sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, 0 };
	sv->sigfd = spawn_signalfd(sigs, oldmask);
	if (sv->sigfd < 0)
		return error_errno("cannot create signalfd");
	signal(SIGPIPE, SIG_IGN);   /* a closed stdout must not kill the supervisor */
	return 0;
}

/* ---- budgets ----------------------------------------------------------- */

/*
 * --max-mem goes to the kernel where the job has a memory cgroup (v2
 * memory.max with memory.high 5% below it, so the job is slowed and
 * reclaimed before it is killed; v1 memory.limit_in_bytes), else the
 * sampler enforces it. Say which at the start.
 */
static void announce_budgets(struct sv *sv, const char *no_cg_why)
{
	const struct supervise_opts *o = sv->o;
	char max[32], soft[32], how[200];
	if (o->max_mem_bytes) {
		if (sv->have_cg && sv->cg.has_memory &&
		    cgroup_set_limit(&sv->cg, o->max_mem_bytes,
		                     sv->cg.version == 2 ? o->max_mem_bytes - o->max_mem_bytes / 20 : 0) == 0) {
			sv->kernel_budget = true;
			snprintf(how, sizeof(how), "by the kernel (cgroup %s)",
			         sv->cg.version == 2 ? "v2 memory.max, memory.high 5% below" : "v1 memory.limit_in_bytes");
		} else {
			snprintf(how, sizeof(how), "by leakproof every %.3g ms (%.150s)", (double)o->interval_ns / 1e6,
			         !sv->have_cg || !sv->cg.has_memory ? (no_cg_why[0] ? no_cg_why : "no memory cgroup")
			                                            : "the cgroup refused the limit");
		}
		sv->soft_bytes = o->soft_limit_bytes ? o->soft_limit_bytes : o->max_mem_bytes / 10 * 9;
		fmt_bytes(max, sizeof(max), (double)o->max_mem_bytes);
		fmt_bytes(soft, sizeof(soft), (double)sv->soft_bytes);
		say(sv, "memory budget %s, enforced %s; soft limit %s%s", max, how, soft,
		    o->restart & RESTART_AT_LIMIT ? " (stop and restart there)" : "");
		store_add_event(sv->st, sv->run_id, 0, "budget", how);
	} else if (o->soft_limit_bytes) {
		sv->soft_bytes = o->soft_limit_bytes;
	}
	if (o->max_gpu_bytes) {
		sv->soft_gpu_bytes = o->soft_gpu_bytes ? o->soft_gpu_bytes : o->max_gpu_bytes / 10 * 9;
		fmt_bytes(max, sizeof(max), (double)o->max_gpu_bytes);
		fmt_bytes(soft, sizeof(soft), (double)sv->soft_gpu_bytes);
		say(sv, "GPU memory budget %s, enforced by leakproof through NVML%s; soft limit %s", max,
		    sv->nvml ? "" : " (which is not available: not enforced)", soft);
	}
}

/* ---- segments ---------------------------------------------------------- */

static uint64_t oom_kills_now(const struct sv *sv)
{
	struct cgroup_events ev;
	if (!sv->have_cg || !sv->cg.has_memory || cgroup_read_events(&sv->cg, &ev) < 0)
		return 0;
	return ev.oom_kill;
}

/* Start the job (again): a new segment in the store, fresh per-process
 * state. Returns 0, or the exit status of a job that could not start. */
static int begin_segment(struct sv *sv, sigset_t *oldmask)
{
	int64_t now = mono_ns();
	if (sv->restarts) {
		sv->seg = store_segment_begin(sv->st, sv->run_id, wall_seconds(), 0);
		if (sv->seg < 0)
			return LP_EXIT_FAILURE;
	}
	sv->state = SV_RUNNING;
	sv->child_exited = sv->core_dumped = false;
	sv->exit_code = sv->exit_signal = 0;
	sv->seg_start_ns = now;
	sv->seg_steps = 0;
	cause_scan_init(&sv->scan);
	if (!sv->restarts)
		sv->oom_kills_at_start = oom_kills_now(sv);   /* later: where the last one ended */
	sv->stop_sent = sv->budget_killed = sv->soft_warned = false;
	sv->stop_deadline_ns = 0;
	sv->restart_why = NULL;
	sv->why_stopped[0] = '\0';
	if (sv->trace && sv->restarts)
		trace_in_forget_dead(sv->trace);   /* the last segment's processes */
	int rc = start_job(sv, oldmask);
	if (rc)
		return rc;
	store_segment_set_pid(sv->st, sv->run_id, sv->seg, sv->child);
	take_sample(sv, mono_ns());
	return 0;
}

/* Why the job should start again after this end, or NULL. */
static const char *restart_policy(const struct sv *sv, enum end_cause c)
{
	unsigned p = sv->o->restart;
	if (sv->interrupted)
		return NULL;
	if (c == CAUSE_STOP_REQUESTED)
		return sv->restart_why;
	if ((c == CAUSE_OOM_KILL || c == CAUSE_BUDGET_KILL) && (p & (RESTART_ON_OOM | RESTART_AT_LIMIT)))
		return p & RESTART_ON_OOM ? "on-oom" : "at-limit";
	if ((c == CAUSE_CUDA_OOM || c == CAUSE_HOST_ALLOC_FAIL) && (p & RESTART_ON_OOM))
		return "on-oom";
	return NULL;
}

/* The main process and its leftovers are gone: name the cause, record the
 * segment's end, say it. Returns why to start the job again, or NULL. */
static const char *end_segment(struct sv *sv)
{
	struct cause_input in = {
		.exited = !sv->exit_signal,
		.exit_code = sv->exit_code,
		.signal = sv->exit_signal,
		.core_dumped = sv->core_dumped,
		.budget_killed = sv->budget_killed,
		.stop_requested = sv->stop_sent,
		.scan = &sv->scan,
	};
	uint64_t ooms = oom_kills_now(sv);
	in.oom_kills = ooms > sv->oom_kills_at_start ? ooms - sv->oom_kills_at_start : 0;
	sv->oom_kills_at_start = ooms;   /* the next start's baseline: the cgroup is empty now */
	char evidence[CAUSE_LINE_MAX + 64];
	enum end_cause c = cause_classify(&in, evidence, sizeof(evidence));
	if (c == CAUSE_BUDGET_KILL || c == CAUSE_STOP_REQUESTED) {
		/* what leakproof saw is better evidence than that it acted */
		const char *how = strrchr(evidence, ';');
		char tail[96];
		snprintf(tail, sizeof(tail), "%s", how ? how : "");
		snprintf(evidence, sizeof(evidence), "%s%s", sv->why_stopped, tail);
	}
	const char *again = restart_policy(sv, c);
	if (again && !strcmp(again, "at-limit") && sv->seg_steps == 0) {
		/* it would only reach the limit again before doing anything */
		say(sv, "not restarting the job: it reached the soft limit before its first step (raise --max-mem or --soft-limit)");
		again = NULL;
	}
	if (again && sv->restarts >= sv->o->max_restarts) {
		say(sv, "not restarting the job after %s: it was restarted %d times already (--max-restarts %d)",
		    cause_name(c), sv->restarts, sv->o->max_restarts);
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "max-restarts", cause_name(c));
		again = NULL;
	}
	struct segment_end se = {
		.ended_at = wall_seconds(),
		.exit_code = sv->exit_signal ? -1 : sv->exit_code,
		.exit_signal = sv->exit_signal,
		.cause = cause_name(c),
		.evidence = evidence,
		.has_step = sv->seg_steps > 0,
		.step = sv->last_step,
		.memory_bytes = sv->have_last ? (uint64_t)fmax(0, mem_sample_value(&sv->last, sv->o->measure)) : 0,
		.restart = again,
	};
	store_segment_end(sv->st, sv->run_id, sv->seg, &se);
	store_flush(sv->st);
	/* With a restart policy, each end is news as it happens; without one
	 * the summary tells it. */
	if (sv->o->restart && (again || c != CAUSE_EXIT)) {
		char mem[32] = "?", at[48] = "before its first step";
		if (sv->have_last)
			fmt_bytes(mem, sizeof(mem), (double)se.memory_bytes);
		if (sv->seg_steps)
			snprintf(at, sizeof(at), "at step %lld", (long long)sv->last_step);
		say(sv, "the job ended (%s: %s) %s with %s%s%s", cause_name(c), evidence, at, mem,
		    again ? "; restarting it: " : "", again ? again : "");
	}
	return again;
}

/* Wait ns before a restart, passing signals on: one to stop leakproof ends
 * the wait and the run. Returns 0, or -1 when told to stop. */
static int wait_backoff(struct sv *sv, int64_t ns)
{
	int64_t end = mono_ns() + ns;
	for (;;) {
		int64_t left = end - mono_ns();
		if (left <= 0)
			return 0;
		struct pollfd pfd = { .fd = sv->sigfd, .events = POLLIN };
		if (poll(&pfd, 1, (int)(left / 1000000) + 1) <= 0)
			continue;
		struct signalfd_siginfo si;
		while (read(sv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (si.ssi_signo == SIGCHLD) {
				reap(sv);
				continue;
			}
			sv->interrupted = true;
			sv->exit_code = -1;
			sv->exit_signal = (int)si.ssi_signo;
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "signal",
			                "stopped while waiting to restart");
			say(sv, "stopped by SIG%s while waiting to restart the job", sigabbrev_np((int)si.ssi_signo));
			return -1;
		}
	}
}

int supervise(const struct supervise_opts *o)
{
	struct sv sv;
	sigset_t oldmask;
	int status = LP_EXIT_FAILURE;
	char why[256] = "";

	memset(&sv, 0, sizeof(sv));
	sv.o = o;
	sv.sigfd = sv.timerfd = sv.outfd = sv.errfd = sv.chanfd = sv.tracefd = sv.stepfd = -1;
	sv.epoch = -1;
	sv.peak = -1;
	linebuf_init(&sv.out_lb, true);
	linebuf_init(&sv.err_lb, true);
	linebuf_init(&sv.chan_lb, false);
	sv.tty = o->status_line == 1 || (o->status_line < 0 && isatty(STDERR_FILENO));
	ensure_std_fds();

	if (o->step_regex && !(sv.re = step_regex_new(o->step_regex, "--step-regex")))
		return LP_EXIT_USAGE;
	if (o->result_regex && !(sv.result_re = step_regex_new(o->result_regex, "--result-regex"))) {
		step_regex_free(sv.re);
		return LP_EXIT_USAGE;
	}
	sv.st = store_open(o->store_path);
	if (!sv.st)
		goto out;

	if (o->use_cgroup) {
		if (cgroup_create_job(&sv.cg, why, sizeof(why)) == 0)
			sv.have_cg = true;
	} else {
		snprintf(why, sizeof(why), "--no-cgroup");
	}
	const char *nvml_why = NULL;
	sv.nvml = nvml_open(&nvml_why);
	if (o->measure == MEASURE_GPU && !sv.nvml)
		warning("--measure gpu: GPU sampling is off: %s", nvml_why ? nvml_why : "NVML not available");
	if (o->measure == MEASURE_CGROUP && !(sv.have_cg && sv.cg.has_memory))
		warning("--measure cgroup: the job has no memory cgroup of its own (%s)",
		        why[0] ? why : "no memory controller");

	uint64_t limit = o->max_mem_bytes;
	const char *limit_source = "max-mem";
	if (!limit && (limit = cgroup_self_limit()))
		limit_source = "cgroup";
	if (!limit) {
		limit = machine_memory();
		limit_source = "machine";
	}

	struct strbuf cmd = STRBUF_INIT;
	command_json(&cmd, o->argv);
	char cwd[PATH_MAX], host[256] = "";
	if (!getcwd(cwd, sizeof(cwd)))
		strcpy(cwd, "?");
	gethostname(host, sizeof(host) - 1);
	struct run_begin rb = {
		.started_at = wall_seconds(),
		.command_json = strbuf_str(&cmd),
		.cwd = cwd,
		.hostname = host,
		.measure = o->measure,
		.interval_ns = o->interval_ns,
		.limit_bytes = limit,
		.limit_source = limit_source,
		.mem_total_bytes = machine_memory(),
		.cgroup_mode = sv.have_cg ? (sv.cg.version == 2 ? "v2" : "v1") : "none",
		.step_regex = o->step_regex,
	};
	sv.run_id = store_run_begin(sv.st, &rb);
	strbuf_release(&cmd);
	if (sv.run_id < 0)
		goto out;
	if (o->trial[0] && store_run_set_trial(sv.st, sv.run_id, o->trial[0], o->trial[1], o->trial[2]) < 0)
		goto out;
	if (!sv.have_cg) {
		char d[300];
		snprintf(d, sizeof(d), "job not in a cgroup of its own: %s", why);
		store_add_event(sv.st, sv.run_id, 0, "warning", d);
	}
	announce_budgets(&sv, why);
	if (o->trace) {
		if (!(sv.tracer = tracer_library())) {
			error("--trace: cannot find the tracer library libleakproof-trace.so (looked beside %s and in %s)",
			      "the leakproof binary", LP_TRACEDIR);
			goto out;
		}
		sv.trace = trace_in_new();
		linebuf_init(&sv.trace_lb, false);
		start_trace_steps(&sv);
		store_trace_begin(sv.st, sv.run_id, o->trace_mean > 0 ? o->trace_mean : TRACE_DEFAULT_MEAN);
	}
	store_flush(sv.st);

	/* The sampler keeps a file open per process of the tree: a job with
	 * hundreds of workers must not run leakproof out of descriptors. */
	if (getrlimit(RLIMIT_NOFILE, &sv.nofile) == 0 && sv.nofile.rlim_cur < sv.nofile.rlim_max) {
		struct rlimit more = sv.nofile;
		more.rlim_cur = more.rlim_max > 65536 ? 65536 : more.rlim_max;
		sv.raised_nofile = more.rlim_cur > sv.nofile.rlim_cur && setrlimit(RLIMIT_NOFILE, &more) == 0;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		warning("cannot become a child subreaper: orphaned workers may escape");
	if (setup_signals(&sv, &oldmask) < 0 || setup_timer(&sv) < 0)
		goto out;

	struct sampler_config sc;
	sampler_config_init(&sc);
	sc.root_pid = getpid();
	sc.exclude_root = true;
	sc.cgroup_dir = sv.have_cg ? sv.cg.dir : NULL;
	sc.cgroup_version = sv.cg.version;
	sc.nvml = sv.nvml;
	/* NVML is slow (a query can take a millisecond): twice a second unless
	 * GPU memory is what is judged or enforced, then at the sampling
	 * interval, but not more than 100 times a second */
	if (o->measure == MEASURE_GPU || o->max_gpu_bytes)
		sc.gpu_interval_ns = o->interval_ns > 10000000 ? o->interval_ns : 10000000;
	/* a budget is enforced on the samples: no process may rest between them */
	sc.every_tick = o->max_mem_bytes || o->soft_limit_bytes;
	sv.sampler = sampler_new(&sc);
	if (!sv.sampler)
		goto out;

	sv.t0_ns = mono_ns();
	sv.last_flush_ns = sv.t0_ns;
	sv.last_proc_ns = sv.t0_ns - PROC_SAMPLE_EVERY_NS;   /* per-process rows from the first sample */
	int rc = begin_segment(&sv, &oldmask);
	if (rc) {
		struct run_end re = { .ended_at = wall_seconds(), .exit_code = rc, .status = "failed-to-start",
		                      .verdict = "inconclusive" };
		store_run_end(sv.st, sv.run_id, &re);
		status = rc;
		goto out;
	}
	int64_t backoff_ns = 0;
	for (;;) {
		loop(&sv);
		status_clear(&sv);
		const char *again = end_segment(&sv);
		if (!again)
			break;
		/* A process that dies right after starting is not started again at
		 * once: 1 s, 2 s, 4 s ... up to 30 s, until one lives longer. */
		bool progress = sv.seg_steps > 0 || mono_ns() - sv.seg_start_ns >= QUICK_DEATH_NS;
		if (!sv.stop_sent && !progress)
			backoff_ns = backoff_ns ? (2 * backoff_ns > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : 2 * backoff_ns)
			                        : BACKOFF_FIRST_NS;
		else
			backoff_ns = 0;
		if (backoff_ns) {
			char d[32];
			report_fmt_duration(d, sizeof(d), (double)backoff_ns / 1e9);
			say(&sv, "the job ended %.1f s after it started, before its first step; waiting %s before restarting it",
			    (double)(mono_ns() - sv.seg_start_ns) / 1e9, d);
			if (wait_backoff(&sv, backoff_ns) < 0)
				break;
		}
		sv.restarts++;
		rc = begin_segment(&sv, &oldmask);
		if (rc) {
			sv.exit_code = rc;
			sv.exit_signal = 0;
			break;
		}
	}

	/* Whatever is still unreported in the pipes is lost only if something
	 * we could not kill holds them open; say so. */
	if (sv.outfd >= 0 || sv.errfd >= 0 || sv.chanfd >= 0 || sv.tracefd >= 0)
		warning("a process outside leakproof's reach kept the job's output open");
	if (sv.ignored_channel_steps)
		warning("ignored %lld step messages from the client because --step-regex is set",
		        (long long)sv.ignored_channel_steps);

	struct run_end re = {
		.ended_at = wall_seconds(),
		.exit_code = sv.exit_signal ? -1 : sv.exit_code,
		.exit_signal = sv.exit_signal,
		.status = "done",
		.step_source = sv.step_source,
		.steps = sv.steps,
		.bad_lines = sv.bad_lines,
		.long_lines = sv.long_lines,
		.peak_bytes = sv.peak > 0 ? (uint64_t)sv.peak : 0,
	};
	struct run_summary sum;
	store_flush(sv.st);
	trace_finish(&sv);
	if (run_summary_load(sv.st, sv.run_id, -1, &sum) == 0) {
		re.verdict = verdict_name(sum.a.verdict);
		re.growth_bytes_per_step = sum.a.slope;
		store_run_end(sv.st, sv.run_id, &re);
		double q[5];
		for (int i = 0; i < 5; i++)
			q[i] = sum.a.points >= 2 ? sum.a.q[i] : NAN;
		store_run_set_summary(sv.st, sv.run_id, q, sum.steps_per_second);
		store_flush(sv.st);
		run_summary_release(&sum);
		if (!o->quiet && run_summary_load(sv.st, sv.run_id, -1, &sum) == 0) {
			report_write(&sum, REPORT_TEXT, stderr);
			run_summary_release(&sum);
		}
	} else {
		store_run_end(sv.st, sv.run_id, &re);
	}
	status = sv.exit_signal ? 128 + sv.exit_signal : sv.exit_code;

out:
	if (sv.have_cg) {
		cgroup_signal_all(&sv.cg, SIGKILL, 0);
		reap(&sv);
		cgroup_remove(&sv.cg);
	}
	sampler_free(sv.sampler);
	trace_in_free(sv.trace);
	stop_trace_steps(&sv);
	nvml_close(sv.nvml);
	step_regex_free(sv.re);
	step_regex_free(sv.result_re);
	if (sv.st)
		store_close(sv.st);
	int fds[] = { sv.sigfd, sv.timerfd, sv.outfd, sv.errfd, sv.chanfd, sv.tracefd };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return status;
}
