/*
 * placement.c — where this process runs, from its environment (SLURM's and
 * torchrun's variables) and its memory cgroup: the allocation and, for one
 * rank of a job across processes or nodes, its rank and the key its ranks
 * share. platform/placement.h says what is read; docs/internals/store.md
 * (schema 7) where it is kept. Units: bytes.
 */
#include "platform/placement.h"
#include "platform/cgroup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* The value of NAME in envp, NULL when absent or empty. */
static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);
	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return (*envp)[n + 1] ? *envp + n + 1 : NULL;
	return NULL;
}

static void copy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

/* A non-negative integer value, else fallback. */
static long env_int(char *const *envp, const char *name, long fallback)
{
	const char *v = env_get(envp, name);
	if (!v)
		return fallback;
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	return errno || *end || n < 0 || n > 1 << 30 ? fallback : n;
}

void placement_parse(char *const *envp, uint64_t cgroup_limit_bytes, struct placement *p)
{
	memset(p, 0, sizeof(*p));
	p->rank = p->local_rank = p->node_id = -1;
	const char *job = env_get(envp, "SLURM_JOB_ID");
	if (!job)
		job = env_get(envp, "SLURM_JOBID");
	copy(p->slurm_job_id, sizeof(p->slurm_job_id), job);
	copy(p->slurm_array_job_id, sizeof(p->slurm_array_job_id), env_get(envp, "SLURM_ARRAY_JOB_ID"));
	copy(p->slurm_array_task_id, sizeof(p->slurm_array_task_id), env_get(envp, "SLURM_ARRAY_TASK_ID"));
	const char *step = env_get(envp, "SLURM_STEP_ID");
	if (!step)
		step = env_get(envp, "SLURM_STEPID");
	copy(p->slurm_step_id, sizeof(p->slurm_step_id), step);

	p->alloc_mem_bytes = cgroup_limit_bytes;
	long mem_mb = env_int(envp, "SLURM_MEM_PER_NODE", 0);
	if (!p->alloc_mem_bytes && job && mem_mb > 0)
		p->alloc_mem_bytes = (uint64_t)mem_mb << 20;

	const char *gpus = env_get(envp, "CUDA_VISIBLE_DEVICES");
	if (!gpus)
		gpus = env_get(envp, "SLURM_STEP_GPUS");
	if (!gpus)
		gpus = env_get(envp, "SLURM_JOB_GPUS");
	copy(p->gpus, sizeof(p->gpus), gpus);

	long world = env_int(envp, "WORLD_SIZE", 0), rank = env_int(envp, "RANK", -1);
	if (world > 0 && rank >= 0 && env_get(envp, "LOCAL_RANK")) {
		/* torchrun (torch.distributed.run) and launchers that speak its words */
		copy(p->launcher, sizeof(p->launcher), "torchrun");
		p->rank = (int)rank;
		p->world_size = (int)world;
		p->local_rank = (int)env_int(envp, "LOCAL_RANK", -1);
		p->node_id = (int)env_int(envp, "GROUP_RANK", env_int(envp, "SLURM_NODEID", -1));
		const char *id = env_get(envp, "TORCHELASTIC_RUN_ID");
		const char *addr = env_get(envp, "MASTER_ADDR"), *port = env_get(envp, "MASTER_PORT");
		snprintf(p->job_key, sizeof(p->job_key), "torchrun:%s@%s:%s%s%s%s%s", id ? id : "none",
		         addr ? addr : "?", port ? port : "?", job ? " slurm:" : "", job ? job : "",
		         job && step ? "." : "", job && step ? step : "");
		return;
	}
	long tasks = env_int(envp, "SLURM_STEP_NUM_TASKS", env_int(envp, "SLURM_NTASKS", 0));
	rank = env_int(envp, "SLURM_PROCID", -1);
	if (job && step && tasks > 1 && rank >= 0) {
		copy(p->launcher, sizeof(p->launcher), "slurm");
		p->rank = (int)rank;
		p->world_size = (int)tasks;
		p->local_rank = (int)env_int(envp, "SLURM_LOCALID", -1);
		p->node_id = (int)env_int(envp, "SLURM_NODEID", -1);
		snprintf(p->job_key, sizeof(p->job_key), "slurm:%s.%s", job, step);
	}
}

void placement_here(struct placement *out)
{
	placement_parse(environ, cgroup_self_limit(), out);
}

int placement_known(const struct placement *p)
{
	return p->slurm_job_id[0] || p->gpus[0] || p->job_key[0];
}
