/*
 * timer_loop.c — the floor for bench/sampler_cost: a supervisor that does
 * nothing but wake up. It forks COMMAND, then waits in poll(2) on a timerfd
 * ticking HZ times a second and a signalfd for SIGCHLD, reading the timer on
 * each tick and nothing more, until COMMAND exits. Whatever a real sampler
 * costs above this is the cost of sampling; this is the cost of waking.
 *
 *     timer_loop [-t TICKS_FILE] HZ -- COMMAND [ARGS...]
 *
 * Exit status: COMMAND's own (128+N when killed by signal N); 125 when the
 * loop itself fails. With -t, the number of timer expirations seen and of
 * wake-ups that read them are written to TICKS_FILE as
 * "expirations N\nwakeups N\n".
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS_PER_S 1000000000LL
#define EXIT_LOOP_FAILED 125

static int usage(void)
{
	fprintf(stderr, "usage: timer_loop [-t TICKS_FILE] HZ -- COMMAND [ARGS...]\n");
	return EXIT_LOOP_FAILED;
}

static int fail(const char *what)
{
	fprintf(stderr, "timer_loop: %s: %s\n", what, strerror(errno));
	return EXIT_LOOP_FAILED;
}

int main(int argc, char **argv)
{
	const char *ticks_path = NULL;
	int i = 1;

	if (i + 1 < argc && strcmp(argv[i], "-t") == 0) {
		ticks_path = argv[i + 1];
		i += 2;
	}
	if (i + 2 >= argc || strcmp(argv[i + 1], "--") != 0)
		return usage();
	char *end;
	long hz = strtol(argv[i], &end, 10);
	if (*end || hz < 1 || hz > 100000)
		return usage();
	char **cmd = argv + i + 2;

	sigset_t mask, oldmask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, &oldmask) < 0)
		return fail("sigprocmask");
	int sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sigfd < 0)
		return fail("signalfd");
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (tfd < 0)
		return fail("timerfd_create");
	int64_t period_ns = NS_PER_S / hz;
	struct itimerspec its = {
		.it_interval = { period_ns / NS_PER_S, period_ns % NS_PER_S },
		.it_value = { period_ns / NS_PER_S, period_ns % NS_PER_S },
	};

	pid_t pid = fork();
	if (pid < 0)
		return fail("fork");
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		execvp(cmd[0], cmd);
		fprintf(stderr, "timer_loop: cannot run '%s': %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	if (timerfd_settime(tfd, 0, &its, NULL) < 0)
		return fail("timerfd_settime");

	uint64_t expirations = 0, wakeups = 0;
	int status = 0;
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = sigfd, .events = POLLIN },
			{ .fd = tfd, .events = POLLIN },
		};
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return fail("poll");
		}
		if (pfd[1].revents & POLLIN) {
			uint64_t n;
			if (read(tfd, &n, sizeof(n)) == (ssize_t)sizeof(n)) {
				expirations += n;
				wakeups++;
			}
		}
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				;
			if (waitpid(pid, &status, WNOHANG) == pid)
				break;
		}
	}

	if (ticks_path) {
		FILE *f = fopen(ticks_path, "w");
		if (!f)
			return fail(ticks_path);
		fprintf(f, "expirations %llu\nwakeups %llu\n",
		        (unsigned long long)expirations, (unsigned long long)wakeups);
		fclose(f);
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
