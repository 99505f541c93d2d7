/*
 * test_slurmjob.c — what `attach --slurm-job` reads of SLURM (parsers of
 * platform/slurmjob.c, on SLURM 22.05's own output): job ids and steps,
 * `scontrol -o show job` records (an array's tasks, a command with
 * spaces), `scontrol listpids` lines, and the job's cgroup cut from a
 * process's path on v1 and v2 layouts; and cgroup_tree_each_proc() and
 * cgroup_tree_oom_kills() on a directory tree shaped as SLURM's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/cgroup.h"
#include "platform/slurmjob.h"
#include "tap.h"

static void test_spec(void)
{
	char job[32], step[32];
	CHECK_EQ_INT(slurm_parse_spec("12", job, sizeof(job), step, sizeof(step)), 0);
	CHECK_STR(job, "12");
	CHECK_STR(step, "");
	CHECK_EQ_INT(slurm_parse_spec("12.batch", job, sizeof(job), step, sizeof(step)), 0);
	CHECK_STR(job, "12");
	CHECK_STR(step, "batch");
	CHECK_EQ_INT(slurm_parse_spec("10_3.0", job, sizeof(job), step, sizeof(step)), 0);
	CHECK_STR(job, "10_3");
	CHECK_STR(step, "0");
	CHECK_EQ_INT(slurm_parse_spec("12.extern", job, sizeof(job), step, sizeof(step)), 0);
	const char *bad[] = { "", "abc", "12.", ".0", "12.x", "12_", "_3", "1 2", "12.0.1", "-1", "12;rm",
	                      "123456789012345678901234567890", NULL };
	for (int i = 0; bad[i]; i++)
		CHECK_EQ_INT(slurm_parse_spec(bad[i], job, sizeof(job), step, sizeof(step)), -1);
}

static void test_show_job(void)
{
	struct slurm_job j;
	memset(&j, 0, sizeof(j));
	const char *one = "JobId=7 JobName=train UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A "
	                  "JobState=RUNNING Reason=None NodeList=node[01-02] BatchHost=node01 "
	                  "Command=/home/alice/run job.sh WorkDir=/home/alice/my dir StdErr=/x\n";
	CHECK_EQ_INT(slurm_parse_show_job(one, &j), 0);
	CHECK_STR(j.job_id, "7");
	CHECK_STR(j.name, "train");
	CHECK_STR(j.user, "alice");
	CHECK_EQ_INT(j.uid, 1001);
	CHECK_STR(j.state, "RUNNING");
	CHECK_STR(j.nodes, "node[01-02]");
	CHECK_STR(j.command, "/home/alice/run job.sh");
	CHECK_STR(j.workdir, "/home/alice/my dir");
	CHECK_STR(j.array_job_id, "");
	CHECK_EQ_INT(j.records, 1);
	/* an array's tasks: a record each; --wrap has no command */
	const char *arr = "JobId=3 ArrayJobId=3 ArrayTaskId=1 JobName=wrap UserId=root(0) JobState=RUNNING "
	                  "Command=(null) NodeList=vm\n"
	                  "JobId=4 ArrayJobId=3 ArrayTaskId=0 JobName=wrap UserId=root(0) JobState=PENDING\n";
	CHECK_EQ_INT(slurm_parse_show_job(arr, &j), 0);
	CHECK_EQ_INT(j.records, 2);
	CHECK_STR(j.job_id, "3");
	CHECK_STR(j.array_task_id, "1");
	CHECK_STR(j.command, "");
	CHECK_EQ_INT(j.uid, 0);
	/* OldJobId= is not JobId= */
	CHECK_EQ_INT(slurm_parse_show_job("Job 3_7 not found\n", &j), -1);
	CHECK_EQ_INT(slurm_parse_show_job("", &j), -1);
}

static void test_listpids(void)
{
	const char *text = "PID      JOBID    STEPID   LOCALID GLOBALID\n"
	                   "16566    2        batch    0       0       \n"
	                   "16567    2        batch    -       -       \n"
	                   "16589    2        0        0       0       \n"
	                   "17000    22       0        0       0       \n"
	                   "garbage\n";
	pid_t pids[8];
	CHECK_EQ_INT(slurm_parse_listpids(text, "2", "", pids, 8), 3);
	CHECK_EQ_INT(pids[0], 16566);
	CHECK_EQ_INT(pids[2], 16589);
	CHECK_EQ_INT(slurm_parse_listpids(text, "2", "0", pids, 8), 1);
	CHECK_EQ_INT(pids[0], 16589);
	CHECK_EQ_INT(slurm_parse_listpids(text, "2", "batch", pids, 1), 1);   /* the cap */
	CHECK_EQ_INT(slurm_parse_listpids(text, "3", "", pids, 8), 0);
	CHECK_EQ_INT(slurm_parse_listpids("PID JOBID STEPID LOCALID GLOBALID\n", "2", "", pids, 8), 0);
}

static void test_cgroup_cut(void)
{
	char out[256];
	/* v1: <memory>/slurm_NODE/uid_U/job_J/step_S/task_T */
	const char *v1 = "/sys/fs/cgroup/memory/slurm_vm/uid_0/job_12/step_batch/task_0";
	CHECK_EQ_INT(slurm_cgroup_cut(v1, "12", "", out, sizeof(out)), 0);
	CHECK_STR(out, "/sys/fs/cgroup/memory/slurm_vm/uid_0/job_12");
	CHECK_EQ_INT(slurm_cgroup_cut(v1, "12", "batch", out, sizeof(out)), 0);
	CHECK_STR(out, "/sys/fs/cgroup/memory/slurm_vm/uid_0/job_12/step_batch");
	CHECK_EQ_INT(slurm_cgroup_cut(v1, "12", "0", out, sizeof(out)), -1);   /* another step's */
	CHECK_EQ_INT(slurm_cgroup_cut(v1, "1", "", out, sizeof(out)), -1);     /* job_1 is not job_12 */
	/* v2: .../system.slice/slurmstepd.scope/job_J/step_S/user/task_T */
	const char *v2 = "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/user/task_1";
	CHECK_EQ_INT(slurm_cgroup_cut(v2, "7", "0", out, sizeof(out)), 0);
	CHECK_STR(out, "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0");
	CHECK_EQ_INT(slurm_cgroup_cut("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7", "7", "", out, sizeof(out)), 0);
	/* proctrack/linuxproc: the job's processes in slurmd's or a user's cgroup */
	CHECK_EQ_INT(slurm_cgroup_cut("/sys/fs/cgroup/system.slice/slurmd.service", "7", "", out, sizeof(out)), -1);
	CHECK_EQ_INT(slurm_cgroup_cut(v1, "12", "", out, 10), -1);   /* does not fit */
}

static void count_one(pid_t pid, void *ctx)
{
	long *sum = ctx;
	*sum += pid;
}

static void put(const char *dir, const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (char *slash = path + strlen(dir) + 1; (slash = strchr(slash, '/')); slash++) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_tree_each_proc(void)
{
	char dir[] = "/tmp/lp-slurmjob-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	put(dir, "job_5/cgroup.procs", "");
	put(dir, "job_5/step_batch/cgroup.procs", "30\n");
	put(dir, "job_5/step_batch/task_0/cgroup.procs", "11\n13\n");
	put(dir, "job_5/step_0/user/task_0/cgroup.procs", "12\n");
	char top[600];
	snprintf(top, sizeof(top), "%s/job_5", dir);
	long sum = 0;
	CHECK_EQ_INT(cgroup_tree_each_proc(top, count_one, &sum), 4);
	CHECK_EQ_INT(sum, 30 + 11 + 13 + 12);
	/* a cgroup below without its cgroup.procs (gone meanwhile): skipped */
	char path[700];
	snprintf(path, sizeof(path), "%s/job_5/step_0/user/task_0/cgroup.procs", dir);
	unlink(path);
	sum = 0;
	CHECK_EQ_INT(cgroup_tree_each_proc(top, count_one, &sum), 3);
	snprintf(path, sizeof(path), "%s/job_5/none", dir);
	CHECK_EQ_INT(cgroup_tree_each_proc(path, NULL, NULL), -1);   /* the top itself: an error */
	/* OOM kills: v1 counts each cgroup's own (summed over the tree), v2's
	 * memory.events at the top counts those below already */
#define OOM_CONTROL(n) "oom_kill_disable 0\nunder_oom 0\noom_kill " #n "\n"
	put(dir, "job_5/memory.oom_control", OOM_CONTROL(0));
	put(dir, "job_5/step_batch/memory.oom_control", OOM_CONTROL(2));
	put(dir, "job_5/step_batch/task_0/memory.oom_control", OOM_CONTROL(1));
	put(dir, "job_5/memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 5\n");
	struct job_cgroup cg = { .version = 1, .has_memory = true };
	snprintf(cg.dir, sizeof(cg.dir), "%s", top);
	CHECK_EQ_INT(cgroup_tree_oom_kills(&cg), 3);
	cg.version = 2;
	CHECK_EQ_INT(cgroup_tree_oom_kills(&cg), 5);
	snprintf(cg.dir, sizeof(cg.dir), "%s", path);   /* gone: 0, quietly */
	CHECK_EQ_INT(cgroup_tree_oom_kills(&cg), 0);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

TEST_MAIN("slurmjob",
	TEST(test_spec),
	TEST(test_show_job),
	TEST(test_listpids),
	TEST(test_cgroup_cut),
	TEST(test_tree_each_proc))
