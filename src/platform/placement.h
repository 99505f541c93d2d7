/*
 * platform/placement.h — where this process runs, read from its
 * environment: SLURM's variables (job, array task, step, rank, node, GPUs,
 * memory) and torchrun's (RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK,
 * TORCHELASTIC_RUN_ID, MASTER_ADDR/PORT). The parse is separate from the
 * reading so tests give it any environment. Units: bytes.
 */
#ifndef LP_PLATFORM_PLACEMENT_H
#define LP_PLATFORM_PLACEMENT_H

#include <stdint.h>

#include "base/placement.h"

/*
 * Fill *out from envp (a NULL-terminated "NAME=value" array) and
 * cgroup_limit_bytes (the memory limit in force for this process, 0 none).
 *
 * A rank is recorded when the environment says the process is one of
 * several of a job: torchrun's RANK and WORLD_SIZE (launcher "torchrun";
 * the key names the rendezvous: TORCHELASTIC_RUN_ID, MASTER_ADDR:PORT and
 * the SLURM job when there is one), else an srun step with
 * SLURM_STEP_NUM_TASKS (or SLURM_NTASKS) > 1 (launcher "slurm"; the key is
 * "slurm:JOB.STEP"). A batch script's lone process is not a rank.
 */
void placement_parse(char *const *envp, uint64_t cgroup_limit_bytes, struct placement *out);
/* The same for this process: its environ and cgroup_self_limit(). */
void placement_here(struct placement *out);
/* Whether p says anything beyond the host and its cgroup's limit (a SLURM
 * job, GPUs, a rank): 1, else 0. */
int placement_known(const struct placement *p);

#endif
