/*
 * test_spawn.c — platform/spawn on real children (/bin/sh and friends):
 * exit statuses, "not found" against "cannot execute", the environment
 * overlay, kept descriptors, stdio choices, a working directory, capture
 * with its cap and its time limit (a child that ignores SIGTERM, and its
 * group), the death signal, the signalfd helper, and a child on a pty.
 *
 * Times are generous (seconds where milliseconds suffice) so that a busy
 * machine does not make the tests flaky.
 */
#include "platform/spawn.h"
#include "util/util.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/lp-spawn-XXXXXX";

/* Run `sh -c script` captured (5 s limit, 1 MiB cap, 4 KiB of stderr). */
static int sh_capture(const char *script, const char *const *env, struct spawn_capture *cap)
{
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct spawn sp = { .argv = argv, .env = env, .in.how = SPAWN_NULL };
	cap->timeout_ms = 5000;
	cap->out_cap_bytes = 1 << 20;
	cap->err_tail_bytes = 4096;
	return spawn_capture(&sp, cap);
}

static int wait_exit(pid_t pid)
{
	int status = -1;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_exit_status(void)
{
	const char *argv[] = { "/bin/sh", "-c", "exit 7", NULL };
	struct spawn sp = { .argv = argv };
	CHECK_EQ_INT(spawn_start(&sp), 0);
	CHECK(sp.pid > 0);
	CHECK_EQ_INT(wait_exit(sp.pid), 7);

	/* found on $PATH only with path_lookup */
	const char *argv2[] = { "sh", "-c", "exit 3", NULL };
	struct spawn sp2 = { .argv = argv2, .path_lookup = true };
	CHECK_EQ_INT(spawn_start(&sp2), 0);
	CHECK_EQ_INT(wait_exit(sp2.pid), 3);
	struct spawn sp3 = { .argv = argv2 };
	CHECK_EQ_INT(spawn_start(&sp3), SPAWN_NOT_FOUND);
}

static void test_not_found_vs_cannot_exec(void)
{
	const char *argv[] = { "/nonexistent/prog", NULL };
	struct spawn sp = { .argv = argv, .path_lookup = true, .out.how = SPAWN_PIPE };
	errno = 0;
	CHECK_EQ_INT(spawn_start(&sp), SPAWN_NOT_FOUND);
	CHECK_EQ_INT(errno, ENOENT);
	CHECK_EQ_INT(sp.pid, -1);
	CHECK_STR(sp.why, "exec");
	CHECK_EQ_INT(waitpid(-1, NULL, WNOHANG), -1);   /* reaped already */

	const char *argv2[] = { "lp-no-such-command-here", NULL };
	struct spawn sp2 = { .argv = argv2, .path_lookup = true };
	CHECK_EQ_INT(spawn_start(&sp2), SPAWN_NOT_FOUND);

	char path[256];
	snprintf(path, sizeof(path), "%s/not-exec", tmpdir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0 && write(fd, "#!/bin/sh\n", 10) == 10);
	close(fd);
	const char *argv3[] = { path, NULL };
	struct spawn sp3 = { .argv = argv3 };
	errno = 0;
	CHECK_EQ_INT(spawn_start(&sp3), SPAWN_CANNOT_EXEC);
	CHECK_EQ_INT(errno, EACCES);

	CHECK_EQ_INT(spawn_exec_status(ENOENT), 127);
	CHECK_EQ_INT(spawn_exec_status(EACCES), 126);
}

static void test_env_overlay(void)
{
	setenv("LP_SPAWN_KEEP", "kept", 1);
	setenv("LP_SPAWN_GONE", "x", 1);
	setenv("LP_SPAWN_PRE_A", "a", 1);
	setenv("LP_SPAWN_PRE_B", "b", 1);
	setenv("LP_SPAWN_SET", "old", 1);
	const char *env[] = { "LP_SPAWN_GONE", "LP_SPAWN_PRE_*", "LP_SPAWN_SET=new", "LP_SPAWN_PRE_C=c",
	                      "LP_SPAWN_NEW=1", NULL };
	struct spawn_capture cap = SPAWN_CAPTURE_INIT;
	CHECK_EQ_INT(sh_capture("env | grep '^LP_SPAWN_' | sort", env, &cap), 0);
	CHECK_EQ_INT(cap.wait_status, 0);
	CHECK_STR(strbuf_str(&cap.out), "LP_SPAWN_KEEP=kept\nLP_SPAWN_NEW=1\nLP_SPAWN_PRE_C=c\nLP_SPAWN_SET=new\n");
	/* one entry per name, the set ones last in overlay order */
	CHECK_EQ_INT(sh_capture("env | grep -c '^LP_SPAWN_SET='", env, &cap), 0);
	CHECK_STR(strbuf_str(&cap.out), "1\n");
	/* ours is untouched */
	CHECK_STR(getenv("LP_SPAWN_SET"), "old");
	CHECK_STR(getenv("LP_SPAWN_GONE"), "x");
	/* no overlay: ours as it is */
	CHECK_EQ_INT(sh_capture("echo $LP_SPAWN_GONE", NULL, &cap), 0);
	CHECK_STR(strbuf_str(&cap.out), "x\n");
	strbuf_release(&cap.out);
	strbuf_release(&cap.err);
	unsetenv("LP_SPAWN_KEEP");
	unsetenv("LP_SPAWN_GONE");
	unsetenv("LP_SPAWN_PRE_A");
	unsetenv("LP_SPAWN_PRE_B");
	unsetenv("LP_SPAWN_SET");
}

static void test_kept_fd_and_stdio(void)
{
	int p[2], q[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0 && pipe2(q, O_CLOEXEC) == 0);
	char script[200];
	/* p[1] kept, q[1] not: writing to it fails in the child */
	snprintf(script, sizeof(script), "echo kept >&%d; (echo lost >&%d) 2>/dev/null; echo out; echo err >&2; pwd",
	         p[1], q[1]);
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	int keep[] = { p[1] };
	struct spawn sp = { .argv = argv, .keep_fds = keep, .nkeep = 1, .out.how = SPAWN_PIPE,
	                    .err.how = SPAWN_NULL, .in.how = SPAWN_NULL, .dir = tmpdir };
	CHECK_EQ_INT(spawn_start(&sp), 0);
	close(p[1]);
	close(q[1]);
	CHECK(sp.out.fd > 2);
	char buf[512];
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	CHECK_STR(buf, "kept\n");
	CHECK_EQ_INT(read(q[0], buf, sizeof(buf)), 0);
	CHECK_EQ_INT(wait_exit(sp.pid), 0);
	n = read(sp.out.fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	char want[256];
	snprintf(want, sizeof(want), "out\n%s\n", tmpdir);
	CHECK_STR(buf, want);
	close(sp.out.fd);
	close(p[0]);
	close(q[0]);

	/* a given descriptor for stdout and stderr: one log file */
	char path[256];
	snprintf(path, sizeof(path), "%s/log", tmpdir);
	int log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	const char *argv2[] = { "/bin/sh", "-c", "echo a; echo b >&2", NULL };
	struct spawn sp2 = { .argv = argv2, .out = { SPAWN_FD, log }, .err = { SPAWN_FD, log } };
	CHECK_EQ_INT(spawn_start(&sp2), 0);
	CHECK_EQ_INT(wait_exit(sp2.pid), 0);
	CHECK(fcntl(log, F_GETFD) >= 0);   /* still the caller's */
	close(log);
	char got[64];
	CHECK_EQ_INT(read_file_buf(path, got, sizeof(got)), 4);
	CHECK_STR(got, "a\nb\n");

	/* a directory that is not there: -1, "chdir" */
	struct spawn sp3 = { .argv = argv2, .dir = "/nonexistent/dir" };
	CHECK_EQ_INT(spawn_start(&sp3), -1);
	CHECK_STR(sp3.why, "chdir");
	CHECK_EQ_INT(errno, ENOENT);
}

/* Capture argv (path lookup); the caller releases cap's buffers. */
static int capture_argv(const char *const *argv, bool new_group, const sigset_t *mask, struct spawn_capture *cap)
{
	struct spawn sp = { .argv = argv, .path_lookup = true, .new_group = new_group, .sigmask = mask };
	cap->timeout_ms = 5000;
	cap->out_cap_bytes = 4096;
	cap->err_tail_bytes = 4096;
	int rc = spawn_capture(&sp, cap);
	return rc ? -1 : sp.pid;
}

static void test_group_and_mask(void)
{
	/* field 5 of /proc/self/stat: the process group */
	const char *argv[] = { "cut", "-d", " ", "-f5", "/proc/self/stat", NULL };
	struct spawn_capture cap = SPAWN_CAPTURE_INIT;
	char want[128];
	int pid = capture_argv(argv, true, NULL, &cap);
	snprintf(want, sizeof(want), "%d\n", pid);
	CHECK_STR(strbuf_str(&cap.out), want);
	capture_argv(argv, false, NULL, &cap);
	snprintf(want, sizeof(want), "%d\n", (int)getpgrp());
	CHECK_STR(strbuf_str(&cap.out), want);

	/* the mask asked for, or none, whatever ours is */
	const char *argv2[] = { "grep", "^SigBlk", "/proc/self/status", NULL };
	sigset_t mask, old;
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);   /* bit 10 */
	capture_argv(argv2, false, &mask, &cap);
	CHECK_STR(strbuf_str(&cap.out), "SigBlk:\t0000000000000200\n");
	sigprocmask(SIG_BLOCK, &mask, &old);
	capture_argv(argv2, false, NULL, &cap);
	CHECK_STR(strbuf_str(&cap.out), "SigBlk:\t0000000000000000\n");
	sigprocmask(SIG_SETMASK, &old, NULL);
	strbuf_release(&cap.out);
	strbuf_release(&cap.err);
}

static void test_capture_cap_and_timeout(void)
{
	struct spawn_capture cap = SPAWN_CAPTURE_INIT;
	CHECK_EQ_INT(sh_capture("echo out; echo err >&2; exit 4", NULL, &cap), 0);
	CHECK(WIFEXITED(cap.wait_status) && WEXITSTATUS(cap.wait_status) == 4);
	CHECK_STR(strbuf_str(&cap.out), "out\n");
	CHECK_STR(strbuf_str(&cap.err), "err\n");
	CHECK(!cap.timed_out && !cap.too_big);

	/* the cap: killed once stdout passes it; stderr keeps its tail */
	const char *argv[] = { "/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' e >&2; echo END >&2; exec yes", NULL };
	struct spawn sp = { .argv = argv };
	cap.timeout_ms = 20000;
	cap.out_cap_bytes = 100000;
	cap.err_tail_bytes = 1000;
	CHECK_EQ_INT(spawn_capture(&sp, &cap), 0);
	CHECK(cap.too_big && !cap.timed_out);
	CHECK(cap.out.len <= 100000);
	CHECK(cap.err.len >= 1000 && cap.err.len <= 2000);
	CHECK(cap.err.len >= 4 && !strcmp(cap.err.buf + cap.err.len - 4, "END\n"));

	/* the time limit: a child that ignores SIGTERM, and a grandchild in
	 * its group that holds the pipes open, are both killed */
	const char *argv2[] = { "/bin/sh", "-c", "trap '' TERM; sleep 30 & echo $!; wait", NULL };
	struct spawn sp2 = { .argv = argv2, .new_group = true };
	cap.timeout_ms = 1000;
	cap.out_cap_bytes = 4096;
	int64_t t0 = mono_ns();
	CHECK_EQ_INT(spawn_capture(&sp2, &cap), 0);
	CHECK(cap.timed_out && !cap.too_big);
	CHECK((mono_ns() - t0) / 1e9 < 10.0);
	pid_t grandchild = (pid_t)atoi(strbuf_str(&cap.out));
	CHECK(grandchild > 0);
	/* gone, or a zombie for init to reap */
	bool gone = false;
	for (int i = 0; i < 300 && !gone && grandchild > 0; i++) {
		char path[64], st[512];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)grandchild);
		ssize_t n = read_file_buf(path, st, sizeof(st));
		const char *paren = n > 0 ? strrchr(st, ')') : NULL;
		gone = n < 0 || (paren && paren[2] == 'Z');
		if (!gone)
			usleep(10000);
	}
	CHECK(gone);
	strbuf_release(&cap.out);
	strbuf_release(&cap.err);

	/* not started: as spawn_start() says */
	const char *argv3[] = { "/nonexistent/prog", NULL };
	struct spawn sp3 = { .argv = argv3 };
	CHECK_EQ_INT(spawn_capture(&sp3, &cap), SPAWN_NOT_FOUND);
}

/* The child of an intermediate process that exits: the death signal
 * reaches it (we are a subreaper meanwhile, to see how it ended). */
static void test_death_signal(void)
{
	CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
	int p[2];
	CHECK(pipe(p) == 0);
	pid_t mid = fork();
	if (mid == 0) {
		const char *argv[] = { "/bin/sleep", "30", NULL };
		struct spawn sp = { .argv = argv, .death_signal = SIGTERM };
		pid_t pid = spawn_start(&sp) == 0 ? sp.pid : -1;
		ssize_t w = write(p[1], &pid, sizeof(pid));
		_exit(w == (ssize_t)sizeof(pid) ? 0 : 1);
	}
	close(p[1]);
	pid_t grandchild = -1;
	CHECK_EQ_INT(read(p[0], &grandchild, sizeof(grandchild)), (long long)sizeof(grandchild));
	close(p[0]);
	CHECK_EQ_INT(wait_exit(mid), 0);
	CHECK(grandchild > 0);
	if (grandchild > 0) {
		int64_t t0 = mono_ns();
		CHECK_EQ_INT(wait_exit(grandchild), 128 + SIGTERM);
		CHECK((mono_ns() - t0) / 1e9 < 10.0);
	}
	prctl(PR_SET_CHILD_SUBREAPER, 0);
}

static void test_signalfd(void)
{
	static const int sigs[] = { SIGUSR2, 0 };
	sigset_t old;
	int fd = spawn_signalfd(sigs, &old);
	CHECK(fd >= 0);
	CHECK(!sigismember(&old, SIGUSR2));
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
	kill(getpid(), SIGUSR2);
	struct signalfd_siginfo si;
	CHECK_EQ_INT(read(fd, &si, sizeof(si)), (long long)sizeof(si));
	CHECK_EQ_INT(si.ssi_signo, SIGUSR2);
	CHECK_EQ_INT(read(fd, &si, sizeof(si)), -1);
	close(fd);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* A child in a session of its own on a pty: its descriptors are the
 * terminal, of the size given, and the pty is its controlling terminal
 * (tty_nr, field 7 of /proc/self/stat, and its session, field 6). */
static void test_pty(void)
{
	struct winsize ws = { .ws_row = 33, .ws_col = 77 };
	int master = -1, slave = -1;
	CHECK_EQ_INT(spawn_openpty(&master, &slave, NULL, &ws), 0);
	if (master < 0)
		return;
	CHECK(master > 2 && slave > 2);
	CHECK(isatty(slave));
	const char *argv[] = { "/bin/sh", "-c",
	                       "[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo TTY; stty size; "
	                       "echo SID $(cut -d' ' -f6 /proc/self/stat) PID $$; "
	                       "[ \"$(cut -d' ' -f7 /proc/self/stat)\" != 0 ] && echo CTTY", NULL };
	struct spawn sp = { .argv = argv, .new_session = true, .ctty = slave,
	                    .in = { SPAWN_FD, slave }, .out = { SPAWN_FD, slave }, .err = { SPAWN_FD, slave } };
	CHECK_EQ_INT(spawn_start(&sp), 0);
	close(slave);
	char out[4096];
	size_t len = 0;
	for (int waited = 0; waited < 500 && len < sizeof(out) - 1;) {
		ssize_t n = read(master, out + len, sizeof(out) - 1 - len);
		if (n > 0) {
			len += (size_t)n;
		} else if (n < 0 && errno == EAGAIN) {
			struct timespec ts = { 0, 10 * 1000000 };
			nanosleep(&ts, NULL);
			waited++;
		} else {
			break;   /* EIO: the child's end is closed */
		}
	}
	out[len] = '\0';
	close(master);
	CHECK_EQ_INT(wait_exit(sp.pid), 0);
	CHECK(strstr(out, "TTY\r\n") != NULL);
	CHECK(strstr(out, "33 77\r\n") != NULL);
	char want[64];
	snprintf(want, sizeof(want), "SID %d PID %d\r\n", (int)sp.pid, (int)sp.pid);
	CHECK(strstr(out, want) != NULL);
	CHECK(strstr(out, "CTTY\r\n") != NULL);
	if (!strstr(out, want) || !strstr(out, "TTY\r\n"))
		fprintf(stderr, "# the child said: %s\n", out);
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	static const struct tap_test tests[] = {
		TEST(test_exit_status),
		TEST(test_not_found_vs_cannot_exec),
		TEST(test_env_overlay),
		TEST(test_kept_fd_and_stdio),
		TEST(test_group_and_mask),
		TEST(test_capture_cap_and_timeout),
		TEST(test_death_signal),
		TEST(test_signalfd),
		TEST(test_pty),
	};
	int rc = tap_run("spawn", tests, (int)(sizeof(tests) / sizeof(tests[0])));
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}
