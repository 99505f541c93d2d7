/*
 * budget.c — the job's memory limits: the limit a projection aims at, the
 * budgets (--max-mem, --max-gpu) and their soft limits, announced at the
 * start and checked at every sample. Part of the supervisor
 * (supervise-int.h); restarts at the soft limit go through restart.c.
 *
 * --max-mem goes to the kernel where the job has a memory cgroup (v2
 * memory.max with memory.high 5% below it, so the job is slowed and
 * reclaimed before it is killed; v1 memory.limit_in_bytes), else the
 * sampler enforces it: SIGKILL to the whole tree past the budget (cause
 * budget-kill). --max-gpu is always polled, through NVML. An attached job's
 * (attach.c) is always polled too, its cgroup not being leakproof's to
 * limit, and its soft limit stops it (the stop signal, SIGKILL after the
 * grace period) since nothing can start it again.
 *
 * Memory is bytes; times are CLOCK_MONOTONIC nanoseconds.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "core/supervise-int.h"
#include "platform/slurmjob.h"
#include "store/store.h"

uint64_t sv_machine_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

/* The limit a projection aims at: --max-mem, else the limit of the cgroup
 * leakproof runs in, else the machine's memory; *source names which. */
uint64_t sv_projection_limit(const struct supervise_opts *o, const char **source)
{
	uint64_t limit = o->max_mem_bytes;
	*source = "max-mem";
	if (!limit && o->attach_slurm && (limit = cgroup_limit_of(&o->attach_slurm->cg)))
		*source = "cgroup";   /* the job's allocation, SLURM's limit on its cgroup */
	else if (!limit && !o->attach_slurm && (limit = cgroup_self_limit()))
		*source = "cgroup";
	if (!limit) {
		limit = sv_machine_memory();
		*source = "machine";
	}
	return limit;
}

/*
 * Set the budgets (the kernel's where it can) and say how each is
 * enforced, on stderr and as a "budget" event.
 */
void sv_announce_budgets(struct sv *sv)
{
	const struct supervise_opts *o = sv->o;
	const char *no_cg_why = sv->no_cg_why;
	char max[32], soft[32], how[200];
	if (o->max_mem_bytes) {
		if (!sv->attached && sv->have_cg && sv->cg.has_memory &&
		    cgroup_set_limit(&sv->cg, o->max_mem_bytes,
		                     sv->cg.version == 2 ? o->max_mem_bytes - o->max_mem_bytes / 20 : 0) == 0) {
			sv->kernel_budget = true;
			snprintf(how, sizeof(how), "by the kernel (cgroup %s)",
			         sv->cg.version == 2 ? "v2 memory.max, memory.high 5% below" : "v1 memory.limit_in_bytes");
		} else {
			snprintf(how, sizeof(how), "by leakproof every %.3g ms (%.150s)", (double)o->interval_ns / 1e6,
			         sv->attached ? "attached: the job's cgroup is not leakproof's to limit"
			         : !sv->have_cg || !sv->cg.has_memory ? (no_cg_why[0] ? no_cg_why : "no memory cgroup")
			                                              : "the cgroup refused the limit");
		}
		sv->soft_bytes = o->soft_limit_bytes ? o->soft_limit_bytes : o->max_mem_bytes / 10 * 9;
		fmt_bytes(max, sizeof(max), (double)o->max_mem_bytes);
		fmt_bytes(soft, sizeof(soft), (double)sv->soft_bytes);
		sv_say(sv, "memory budget %s, enforced %s; soft limit %s%s", max, how, soft,
		       o->restart & RESTART_AT_LIMIT ? " (stop and restart there)"
		       : sv->attached ? " (the stop signal there, SIGKILL after the grace period)" : "");
		store_add_event(sv->st, sv->run_id, 0, "budget", how);
	} else if (o->soft_limit_bytes) {
		sv->soft_bytes = o->soft_limit_bytes;
	}
	if (o->max_gpu_bytes) {
		sv->soft_gpu_bytes = o->soft_gpu_bytes ? o->soft_gpu_bytes : o->max_gpu_bytes / 10 * 9;
		fmt_bytes(max, sizeof(max), (double)o->max_gpu_bytes);
		fmt_bytes(soft, sizeof(soft), (double)sv->soft_gpu_bytes);
		sv_say(sv, "GPU memory budget %s, enforced by leakproof through NVML%s; soft limit %s", max,
		       sv->nvml ? "" : " (which is not available: not enforced)", soft);
	}
}

static void budget_kill(struct sv *sv, int64_t now, const char *what, uint64_t used, uint64_t max)
{
	char u[32], m[32], d[160];
	snprintf(d, sizeof(d), "%s %s over the budget of %s", what, fmt_bytes(u, sizeof(u), (double)used),
	         fmt_bytes(m, sizeof(m), (double)max));
	sv->budget_killed = true;
	snprintf(sv->why_stopped, sizeof(sv->why_stopped), "%s", d);
	sv_signal_job(sv, SIGKILL);
	store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "budget-kill", d);
	sv_say(sv, "%s: killing the job", d);
}

/* One budget: soft limit (stop and restart, or a warning), hard (polled). */
static void check_one(struct sv *sv, int64_t now, const char *what, uint64_t used, uint64_t soft,
                      uint64_t max, bool polled)
{
	char u[32], l[32], reason[160];
	if (max && polled && used > max) {
		budget_kill(sv, now, what, used, max);
		return;
	}
	if (!soft || used < soft || sv->stop_sent)
		return;
	snprintf(reason, sizeof(reason), "%s %s reached the soft limit of %s", what,
	         fmt_bytes(u, sizeof(u), (double)used), fmt_bytes(l, sizeof(l), (double)soft));
	if (sv->o->restart & RESTART_AT_LIMIT) {
		sv_request_stop(sv, now, "at-limit", reason);
	} else if (sv->attached) {   /* no restart: the soft limit is where it is stopped */
		sv_request_stop(sv, now, NULL, reason);
	} else if (!sv->soft_warned) {
		sv->soft_warned = true;
		store_add_event(sv->st, sv->run_id, sv_now_t(sv, now), "soft-limit", reason);
		sv_say(sv, "warning: %s (--restart at-limit would restart the job here)", reason);
	}
}

/* Past a budget (polled ones only), kill; past a soft limit, stop to
 * restart or warn once. */
void sv_check_budgets(struct sv *sv, const struct mem_sample *s, int64_t now)
{
	if (sv->child_exited || sv->budget_killed)
		return;
	check_one(sv, now, "memory", s->pss, sv->soft_bytes, sv->o->max_mem_bytes, !sv->kernel_budget);
	if (s->has_gpu && !sv->budget_killed)
		check_one(sv, now, "GPU memory", s->gpu, sv->soft_gpu_bytes, sv->o->max_gpu_bytes, true);
}
