/*
 * job.c — the job's processes as a whole: signal every one of them (its
 * process group, what left the group in its cgroup, and workers orphaned
 * and reparented to leakproof, the child subreaper), and reap those that
 * ended, noting how the main process ended. Part of the supervisor
 * (supervise-int.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sampler.h"
#include "core/supervise-int.h"
#include "platform/proc.h"

int sv_signal_main(struct sv *sv, int sig)
{
	if (!sv->attached)
		return sigqueue(sv->child, sig, (union sigval){ .sival_int = 0 });
	if (sv->o->attach_slurm) {   /* no main process: every one of the job's */
		if (sv_signal_slurm_job(sv, sig) > 0)
			return 0;
		errno = ESRCH;
		return -1;
	}
#ifdef SYS_pidfd_send_signal
	if (sv->pidfd >= 0)
		return (int)syscall(SYS_pidfd_send_signal, sv->pidfd, sig, NULL, 0);
#endif
	struct proc_stat ps;   /* no pidfd: only while it is still the process attached to */
	if (read_proc_stat(NULL, sv->child, &ps) < 0 || ps.starttime_ticks != sv->job_start_ticks) {
		errno = ESRCH;
		return -1;
	}
	return kill(sv->child, sig);
}

struct slurm_walk {
	int sig;                    /* 0: count only */
	int n;
};

static void slurm_one(pid_t pid, void *vctx)
{
	struct slurm_walk *w = vctx;
	struct proc_stat ps;
	if (pid <= 0 || pid == getpid() || read_proc_stat(NULL, pid, &ps) < 0 || ps.state == 'Z' ||
	    !strncmp(ps.comm, SLURM_STEPD_COMM, strlen(SLURM_STEPD_COMM)))
		return;
	if (w->sig && kill(pid, w->sig) < 0)
		return;
	w->n++;
}

int sv_signal_slurm_job(struct sv *sv, int sig)
{
	struct slurm_walk w = { sig, 0 };
	if (cgroup_tree_each_proc(sv->cg.dir, slurm_one, &w) < 0)
		return -1;
	return w.n;
}

/* An attached job (attach.c) is in no process group of ours: the main
 * process through its pidfd, the members of its tree the sampler finds
 * now, and its cgroup when it is its own; a SLURM job's processes in its
 * cgroup tree, one by one. */
static void signal_attached(struct sv *sv, int sig)
{
	if (sv->o->attach_slurm) {   /* never its cgroup whole: slurmstepd is in it */
		sv_signal_slurm_job(sv, sig);
		return;
	}
	struct mem_sample s;
	const struct proc_mem *pm;
	sampler_sample(sv->sampler, mono_ns(), false, &s);
	size_t n = sampler_procs(sv->sampler, &pm);
	sv_signal_main(sv, sig);
	for (size_t i = 0; i < n; i++)
		if (pm[i].pid != sv->child && pm[i].pid != getpid())
			kill(pm[i].pid, sig);
	if (sv->have_cg)
		cgroup_signal_all(&sv->cg, sig, 0);
}

/* Send sig to the whole job: its process group, and what left the group
 * (in its cgroup, or reparented to leakproof). */
void sv_signal_job(struct sv *sv, int sig)
{
	if (sv->attached) {
		signal_attached(sv, sig);
		return;
	}
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

size_t sv_leftovers(struct sv *sv, char *list, size_t len)
{
	struct mem_sample s;
	const struct proc_mem *pm;
	list[0] = '\0';
	if (sampler_sample(sv->sampler, mono_ns(), true, &s) <= 0)   /* true: a fresh look at who is in the tree */
		return 0;
	size_t n = sampler_procs(sv->sampler, &pm), at = 0;
	for (size_t i = 0; i < n && i < 3; i++) {
		int w = snprintf(list + at, len - at, "%spid %d (%s)", i ? ", " : "", (int)pm[i].pid, pm[i].name);
		if (w < 0 || (size_t)w >= len - at)
			break;
		at += (size_t)w;
	}
	if (n > 3 && at + 6 < len)
		snprintf(list + at, len - at, ", ...");
	return n;
}

/* Reap every child that ended; true when none is left at all. On a
 * pseudo-terminal, a stop of the main process is noted too (job_stop_sig,
 * for the terminal to follow: console.c). */
bool sv_reap(struct sv *sv)
{
	for (;;) {
		int status;
		struct rusage ru;
		pid_t pid = wait4(-1, &status, WNOHANG | (sv->pty || sv->fg_job ? WUNTRACED : 0), &ru);
		if (pid == 0)
			return false;
		if (pid < 0)
			return errno == ECHILD;
		if (WIFSTOPPED(status)) {
			if (pid == sv->child && !sv->child_exited)
				sv->job_stop_sig = WSTOPSIG(status);
			continue;
		}
		if (pid == sv->child && !sv->child_exited) {
			sv->child_exited = true;
			sv->child_maxrss = (uint64_t)ru.ru_maxrss * 1024;   /* KiB */
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
