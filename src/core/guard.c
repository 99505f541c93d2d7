/*
 * guard.c — the job's guard: a small process that outlives the supervisor
 * only to end the job when the supervisor dies without ending it itself
 * (kill -9, a crash, the OOM killer). Part of the supervisor
 * (supervise-int.h).
 *
 * The guard is started through platform/spawn.c before leakproof becomes
 * a child subreaper, and forks once more so that it is nobody's child of
 * ours: it is neither sampled nor waited for as part of the job. It keeps
 * the read end of a pipe whose write end only the supervisor holds
 * (close-on-exec, so the job never has it). The supervisor writes 32-bit
 * messages: a pid > 0 is the job's process group now, 0 says no job runs,
 * -1 says stand down (the supervisor ended the job and removed its
 * cgroup; it then waits, a second at most, for the end of file of a second
 * pipe the guard holds, so the guard is gone before leakproof exits), -2
 * followed by a struct termios says the terminal on stdin is raw now and
 * was so before, -3 that it is restored (console.c). End of file without
 * -1 means the supervisor is gone: the guard gives a raw terminal its
 * modes back (first, before the shell reads its next command) and the
 * terminal's foreground to the supervisor's process group if the job had
 * it, SIGKILLs the job's process group and everything in its cgroup (again
 * until it is empty, for processes forked meanwhile), removes the cgroup,
 * and exits.
 *
 * After fork the guard uses raw system calls only: the supervisor may have
 * had threads (NVML's), so nothing that takes a lock (malloc, stdio) runs
 * in it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "core/sampler.h"
#include "core/supervise-int.h"
#include "platform/proc.h"
#include "platform/spawn.h"

#define GUARD_KILL_NS (10 * NS_PER_S)   /* how long the guard tries to empty the cgroup */

enum { GUARD_STAND_DOWN = -1, GUARD_TERM_RAW = -2, GUARD_TERM_RESTORED = -3, GUARD_ALSO = -4 };

/* a process of the job outside its process group (setsid), as told */
struct guard_also {
	int32_t pid;
	uint64_t start;   /* its start time, /proc/PID/stat field 22 */
};

struct guard_args {
	int rfd;                            /* the supervisor's messages */
	int ackfd;                          /* held until the guard exits: the supervisor
	                                       waits for its end of file */
	const struct job_cgroup *cg;        /* NULL: the job has no cgroup */
};

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int64_t guard_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* dir/leaf into buf; false when it does not fit. */
static bool path_in(char *buf, size_t n, const char *dir, const char *leaf)
{
	size_t a = strlen(dir), b = strlen(leaf);
	if (a + 1 + b + 1 > n)
		return false;
	memcpy(buf, dir, a);
	buf[a] = '/';
	memcpy(buf + a + 1, leaf, b + 1);
	return true;
}

/* SIGKILL every pid listed in dir/cgroup.procs; how many were listed. */
static int kill_listed(const char *dir)
{
	char path[4200], buf[4096];
	if (!path_in(path, sizeof(path), dir, "cgroup.procs"))
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int listed = 0;
	long pid = 0;
	bool in_num = false;
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				pid = pid * 10 + (buf[i] - '0');
				in_num = true;
			} else if (in_num) {
				if (pid > 0)
					kill((pid_t)pid, SIGKILL), listed++;
				pid = 0, in_num = false;
			}
		}
	if (in_num && pid > 0)
		kill((pid_t)pid, SIGKILL), listed++;
	close(fd);
	return listed;
}

/* The supervisor is gone: end the job, remove its cgroup. */
static void guard_end_job(const struct guard_args *g, pid_t pgid)
{
	if (pgid > 0)
		kill(-pgid, SIGKILL);
	if (!g->cg)
		return;
	const char *dir = g->cg->dir;
	char path[4200];
	if (g->cg->version == 2 && path_in(path, sizeof(path), dir, "cgroup.kill")) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t w = write(fd, "1", 1);
			(void)w;
			close(fd);
		}
	}
	int64_t deadline = guard_now_ns() + GUARD_KILL_NS;
	while (kill_listed(dir) > 0 && guard_now_ns() < deadline)
		nap_ms(20);
	while (rmdir(dir) < 0 && errno == EBUSY && guard_now_ns() < deadline)
		nap_ms(20);   /* the kernel is still reaping */
}

/* The start time of pid (/proc/PID/stat field 22, clock ticks since
 * boot); 0 when it is gone. No allocation, no lock: the path is built by
 * hand, pread_proc_stat() reads into its stack and parses by hand. */
static uint64_t guard_start_time(pid_t pid)
{
	char path[40], digits[16];
	int k = 0, at = 6;
	unsigned v = (unsigned)pid;
	do
		digits[k++] = (char)('0' + v % 10);
	while ((v /= 10) && k < (int)sizeof(digits));
	memcpy(path, "/proc/", 6);
	while (k)
		path[at++] = digits[--k];
	memcpy(path + at, "/stat", 6);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct proc_stat st;
	int rc = pread_proc_stat(fd, &st);
	close(fd);
	return rc < 0 ? 0 : st.starttime_ticks;
}

/* SIGKILL each process told of that is still the one told of, and its
 * process group if it leads one. */
static void guard_kill_also(const struct guard_also *also, int n)
{
	for (int i = 0; i < n; i++) {
		pid_t pid = also[i].pid;
		if (pid > 0 && guard_start_time(pid) == also[i].start) {
			if (getpgid(pid) == pid)
				kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
		}
	}
}

/* Read exactly n bytes; false at end of file or on an error. */
static bool read_full(int fd, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* In the intermediate child: fork the guard and leave, so the guard is
 * reparented away from the supervisor at once. */
static void guard_main(void *data)
{
	const struct guard_args *g = data;
	pid_t home = getpgid(getppid());   /* the supervisor's process group */
	pid_t p = fork();
	if (p != 0)
		_exit(p < 0);
	/* the guard: a name of its own, so that `killall -9 leakproof` (or
	 * pkill -x) ends the supervisor and not what would clean up after it,
	 * and `ps` tells the two apart */
	prctl(PR_SET_NAME, "leakproof-guard", 0, 0, 0);
	/* deaf to the signals meant for the supervisor and the job */
	static const int deaf[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE };
	for (size_t i = 0; i < sizeof(deaf) / sizeof(deaf[0]); i++)
		signal(deaf[i], SIG_IGN);
	/* nothing of the supervisor's kept open but the two pipes and stdio */
	unsigned lo = (unsigned)(g->rfd < g->ackfd ? g->rfd : g->ackfd);
	unsigned hi = (unsigned)(g->rfd < g->ackfd ? g->ackfd : g->rfd);
	if ((lo > 3 && syscall(SYS_close_range, 3u, lo - 1, 0u) < 0) ||
	    (hi > lo + 1 && syscall(SYS_close_range, lo + 1, hi - 1, 0u) < 0) ||
	    syscall(SYS_close_range, hi + 1, ~0u, 0u) < 0)
		for (int fd = 3; fd < 65536; fd++)
			if (fd != g->rfd && fd != g->ackfd)
				close(fd);
	pid_t pgid = 0;
	struct termios saved;
	bool raw = false;
	struct guard_also also[GUARD_ALSO_MAX];
	int nalso = 0, next_also = 0;
	for (;;) {
		int32_t msg;
		if (!read_full(g->rfd, &msg, sizeof(msg)))
			break;   /* EOF: the supervisor is gone */
		if (msg == GUARD_STAND_DOWN)
			_exit(0);
		else if (msg == GUARD_TERM_RAW)
			raw = read_full(g->rfd, &saved, sizeof(saved));
		else if (msg == GUARD_TERM_RESTORED)
			raw = false;
		else if (msg == GUARD_ALSO) {
			struct guard_also a;
			if (!read_full(g->rfd, &a, sizeof(a)))
				break;
			also[next_also] = a;   /* the oldest gives way */
			next_also = (next_also + 1) % GUARD_ALSO_MAX;
			if (nalso < GUARD_ALSO_MAX)
				nalso++;
		} else if (msg >= 0)
			pgid = (pid_t)msg;
	}
	if (raw)   /* SIGTTOU is ignored: this works from the background */
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	/* a job without a pty may hold the terminal's foreground (console.c):
	 * it goes back to the group the supervisor was in, for whoever started
	 * it and is not a shell that takes it back itself */
	if (pgid > 0 && home > 0 && tcgetpgrp(STDIN_FILENO) == pgid)
		tcsetpgrp(STDIN_FILENO, home);
	guard_kill_also(also, nalso);
	guard_end_job(g, pgid);
	_exit(0);
}

int sv_guard_start(struct sv *sv)
{
	int p[2], ack[2];
	sv->guard_fd = sv->guard_ack = -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(ack, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	struct guard_args g = { .rfd = p[0], .ackfd = ack[1], .cg = sv->have_cg ? &sv->cg : NULL };
	struct spawn sp = { .new_group = true, .child_main = guard_main, .hook_data = &g };
	int rc = spawn_start(&sp);
	close(p[0]);
	close(ack[1]);
	if (rc) {
		close(p[1]);
		close(ack[0]);
		return -1;
	}
	sv->guard_ack = ack[0];
	while (waitpid(sp.pid, NULL, 0) < 0 && errno == EINTR)
		;   /* the intermediate child, gone once the guard is forked */
	sv->guard_fd = p[1];
	return 0;
}

void sv_guard_tell(struct sv *sv, int32_t msg)
{
	if (sv->guard_fd < 0)
		return;
	ssize_t w = write(sv->guard_fd, &msg, sizeof(msg));
	(void)w;
	if (msg == GUARD_STAND_DOWN) {
		close(sv->guard_fd);
		sv->guard_fd = -1;
		/* wait (1 s at most) for the guard to be gone, so that nothing of
		 * leakproof's outlives it */
		struct pollfd pfd = { .fd = sv->guard_ack, .events = POLLIN };
		char c;
		while (poll(&pfd, 1, 1000) > 0 && read(sv->guard_ack, &c, 1) > 0)
			;
		close(sv->guard_ack);
		sv->guard_ack = -1;
	}
}

/*
 * Processes of the job outside its process group (a worker that called
 * setsid) escape kill(-pgid); with a cgroup the guard ends them through
 * it, without one it must know them. After each sample, the members of
 * the tree that are neither in the job's group nor told of before are
 * told of, with their start times (so that a pid used again is left
 * alone). The guard keeps the last GUARD_ALSO_MAX.
 */
void sv_guard_also(struct sv *sv)
{
	if (sv->guard_fd < 0 || sv->have_cg || sv->child <= 0)
		return;
	const struct proc_mem *pm;
	size_t n = sampler_procs(sv->sampler, &pm);
	pid_t now[GUARD_ALSO_MAX];
	uint64_t now_start[GUARD_ALSO_MAX];
	size_t nnow = 0;
	bool any_new = false;
	for (size_t i = 0; i < n && nnow < GUARD_ALSO_MAX; i++) {
		pid_t pid = pm[i].pid;
		if (pid == sv->child || getpgid(pid) == sv->child)
			continue;
		bool told = false;
		for (size_t j = 0; j < sv->nalso && !told; j++)
			if (sv->also[j] == pid) {
				told = true;
				now[nnow] = pid;
				now_start[nnow++] = sv->also_start[j];
			}
		struct proc_stat st;
		if (told || read_proc_stat(NULL, pid, &st) < 0)
			continue;
		now[nnow] = pid;
		now_start[nnow++] = st.starttime_ticks;
		any_new = true;
		/* the message and its payload back to back, as the guard reads
		 * them (a struct of the two would pad between), in one write */
		int32_t msg = GUARD_ALSO;
		struct guard_also a;
		memset(&a, 0, sizeof(a));   /* its padding too: it is written out */
		a.pid = pid;
		a.start = st.starttime_ticks;
		char m[sizeof(msg) + sizeof(a)];
		memcpy(m, &msg, sizeof(msg));
		memcpy(m + sizeof(msg), &a, sizeof(a));
		ssize_t w = write(sv->guard_fd, m, sizeof(m));
		(void)w;
	}
	memcpy(sv->also, now, nnow * sizeof(now[0]));
	memcpy(sv->also_start, now_start, nnow * sizeof(now_start[0]));
	sv->nalso = nnow;
	if (!any_new)
		return;
	/* and to the store, for the next writer should the guard die too */
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < nnow; i++)
		strbuf_addf(&sb, "%s%ld:%llu", i ? " " : "", (long)now[i], (unsigned long long)now_start[i]);
	store_segment_set_also(sv->st, sv->run_id, sv->seg, strbuf_str(&sb));
	strbuf_release(&sb);
}

void sv_guard_term(struct sv *sv, const struct termios *saved)
{
	if (sv->guard_fd < 0)
		return;
	struct {
		int32_t msg;
		struct termios t;
	} m;
	memset(&m, 0, sizeof(m));
	m.msg = saved ? GUARD_TERM_RAW : GUARD_TERM_RESTORED;
	if (saved)
		m.t = *saved;
	/* one write of less than PIPE_BUF: the guard never reads half of it */
	ssize_t w = write(sv->guard_fd, &m, saved ? sizeof(m) : sizeof(m.msg));
	(void)w;
}
