/*
 * supervise-int.h — what the supervisor's files share, private to them:
 * the state of one supervised run (struct sv) and the functions one file
 * calls in another. Not for use outside src/core/supervise*.c and the
 * files named below.
 *
 *   supervise.c  the state machine, the poll loop, starting the job, and
 *                supervise() itself in phases
 *   job.c        the job's processes: signal them all, reap them
 *   guard.c      the guard that ends the job if the supervisor dies
 *   observe.c    what the job says and holds: its output and channel
 *                lines, its steps, the samples of its memory
 *   console.c    what leakproof writes on the terminal: the job's output
 *                passed through, the live status line, leakproof's lines
 *   budget.c     the memory limit for projections and the budgets
 *   restart.c    requested stops, the end of a segment, restarts
 *   tracing.c    the supervisor's side of --trace
 *   locate.c     the files that ship with leakproof
 *   attach.c     a job leakproof did not start (`leakproof attach`): its
 *                cgroup, its liveness, its log file, its end
 *
 * Calls between them run one way: supervise.c calls the others; observe.c
 * calls budget.c and restart.c; budget.c calls restart.c; attach.c calls
 * observe.c and restart.c; all may call console.c, job.c, guard.c and
 * locate.c, which call none of them but console.c, which tells guard.c when
 * the terminal is raw.
 *
 * Times are CLOCK_MONOTONIC nanoseconds; memory is bytes.
 */
#ifndef LP_SUPERVISE_INT_H
#define LP_SUPERVISE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <termios.h>

#include "core/cause.h"
#include "core/channel.h"
#include "core/scan.h"
#include "core/supervise.h"
#include "platform/cgroup.h"
#include "util/util.h"

#define NS_PER_S 1000000000LL
#define FLUSH_EVERY_NS NS_PER_S            /* commit the store this often */
#define PROC_SAMPLE_EVERY_NS NS_PER_S      /* per-process rows this often */
#define KINDS_EVERY_NS (NS_PER_S / 5)      /* kind rows that moved, this often */
#define KINDS_FAST_EVERY_NS (NS_PER_S / 100) /* ... while memory moves fast, this often */
#define KINDS_FAST_MOVE_BYTES (1024.0 * 1024) /* fast: it moved this much since the last look */
#define KINDS_FAST_FOR_NS (3 * NS_PER_S)   /* ... for this long, then twice as long apart */
#define NEAR_LIMIT_FRACTION 0.8            /* memory above this part of the limit: */
#define NEAR_LIMIT_EVERY_NS (NS_PER_S / 5) /* per-process rows and flushes this often
                                            * (the OOM flight recorder's last steps) */
#define STATUS_EVERY_NS (NS_PER_S / 4)     /* live status line redraws */
#define LIVE_RING 64                       /* steps kept for the live growth estimate */
#define CENSUS_WAKE_RING 64                /* samples judged to wake the census */
#define GUARD_ALSO_MAX 64                  /* processes outside the job's group the guard knows */

struct store;
struct sampler;
struct nvml;
struct trace_in;

enum sv_state { SV_RUNNING, SV_ENDING, SV_KILLING, SV_DONE };

struct sv {
	const struct supervise_opts *o;
	enum sv_state state;
	int64_t state_deadline_ns;

	struct store *st;                      /* not owned: the caller's */
	int64_t run_id;
	struct sampler *sampler;
	struct nvml *nvml;
	struct job_cgroup cg;
	bool have_cg;
	char no_cg_why[256];                   /* why the job has no cgroup of its own */

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
	int64_t backoff_ns;                    /* the wait before the next start; 0: none */
	bool interrupted;                      /* leakproof was told to stop: no restart */
	bool forwarded_stop;                   /* a stop signal was forwarded: a second kills */
	int guard_fd;                          /* the pipe to the job's guard (guard.c); -1: none */
	int guard_ack;                         /* its end of file: the guard is gone */
	pid_t also[GUARD_ALSO_MAX];            /* told it of these (outside the job's group) */
	uint64_t also_start[GUARD_ALSO_MAX];   /* their start times, as also recorded in the store */
	size_t nalso;
	bool kernel_budget;                    /* --max-mem is the cgroup's limit */
	uint64_t soft_bytes, soft_gpu_bytes;

	int64_t t0_ns;
	int sigfd, timerfd, outfd, errfd, chanfd, tracefd;
	int64_t tick0_ns, next_tick_ns;        /* the timer's grid, and its next expiry */
	struct linebuf out_lb, err_lb, chan_lb, trace_lb;
	struct trace_in *trace;                /* --trace: what the tracers said */
	const char *tracer;                    /* the library preloaded */
	bool out_broken, err_broken;           /* our stdout/stderr went away */
	int tee_pipe[2][2];                    /* per stdout, stderr: the scratch pipe
	                                          the job's output is duplicated into
	                                          (observe.c); -1: none */
	signed char tee_state[2];              /* 0: not decided, 1: spliced, -1: copied */

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
	struct step_rec *pending;              /* steps marked before the first sample */
	size_t npending, pending_cap;
	int64_t pending_dropped;               /* past PENDING_STEPS_MAX */
	uint64_t child_maxrss;                 /* the main process's peak RSS (wait4), bytes */
	int64_t last_sample_ns;
	double peak;

	int64_t last_flush_ns, last_proc_ns, last_status_ns;
	double proc_level;                     /* the measure at the last per-process rows */
	int64_t last_kinds_ns;                 /* kind rows last looked at */
	double kinds_level;                    /* the memory then (the larger of the measure
	                                        * and the cgroup's usage) */
	int64_t kinds_fast_since_ns;           /* memory moving fast since then; 0: not */
	uint64_t memstat_reads;                /* the cgroup's kinds last stored */
	double near_limit_bytes;               /* NEAR_LIMIT_FRACTION of the limit; 0: none */
	bool tty, status_drawn;

	/* the terminal (console.c): when leakproof runs in one, the job gets a
	 * pseudo-terminal of its own (docs/internals/terminal.md) */
	bool pty;                              /* the job runs on one */
	bool fg_job;                           /* no pty, and our stdin is a terminal: the job
	                                          reads it itself, in its foreground */
	bool said_tty_stop;                    /* ... and was told it cannot (console.c) */
	int term_fd;                           /* where its output goes: 1 or 2 */
	int pty_in;                            /* its master, for what is typed; -1: none */
	int infd;                              /* our stdin while it is read (raw, in the foreground); -1 */
	bool raw;                              /* our terminal is in raw mode, saved_term before */
	struct termios saved_term;
	bool line_open;                        /* the job's last byte on the terminal ended no line */
	int job_stop_sig;                      /* the job's main process stopped by this; 0: not */
	bool ctrl_z;                           /* we sent it SIGSTOP for a Ctrl-Z */
	double ring_x[LIVE_RING], ring_y[LIVE_RING];
	size_t ring_n;
	double first_step_t;

	/* attach.c: a job leakproof did not start (o->attach_pid, o->attach_slurm) */
	bool attached;
	bool detached;                         /* leakproof stopped watching; the job went on */
	int pidfd;                             /* its main process (pidfd_open); -1: none */
	uint64_t job_start_ticks;              /* its /proc starttime: a pid used again differs */
	struct log_follow *log;                /* --log: the file followed */
	char end_how[200];                     /* how its end was known (the report's evidence) */
	/* the object census (census_wake.c): the memory judged to wake the
	 * dormant hook */
	bool census_woken;                     /* SIGURG sent (once) */
	int64_t census_lines;                  /* censuses received */
	int64_t census_hooks;                  /* hooks that said their pid (--census) */
	struct census_wake {
		double x[CENSUS_WAKE_RING], y[CENSUS_WAKE_RING];
		size_t n;
		double spacing_s;              /* between two points kept */
		double judged_t;
	} wake;
};

/* census_wake.c: the census hook started in process pid (its `census 0 *
 * hook=PID` line, --census); the latest sample (seconds since the start,
 * bytes of the measure): wakes the dormant hooks when the memory turns to
 * growth. */
void sv_census_hook(struct sv *sv, int64_t pid);
void sv_census_watch(struct sv *sv, double t, double v);

/* Seconds since the run began, for the store's timestamps. */
static inline double sv_now_t(const struct sv *sv, int64_t now_ns)
{
	return (double)(now_ns - sv->t0_ns) / 1e9;
}

/* job.c: signal the job's whole tree; reap every child that ended (true
 * when none is left at all). */
void sv_signal_job(struct sv *sv, int sig);
/* After the main process ended: how many of the job's processes still run,
 * the first few of them into list ("pid 12 (sleep), pid 13 (sleep)"). */
size_t sv_leftovers(struct sv *sv, char *list, size_t len);
bool sv_reap(struct sv *sv);
/* The job's main process alone: sigqueue (a prefork stub tells it from a
 * kill of its group); an attached job's through its pidfd, or only while
 * its start time is the one attached to. 0, or -1 with errno. */
int sv_signal_main(struct sv *sv, int sig);
/* A SLURM job's processes (o->attach_slurm), every one in its cgroup tree
 * but SLURM's slurmstepd, sent sig one by one (0: counted only): how many,
 * -1 when its cgroup cannot be read (gone). */
int sv_signal_slurm_job(struct sv *sv, int sig);

/* guard.c: start the job's guard (0, or -1 with errno: the job runs
 * unguarded); tell it the job's process group (> 0), that none runs (0),
 * or to stand down (-1, which closes the pipe). */
int sv_guard_start(struct sv *sv);
void sv_guard_tell(struct sv *sv, int32_t msg);
/* The terminal on stdin is raw now, and was *saved before; NULL: restored.
 * A guard whose supervisor dies while it is raw restores it. */
void sv_guard_term(struct sv *sv, const struct termios *saved);
/* After a sample, without a cgroup: the job's processes outside its
 * process group to the guard. */
void sv_guard_also(struct sv *sv);

/* locate.c: a file that ships with leakproof, beside the binary or where
 * it was installed (see its definition). */
bool find_beside_binary(const char *const *rel, size_t nrel, const char *leaf, const char *installed,
                        bool want_dir, char *out, size_t outsz);

/* console.c */
int sv_write_all(int fd, const char *p, size_t n);
void sv_term_init(struct sv *sv);
int sv_term_open_pty(struct sv *sv, int *master, int *slave);
void sv_term_enter(struct sv *sv);
void sv_term_leave(struct sv *sv);
void sv_term_winch(struct sv *sv);
void sv_term_input(struct sv *sv);
void sv_term_suspend(struct sv *sv);
void sv_term_follow_stop(struct sv *sv, int64_t now_ns);
void sv_term_continued(struct sv *sv);
void sv_term_close_pty(struct sv *sv);
void sv_pass_output(struct sv *sv, int fd, const char *p, size_t n, bool *broken);
void sv_status_clear(struct sv *sv);
void sv_status_draw(struct sv *sv, int64_t now_ns);
void sv_say(struct sv *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* observe.c */
void sv_take_sample(struct sv *sv, int64_t now_ns);
void sv_store_pending_steps(struct sv *sv);
void sv_on_channel_line(void *ctx, const char *line, size_t len, bool truncated);
void sv_on_output_line(void *ctx, const char *line, size_t len, bool truncated);
bool sv_pump(struct sv *sv, int *fdp, int out_fd, bool *broken, struct linebuf *lb, line_fn fn);

/* budget.c */
uint64_t sv_machine_memory(void);
uint64_t sv_projection_limit(const struct supervise_opts *o, const char **source);
void sv_announce_budgets(struct sv *sv);
void sv_check_budgets(struct sv *sv, const struct mem_sample *s, int64_t now);

/* restart.c */
void sv_request_stop(struct sv *sv, int64_t now, const char *restart_why, const char *reason);
uint64_t sv_oom_kills_now(const struct sv *sv);
const char *sv_end_segment(struct sv *sv);
int sv_wait_before_restart(struct sv *sv);

/* attach.c */
bool sv_attach_find_cgroup(struct sv *sv);
void sv_attach_describe(const struct sv *sv, struct strbuf *command_json, char *cwd, size_t cwdsz);
int sv_attach_begin(struct sv *sv);
int sv_attach_watch_fd(const struct sv *sv);
void sv_attach_follow(struct sv *sv);
void sv_attach_note_end(struct sv *sv, int64_t now);
void sv_attach_on_stop_signal(struct sv *sv, int sig, int64_t now);
void sv_attach_end_segment(struct sv *sv);
enum run_status sv_attach_status(const struct sv *sv);
void sv_attach_release(struct sv *sv);
/* A SLURM job (o->attach_slurm): its placement (job, step, array task,
 * its cgroup's limit) instead of leakproof's own. */
struct placement;
void sv_attach_slurm_placement(const struct sv *sv, struct placement *place /* out */);
#define SLURM_STEPD_COMM "slurmstepd"   /* SLURM's step daemon, in the job's cgroup too */

/* tracing.c */
int sv_trace_prepare(struct sv *sv);
void sv_on_trace_line(void *ctx, const char *line, size_t len, bool truncated);
void sv_trace_maybe_write(struct sv *sv, int64_t now_ns);
void sv_trace_finish(struct sv *sv);
void sv_trace_release(struct sv *sv);

#endif
