/*
 * attach.c — a job leakproof did not start (`leakproof attach PID`): the
 * supervisor's loop, sampler, budgets and store drive it as they drive a
 * job `run` started (supervise.c), and this file holds what differs. Part
 * of the supervisor (supervise-int.h); docs/internals/attach.md.
 *
 * All it reads is /proc, the cgroup tree, the job's log file and, at the
 * end, the kernel's log: no ptrace, nothing stopped, nothing written into
 * the job. What differs from a job of our own:
 *
 *   - its cgroup is used (measured, never limited or removed) only when it
 *     is the job's own: every process in it is the job's main process or
 *     one of its descendants; a session's or the machine's is not;
 *   - it is not our child: its end is seen through a pidfd (readable when
 *     it exits), or a /proc look at each tick; its start time is checked at
 *     each one, so a pid used again is never taken for the job, and every
 *     signal to the main process goes through the pidfd;
 *   - its exit status cannot be known (waitid on a pidfd serves children
 *     only): its end is recorded from evidence, the cgroup's oom_kill
 *     count or the kernel's OOM record, else as "ended, status unknown";
 *   - its output is not ours: steps come from a log file it writes,
 *     followed as `tail -F` does (a new file at the path: rotation; a
 *     file shorter than what was read: truncation), woken by inotify;
 *   - a stop signal to leakproof ends the watching, not the job
 *     (detached), unless a budget's stop is pending: then SIGKILL.
 *
 * A SLURM job (`--slurm-job`, o->attach_slurm, found by platform/slurmjob.c)
 * has no main process: everything in its cgroup and the cgroups below it
 * (its steps, their tasks) is the job, but slurmstepd, SLURM's daemon that
 * sits there too; the cgroup emptied of the job's processes, or removed,
 * is its end; signals go to those processes one by one, never to the
 * cgroup whole (it would reach slurmstepd) and never through scancel.
 *
 * Times are CLOCK_MONOTONIC nanoseconds; memory is bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/placement.h"
#include "core/sampler.h"
#include "core/supervise-int.h"
#include "platform/cgroup.h"
#include "platform/proc.h"
#include "platform/slurmjob.h"
#include "store/store.h"
#include "util/jsonw.h"

#define LOG_READ_MAX (4 << 20)      /* bytes of the log read at one wake-up */
#define KMSG_RECORDS_MAX 100000     /* records of the kernel's log looked at */
#define SEEN_MAX 256                /* the job's processes remembered, for its log */

/* The job's processes seen so far (the main one first), for the kernel's
 * OOM record at the end: a worker the OOM killer ended is one of them. */
static pid_t seen[SEEN_MAX];
static size_t nseen;
/* A SLURM job's cgroup's OOM kills when last looked: SLURM removes it soon
 * after the job ends, before the end is recorded. */
static uint64_t slurm_ooms;

static void remember(pid_t pid)
{
	for (size_t i = 0; i < nseen; i++)
		if (seen[i] == pid)
			return;
	if (nseen < SEEN_MAX)
		seen[nseen++] = pid;
}

struct log_follow {
	char *path;
	int fd;                     /* the file at the path when last looked; -1: none yet */
	dev_t dev;
	ino_t ino;
	off_t off;                  /* read up to here */
	int ino_fd;                 /* inotify on the file's directory; -1: none (ticks only) */
	bool said_missing;
};

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

/* ---- which process ----------------------------------------------------- */

int supervise_attach_check(pid_t pid, bool *denied, char *why, size_t whysz)
{
	struct proc_stat ps;
	*denied = false;
	if (pid <= 0) {
		snprintf(why, whysz, "'%d' is not a process id", (int)pid);
		return -1;
	}
	if (pid == 1) {
		snprintf(why, whysz, "pid 1 is the system's (or the container's) init: attach to the job's own process");
		return -1;
	}
	if (pid == getpid()) {
		snprintf(why, whysz, "pid %d is leakproof itself", (int)pid);
		return -1;
	}
	if (read_proc_stat(NULL, pid, &ps) < 0) {
		snprintf(why, whysz, "no process with pid %d", (int)pid);
		return -1;
	}
	if (ps.state == 'Z' || ps.state == 'X') {
		snprintf(why, whysz, "pid %d (%s) is a zombie: it has ended, and its parent has not collected it yet",
		         (int)pid, ps.comm);
		return -1;
	}
	if (pid == 2 || ps.ppid == 2) {
		snprintf(why, whysz, "pid %d (%s) is a kernel thread", (int)pid, ps.comm);
		return -1;
	}
	/* its tree must not hold leakproof: the shell it runs in, say */
	pid_t up = getppid();
	for (int hops = 0; up > 1 && hops < 4096; hops++) {
		struct proc_stat a;
		if (up == pid) {
			snprintf(why, whysz, "pid %d (%s) is an ancestor of leakproof (the shell it runs in?): its tree "
			         "holds leakproof itself", (int)pid, ps.comm);
			return -1;
		}
		if (read_proc_stat(NULL, up, &a) < 0)
			break;
		up = a.ppid;
	}
	/* The rights: its memory maps are what the sampler reads. Another
	 * user's process gives EACCES here (the kernel's ptrace read check). */
	char path[64];
	int e = proc_maps_readable(NULL, pid, path, sizeof(path));
	if (e == ENOENT || e == ESRCH) {
		snprintf(why, whysz, "no process with pid %d", (int)pid);
		return -1;
	}
	if (e) {
		*denied = true;
		snprintf(why, whysz, "cannot read '%s': %s: attaching to pid %d (%s) needs the rights to read its "
		         "memory maps (its own user, or root)", path, strerror(e), (int)pid, ps.comm);
		return -1;
	}
	return 0;
}

/* ---- its cgroup -------------------------------------------------------- */

struct own_ctx {
	const struct proc_list *pl;
	pid_t root;
	pid_t foreign;              /* the first process in it not of the job; 0: none */
};

static void own_one(pid_t pid, void *vctx)
{
	struct own_ctx *c = vctx;
	if (c->foreign || pid == c->root)
		return;
	if (pid <= 0 || !proc_list_descends(c->pl, pid, c->root))
		c->foreign = pid > 0 ? pid : -1;
}

/* Whether directory dir holds a directory (a cgroup below it). */
static bool has_subdir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;
	if (!d)
		return false;
	while (!found && (e = readdir(d)))
		found = e->d_type == DT_DIR && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return found;
}

/* The job's cgroup, when it is its own (every process in it is the job's):
 * measured and read for OOM kills, never limited or removed. */
bool sv_attach_find_cgroup(struct sv *sv)
{
	char why[200];
	struct job_cgroup cg;
	pid_t pid = sv->o->attach_pid;
	if (sv->o->attach_slurm) {   /* SLURM's, made for the job: its own by construction */
		sv->cg = sv->o->attach_slurm->cg;
		return true;
	}
	if (cgroup_of_process(pid, &cg, why, sizeof(why)) < 0) {
		snprintf(sv->no_cg_why, sizeof(sv->no_cg_why), "attached: its cgroup is not its own (%s)", why);
		return false;
	}
	struct proc_list pl = PROC_LIST_INIT;
	struct own_ctx c = { &pl, pid, 0 };
	int n = proc_scan(NULL, &pl) < 0 ? -1 : cgroup_each_proc(&cg, own_one, &c);
	proc_list_release(&pl);
	if (n < 0) {
		snprintf(sv->no_cg_why, sizeof(sv->no_cg_why), "attached: cannot read '%.180s/cgroup.procs'", cg.dir);
		return false;
	}
	if (!c.foreign && has_subdir(cg.dir)) {
		/* the sampler reads its cgroup.procs alone: members below would
		 * be missed, others' memory counted */
		snprintf(sv->no_cg_why, sizeof(sv->no_cg_why),
		         "attached: its cgroup '%.140s' has cgroups below it: not a leaf of its own", cg.dir);
		return false;
	}
	if (c.foreign) {
		struct proc_stat ps;
		bool known = c.foreign > 0 && read_proc_stat(NULL, c.foreign, &ps) == 0;
		snprintf(sv->no_cg_why, sizeof(sv->no_cg_why),
		         "attached: its cgroup '%.100s' holds other processes too (pid %d%s%.16s%s): not the job's own",
		         cg.dir, (int)c.foreign, known ? " (" : "", known ? ps.comm : "", known ? ")" : "");
		return false;
	}
	sv->cg = cg;
	return true;
}

/* ---- what it runs ------------------------------------------------------ */

void sv_attach_describe(const struct sv *sv, struct strbuf *command_json, char *cwd, size_t cwdsz)
{
	const struct slurm_job *job = sv->o->attach_slurm;
	pid_t pid = job ? job->pids[0] : sv->o->attach_pid;
	char path[64], buf[8192];
	/* the whole job or its batch step: its batch script, as SLURM knows it;
	 * a step (srun): the command line of its first process */
	struct json_writer jw;
	jw_init(&jw, command_json);
	jw_array_begin(&jw, false);
	if (job && job->command[0] && (!job->step[0] || !strcmp(job->step, "batch"))) {
		jw_array_string(&jw, job->command);
		jw_end(&jw);
		snprintf(cwd, cwdsz, "%s", job->workdir[0] ? job->workdir : "?");
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		buf[n] = '\0';
		for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1)
			jw_array_string(&jw, buf + i);
	} else {
		struct proc_stat ps;
		char name[80];
		snprintf(name, sizeof(name), "[%.60s]", read_proc_stat(NULL, pid, &ps) == 0 ? ps.comm : "?");
		jw_array_string(&jw, name);
	}
	jw_end(&jw);
	snprintf(path, sizeof(path), "/proc/%d/cwd", (int)pid);
	ssize_t m = readlink(path, cwd, cwdsz - 1);
	if (job && job->workdir[0])
		snprintf(cwd, cwdsz, "%s", job->workdir);
	else if (m > 0)
		cwd[m] = '\0';
	else
		snprintf(cwd, cwdsz, "?");
}

/* The wall-clock time process start time ticks stands for (boot time from
 * /proc/stat); 0 when unknown. */
static double wall_of_ticks(uint64_t ticks)
{
	char buf[8192];
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *b = strstr(buf, "\nbtime ");
	long hz = sysconf(_SC_CLK_TCK);
	if (!b || hz <= 0)
		return 0;
	return (double)strtoull(b + 7, NULL, 10) + (double)ticks / (double)hz;
}

/* ---- its log file ------------------------------------------------------ */

static void log_read_new(struct sv *sv, struct log_follow *lf)
{
	static char buf[256 * 1024];
	struct stat st;
	if (lf->fd < 0)
		return;
	if (fstat(lf->fd, &st) == 0 && st.st_size < lf->off) {   /* truncated (copytruncate, "> log") */
		linebuf_finish(&sv->out_lb, sv_on_output_line, sv);
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "log", "the log file was truncated: read from its start");
		lf->off = 0;
	}
	for (size_t got = 0; got < LOG_READ_MAX;) {
		ssize_t n = pread(lf->fd, buf, sizeof(buf), lf->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		lf->off += n;
		got += (size_t)n;
		linebuf_feed(&sv->out_lb, buf, (size_t)n, sv_on_output_line, sv);
	}
}

/* Open the file at the path, from its end (at_end: what it held before
 * leakproof came is history) or its start (a file that appeared since). */
static void log_open(struct sv *sv, struct log_follow *lf, bool at_end)
{
	int fd = open(lf->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		if (!lf->said_missing)
			sv_say(sv, "waiting for the log file '%s' to appear (%s)", lf->path, strerror(errno));
		lf->said_missing = true;
		return;
	}
	lf->fd = fd;
	lf->dev = st.st_dev;
	lf->ino = st.st_ino;
	lf->off = at_end ? st.st_size : 0;
}

void sv_attach_follow(struct sv *sv)
{
	struct log_follow *lf = sv->log;
	if (!lf)
		return;
	if (lf->ino_fd >= 0) {   /* what inotify said is only a wake-up */
		char ev[4096];
		while (read(lf->ino_fd, ev, sizeof(ev)) > 0)
			;
	}
	log_read_new(sv, lf);
	struct stat st;
	if (stat(lf->path, &st) == 0 && (lf->fd < 0 || st.st_dev != lf->dev || st.st_ino != lf->ino)) {
		if (lf->fd >= 0) {   /* rotated: the old file was read to its end above */
			linebuf_finish(&sv->out_lb, sv_on_output_line, sv);
			close(lf->fd);
			lf->fd = -1;
			store_add_event(sv->st, sv->run_id, sv_now_t(sv, mono_ns()), "log",
			                "a new log file at the path (rotated): followed from its start");
		}
		log_open(sv, lf, false);
		log_read_new(sv, lf);
	}
}

int sv_attach_watch_fd(const struct sv *sv)
{
	return sv->log ? sv->log->ino_fd : -1;
}

static void log_start(struct sv *sv)
{
	struct log_follow *lf = xcalloc(1, sizeof(*lf));
	lf->path = xstrdup(sv->o->follow_log);
	lf->fd = lf->ino_fd = -1;
	sv->log = lf;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", lf->path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	lf->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (lf->ino_fd >= 0 && inotify_add_watch(lf->ino_fd, dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE |
	                                         IN_DELETE | IN_MOVED_FROM | IN_ATTRIB) < 0) {
		close(lf->ino_fd);
		lf->ino_fd = -1;   /* read at each tick instead */
	}
	log_open(sv, lf, true);
}

/* ---- its start and its end --------------------------------------------- */

/* The job's name for messages: "SLURM job 12.batch", "SLURM job 10_3". */
static void slurm_name(const struct slurm_job *job, char *out, size_t outsz)
{
	if (job->array_job_id[0] && job->array_task_id[0])
		snprintf(out, outsz, "SLURM job %s_%s%s%s", job->array_job_id, job->array_task_id, job->step[0] ? "." : "",
		         job->step);
	else
		snprintf(out, outsz, "SLURM job %s%s%s", job->job_id, job->step[0] ? "." : "", job->step);
}

/* A SLURM job's start: its processes here as SLURM listed them (the
 * earliest start time bounds the kernel's log read at the end). */
static int slurm_begin(struct sv *sv)
{
	const struct slurm_job *job = sv->o->attach_slurm;
	char name[128], when[64] = "?", ago[32] = "?", d[1400];
	struct proc_stat ps;
	uint64_t first = 0;
	size_t alive = 0;
	slurm_name(job, name, sizeof(name));
	nseen = 0;
	for (size_t i = 0; i < job->npids; i++) {
		if (read_proc_stat(NULL, job->pids[i], &ps) < 0 || ps.state == 'Z')
			continue;
		alive++;
		remember(job->pids[i]);
		if (!first || ps.starttime_ticks < first)
			first = ps.starttime_ticks;
	}
	if (!alive)
		return error("%s ended before leakproof could watch it", name);
	sv->child = 0;   /* no main process */
	sv->job_start_ticks = first;
	sv->oom_kills_at_start = slurm_ooms = cgroup_tree_oom_kills(&sv->cg);
	double started = wall_of_ticks(first);
	if (started > 0) {
		time_t t = (time_t)started;
		struct tm tm;
		fmt_duration(ago, sizeof(ago), wall_seconds() - started > 0 ? wall_seconds() - started : 0);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&t, &tm));
	}
	snprintf(d, sizeof(d), "%s (%.60s) of user %.40s, its cgroup '%.300s', %zu process%s, started %s, %s before "
	         "leakproof came; started_at=%.3f", name, job->name, job->user, sv->cg.dir, alive, alive == 1 ? "" : "es",
	         when, ago, started);
	store_add_event(sv->st, sv->run_id, 0, "attach", d);
	sv_say(sv, "attached to %s (%s), started %s ago; watching its cgroup '%s'", name, job->name, ago, sv->cg.dir);
	if (sv->o->follow_log)
		log_start(sv);
	store_flush(sv->st);
	sv_take_sample(sv, mono_ns());
	return 0;
}

int sv_attach_begin(struct sv *sv)
{
	pid_t pid = sv->o->attach_pid;
	int64_t now = mono_ns();
	struct proc_stat ps;
	sv->state = SV_RUNNING;
	sv->seg_start_ns = now;
	cause_scan_init(&sv->scan);
	if (sv->o->attach_slurm)
		return slurm_begin(sv);
	if (read_proc_stat(NULL, pid, &ps) < 0 || ps.state == 'Z')
		return error("pid %d ended before leakproof could watch it", (int)pid);
	sv->child = pid;
	sv->job_start_ticks = ps.starttime_ticks;
	nseen = 0;
	remember(pid);
	sv->pidfd = pidfd_open_(pid);
	sv->oom_kills_at_start = sv_oom_kills_now(sv);
	/* No store_segment_set_pid(): what a run's segment records is what the
	 * next writer ends should this supervisor die (supervise.c), and an
	 * attached job is not ours to end. The "attach" event names it. */

	double started = wall_of_ticks(ps.starttime_ticks);
	char ago[32] = "?", when[64] = "?", d[300];
	if (started > 0) {
		time_t t = (time_t)started;
		struct tm tm;
		fmt_duration(ago, sizeof(ago), wall_seconds() - started > 0 ? wall_seconds() - started : 0);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&t, &tm));
	}
	snprintf(d, sizeof(d), "pid %d (%s), started %s, %s before leakproof came; started_at=%.3f", (int)pid,
	         ps.comm, when, ago, started);
	store_add_event(sv->st, sv->run_id, 0, "attach", d);
	if (sv->have_cg)
		sv_say(sv, "attached to pid %d (%s), started %s ago; watching its tree and its cgroup '%s'", (int)pid,
		       ps.comm, ago, sv->cg.dir);
	else
		sv_say(sv, "attached to pid %d (%s), started %s ago; watching its tree (%s)", (int)pid, ps.comm, ago,
		       sv->no_cg_why);
	if (sv->o->follow_log)
		log_start(sv);
	store_flush(sv->st);
	sv_take_sample(sv, mono_ns());
	return 0;
}

/* The most OOM kills the job's cgroup tree has counted: a step's cgroup
 * removed takes its count with it, so the tree's sum can fall. */
static void note_slurm_ooms(struct sv *sv)
{
	uint64_t now = cgroup_tree_oom_kills(&sv->cg);
	if (now > slurm_ooms)
		slurm_ooms = now;
}

/* A SLURM job ends when its cgroup is gone, or holds none of its
 * processes any more (slurmstepd may linger a moment): looked for at each
 * tick where the last sample found nobody, and at least once a second. */
static void slurm_note_end(struct sv *sv, int64_t now)
{
	static int64_t last_look_ns;
	static size_t last_n;
	const struct proc_mem *pm;
	struct stat st;
	size_t n = sampler_procs(sv->sampler, &pm);
	bool gone = stat(sv->cg.dir, &st) < 0;
	/* A member gone may be an OOM kill whose step cgroup SLURM removes
	 * soon after, taking its count with it: the counts read at once. */
	if (!gone && n < last_n)
		note_slurm_ooms(sv);
	last_n = n;
	if (!gone && (n == 0 || now - last_look_ns >= 1000000000LL)) {
		last_look_ns = now;
		gone = sv_signal_slurm_job(sv, 0) <= 0;
		if (stat(sv->cg.dir, &st) == 0)
			note_slurm_ooms(sv);
	}
	if (!gone)
		return;
	char name[128], d[260];
	slurm_name(sv->o->attach_slurm, name, sizeof(name));
	sv_attach_follow(sv);   /* the last lines it wrote */
	linebuf_finish(&sv->out_lb, sv_on_output_line, sv);
	sv->child_exited = true;
	snprintf(d, sizeof(d), "ended: %s has no process left in its cgroup (its exit status is SLURM's to know)", name);
	store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "exit", d);
	sv->state = SV_ENDING;
	sv->state_deadline_ns = now;
}

void sv_attach_note_end(struct sv *sv, int64_t now)
{
	if (sv->child_exited || sv->detached)
		return;
	const struct proc_mem *pm;   /* the members of the last sample */
	for (size_t i = 0, n = sampler_procs(sv->sampler, &pm); i < n; i++)
		remember(pm[i].pid);
	bool gone = false, reused = false;
	if (sv->o->attach_slurm) {
		slurm_note_end(sv, now);
		return;
	}
	if (sv->pidfd >= 0) {
		struct pollfd p = { .fd = sv->pidfd, .events = POLLIN };
		gone = poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP));
	}
	struct proc_stat ps;
	if (!gone) {
		if (read_proc_stat(NULL, sv->child, &ps) < 0)
			gone = true;
		else if (ps.starttime_ticks != sv->job_start_ticks)
			gone = reused = true;
		else if (ps.state == 'Z' || ps.state == 'X')
			gone = true;
	}
	if (!gone)
		return;
	sv_attach_follow(sv);   /* the last lines it wrote */
	linebuf_finish(&sv->out_lb, sv_on_output_line, sv);
	sv->child_exited = true;
	char d[160];
	if (reused)
		snprintf(d, sizeof(d), "ended: pid %d is another process now (%s), not followed", (int)sv->child, ps.comm);
	else
		snprintf(d, sizeof(d), "ended (its exit status is its parent's to know)");
	store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "exit", d);
	if (reused)
		sv_say(sv, "pid %d is another process now (%s): the job ended; not following it", (int)sv->child, ps.comm);
	sv->state = SV_ENDING;   /* what it left running is left alone */
	sv->state_deadline_ns = now;
}

void sv_attach_on_stop_signal(struct sv *sv, int sig, int64_t now)
{
	const char *name = sigabbrev_np(sig) ? sigabbrev_np(sig) : "?";
	if (sv->state != SV_RUNNING)
		return;
	if (sv->stop_deadline_ns) {
		/* a budget asked the job to stop: that is not left half done */
		sv->stop_deadline_ns = 0;
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "signal",
		                "stop signal during the budget's grace period: SIGKILL");
		sv_say(sv, "SIG%s while the job is asked to stop for its budget: SIGKILL to the job", name);
		sv_signal_job(sv, SIGKILL);
		sv->budget_killed = true;
		return;
	}
	sv->detached = sv->interrupted = true;
	char d[96];
	snprintf(d, sizeof(d), "SIG%s: leakproof stopped watching; the job went on", name);
	store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "detach", d);
	char who[128];
	if (sv->o->attach_slurm)
		slurm_name(sv->o->attach_slurm, who, sizeof(who));
	else
		snprintf(who, sizeof(who), "pid %d", (int)sv->child);
	sv_say(sv, "SIG%s: detached from %s, which goes on running; the run is stored as detached", name, who);
	sv->state = SV_ENDING;
	sv->state_deadline_ns = now;
}

/* Whether the kernel's log line text names the OOM kill of one of the
 * job's processes ("Killed process PID (" or "oom-kill:...,pid=PID,"). */
static bool names_seen(const char *text)
{
	const char *k = strstr(text, "Killed process "), *o = strstr(text, "oom-kill:");
	long pid = k ? strtol(k + 15, NULL, 10) : 0;
	if (!k && o && (o = strstr(o, ",pid=")))
		pid = strtol(o + 5, NULL, 10);
	for (size_t i = 0; pid > 0 && i < nseen; i++)
		if (seen[i] == pid)
			return true;
	return false;
}

/* The kernel's record of an OOM kill of one of the job's processes since
 * start_ticks (its start): 1 and the line in out, 0 none, -1 the kernel's
 * log cannot be read. */
static int kernel_oom_record(uint64_t start_ticks, char *out, size_t outsz)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long hz = sysconf(_SC_CLK_TCK);
	double since_s = hz > 0 ? (double)start_ticks / (double)hz : 0;
	char rec[2048];
	int found = 0;
	for (int i = 0; i < KMSG_RECORDS_MAX; i++) {
		ssize_t n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;   /* overwritten while read */
		if (n <= 0)
			break;
		rec[n] = '\0';
		/* "PRIO,SEQ,USEC,FLAGS;TEXT" */
		char *semi = strchr(rec, ';');
		unsigned long long usec = 0;
		if (!semi || sscanf(rec, "%*u,%*u,%llu", &usec) != 1 || (double)usec / 1e6 < since_s)
			continue;
		char *nl = strchr(semi + 1, '\n');
		if (nl)
			*nl = '\0';
		if (names_seen(semi + 1) && (!found || strstr(semi + 1, "Killed process "))) {
			snprintf(out, outsz, "%s", semi + 1);   /* the last, "Killed process" rather than its header */
			found = 1;
		}
	}
	close(fd);
	return found;
}

void sv_attach_end_segment(struct sv *sv)
{
	enum end_cause cause;
	char evidence[CAUSE_LINE_MAX + 200], line[CAUSE_LINE_MAX];
	struct stat st;
	bool cg_gone = sv->o->attach_slurm && stat(sv->cg.dir, &st) < 0;   /* SLURM removed it */
	uint64_t ooms;
	if (sv->o->attach_slurm) {   /* a step's cgroup removed takes its count with it */
		uint64_t now_ooms = cg_gone ? 0 : cgroup_tree_oom_kills(&sv->cg);
		ooms = now_ooms > slurm_ooms ? now_ooms : slurm_ooms;
	} else {
		ooms = sv_oom_kills_now(sv);
	}
	int kernel = 0;
	if (sv->detached) {
		cause = CAUSE_DETACHED;
		snprintf(evidence, sizeof(evidence), "leakproof stopped watching; the job was still running");
	} else if (sv->budget_killed) {
		cause = CAUSE_BUDGET_KILL;
		snprintf(evidence, sizeof(evidence), "%s; SIGKILL", sv->why_stopped[0] ? sv->why_stopped : "leakproof killed it");
	} else if (ooms > sv->oom_kills_at_start) {
		cause = CAUSE_OOM_KILL;
		snprintf(evidence, sizeof(evidence), "its cgroup's memory.events oom_kill rose by %llu",
		         (unsigned long long)(ooms - sv->oom_kills_at_start));
	} else if ((kernel = kernel_oom_record(sv->job_start_ticks, line, sizeof(line))) > 0) {
		cause = CAUSE_OOM_KILL;
		snprintf(evidence, sizeof(evidence), "the kernel's log: %s", line);
	} else if (sv->stop_sent) {
		cause = CAUSE_STOP_REQUESTED;
		snprintf(evidence, sizeof(evidence), "%s; it ended after SIG%s (its exit status is unknown)",
		         sv->why_stopped, sigabbrev_np(sv->o->stop_signal));
	} else {
		cause = CAUSE_ENDED;
		snprintf(evidence, sizeof(evidence), "status unknown: %s; no OOM kill in %s%s",
		         sv->o->attach_slurm ? "SLURM's to know (sacct, scontrol show job)" : "leakproof is not its parent",
		         sv->have_cg && sv->cg.has_memory ? "its cgroup's memory.events" : "",
		         kernel < 0 ? (sv->have_cg && sv->cg.has_memory ? " (the kernel's log is not readable here)"
		                                                       : "any record readable here (no cgroup of its own, "
		                                                         "the kernel's log not readable)")
		                    : sv->have_cg && sv->cg.has_memory ? " or the kernel's log" : "the kernel's log");
	}
	snprintf(sv->end_how, sizeof(sv->end_how), "%s: %.180s", cause_name(cause), evidence);
	struct segment_end se = {
		.ended_at = wall_seconds(),
		.exit_code = -1,
		.exit_signal = sv->budget_killed ? SIGKILL : 0,
		.cause = cause,
		.evidence = evidence,
		.has_step = sv->seg_steps > 0,
		.step = sv->last_step,
		.memory_bytes = sv->have_last ? (uint64_t)(mem_sample_value(&sv->last, sv->o->measure) > 0 ?
		                                          mem_sample_value(&sv->last, sv->o->measure) : 0) : 0,
	};
	store_segment_end(sv->st, sv->run_id, sv->seg, &se);
	store_flush(sv->st);
	char who[128];
	if (sv->o->attach_slurm)
		slurm_name(sv->o->attach_slurm, who, sizeof(who));
	else
		snprintf(who, sizeof(who), "pid %d", (int)sv->child);
	if (!sv->detached)
		sv_say(sv, "%s ended (%s: %s)", who, cause_name(cause), evidence);
}

void sv_attach_slurm_placement(const struct sv *sv, struct placement *p)
{
	const struct slurm_job *job = sv->o->attach_slurm;
	memset(p, 0, sizeof(*p));
	p->rank = p->local_rank = p->node_id = -1;
	snprintf(p->slurm_job_id, sizeof(p->slurm_job_id), "%s", job->job_id);
	snprintf(p->slurm_array_job_id, sizeof(p->slurm_array_job_id), "%s", job->array_job_id);
	snprintf(p->slurm_array_task_id, sizeof(p->slurm_array_task_id), "%s", job->array_task_id);
	snprintf(p->slurm_step_id, sizeof(p->slurm_step_id), "%s", job->step);
	p->alloc_mem_bytes = cgroup_limit_of(&job->cg);
}

/* The run's status: detached (the job went on), done (leakproof killed
 * it: SIGKILL is its end), ended (status unknown). */
enum run_status sv_attach_status(const struct sv *sv)
{
	return sv->detached ? RUN_DETACHED : sv->budget_killed ? RUN_DONE : RUN_ENDED;
}

void sv_attach_release(struct sv *sv)
{
	if (sv->pidfd >= 0)
		close(sv->pidfd);
	sv->pidfd = -1;
	if (sv->log) {
		if (sv->log->fd >= 0)
			close(sv->log->fd);
		if (sv->log->ino_fd >= 0)
			close(sv->log->ino_fd);
		free(sv->log->path);
		free(sv->log);
		sv->log = NULL;
	}
}
