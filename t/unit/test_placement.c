/*
 * test_placement.c — where a run ran: the placement read from SLURM's and
 * torchrun's environment (a batch script, an srun step's ranks, an array
 * task, torchrun under SLURM, nothing at all, hostile values), and its
 * round trip through the store: a run's row carries it, the ranks of one
 * job are listed by rank, and the job's report names the rank that grows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "judge/job.h"
#include "platform/placement.h"
#include "report/report.h"
#include "store/store.h"
#include "util/util.h"
#include "tap.h"

static void test_batch_script(void)
{
	char *env[] = { "SLURM_JOB_ID=41", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_MEM_PER_NODE=300",
	                "SLURM_JOB_GPUS=0,1", "PATH=/bin", NULL };
	struct placement p;
	placement_parse(env, 0, &p);
	CHECK_STR(p.slurm_job_id, "41");
	CHECK_STR(p.slurm_step_id, "");
	CHECK(p.alloc_mem_bytes == 300ULL << 20);   /* no cgroup limit: SLURM's number */
	CHECK_STR(p.gpus, "0,1");
	CHECK_STR(p.job_key, "");                   /* one process: not a rank */
	CHECK_EQ_INT(p.rank, -1);
	CHECK(placement_known(&p));
	placement_parse(env, 123456789, &p);
	CHECK(p.alloc_mem_bytes == 123456789);      /* the cgroup's limit wins */
}

static void test_srun_ranks(void)
{
	char *env[] = { "SLURM_JOB_ID=7", "SLURM_STEP_ID=2", "SLURM_PROCID=1", "SLURM_LOCALID=1",
	                "SLURM_NODEID=0", "SLURM_STEP_NUM_TASKS=3", "SLURM_NTASKS=3",
	                "CUDA_VISIBLE_DEVICES=3", "SLURM_ARRAY_JOB_ID=5", "SLURM_ARRAY_TASK_ID=2", NULL };
	struct placement p;
	placement_parse(env, 1 << 30, &p);
	CHECK_STR(p.launcher, "slurm");
	CHECK_STR(p.job_key, "slurm:7.2");
	CHECK_EQ_INT(p.rank, 1);
	CHECK_EQ_INT(p.local_rank, 1);
	CHECK_EQ_INT(p.node_id, 0);
	CHECK_EQ_INT(p.world_size, 3);
	CHECK_STR(p.gpus, "3");
	CHECK_STR(p.slurm_array_job_id, "5");
	CHECK_STR(p.slurm_array_task_id, "2");
	CHECK_STR(p.slurm_step_id, "2");
}

static void test_torchrun(void)
{
	char *env[] = { "RANK=5", "LOCAL_RANK=1", "WORLD_SIZE=8", "GROUP_RANK=2", "TORCHELASTIC_RUN_ID=abc",
	                "MASTER_ADDR=node1", "MASTER_PORT=29500", "SLURM_JOB_ID=9", "SLURM_STEP_ID=0",
	                "SLURM_PROCID=2", "SLURM_STEP_NUM_TASKS=4", NULL };
	struct placement p;
	placement_parse(env, 0, &p);
	CHECK_STR(p.launcher, "torchrun");          /* torchrun's ranks, not srun's */
	CHECK_EQ_INT(p.rank, 5);
	CHECK_EQ_INT(p.local_rank, 1);
	CHECK_EQ_INT(p.world_size, 8);
	CHECK_EQ_INT(p.node_id, 2);
	CHECK_STR(p.job_key, "torchrun:abc@node1:29500 slurm:9.0");
}

static void test_nothing_and_hostile(void)
{
	char *none[] = { "HOME=/root", NULL };
	struct placement p;
	placement_parse(none, 0, &p);
	CHECK(!placement_known(&p));
	CHECK_EQ_INT(p.rank, -1);
	CHECK_EQ_INT(p.world_size, 0);
	placement_parse(NULL, 0, &p);
	CHECK(!placement_known(&p));
	char big[400];
	memset(big, '9', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "SLURM_JOB_ID=", 13);
	char *bad[] = { big, "SLURM_STEP_ID=0", "SLURM_PROCID=-1", "SLURM_STEP_NUM_TASKS=x", "RANK=1",
	                "WORLD_SIZE=99999999999999999999", "LOCAL_RANK=0", "SLURM_MEM_PER_NODE=1e9", NULL };
	placement_parse(bad, 0, &p);
	CHECK(strlen(p.slurm_job_id) < sizeof(p.slurm_job_id));   /* cut, not overrun */
	CHECK_STR(p.job_key, "");                 /* no rank from numbers out of range */
	CHECK_EQ_INT(p.rank, -1);
	CHECK(p.alloc_mem_bytes == 0);
}

static char tmpdir[64];

static int64_t begin(struct store *st, const struct placement *p)
{
	struct run_begin rb = { .started_at = 1700000000, .command_json = "[\"x\"]", .cwd = "/", .hostname = "n1",
	                        .measure = MEASURE_RSS, .placement = p };
	return store_run_begin(st, &rb);
}

static void test_store_round_trip(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/p.db", tmpdir);
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	char *e0[] = { "SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NODEID=0",
	               "SLURM_STEP_NUM_TASKS=2", "SLURM_ARRAY_TASK_ID=3", "CUDA_VISIBLE_DEVICES=0", NULL };
	char *e1[] = { "SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NODEID=1",
	               "SLURM_STEP_NUM_TASKS=2", NULL };
	struct placement p0, p1;
	placement_parse(e0, 2ULL << 30, &p0);
	placement_parse(e1, 0, &p1);
	int64_t lone = begin(st, NULL);
	int64_t r1 = begin(st, &p1);   /* rank 1 first: listed by rank */
	int64_t r0 = begin(st, &p0);
	CHECK(lone > 0 && r0 > 0 && r1 > 0);
	store_close(st);

	st = store_open_readonly(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_row r;
	CHECK_EQ_INT(store_get_run(st, lone, &r), 0);
	CHECK(!r.has_place);
	CHECK_EQ_INT(r.place.rank, -1);
	CHECK_STR(r.place.job_key, "");
	run_row_release(&r);
	CHECK_EQ_INT(store_get_run(st, r0, &r), 0);
	CHECK(r.has_place);
	CHECK_STR(r.place.slurm_job_id, "7");
	CHECK_STR(r.place.slurm_array_task_id, "3");
	CHECK_STR(r.place.slurm_step_id, "0");
	CHECK_STR(r.place.gpus, "0");
	CHECK(r.place.alloc_mem_bytes == 2ULL << 30);
	CHECK_STR(r.place.launcher, "slurm");
	CHECK_EQ_INT(r.place.world_size, 2);
	run_row_release(&r);

	struct run_row *rows;
	size_t n;
	CHECK_EQ_INT(store_list_job_runs(st, "slurm:7.0", &rows, &n), 0);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_EQ_INT(rows[0].id, r0);
		CHECK_EQ_INT(rows[0].place.rank, 0);
		CHECK_EQ_INT(rows[1].id, r1);
		CHECK_EQ_INT(rows[1].place.node_id, 1);
		CHECK(rows[1].place.alloc_mem_bytes == 0);
	}
	run_rows_free(rows, n);
	CHECK_EQ_INT(store_list_job_runs(st, "slurm:8.0", &rows, &n), 0);
	CHECK_EQ_INT(n, 0);
	run_rows_free(rows, n);
	CHECK_EQ_INT(store_list_runs(st, &rows, &n), 0);
	CHECK_EQ_INT(n, 3);
	run_rows_free(rows, n);
	store_close(st);
}

/* A rank of job "slurm:9.0" with 60 steps growing growth bytes a step. */
static int64_t rank_run(struct store *st, int rank, double growth)
{
	char r[32], *env[] = { "SLURM_JOB_ID=9", "SLURM_STEP_ID=0", r, "SLURM_NODEID=0", "SLURM_STEP_NUM_TASKS=3",
	                       NULL };
	snprintf(r, sizeof(r), "SLURM_PROCID=%d", rank);
	struct placement p;
	placement_parse(env, 0, &p);
	int64_t id = begin(st, &p);
	for (int i = 0; i < 60; i++) {
		uint64_t b = (100ULL << 20) + (uint64_t)(growth * i) + (uint64_t)((i * 7919) % 13) * 4096;
		struct step_rec sr = { .step = i + 1, .epoch = -1,
		                       .mem = { .t = i * 0.1, .nprocs = 1, .rss = b, .pss = b, .uss = b, .pss_exact = true } };
		store_add_sample(st, id, &sr.mem);
		store_add_step(st, id, &sr);
	}
	struct run_end re = { .ended_at = 1700000010, .status = RUN_DONE, .step_source = STEP_SOURCE_CHANNEL, .steps = 60 };
	store_run_end(st, id, &re);
	store_flush(st);
	return id;
}

static void test_job_report(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/j.db", tmpdir);
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	int64_t r0 = rank_run(st, 0, 0), r1 = rank_run(st, 1, 1 << 20);
	rank_run(st, 2, 0);
	int64_t lone = begin(st, NULL);
	store_close(st);
	st = store_open_readonly(path);
	if (!st)
		return;

	struct job_model m;
	char id[32];
	snprintf(id, sizeof(id), "%lld", (long long)r0);
	CHECK_EQ_INT(job_model_load(st, id, -1, &m), 0);
	CHECK_STR(m.key, "slurm:9.0");
	CHECK_EQ_INT(m.nranks, 3);
	CHECK_EQ_INT(m.growing, 1);
	if (m.nranks == 3) {
		CHECK_EQ_INT(m.ranks[m.worst].run.id, r1);
		CHECK_EQ_INT(m.ranks[1].verdict, VERDICT_LEAK);
		CHECK(m.ranks[0].verdict != VERDICT_LEAK && m.ranks[2].verdict != VERDICT_LEAK);
	}
	struct strbuf sb = STRBUF_INIT;
	CHECK_EQ_INT(job_report_render(&m, REPORT_TEXT, &sb), 0);
	CHECK(strstr(strbuf_str(&sb), "leakproof: job slurm:9.0 \xe2\x80\x94 3 ranks recorded (slurm)\n") != NULL);
	CHECK(strstr(strbuf_str(&sb), "rank 1 grows: +1.00 MiB/step on n1 (node 0)") != NULL);
	strbuf_reset(&sb);
	CHECK_EQ_INT(job_report_render(&m, REPORT_JSON, &sb), 0);
	CHECK(strstr(strbuf_str(&sb), "\"growing_ranks\": [1]") != NULL);
	strbuf_reset(&sb);
	CHECK_EQ_INT(job_report_render(&m, REPORT_HTML, &sb), -1);   /* not a table format */
	strbuf_release(&sb);
	job_model_release(&m);

	capture_begin();
	CHECK_EQ_INT(job_model_load(st, "", -1, &m), 1);   /* the latest run ran alone */
	CHECK(strstr(capture_end(), "is not one rank of a job of several") != NULL);
	job_model_release(&m);
	capture_begin();
	CHECK_EQ_INT(job_model_load(st, "slurm:1.0", -1, &m), 1);
	CHECK(strstr(capture_end(), "no job 'slurm:1.0' in the store") != NULL);
	job_model_release(&m);
	(void)lone;
	store_close(st);
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/lp-place-XXXXXX");
	if (!mkdtemp(tmpdir))
		abort();
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "# cannot remove %s\n", tmpdir);
}

static void test_store(void)
{
	setup();
	test_store_round_trip();
	test_job_report();
	teardown();
}

TEST_MAIN("placement", TEST(test_batch_script), TEST(test_srun_ranks), TEST(test_torchrun),
          TEST(test_nothing_and_hostile), TEST(test_store))
