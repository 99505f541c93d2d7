/*
 * supervise.c — the supervisor: one process, one poll loop, no threads.
 *
 * The job is forked into its own process group and, where the machine
 * allows, its own cgroup; leakproof makes itself a child subreaper so that
 * workers orphaned by the job are reparented to it and can be found and
 * ended. One poll() set carries every event source:
 *
 *   signalfd   SIGCHLD (reap), SIGINT/SIGTERM/SIGHUP/SIGQUIT (forward);
 *              on a terminal also SIGWINCH, SIGTSTP, SIGCONT (console.c)
 *   timerfd    the sampling tick
 *   stdout/err the job's output, passed through unchanged and scanned
 *              (on a terminal, one of them is the job's pseudo-terminal)
 *   stdin      on a terminal, in the foreground: what is typed, to the job
 *   channel    the client protocol on $LEAKPROOF_FD
 *   trace      --trace: what the preloaded tracers say
 *
 * States (see docs/internals/design.md):
 *
 *   RUNNING   --main process exits-->  ENDING (SIGTERM to leftovers)
 *   ENDING    --grace elapses------->  KILLING (SIGKILL to leftovers)
 *   ENDING/KILLING --no process left and output drained--> DONE
 *   KILLING   --1 s more------------>  DONE (whatever is left)
 *
 * This file holds the state machine, the loop, starting the job, and
 * supervise() in its phases: prepare, run the segments (start, loop, end,
 * restart), finish, release. What the events mean lives beside it
 * (supervise-int.h): observe.c (output, channel, steps, samples),
 * console.c, budget.c, restart.c, tracing.c.
 *
 * Times are CLOCK_MONOTONIC nanoseconds; memory is bytes.
 */
#include "core/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/locate.h"
#include "core/sampler.h"
#include "core/supervise-int.h"
#include "core/trace.h"
#include "platform/cgroup.h"
#include "platform/nvml.h"
#include "platform/placement.h"
#include "platform/proc.h"
#include "platform/spawn.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "util/jsonw.h"
#include "util/util.h"


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
	o->census_ns = CENSUS_AUTO_NS;
}

/* ---- processes ------------------------------------------------------- */

static void enter_state(struct sv *sv, enum sv_state st, int64_t now)
{
	/* processes the main process left running are named, and so is their end */
	char list[200], d[300];
	size_t n = sv->child_exited ? sv_leftovers(sv, list, sizeof(list)) : 0;
	const char *s = n == 1 ? "" : "es";
	sv->state = st;
	if (st == SV_ENDING) {
		sv_signal_job(sv, SIGTERM);
		sv->state_deadline_ns = now + sv->o->leftover_grace_ns;
		if (n) {
			char grace[32];
			fmt_duration(grace, sizeof(grace), (double)sv->o->leftover_grace_ns / 1e9);
			snprintf(d, sizeof(d), "%zu process%s left running by the main process: %s: SIGTERM", n, s, list);
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "leftover", d);
			sv_say(sv, "the job's main process ended and left %zu process%s running (%s): SIGTERM, SIGKILL in %s",
			       n, s, list, grace);
		}
	} else if (st == SV_KILLING) {
		sv_signal_job(sv, SIGKILL);
		sv->state_deadline_ns = now + NS_PER_S;
		if (n) {
			snprintf(d, sizeof(d), "%zu process%s still running after SIGTERM: %s: SIGKILL", n, s, list);
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "leftover", d);
			sv_say(sv, "%zu process%s still running (%s): SIGKILL", n, s, list);
		}
	}
}

static void note_reaped(struct sv *sv, int64_t now);

static void on_signal(struct sv *sv, int64_t now)
{
	struct signalfd_siginfo si;
	while (read(sv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGCHLD)
			continue;
		if (sig == SIGWINCH) {
			sv_term_winch(sv);
			continue;
		}
		if (sig == SIGCONT) {
			sv_term_continued(sv);
			continue;
		}
		if (sig == SIGTSTP) {   /* Ctrl-Z on our terminal, not raw: the job stops, we follow */
			sv_term_suspend(sv);
			continue;
		}
		/* Forward to the whole job, SIGKILL after the grace period; a
		 * second one, or one while ending, kills at once. An attached
		 * job is not ours to stop: leakproof detaches (attach.c). */
		if (sv->attached) {
			sv_attach_on_stop_signal(sv, sig, now);
		} else if (sv->state == SV_RUNNING && sv->forwarded_stop) {
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "signal", "second stop signal: SIGKILL");
			sv_say(sv, "SIG%s again: SIGKILL to the job", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
			sv->stop_deadline_ns = 0;
			sv_signal_job(sv, SIGKILL);
		} else if (sv->state == SV_RUNNING) {
			sv->interrupted = true;   /* the user's stop: no restart after it */
			sv->forwarded_stop = true;
			sv_signal_job(sv, sig);
			char d[32];
			snprintf(d, sizeof(d), "%s forwarded", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "signal", d);
			int64_t deadline = now + sv->o->grace_ns;
			if (!sv->stop_deadline_ns || deadline < sv->stop_deadline_ns)
				sv->stop_deadline_ns = deadline;
			char grace[32];
			fmt_duration(grace, sizeof(grace), (double)sv->o->grace_ns / 1e9);
			sv_say(sv, "SIG%s forwarded to the job (SIGKILL in %s if it is still running; again to kill it now)",
			       sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", grace);
		} else if (sv->state == SV_ENDING) {
			enter_state(sv, SV_KILLING, now);
		}
	}
	note_reaped(sv, now);
}

/* Reap what ended; when it is the main process, record its end and start
 * ending the rest. Called on SIGCHLD and, in case a thread of a library
 * loaded into us (NVML's) took the SIGCHLD, on every timer tick. */
static void note_reaped(struct sv *sv, int64_t now)
{
	if (sv->attached) {   /* not our child: its end is looked for */
		sv_attach_note_end(sv, now);
		return;
	}
	bool none_left = sv_reap(sv);
	if (sv->job_stop_sig && !sv->child_exited) {
		/* what it wrote before it stopped is passed on first */
		bool dummy = false;
		if (sv->outfd >= 0)
			sv_pump(sv, &sv->outfd, STDOUT_FILENO, &sv->out_broken, &sv->out_lb, sv_on_output_line);
		if (sv->errfd >= 0)
			sv_pump(sv, &sv->errfd, STDERR_FILENO, &sv->err_broken, &sv->err_lb, sv_on_output_line);
		if (sv->chanfd >= 0)
			sv_pump(sv, &sv->chanfd, -1, &dummy, &sv->chan_lb, sv_on_channel_line);
		sv_term_follow_stop(sv, now);
	}
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
	                                     "LEAKPROOF_STOP_SIGNAL", "LEAKPROOF_TRIAL", "LEAKPROOF_TRACE_*",
	                                     "LEAKPROOF_CENSUS", "LEAKPROOF_CENSUS_WAKE" };
	size_t nunset = sizeof(unset) / sizeof(unset[0]);
	char **env = xcalloc(nunset + 20, sizeof(char *));
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
	if (sv->o->census_ns > 0)
		strbuf_addf(&sb, "LEAKPROOF_CENSUS=%.3f", (double)sv->o->census_ns / 1e9);
	else
		strbuf_addstr(&sb, "LEAKPROOF_CENSUS=off");
	env[k++] = strbuf_detach(&sb, NULL);
	const char *client = python_client_dir();
	/* without --census the hook waits, dormant, for SIGURG (census_wake.c) */
	if (client && sv->o->census_ns > 0 && !sv->o->census_hook)
		env[k++] = xstrdup("LEAKPROOF_CENSUS_WAKE=SIGURG");
	if (client || pypath) {
		strbuf_addstr(&sb, "PYTHONPATH=");
		/* the census's startup hook first, so that its sitecustomize is
		 * the one Python imports; it runs the user's own after it */
		if (client && sv->o->census_ns > 0)
			strbuf_addf(&sb, "%s/leakproof/hook:", client);
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

/* Are descriptors a and b the same file (or pipe, or terminal)? */
static bool same_file(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
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
	/* On a terminal: a pseudo-terminal of its own for each of its standard
	 * descriptors that is a terminal for us (console.c) */
	int master = -1, slave = -1;
	if (sv->pty && sv_term_open_pty(sv, &master, &slave) < 0) {
		warning("cannot open a pseudo-terminal for the job (%s): it gets pipes", strerror(errno));
		sv->pty = false;
	}
	if (sv->pty) {
		sp.new_session = true;
		sp.ctty = slave;
		if (isatty(STDIN_FILENO))
			sp.in = (struct spawn_fd){ SPAWN_FD, slave };
		if (isatty(STDOUT_FILENO))
			sp.out = (struct spawn_fd){ SPAWN_FD, slave };
		if (isatty(STDERR_FILENO))
			sp.err = (struct spawn_fd){ SPAWN_FD, slave };
	}
	/* stdout and stderr one file (`> log 2>&1`, a SLURM output file,
	 * `2>&1 | tee`): one pipe for both, so that what the job writes stays
	 * in the order it wrote it, as it would without leakproof */
	int shared[2] = { -1, -1 };
	if (sp.out.how == SPAWN_PIPE && sp.err.how == SPAWN_PIPE && same_file(STDOUT_FILENO, STDERR_FILENO) &&
	    pipe2(shared, O_CLOEXEC) == 0)
		sp.out = sp.err = (struct spawn_fd){ SPAWN_FD, shared[1] };
	int rc = spawn_start(&sp);
	int e = errno;
	free_env(env);
	if (slave >= 0)
		close(slave);   /* the job's now: its end closes the master */
	if (shared[1] >= 0)
		close(shared[1]);
	close(chanp[1]);
	if (tracep[1] >= 0)
		close(tracep[1]);
	if (rc) {
		close(chanp[0]);
		if (tracep[0] >= 0)
			close(tracep[0]);
		if (master >= 0)
			close(master);
		if (shared[0] >= 0)
			close(shared[0]);
		sv_term_close_pty(sv);
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
	sv_guard_tell(sv, (int32_t)sp.pid);   /* its process group */
	/* the pty's output comes where the first descriptor on it would go */
	sv->outfd = shared[0] >= 0 ? shared[0] : sp.out.how == SPAWN_PIPE ? sp.out.fd : master;
	sv->errfd = sp.err.how == SPAWN_PIPE ? sp.err.fd : sp.out.how == SPAWN_PIPE ? master : -1;
	sv->chanfd = chanp[0];
	for (int i = 0; i < 2; i++) {
		int fd = i ? sv->errfd : sv->outfd;
		if (fd >= 0 && fd != master) {
			fcntl(fd, F_SETFL, O_NONBLOCK);
			fcntl(fd, F_SETPIPE_SZ, 1 << 20);   /* fewer, larger reads; best effort */
		}
	}
	fcntl(sv->chanfd, F_SETFL, O_NONBLOCK);
	sv->tracefd = tracep[0];
	if (sv->tracefd >= 0)
		fcntl(sv->tracefd, F_SETFL, O_NONBLOCK);
	return 0;
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
			sv_say(sv, "the job did not stop within the grace period: SIGKILL");
			sv_signal_job(sv, SIGKILL);
		}
		if (sv->state != SV_RUNNING) {
			bool none_left = sv_reap(sv);
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

		struct pollfd pfd[9];
		int nfd = 0;
		pfd[nfd++] = (struct pollfd){ .fd = sv->sigfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->timerfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->outfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->errfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->chanfd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->tracefd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->state == SV_RUNNING ? sv->infd : -1, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->state == SV_RUNNING ? sv_attach_watch_fd(sv) : -1, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = sv->state == SV_RUNNING ? sv->pidfd : -1, .events = POLLIN };
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
				sv_attach_follow(sv);
				note_reaped(sv, now);
				if (!sv->child_exited) {
					sv_take_sample(sv, now);
					sv_guard_also(sv);
					sv_status_draw(sv, now);
					sleep_until_due(sv, now);
				}
			}
		}
		if (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))
			sv_pump(sv, &sv->outfd, STDOUT_FILENO, &sv->out_broken, &sv->out_lb, sv_on_output_line);
		if (pfd[3].revents & (POLLIN | POLLHUP | POLLERR))
			sv_pump(sv, &sv->errfd, STDERR_FILENO, &sv->err_broken, &sv->err_lb, sv_on_output_line);
		if (pfd[4].revents & (POLLIN | POLLHUP | POLLERR)) {
			bool dummy = false;
			sv_pump(sv, &sv->chanfd, -1, &dummy, &sv->chan_lb, sv_on_channel_line);
		}
		if (pfd[5].revents & (POLLIN | POLLHUP | POLLERR)) {
			bool dummy = false;
			sv_pump(sv, &sv->tracefd, -1, &dummy, &sv->trace_lb, sv_on_trace_line);
			sv_trace_maybe_write(sv, now);
		}
		if (pfd[6].revents & (POLLIN | POLLHUP | POLLERR))
			sv_term_input(sv);
		if (pfd[7].revents & POLLIN)
			sv_attach_follow(sv);   /* the log file moved */
		if (pfd[8].revents & (POLLIN | POLLHUP | POLLERR))
			note_reaped(sv, now);   /* the attached job ended */
	}
}

static int setup_signals(struct sv *sv, sigset_t *oldmask)
{
	static const int sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, 0 };
	static const int on_pty[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP, SIGCONT, 0 };
	sv->sigfd = spawn_signalfd(sv->pty ? on_pty : sigs, oldmask);
	if (sv->sigfd < 0)
		return error_errno("cannot create signalfd");
	signal(SIGPIPE, SIG_IGN);   /* a closed stdout must not kill the supervisor */
	return 0;
}

/* ---- segments -------------------------------------------------------- */

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
		sv->oom_kills_at_start = sv_oom_kills_now(sv);   /* later: where the last one ended */
	sv->stop_sent = sv->budget_killed = sv->soft_warned = false;
	sv->stop_deadline_ns = 0;
	sv->restart_why = NULL;
	sv->why_stopped[0] = '\0';
	if (sv->trace && sv->restarts)
		trace_in_forget_dead(sv->trace);   /* the last segment's processes */
	int rc = start_job(sv, oldmask);
	if (rc)
		return rc;
	sv_term_enter(sv);
	struct proc_stat leader;   /* recorded for the next writer, should guard and supervisor die */
	bool known = read_proc_stat(NULL, sv->child, &leader) == 0;
	store_segment_set_pid(sv->st, sv->run_id, sv->seg, sv->child, known ? leader.starttime_ticks : 0,
	                      sv->have_cg ? sv->cg.dir : NULL);
	sv_take_sample(sv, mono_ns());
	return 0;
}

/* ---- supervise(), in phases ------------------------------------------ */

/* A fresh state: no descriptor open, nothing measured. */
static void sv_init(struct sv *sv, struct store *st, const struct supervise_opts *o)
{
	memset(sv, 0, sizeof(*sv));
	sv->o = o;
	sv->st = st;
	sv->sigfd = sv->timerfd = sv->outfd = sv->errfd = sv->chanfd = sv->tracefd = sv->stepfd = -1;
	sv->guard_fd = sv->guard_ack = sv->pidfd = -1;
	sv->attached = o->attach_pid > 0 || o->attach_slurm;
	sv->tee_pipe[0][0] = sv->tee_pipe[0][1] = sv->tee_pipe[1][0] = sv->tee_pipe[1][1] = -1;
	sv->epoch = -1;
	sv->peak = -1;
	linebuf_init(&sv->out_lb, true);
	linebuf_init(&sv->err_lb, true);
	linebuf_init(&sv->chan_lb, false);
	sv->tty = o->status_line == 1 || (o->status_line < 0 && isatty(STDERR_FILENO));
	sv_term_init(sv);
	if (sv->attached)
		sv->fg_job = false;   /* its terminal is not ours to hand over */
}

/* A process a stale run recorded (pid, its start time), and the process
 * group it leads, SIGKILLed if it is still that process and one of that
 * run's: entry ("LEAKPROOF_RUN=ID") in the environment it was started
 * with, since a store's word alone does not name a process to kill.
 * Whether it was. */
static bool end_recorded(long long pid, unsigned long long start, const char *entry)
{
	struct proc_stat ps;
	if (pid <= 0 || pid > INT_MAX || !start || read_proc_stat(NULL, (pid_t)pid, &ps) < 0 ||
	    ps.starttime_ticks != start || ps.state == 'Z' || !proc_environ_has(NULL, (pid_t)pid, entry))
		return false;
	if (getpgid((pid_t)pid) == (pid_t)pid)
		kill(-(pid_t)pid, SIGKILL);
	return kill((pid_t)pid, SIGKILL) == 0;
}

/* What a stale run's job left that its cgroup may not hold: its process
 * group, and the processes outside it that the guard was told of ("PID:START
 * ..."). How many of those were ended. */
static int end_left_processes(const struct stale_run *r)
{
	char entry[48];
	snprintf(entry, sizeof(entry), "LEAKPROOF_RUN=%lld", (long long)r->run_id);
	int n = end_recorded(r->job_pid, r->job_start, entry);
	for (const char *p = r->also; p && *p;) {
		char *end;
		long long pid = strtoll(p, &end, 10);
		if (end == p || *end != ':')
			break;
		p = end + 1;
		unsigned long long start = strtoull(p, &end, 10);
		if (end == p)
			break;
		n += end_recorded(pid, start, entry);
		p = end + strspn(end, " ");
	}
	return n;
}

void supervise_end_interrupted(struct store *st)
{
	const struct stale_run *stale;
	size_t n = store_stale_runs(st, &stale);
	for (size_t i = 0; i < n; i++) {
		const struct stale_run *r = &stale[i];
		int procs = end_left_processes(r);
		int left = 0;   /* its cgroups that could not be judged or removed yet */
		int killed = cgroup_reap_left((pid_t)r->supervisor_pid, r->supervisor_start, r->cgroup, &left);
		if (killed > 0)
			warning("ended %d process%s left running by interrupted run %lld (its supervisor, pid %lld, "
			        "was killed with its guard) and removed its cgroup", killed, killed == 1 ? "" : "es",
			        (long long)r->run_id, (long long)r->supervisor_pid);
		else if (procs > 0)
			warning("ended the job left running by interrupted run %lld (%d process%s and the groups they "
			        "lead; its supervisor, pid %lld, was killed with its guard)", (long long)r->run_id, procs,
			        procs == 1 ? "" : "es",
			        (long long)r->supervisor_pid);
		/* the recorded processes are ended (or were gone); what is left
		 * is a cgroup, and the next writer tries again */
		if (left == 0)
			store_stale_run_cleaned(st, r->run_id);
	}
}

/* Where the job will run: its own cgroup (or why not), NVML, and what
 * each means for the measure asked for. */
static void find_resources(struct sv *sv)
{
	const struct supervise_opts *o = sv->o;
	supervise_end_interrupted(sv->st);
	if (sv->attached) {
		sv->have_cg = o->use_cgroup ? sv_attach_find_cgroup(sv) : false;
		if (!o->use_cgroup)
			snprintf(sv->no_cg_why, sizeof(sv->no_cg_why), "--no-cgroup");
	} else if (o->use_cgroup) {
		if (cgroup_create_job(&sv->cg, sv->no_cg_why, sizeof(sv->no_cg_why)) == 0)
			sv->have_cg = true;
	} else {
		snprintf(sv->no_cg_why, sizeof(sv->no_cg_why), "--no-cgroup");
	}
	const char *nvml_why = NULL;
	sv->nvml = nvml_open(&nvml_why);
	if (o->measure == MEASURE_GPU && !sv->nvml)
		warning("--measure gpu: GPU sampling is off: %s", nvml_why ? nvml_why : "NVML not available");
	if (o->measure == MEASURE_CGROUP && !(sv->have_cg && sv->cg.has_memory))
		warning("--measure cgroup: the job has no memory cgroup of its own (%s)",
		        sv->no_cg_why[0] ? sv->no_cg_why : "no memory controller");
}

/* The run in the store, with what it runs, where (host, allocation, rank),
 * and under which limit.
 * 0, or -1 after a message. */
static int record_run_begin(struct sv *sv)
{
	const struct supervise_opts *o = sv->o;
	const char *limit_source;
	uint64_t limit = sv_projection_limit(o, &limit_source);
	sv->near_limit_bytes = (double)limit * NEAR_LIMIT_FRACTION;
	struct strbuf cmd = STRBUF_INIT;
	char cwd[PATH_MAX], host[256] = "";
	if (sv->attached)
		sv_attach_describe(sv, &cmd, cwd, sizeof(cwd));
	else
		jw_string_array(&cmd, o->argv);
	if (!sv->attached && !getcwd(cwd, sizeof(cwd)))
		strcpy(cwd, "?");
	gethostname(host, sizeof(host) - 1);
	struct placement place;  /* its SLURM allocation, its rank in a job of several */
	placement_here(&place);
	if (o->attach_slurm)
		sv_attach_slurm_placement(sv, &place);
	struct proc_stat self;   /* who supervises: a later leakproof tells a dead one */
	bool know_self = read_proc_stat(NULL, getpid(), &self) == 0;
	uint64_t pidns = 0;      /* where that pid means us */
	char boot_id[64] = "";
	if (proc_self_pidns(&pidns) < 0)
		pidns = 0;
	if (read_boot_id(boot_id, sizeof(boot_id)) < 0)
		boot_id[0] = '\0';
	struct run_begin rb = {
		.supervisor_pid = know_self ? (int)getpid() : 0,
		.supervisor_start = know_self ? self.starttime_ticks : 0,
		.supervisor_pidns = pidns,
		.boot_id = boot_id[0] ? boot_id : NULL,
		.started_at = wall_seconds(),
		.command_json = strbuf_str(&cmd),
		.cwd = cwd,
		.hostname = host,
		.measure = o->measure,
		.interval_ns = o->interval_ns,
		.limit_bytes = limit,
		.limit_source = limit_source,
		.mem_total_bytes = sv_machine_memory(),
		.cgroup_mode = sv->have_cg ? (sv->cg.version == 2 ? "v2" : "v1") : "none",
		.step_regex = o->step_regex,
		.placement = placement_known(&place) || place.alloc_mem_bytes ? &place : NULL,
	};
	sv->run_id = store_run_begin(sv->st, &rb);
	strbuf_release(&cmd);
	if (sv->run_id < 0)
		return -1;
	if (o->trial[0] && store_run_set_trial(sv->st, sv->run_id, o->trial[0], o->trial[1], o->trial[2]) < 0)
		return -1;
	if (!sv->have_cg) {
		char d[300];
		snprintf(d, sizeof(d), "job not in a cgroup of its own: %s", sv->no_cg_why);
		store_add_event(sv->st, sv->run_id, 0, "warning", d);
	}
	return 0;
}

/* The sampler of the job's tree (core/sampler.c), or NULL after a message. */
static struct sampler *make_sampler(const struct sv *sv)
{
	const struct supervise_opts *o = sv->o;
	struct sampler_config sc;
	sampler_config_init(&sc);
	sc.root_pid = sv->attached ? o->attach_pid : getpid();
	sc.exclude_root = !sv->attached;
	sc.cgroup_dir = sv->have_cg ? sv->cg.dir : NULL;
	sc.cgroup_version = sv->cg.version;
	if (o->attach_slurm) {   /* the job's cgroup and those below: its steps, their tasks */
		sc.cgroup_tree = true;
		sc.skip_comm = SLURM_STEPD_COMM;
	}
	sc.nvml = sv->nvml;
	/* NVML is slow (a query can take a millisecond): twice a second unless
	 * GPU memory is what is judged or enforced, then at the sampling
	 * interval, but not more than 100 times a second */
	if (o->measure == MEASURE_GPU || o->max_gpu_bytes)
		sc.gpu_interval_ns = o->interval_ns > 10000000 ? o->interval_ns : 10000000;
	/* a budget is enforced on the samples: no process may rest between them */
	sc.every_tick = o->max_mem_bytes || o->soft_limit_bytes;
	return sampler_new(&sc);
}

/*
 * Everything before the job starts: its cgroup, the run in the store, the
 * budgets, tracing, our own limits, signals, the timer, the sampler.
 * 0, or -1 after a message.
 */
static int prepare(struct sv *sv, sigset_t *oldmask)
{
	ensure_std_fds();   /* again, for a caller that did not */
	/* Signals blocked first: a thread a library starts (NVML's does) keeps
	 * the mask it was born with, and one that does not block SIGCHLD
	 * takes it from the signalfd. */
	if (setup_signals(sv, oldmask) < 0)
		return -1;
	find_resources(sv);
	/* before we become a subreaper: the guard must be no descendant of
	 * ours. An attached job has neither: it is not ours to end. */
	if (!sv->attached && sv_guard_start(sv) < 0)
		warning("cannot start the job's guard: if leakproof is killed, the job may outlive it");
	if (record_run_begin(sv) < 0)
		return -1;
	sv_announce_budgets(sv);
	if (sv_trace_prepare(sv) < 0)
		return -1;
	store_flush(sv->st);

	/* The sampler keeps a file open per process of the tree: a job with
	 * hundreds of workers must not run leakproof out of descriptors. */
	if (getrlimit(RLIMIT_NOFILE, &sv->nofile) == 0 && sv->nofile.rlim_cur < sv->nofile.rlim_max) {
		struct rlimit more = sv->nofile;
		more.rlim_cur = more.rlim_max > 65536 ? 65536 : more.rlim_max;
		sv->raised_nofile = more.rlim_cur > sv->nofile.rlim_cur && setrlimit(RLIMIT_NOFILE, &more) == 0;
	}
	if (!sv->attached && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		warning("cannot become a child subreaper: orphaned workers may escape");
	if (setup_timer(sv) < 0)
		return -1;
	sv->sampler = make_sampler(sv);
	return sv->sampler ? 0 : -1;
}

/* The job could not start (rc 126, 127 or 125): the run ends there. */
static void record_failed_start(struct sv *sv, int rc)
{
	struct run_end re = { .ended_at = wall_seconds(), .exit_code = rc, .status = RUN_FAILED_TO_START,
	                      .verdict = "inconclusive" };
	store_run_end(sv->st, sv->run_id, &re);
}

/*
 * Start the job and supervise it until it ends for good: the loop until
 * each start's processes are gone, then the restart policy. Returns 0, or
 * the exit status of a first start that failed (the run is then recorded
 * as failed to start).
 */
static int run_segments(struct sv *sv, sigset_t *oldmask)
{
	sv->t0_ns = mono_ns();
	sv->last_flush_ns = sv->t0_ns;
	sv->last_proc_ns = sv->t0_ns - PROC_SAMPLE_EVERY_NS;   /* per-process rows from the first sample */
	if (sv->attached) {   /* one segment: watched until it ends or leakproof detaches */
		if (sv_attach_begin(sv) < 0) {
			record_failed_start(sv, LP_EXIT_FAILURE);
			return LP_EXIT_FAILURE;
		}
		loop(sv);
		sv_status_clear(sv);
		sv_store_pending_steps(sv);
		sv_attach_end_segment(sv);
		return 0;
	}
	int rc = begin_segment(sv, oldmask);
	if (rc) {
		record_failed_start(sv, rc);
		return rc;
	}
	for (;;) {
		loop(sv);
		sv_guard_tell(sv, 0);   /* no process group of the job left */
		sv_status_clear(sv);
		sv_term_leave(sv);
		sv_term_close_pty(sv);
		sv_store_pending_steps(sv);   /* before the end records the last memory */
		if (!sv_end_segment(sv))
			return 0;
		if (sv_wait_before_restart(sv) < 0)
			return 0;
		sv->restarts++;
		rc = begin_segment(sv, oldmask);
		if (rc) {
			sv->exit_code = rc;
			sv->exit_signal = 0;
			return 0;
		}
	}
}

/* The job is over: say what was lost, finish the trace, and record the
 * end of the run (unjudged: the caller judges it, see supervise.h). */
static void finish(struct sv *sv, struct supervise_result *out)
{
	/* Whatever is still unreported in the pipes is lost only if something
	 * we could not kill holds them open; say so. */
	if (sv->outfd >= 0 || sv->errfd >= 0 || sv->chanfd >= 0 || sv->tracefd >= 0)
		warning("a process outside leakproof's reach kept the job's output open");
	if (sv->ignored_channel_steps)
		warning("ignored %lld step messages from the client because --step-regex is set",
		        (long long)sv->ignored_channel_steps);
	if (sv->o->census_hook && sv->o->census_ns > 0 && !sv->census_lines) {
		/* python -I, -E or -S ignore PYTHONPATH or sitecustomize */
		const char *d = sv->census_hooks
		                ? "--census: no census ran (the job ended before its first census)"
		                : "--census: no census ran (no Python process loaded its startup hook: "
		                  "not a Python job, or python -I, -E or -S)";
		warning("%s", d);
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "census-none", d);
	}

	struct run_end re = {
		.ended_at = wall_seconds(),
		.exit_code = sv->exit_signal || sv->attached ? -1 : sv->exit_code,
		.exit_signal = sv->attached ? (sv->budget_killed ? SIGKILL : 0) : sv->exit_signal,
		.status = sv->attached ? sv_attach_status(sv) : RUN_DONE,
		.step_source = sv->step_source,
		.steps = sv->steps,
		.bad_lines = sv->bad_lines,
		.long_lines = sv->long_lines,
		.peak_bytes = sv->peak > 0 ? (uint64_t)sv->peak : 0,
	};
	store_flush(sv->st);
	sv_trace_finish(sv);
	store_run_end(sv->st, sv->run_id, &re);
	store_flush(sv->st);
	out->end = re;
	out->outcome = SUPERVISE_ENDED;
	out->exit_status = sv->attached ? 0 : sv->exit_signal ? 128 + sv->exit_signal : sv->exit_code;
}

/* What is left: the job's cgroup (and anything still in it), the sampler,
 * tracing, NVML, our descriptors. The store stays open: it is the caller's. */
static void release(struct sv *sv)
{
	if (sv->have_cg && !sv->attached) {   /* an attached job's cgroup is not ours */
		cgroup_signal_all(&sv->cg, SIGKILL, 0);
		sv_reap(sv);
		cgroup_remove(&sv->cg);
	}
	sv_guard_tell(sv, -1);   /* the job is ended and its cgroup gone */
	sv_term_leave(sv);
	sv_term_close_pty(sv);
	sampler_free(sv->sampler);
	free(sv->pending);
	sv_trace_release(sv);
	sv_attach_release(sv);
	nvml_close(sv->nvml);
	int fds[] = { sv->sigfd, sv->timerfd, sv->outfd, sv->errfd, sv->chanfd, sv->tracefd,
	              sv->tee_pipe[0][0], sv->tee_pipe[0][1], sv->tee_pipe[1][0], sv->tee_pipe[1][1] };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

void supervise_std_fds(void)
{
	ensure_std_fds();
}

int supervise(struct store *st, const struct supervise_opts *o, struct supervise_result *out)
{
	struct sv sv;
	sigset_t oldmask;

	memset(out, 0, sizeof(*out));
	out->outcome = SUPERVISE_FAILED;
	out->exit_status = LP_EXIT_FAILURE;
	sv_init(&sv, st, o);
	if (prepare(&sv, &oldmask) == 0) {
		int rc = run_segments(&sv, &oldmask);
		if (rc) {
			out->outcome = SUPERVISE_NOT_STARTED;
			out->exit_status = rc;
		} else {
			finish(&sv, out);
		}
	}
	out->run_id = sv.run_id > 0 ? sv.run_id : 0;
	release(&sv);
	return out->exit_status;
}
