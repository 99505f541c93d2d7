/*
 * restart_job.c — the job of bench/restart_cost: it timestamps, with
 * CLOCK_MONOTONIC (the clock leakproof's loop uses), the moments that the
 * supervisor's stop and restart latency is measured between.
 *
 *   restart_job cross OUT SOFT_MIB GAP_KIB JUMP_KIB SETTLE_MS JITTER_US [TIMEOUT_MS]
 *
 *     Crossing the soft limit of SOFT_MIB. Records the time of the stop
 *     signal in a handler (SIGTERM, or $LEAKPROOF_STOP_SIGNAL); marks a
 *     step; touches memory until its own Pss (smaps_rollup) is GAP_KIB under
 *     the limit, and maps (untouched) the JUMP_KIB to come; sleeps SETTLE_MS,
 *     then a random 0..JITTER_US, so that the crossing is not phase-locked
 *     to the sampler's tick; then records t_before, touches the JUMP_KIB
 *     (which crosses the limit GAP_KIB into it: page faults only, no system
 *     call), records t_after, and waits for the signal (at most TIMEOUT_MS,
 *     default 5000). Appends one line to OUT:
 *
 *         cross RESTART t_before t_after t_signal t_filled pss_before
 *
 *     (times in ns; t_signal 0 when no signal came; t_filled: when the fill
 *     was done; pss_before: our own Pss, bytes, read after SETTLE_MS, just
 *     before the random sleep). Exit status 0, or 3 when no signal came.
 *
 *   restart_job every OUT [TIMEOUT_MS [WORKER]]
 *
 *     Restart overhead. The first thing main() does is read the clock; it
 *     appends "start RESTART t" to OUT, marks a step, and waits for the stop
 *     signal (blocked, taken with sigtimedwait); then it reads the clock,
 *     appends "exit RESTART t" and calls _exit(0). Without leakproof
 *     (LEAKPROOF_FD unset) it does not wait: it appends "exit" at once, for
 *     the fork+exec baseline. WORKER "term" or "stubborn": first fork a
 *     worker that inherits the job's output and channel and waits, until
 *     SIGTERM ends it ("term") or only SIGKILL ("stubborn", which ignores
 *     SIGTERM); it is left behind when the main process exits, as a data
 *     loader's worker can be (default "none"). Exit status 0, or 3 when no
 *     signal came.
 *
 *   restart_job bare N OUT
 *
 *     The baseline of "every": starts this program in mode "every" N+1
 *     times in a row, each by fork, execve and waitpid, outside leakproof
 *     (LEAKPROOF_FD removed, LEAKPROOF_RESTART set to 0..N).
 *
 * RESTART is $LEAKPROOF_RESTART (0 outside leakproof). OUT is opened with
 * O_APPEND and each line goes out in one write(2). Exit status 2 for a usage
 * error.
 */
#include <leakproof.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static volatile sig_atomic_t got_signal;
static volatile int64_t t_signal;

static void on_stop(int sig)
{
	(void)sig;
	if (!got_signal) {
		t_signal = mono_ns();   /* clock_gettime is async-signal-safe */
		got_signal = 1;
	}
}

/* The stop signal leakproof announces (LEAKPROOF_STOP_SIGNAL=SIGTERM), else SIGTERM. */
static int stop_signal(void)
{
	static const struct { const char *name; int sig; } sigs[] = {
		{ "SIGTERM", SIGTERM }, { "SIGINT", SIGINT }, { "SIGUSR1", SIGUSR1 },
		{ "SIGUSR2", SIGUSR2 }, { "SIGHUP", SIGHUP }, { "SIGQUIT", SIGQUIT },
	};
	const char *s = getenv("LEAKPROOF_STOP_SIGNAL");
	if (s)
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			if (!strcmp(s, sigs[i].name))
				return sigs[i].sig;
	return SIGTERM;
}

static int append_line(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t len = strlen(line);
	ssize_t n = write(fd, line, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

/* Our own Pss (smaps_rollup), bytes; -1 when unreadable. */
static long long own_pss(void)
{
	char buf[4096];
	long long kb = -1;
	int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = strstr(buf, "\nPss:");
	if (p)
		kb = strtoll(p + 5, NULL, 10);
	return kb < 0 ? -1 : kb * 1024;
}

/* Map bytes of anonymous memory, never freed; NULL on failure. */
static char *map_bytes(size_t bytes)
{
	char *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL) };
	while (ns > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR && !got_signal)
		;
}

static int cross(int argc, char **argv)
{
	if (argc < 8 || argc > 9)
		return 2;
	const char *out = argv[2];
	long soft_mib = strtol(argv[3], NULL, 10), gap_kib = strtol(argv[4], NULL, 10);
	long jump_kib = strtol(argv[5], NULL, 10);
	long settle_ms = strtol(argv[6], NULL, 10), jitter_us = strtol(argv[7], NULL, 10);
	long timeout_ms = argc > 8 ? strtol(argv[8], NULL, 10) : 5000;
	if (soft_mib < 1 || gap_kib < 0 || jump_kib <= gap_kib || settle_ms < 0 || jitter_us < 0 || timeout_ms < 1)
		return 2;

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(stop_signal(), &sa, NULL);

	srand((unsigned)(mono_ns() ^ getpid()));
	lp_step(1);

	/* Fill to GAP_KIB under the limit: most of it first, then the rest as
	 * our own Pss says. */
	long long target = (long long)soft_mib * 1048576 - (long long)gap_kib * 1024;
	for (int round = 0; round < 3; round++) {
		long long pss = own_pss();
		if (pss < 0)
			return 4;
		long long need = (target - pss) / 4096 * 4096;
		if (need <= 0)
			break;
		char *p = map_bytes((size_t)need);
		if (!p)
			return 4;
		memset(p, 0x5a, (size_t)need);
	}
	size_t jump = (size_t)jump_kib * 1024;
	char *j = map_bytes(jump);    /* mapped now: the window holds page faults only */
	if (!j)
		return 4;
	int64_t t_filled = mono_ns();
	sleep_ns((int64_t)settle_ms * 1000000LL);
	long long pss_before = own_pss();   /* read before the random sleep: its cost is outside the window */
	if (jitter_us > 0)
		sleep_ns((int64_t)((double)rand() / ((double)RAND_MAX + 1.0) * (double)jitter_us * 1000.0));

	int64_t t_before = mono_ns();
	memset(j, 0x5a, jump);
	int64_t t_after = mono_ns();

	int64_t deadline = t_after + (int64_t)timeout_ms * 1000000LL;
	while (!got_signal && mono_ns() < deadline)
		sleep_ns(1000000);   /* the signal ends the sleep early */

	char line[200];
	snprintf(line, sizeof(line), "cross %d %lld %lld %lld %lld %lld\n", lp_restart(), (long long)t_before,
	         (long long)t_after, got_signal ? (long long)t_signal : 0LL, (long long)t_filled, pss_before);
	if (append_line(out, line) < 0)
		return 4;
	return got_signal ? 0 : 3;
}

static int every(int argc, char **argv, int64_t t_start)
{
	if (argc < 3 || argc > 5)
		return 2;
	const char *out = argv[2];
	long timeout_ms = argc > 3 ? strtol(argv[3], NULL, 10) : 5000;
	const char *worker = argc > 4 ? argv[4] : "none";
	if (timeout_ms < 1 || (strcmp(worker, "none") && strcmp(worker, "term") && strcmp(worker, "stubborn")))
		return 2;
	if (strcmp(worker, "none")) {
		/* A worker that holds the job's output and channel open and waits:
		 * "term" dies of SIGTERM, "stubborn" ignores it. Never past 30 s. */
		if (!strcmp(worker, "stubborn"))
			signal(SIGTERM, SIG_IGN);   /* before the fork: no window where it is not ignored */
		pid_t pid = fork();
		if (pid < 0)
			return 4;
		if (pid == 0) {
			alarm(30);
			for (;;)
				pause();
		}
		signal(SIGTERM, SIG_DFL);           /* ours again: an ignored signal would not wait for us */
	}
	int sig = stop_signal();
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_BLOCK, &set, NULL);   /* before the step: the signal waits for sigtimedwait */

	char line[120];
	snprintf(line, sizeof(line), "start %d %lld\n", lp_restart(), (long long)t_start);
	if (append_line(out, line) < 0)
		return 4;
	int ok = 1;
	if (lp_enabled()) {
		lp_step(1);
		struct timespec to = { timeout_ms / 1000, (timeout_ms % 1000) * 1000000L };
		int r;
		do
			r = sigtimedwait(&set, NULL, &to);
		while (r < 0 && errno == EINTR);
		ok = r == sig;
	}
	snprintf(line, sizeof(line), "exit %d %lld\n", lp_restart(), (long long)mono_ns());
	if (append_line(out, line) < 0)
		return 4;
	_exit(ok ? 0 : 3);
}

/* The baseline: start ourselves in mode "every" N+1 times in a row, each
 * by fork, execve and waitpid, outside leakproof. */
static int bare(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	long n = strtol(argv[2], NULL, 10);
	if (n < 0)
		return 2;
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return 4;
	self[len] = '\0';
	char *args[] = { self, "every", argv[3], NULL };
	unsetenv("LEAKPROOF_FD");
	for (long i = 0; i <= n; i++) {
		char num[24];
		snprintf(num, sizeof(num), "%ld", i);
		setenv("LEAKPROOF_RESTART", num, 1);
		pid_t pid = fork();
		if (pid < 0)
			return 4;
		if (pid == 0) {
			execve(self, args, environ);
			_exit(127);
		}
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			return 4;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int64_t t_start = mono_ns();   /* first: the restart ends here */
	int rc = 2;

	if (argc >= 2 && !strcmp(argv[1], "cross"))
		rc = cross(argc, argv);
	else if (argc >= 2 && !strcmp(argv[1], "every"))
		rc = every(argc, argv, t_start);
	else if (argc >= 2 && !strcmp(argv[1], "bare"))
		rc = bare(argc, argv);
	if (rc == 2)
		fprintf(stderr, "usage: restart_job cross OUT SOFT_MIB GAP_KIB JUMP_KIB SETTLE_MS JITTER_US [TIMEOUT_MS]\n"
		                "       restart_job every OUT [TIMEOUT_MS [none|term|stubborn]]\n"
		                "       restart_job bare N OUT\n");
	return rc;
}
