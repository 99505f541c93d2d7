/*
 * spawn.c — starting child processes: fork, set the child up, exec, and
 * learn in the parent whether the exec happened (see spawn.h and
 * docs/internals/spawn.md).
 *
 * Everything that allocates (the environment, the pipes, /dev/null) is
 * done before fork; between fork and exec the child makes only
 * async-signal-safe calls. A failure in the child is written to a
 * close-on-exec pipe as { stage, errno } and the child exits 127; a
 * successful exec closes the pipe, so the parent reads 0 bytes.
 *
 * Times are CLOCK_MONOTONIC nanoseconds inside, milliseconds in the API.
 */
#include "platform/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Where the child failed; the parent turns it into its return value. */
enum stage { STAGE_DUP, STAGE_CHDIR, STAGE_EXEC };
static const char *const stage_name[] = { "dup2", "chdir", "exec" };

struct child_report {
	int stage, err;
};

/* ---- the environment ----------------------------------------------------- */

/* Does the overlay entry e name the variable at the start of var ("N=V")? */
static bool entry_names(const char *e, const char *var)
{
	size_t n = strcspn(e, "=");
	if (!e[n] && n > 0 && e[n - 1] == '*')
		return !strncmp(var, e, n - 1);
	return !strncmp(var, e, n) && var[n] == '=';
}

/* Ours overlaid with env (see struct spawn). The array is the caller's to
 * free(); its strings are environ's and env's, not copies. */
static char **overlay_env(const char *const *env)
{
	size_t n = 0, m = 0;
	while (environ && environ[n])
		n++;
	while (env[m])
		m++;
	char **out = xcalloc(n + m + 1, sizeof(*out));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		bool drop = false;
		for (size_t j = 0; j < m && !drop; j++)
			drop = entry_names(env[j], environ[i]);
		if (!drop)
			out[k++] = environ[i];
	}
	for (size_t j = 0; j < m; j++)
		if (strchr(env[j], '='))
			out[k++] = (char *)env[j];
	out[k] = NULL;
	return out;
}

/* ---- descriptors ------------------------------------------------------- */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Move a descriptor of ours off 0-2, so that setting up the child's
 * standard descriptors cannot overwrite it. */
static int above_std(int fd)
{
	if (fd < 0 || fd > 2)
		return fd;
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	int e = errno;
	close(fd);
	errno = e;
	return nfd;
}

/* The child's end of one standard descriptor (child_fd) and ours
 * (parent_fd, for a pipe), made before fork. */
static int prepare_stdio(struct spawn_fd *s, int target, int *child_fd, int *parent_fd, const char **why)
{
	*child_fd = *parent_fd = -1;
	switch (s->how) {
	case SPAWN_INHERIT:
		return 0;
	case SPAWN_FD:
		*child_fd = s->fd;
		return 0;
	case SPAWN_NULL:
		*child_fd = above_std(open("/dev/null", (target ? O_WRONLY : O_RDONLY) | O_CLOEXEC));
		*why = "open /dev/null";
		return *child_fd < 0 ? -1 : 0;
	case SPAWN_PIPE: {
		int p[2];
		*why = "pipe";
		if (pipe2(p, O_CLOEXEC) < 0)
			return -1;
		p[0] = above_std(p[0]);
		p[1] = above_std(p[1]);
		*child_fd = target ? p[1] : p[0];
		*parent_fd = target ? p[0] : p[1];
		if (*child_fd >= 0 && *parent_fd >= 0)
			return 0;
		int e = errno;
		close_fd(child_fd);
		close_fd(parent_fd);
		errno = e;
		return -1;
	}
	}
	return 0;
}

void spawn_give_terminal(pid_t pgrp)
{
	sigset_t ttou, old;
	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, &old);
	tcsetpgrp(STDIN_FILENO, pgrp);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* ---- the child --------------------------------------------------------- */

static _Noreturn void child_fail(int report_fd, enum stage st)
{
	struct child_report r = { st, errno };
	ssize_t w = write(report_fd, &r, sizeof(r));
	(void)w;
	_exit(SPAWN_NOT_FOUND);
}

/* After fork, in the child: only async-signal-safe calls. */
static _Noreturn void child_run(const struct spawn *sp, pid_t parent, const int *fds, char **envp, int report_fd)
{
	if (sp->new_session) {
		setsid();
		if (sp->ctty > 0)
			ioctl(sp->ctty, TIOCSCTTY, 0);
	} else if (sp->new_group) {
		setpgid(0, 0);
	}
	if (sp->child_hook)
		sp->child_hook(sp->hook_data);
	if (sp->death_signal) {
		prctl(PR_SET_PDEATHSIG, sp->death_signal);
		if (getppid() != parent)
			_exit(128 + sp->death_signal);   /* we died before prctl: too late to be told */
	}
	signal(SIGPIPE, SIG_DFL);
	if (sp->reset_signals) {
		static const int sigs[] = { SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD };
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], SIG_DFL);
	}
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, sp->sigmask ? sp->sigmask : &none, NULL);
	for (int target = 0; target < 3; target++) {
		if (fds[target] < 0)
			continue;
		if (fds[target] == target ? fcntl(target, F_SETFD, 0) < 0 : dup2(fds[target], target) < 0)
			child_fail(report_fd, STAGE_DUP);
	}
	for (size_t i = 0; i < sp->nkeep; i++)
		fcntl(sp->keep_fds[i], F_SETFD, 0);
	if (sp->dir && chdir(sp->dir) < 0)
		child_fail(report_fd, STAGE_CHDIR);
	if (sp->child_main) {
		close(report_fd);   /* started: the parent reads EOF */
		sp->child_main(sp->hook_data);
		_exit(0);
	}
	if (sp->path_lookup)
		execvpe(sp->argv[0], (char *const *)sp->argv, envp);
	else
		execve(sp->argv[0], (char *const *)sp->argv, envp);
	child_fail(report_fd, STAGE_EXEC);
}

/* ---- the parent ---------------------------------------------------------- */

static void reap(pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

int spawn_exec_status(int err)
{
	return err == ENOENT ? SPAWN_NOT_FOUND : SPAWN_CANNOT_EXEC;
}

int spawn_start(struct spawn *sp)
{
	struct spawn_fd *std[3] = { &sp->in, &sp->out, &sp->err };
	int child_fd[3] = { -1, -1, -1 }, parent_fd[3] = { -1, -1, -1 }, report[2] = { -1, -1 };
	char **envp = sp->env ? overlay_env(sp->env) : environ;
	int rc = -1, e = 0;
	pid_t parent = getpid(), pid = -1;

	sp->pid = -1;
	sp->why = NULL;
	for (int i = 0; i < 3; i++)
		if (prepare_stdio(std[i], i, &child_fd[i], &parent_fd[i], &sp->why) < 0)
			goto out;
	sp->why = "pipe";
	if (pipe2(report, O_CLOEXEC) < 0 || (report[1] = above_std(report[1])) < 0)
		goto out;
	sp->why = "fork";
	pid = fork();
	if (pid < 0)
		goto out;
	if (pid == 0)
		child_run(sp, parent, child_fd, envp, report[1]);
	if (sp->new_group && !sp->new_session)
		setpgid(pid, pid);   /* both sides, so there is no race */
	close_fd(&report[1]);
	for (int i = 0; i < 3; i++)
		if (std[i]->how != SPAWN_FD)
			close_fd(&child_fd[i]);

	struct child_report r;
	ssize_t n;
	do
		n = read(report[0], &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(r)) {
		reap(pid, NULL);
		errno = r.err;
		sp->why = r.stage >= 0 && r.stage <= STAGE_EXEC ? stage_name[r.stage] : "exec";
		rc = r.stage == STAGE_EXEC ? spawn_exec_status(r.err) : -1;
		goto out;
	}
	sp->pid = pid;
	sp->why = NULL;
	for (int i = 0; i < 3; i++)
		if (std[i]->how == SPAWN_PIPE) {
			std[i]->fd = parent_fd[i];
			parent_fd[i] = -1;
		}
	rc = 0;
out:
	e = errno;
	for (int i = 0; i < 3; i++) {
		if (std[i]->how != SPAWN_FD)
			close_fd(&child_fd[i]);
		close_fd(&parent_fd[i]);
	}
	close_fd(&report[0]);
	close_fd(&report[1]);
	if (envp != environ)
		free(envp);
	errno = e;
	return rc;
}

/* ---- run to the end, captured ------------------------------------------- */

/* Keep the last keep bytes of sb once it holds twice as many. */
static void keep_tail(struct strbuf *sb, size_t keep)
{
	if (sb->len <= 2 * keep)
		return;
	memmove(sb->buf, sb->buf + sb->len - keep, keep);
	sb->len = keep;
	sb->buf[sb->len] = '\0';
}

static void kill_child(const struct spawn *sp, int sig)
{
	kill(sp->new_group ? -sp->pid : sp->pid, sig);
}

/* Read stdout and stderr until both close, the deadline passes or stdout
 * grows past its cap. 0, or -1 with errno and sp->why. */
static int capture_output(struct spawn *sp, struct spawn_capture *cap, int64_t deadline)
{
	int *fds[2] = { &sp->out.fd, &sp->err.fd };
	char buf[65536];
	while (*fds[0] >= 0 || *fds[1] >= 0) {
		int64_t left_ms = (deadline - mono_ns()) / 1000000;
		if (left_ms <= 0) {
			cap->timed_out = true;
			return 0;
		}
		struct pollfd pfd[2] = { { *fds[0], POLLIN, 0 }, { *fds[1], POLLIN, 0 } };
		int r = poll(pfd, 2, left_ms > INT_MAX ? INT_MAX : (int)left_ms);
		if (r < 0 && errno != EINTR) {
			sp->why = "poll";
			return -1;
		}
		for (int i = 0; r > 0 && i < 2; i++) {
			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			ssize_t n = read(pfd[i].fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				close_fd(fds[i]);
				continue;
			}
			if (i == 1) {
				strbuf_add(&cap->err, buf, (size_t)n);
				keep_tail(&cap->err, cap->err_tail_bytes);
			} else if (cap->out.len + (size_t)n > cap->out_cap_bytes) {
				cap->too_big = true;
				return 0;
			} else {
				strbuf_add(&cap->out, buf, (size_t)n);
			}
		}
	}
	return 0;
}

/* Both pipes closed: reap, still under the deadline. 0, or -1 with errno
 * and sp->why. */
static int wait_end(struct spawn *sp, struct spawn_capture *cap, int64_t deadline)
{
	for (;;) {
		pid_t w = waitpid(sp->pid, &cap->wait_status, WNOHANG);
		if (w == sp->pid)
			return 0;
		if (w < 0 && errno != EINTR) {
			sp->why = "waitpid";
			return -1;
		}
		if (mono_ns() >= deadline) {
			cap->timed_out = true;
			return 0;
		}
		struct timespec ts = { 0, 10 * 1000000 };
		nanosleep(&ts, NULL);
	}
}

int spawn_capture(struct spawn *sp, struct spawn_capture *cap)
{
	strbuf_reset(&cap->out);
	strbuf_reset(&cap->err);
	cap->wait_status = 0;
	cap->timed_out = cap->too_big = false;
	sp->out = (struct spawn_fd){ SPAWN_PIPE, -1 };
	sp->err = (struct spawn_fd){ SPAWN_PIPE, -1 };
	int64_t deadline = mono_ns() + (int64_t)cap->timeout_ms * 1000000;
	int rc = spawn_start(sp);
	if (rc)
		return rc;
	rc = capture_output(sp, cap, deadline);
	if (rc == 0 && !cap->timed_out && !cap->too_big)
		rc = wait_end(sp, cap, deadline);
	if (rc < 0 || cap->timed_out || cap->too_big) {
		int e = errno;
		kill_child(sp, SIGKILL);
		reap(sp->pid, NULL);
		errno = e;
	}
	close_fd(&sp->out.fd);
	close_fd(&sp->err.fd);
	return rc;
}

/* ---- pseudo-terminals ------------------------------------------------------ */

int spawn_openpty(int *master, int *slave, const struct termios *term, const struct winsize *win)
{
	char name[128];
	*master = *slave = -1;
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -1;
	if ((m = above_std(m)) < 0)
		return -1;
	int sl = -1;
	if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, sizeof(name)) != 0 ||
	    (sl = above_std(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC))) < 0)
		goto fail;
	if ((term && tcsetattr(sl, TCSANOW, term) < 0) || (win && ioctl(sl, TIOCSWINSZ, win) < 0))
		goto fail;
	if (fcntl(m, F_SETFL, O_NONBLOCK) < 0)
		goto fail;
	*master = m;
	*slave = sl;
	return 0;
fail:;
	int e = errno;
	close(m);
	if (sl >= 0)
		close(sl);
	errno = e;
	return -1;
}

/* ---- signals as a descriptor ------------------------------------------------ */

int spawn_signalfd(const int *sigs, sigset_t *old)
{
	sigset_t mask;
	sigemptyset(&mask);
	for (const int *s = sigs; *s; s++)
		sigaddset(&mask, *s);
	if (sigprocmask(SIG_BLOCK, &mask, old) < 0)
		return -1;
	return signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
}
