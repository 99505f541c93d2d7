/*
 * console.c — the supervisor and the terminal: the job's own output passed
 * through (write_all), the live status line on stderr (step, steps per
 * second, memory under the measure, its growth per step over the last
 * LIVE_RING steps, processes), leakproof's own lines, drawn clear of the
 * status line, and the job's pseudo-terminal. Part of the supervisor
 * (supervise-int.h).
 *
 * When leakproof's stdout or stderr is a terminal the job runs on a
 * pseudo-terminal of its own (docs/internals/terminal.md): its standard
 * descriptors that are terminals for leakproof are the pty's slave, it is
 * the pty's session and foreground process group, and leakproof copies the
 * pty's output to its terminal and, while it is in the foreground with a
 * terminal on stdin, what is typed to the pty (the terminal in raw mode
 * meanwhile, restored on every way out). The pty's line discipline turns
 * Ctrl-C, Ctrl-\ and Ctrl-Z into signals to the job's process group as a
 * terminal would; when the job stops, leakproof stops too, and resumes it
 * when it is resumed itself (fg, bg).
 *
 * The status line never erases a line the job left open (a prompt, a
 * progress bar): it is then drawn on the line below, the cursor saved and
 * restored around it.
 *
 * Memory is bytes; times are CLOCK_MONOTONIC nanoseconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/analyze.h"
#include "core/supervise-int.h"
#include "platform/proc.h"
#include "platform/spawn.h"
#include "store/store.h"

/* All of p to fd, waiting out a full pipe; -1 when fd is gone. */
int sv_write_all(int fd, const char *p, size_t n)
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

/* Erase the status line, before anything else is written: the line it is
 * on, or the one below the job's open line. */
void sv_status_clear(struct sv *sv)
{
	if (sv->status_drawn) {
		if (sv->line_open)
			sv_write_all(STDERR_FILENO, "\0337\033D\r\033[K\0338", 10);
		else
			sv_write_all(STDERR_FILENO, "\r\033[K", 4);
		sv->status_drawn = false;
	}
}

/* The job's output to our fd: clear of the status line, noting whether it
 * left a line open on the terminal. */
void sv_pass_output(struct sv *sv, int fd, const char *p, size_t n, bool *broken)
{
	if (*broken || !n)
		return;
	sv_status_clear(sv);
	if (sv_write_all(fd, p, n) < 0)
		*broken = true;   /* the caller keeps draining so the job never blocks */
	else if (sv->tty && (fd == STDERR_FILENO || isatty(fd)))
		sv->line_open = p[n - 1] != '\n';
}

/* Redraw the status line, at most every STATUS_EVERY_NS, on a terminal. */
void sv_status_draw(struct sv *sv, int64_t now_ns)
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
	if (sv->line_open) {
		/* below the open line: make room (a line feed and back, which
		 * scrolls at the bottom), keep the cursor, draw, come back */
		char buf[300];
		int k = snprintf(buf, sizeof(buf), "\033D\033M\0337\033D\r\033[K%.*s\0338", n, line);
		if (k > 0)
			sv_write_all(STDERR_FILENO, buf, (size_t)k < sizeof(buf) ? (size_t)k : sizeof(buf) - 1);
	} else {
		sv_write_all(STDERR_FILENO, "\r\033[K", 4);
		sv_write_all(STDERR_FILENO, line, (size_t)n);
	}
	sv->status_drawn = true;
}

/* A line from leakproof on stderr, clear of the status line. --quiet
 * silences the summary, not these: they say what leakproof did to the job. */
void sv_say(struct sv *sv, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	sv_status_clear(sv);
	fprintf(stderr, "%sleakproof: %s\n", sv->line_open ? "\n" : "", line);
	sv->line_open = false;
}

/* ---- the job's pseudo-terminal ----------------------------------------- */

/* Is fd our terminal, and are we its foreground process group? */
static bool in_foreground(int fd)
{
	pid_t fg = tcgetpgrp(fd);
	return fg > 0 && fg == getpgrp();
}

static void restore_at_exit(void);
static struct sv *raw_owner;   /* whose terminal is raw, for restore_at_exit */

/* Decide: a pseudo-terminal for the job when our stdout or stderr is a
 * terminal (and --no-pty is not given); else, when our stdin is one, the
 * job reads it itself, its process group in the terminal's foreground
 * while we are there (as a shell runs a job: sv_term_enter). */
void sv_term_init(struct sv *sv)
{
	sv->pty_in = sv->infd = -1;
	if (!sv->o->no_pty && isatty(STDOUT_FILENO))
		sv->term_fd = STDOUT_FILENO;
	else if (!sv->o->no_pty && isatty(STDERR_FILENO))
		sv->term_fd = STDERR_FILENO;
	else {
		sv->fg_job = isatty(STDIN_FILENO);
		return;
	}
	sv->pty = true;
	static bool registered;
	if (!registered)
		registered = atexit(restore_at_exit) == 0;
}

/* A pty for the next start of the job, with our terminal's modes and size:
 * 0, or -1 with errno. */
int sv_term_open_pty(struct sv *sv, int *master, int *slave)
{
	struct termios t, *tp = NULL;
	struct winsize ws, *wp = NULL;
	int from = isatty(STDIN_FILENO) ? STDIN_FILENO : sv->term_fd;
	if (sv->raw)
		t = sv->saved_term, tp = &t;
	else if (tcgetattr(from, &t) == 0)
		tp = &t;
	/* our terminal processes what we copy to it (its modes are kept, raw
	 * or not): the pty must not as well, or each "\n" of the job reaches
	 * it as "\r\r\n" */
	if (tp)
		t.c_oflag &= ~(tcflag_t)OPOST;
	if (ioctl(sv->term_fd, TIOCGWINSZ, &ws) == 0)
		wp = &ws;
	if (spawn_openpty(master, slave, tp, wp) < 0)
		return -1;
	sv->pty_in = fcntl(*master, F_DUPFD_CLOEXEC, 3);
	return 0;
}

void sv_term_close_pty(struct sv *sv)
{
	if (sv->pty_in >= 0)
		close(sv->pty_in);
	sv->pty_in = -1;
}

/* Raw mode on our terminal, to pass what is typed to the job's pty: when
 * stdin is a terminal and we are in its foreground (not after `bg`, not
 * started with `&`). Output processing stays on, for our own lines.
 * Without a pty, the terminal's foreground to the job, on the same
 * condition. */
void sv_term_enter(struct sv *sv)
{
	if (sv->fg_job) {
		if (sv->state == SV_RUNNING && !sv->child_exited && sv->child > 0 && in_foreground(STDIN_FILENO))
			spawn_give_terminal(sv->child);
		return;
	}
	if (!sv->pty || sv->raw || sv->pty_in < 0 || !isatty(STDIN_FILENO) || !in_foreground(STDIN_FILENO))
		return;
	if (tcgetattr(STDIN_FILENO, &sv->saved_term) < 0)
		return;
	struct termios raw = sv->saved_term;
	cfmakeraw(&raw);
	raw.c_oflag = sv->saved_term.c_oflag;
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) < 0)
		return;
	sv->raw = true;
	raw_owner = sv;
	sv_guard_term(sv, &sv->saved_term);
	sv->infd = STDIN_FILENO;
	sv_term_winch(sv);
}

/* Our terminal as it was; stdin no longer read. Without a pty, the
 * terminal's foreground back from the job, if it has it. */
void sv_term_leave(struct sv *sv)
{
	sv->infd = -1;
	if (sv->fg_job && sv->child > 0 && tcgetpgrp(STDIN_FILENO) == sv->child)
		spawn_give_terminal(getpgrp());
	if (!sv->raw)
		return;
	tcsetattr(STDIN_FILENO, TCSADRAIN, &sv->saved_term);
	sv->raw = false;
	raw_owner = NULL;
	sv_guard_term(sv, NULL);
}

static void restore_at_exit(void)
{
	if (raw_owner)
		sv_term_leave(raw_owner);
}

/* Our terminal's size to the job's pty (the kernel tells the job). */
void sv_term_winch(struct sv *sv)
{
	struct winsize ws;
	if (sv->pty_in >= 0 && ioctl(sv->term_fd, TIOCGWINSZ, &ws) == 0)
		ioctl(sv->pty_in, TIOCSWINSZ, &ws);
}

/* How pid takes sig: 'i' ignored, 'c' caught, 'd' the default action
 * (also when /proc cannot tell). */
static char disposition(pid_t pid, int sig)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 'd';
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 'd';
	buf[n] = '\0';
	static const char *const field[2] = { "\nSigIgn:", "\nSigCgt:" };
	for (int i = 0; i < 2; i++) {
		const char *p = strstr(buf, field[i]);
		if (p && (strtoull(p + strlen(field[i]), NULL, 16) >> (sig - 1)) & 1)
			return i ? 'c' : 'i';
	}
	return 'd';
}

/* Bytes typed, to the job's pty (non-blocking): what it cannot take, its
 * input queue full, is dropped, as a terminal does. */
static void to_pty(struct sv *sv, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(sv->pty_in, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/*
 * What was typed, to the job's pty. Its line discipline makes Ctrl-C and
 * Ctrl-\ signals to the job's process group, as a terminal does; leakproof
 * notes them: the user stopped the job, so it is not restarted. Ctrl-Z
 * needs help: the job's process group is alone in its session, so the
 * kernel drops a terminal's SIGTSTP that would stop it (an orphaned
 * group); the pty still delivers it to a job that catches it, and a job
 * that leaves SIGTSTP to its default action gets SIGSTOP from leakproof
 * (the character does not go to the pty then: its echo would join the
 * job's next line of output).
 */
void sv_term_input(struct sv *sv)
{
	char buf[4096];
	ssize_t n = read(sv->infd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {   /* our terminal hung up */
		sv->infd = -1;
		return;
	}
	if (sv->pty_in < 0)
		return;
	struct termios t;
	if (tcgetattr(sv->pty_in, &t) < 0 || !(t.c_lflag & ISIG)) {
		to_pty(sv, buf, (size_t)n);
		return;
	}
	const char *what = NULL;
	if (t.c_cc[VINTR] && memchr(buf, t.c_cc[VINTR], (size_t)n))
		what = "SIGINT from the terminal (Ctrl-C)";
	else if (t.c_cc[VQUIT] && memchr(buf, t.c_cc[VQUIT], (size_t)n))
		what = "SIGQUIT from the terminal (Ctrl-\\)";
	if (what && sv->state == SV_RUNNING) {
		sv->interrupted = true;
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "signal", what);
	}
	const char *susp = t.c_cc[VSUSP] ? memchr(buf, t.c_cc[VSUSP], (size_t)n) : NULL;
	if (!susp) {
		to_pty(sv, buf, (size_t)n);
		return;
	}
	size_t upto = (size_t)(susp - buf);
	to_pty(sv, buf, upto);
	upto++;
	if (sv->state == SV_RUNNING && !sv->child_exited && disposition(sv->child, SIGTSTP) == 'd') {
		/* the echo a terminal would make, on ours: through the pty it
		 * would join the job's next line, which the step regex reads */
		bool dropped = false;
		if ((t.c_lflag & ECHO) && (t.c_lflag & ECHOCTL))
			sv_pass_output(sv, sv->term_fd, "^Z", 2, &dropped);
		kill(-sv->child, SIGSTOP);
		sv->ctrl_z = true;
	} else {
		to_pty(sv, susp, 1);   /* SIGTSTP to a job that catches it; ignored, nothing */
	}
	/* the rest is for after the stop: the pty keeps it */
	to_pty(sv, buf + upto, (size_t)n - upto);
}

/* SIGTSTP to leakproof, for the job: SIGTSTP to its process group, where
 * a job that catches it runs its handler, or SIGSTOP when its main
 * process leaves SIGTSTP to the default action, which the kernel would
 * drop in its orphaned group (see sv_term_input). */
void sv_term_suspend(struct sv *sv)
{
	if (sv->state != SV_RUNNING || sv->child_exited)
		return;
	char how = disposition(sv->child, SIGTSTP);
	if (how == 'c')
		kill(-sv->child, SIGTSTP);
	else if (how == 'd') {
		kill(-sv->child, SIGSTOP);
		sv->ctrl_z = true;
	}
}

/* Is our process group orphaned, no member's parent in another group of
 * our session? (Ancestors only: the walk ends at the first outside our
 * group.) The kernel then discards SIGTSTP to us. */
static bool group_orphaned(void)
{
	pid_t pg = getpgrp(), sid = getsid(0), p = getpid();
	for (int hops = 0; hops < 64; hops++) {
		struct proc_stat st;
		if (read_proc_stat(NULL, p, &st) < 0 || st.ppid <= 0)
			return true;
		pid_t ppg = getpgid(st.ppid);
		if (ppg < 0)
			return true;
		if (ppg != pg)
			return getsid(st.ppid) != sid;
		p = st.ppid;
	}
	return true;
}

/* The job's main process stopped (Ctrl-Z on its pty, SIGSTOP): stop with
 * it, our terminal restored, so the shell sees the job stopped; resume it
 * when we are resumed. In a process group no shell watches (orphaned),
 * SIGTSTP does not stop us: the job is resumed at once. */
void sv_term_follow_stop(struct sv *sv, int64_t now_ns)
{
	int sig = sv->job_stop_sig;
	sv->job_stop_sig = 0;
	if (sv->state != SV_RUNNING)
		return;
	if (sv->fg_job && (sig == SIGTTIN || sig == SIGTTOU) &&
	    (in_foreground(STDIN_FILENO) || tcgetpgrp(STDIN_FILENO) == sv->child)) {
		/* it used the terminal before we gave it (after its start, which
		 * the guard is told of first: a guard must know whose the
		 * terminal is) */
		spawn_give_terminal(sv->child);
		sv_signal_job(sv, SIGCONT);
		return;
	}
	if (sv->fg_job && (sig == SIGTTIN || sig == SIGTTOU) && group_orphaned()) {
		/* resumed, it would only stop again: it waits for a SIGCONT */
		if (!sv->said_tty_stop) {
			sv->said_tty_stop = true;
			sv_say(sv, "the job stopped (SIG%s) to use the terminal, which no shell can give it here "
			       "(leakproof is in its background, in an orphaned process group): it stays stopped "
			       "until it gets SIGCONT", sigabbrev_np(sig));
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, now_ns), "signal",
			                sig == SIGTTIN ? "stopped by SIGTTIN" : "stopped by SIGTTOU");
		}
		return;
	}
	char d[64];
	if (sig == SIGSTOP && sv->ctrl_z)   /* ours, for a Ctrl-Z: say what the user did */
		snprintf(d, sizeof(d), "stopped by Ctrl-Z (SIGSTOP to the job)");
	else
		snprintf(d, sizeof(d), "stopped by SIG%s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
	sv->ctrl_z = false;
	store_add_event(sv->st, sv->run_id, sv_now_t(sv, now_ns), "signal", d);
	store_flush(sv->st);
	sv_status_clear(sv);
	sv_term_leave(sv);
	/* here we stay until SIGCONT (SIGTSTP is read from the signalfd
	 * otherwise, and may be waiting there: it is let through once) */
	sigset_t tstp, old;
	sigemptyset(&tstp);
	sigaddset(&tstp, SIGTSTP);
	sigprocmask(SIG_UNBLOCK, &tstp, &old);
	raise(SIGTSTP);
	sigprocmask(SIG_SETMASK, &old, NULL);
	store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "signal", "continued");
	sv_term_continued(sv);
}

/* We were resumed (fg, bg, SIGCONT): the terminal again if it is ours,
 * its size, and the job resumed. */
void sv_term_continued(struct sv *sv)
{
	sv_term_enter(sv);
	sv_term_winch(sv);
	if (sv->state == SV_RUNNING)
		sv_signal_job(sv, SIGCONT);
}
