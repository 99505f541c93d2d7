/*
 * placement.h — where a run ran: the host's allocation (a SLURM job, its
 * array task and step, its memory and GPUs) and, for one rank of a job
 * spread over processes and nodes (srun, torchrun), the rank and the key
 * its ranks share. Read from the supervisor's environment
 * (platform/placement.c), kept with the run (store, schema 10), shown by
 * `report` and `ls`. Strings are fixed arrays: nothing to free.
 * Units: bytes.
 */
#ifndef LP_BASE_PLACEMENT_H
#define LP_BASE_PLACEMENT_H

#include <stdint.h>

struct placement {
	char slurm_job_id[32];        /* SLURM_JOB_ID; "" outside SLURM */
	char slurm_array_job_id[32];  /* SLURM_ARRAY_JOB_ID; "" unless an array task */
	char slurm_array_task_id[32]; /* SLURM_ARRAY_TASK_ID */
	char slurm_step_id[32];       /* SLURM_STEP_ID (srun's steps); "" in the batch script */
	uint64_t alloc_mem_bytes;     /* the allocation's memory: the cgroup limit in
	                               * force, else SLURM_MEM_PER_NODE; 0 unknown */
	char gpus[128];               /* CUDA_VISIBLE_DEVICES, else SLURM_STEP_GPUS or
	                               * SLURM_JOB_GPUS; "" none known */
	char launcher[16];            /* what made the ranks: "slurm", "torchrun"; "" alone */
	char job_key[160];            /* shared by the ranks of one job; "" alone */
	int rank;                     /* global rank (SLURM_PROCID, RANK); -1 alone */
	int local_rank;               /* on its node (SLURM_LOCALID, LOCAL_RANK); -1 */
	int world_size;               /* ranks in the job (SLURM_STEP_NUM_TASKS, WORLD_SIZE); 0 */
	int node_id;                  /* SLURM_NODEID, GROUP_RANK; -1 unknown */
};

#endif
