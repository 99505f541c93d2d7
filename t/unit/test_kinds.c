/*
 * test_kinds.c — the growth kinds judged from a store with known series
 * (judge/kinds.c through run_summary_load): copy-on-write of two workers
 * that stops (not a leak, the verdict changed), that still rises (bound,
 * no projection to the limit), a worker's anonymous leak with the parent
 * flat, page cache only (not a leak), and the flight recorder of an
 * oom-kill end naming the growing worker. Deterministic: rows written as
 * the supervisor would, no timing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "judge/census.h"
#include "judge/kinds.h"
#include "judge/summary.h"
#include "report/report.h"
#include "store/store.h"
#include "util/util.h"
#include "tap.h"

#define MiB (1024.0 * 1024.0)

static char tmpdir[64];
static char store_path[128];

static int64_t begin(struct store *st)
{
	struct run_begin rb = {
		.started_at = 1700000000.0, .command_json = "[\"python3\", \"train.py\"]", .cwd = "/w",
		.hostname = "h", .measure = MEASURE_PSS, .interval_ns = 10000000, .limit_bytes = 8ULL << 30,
		.limit_source = "max-mem", .mem_total_bytes = 16ULL << 30, .cgroup_mode = "v1",
	};
	return store_run_begin(st, &rb);
}

static void end(struct store *st, int64_t id, double duration, int64_t steps)
{
	struct run_end re = { .ended_at = 1700000000.0 + duration, .exit_code = 0, .status = RUN_DONE,
	                      .step_source = STEP_SOURCE_CHANNEL, .steps = steps };
	store_run_end(st, id, &re);
}

static void step(struct store *st, int64_t id, int i, double t, double pss)
{
	struct step_rec r = { .step = i, .epoch = -1 };
	r.mem.t = t;
	r.mem.nprocs = 3;
	r.mem.rss = r.mem.pss = r.mem.uss = (uint64_t)pss;
	r.mem.pss_exact = true;
	store_add_step(st, id, &r);
}

static void kind(struct store *st, int64_t id, double t, int pid, int ppid, double anon, double cow,
                 double cow_base, double file)
{
	struct kind_row k = { .t = t, .pid = pid, .ppid = ppid, .anon = (uint64_t)anon,
	                      .cow = (uint64_t)cow, .cow_base = (uint64_t)cow_base, .file = (uint64_t)file };
	snprintf(k.name, sizeof(k.name), "%s", pid ? "python3" : "cgroup");
	store_add_kind_sample(st, id, &k);
}

/*
 * A DataLoader: main (pid 100) holds 400 MiB; workers 101 and 102 share it
 * and copy 100 MiB each over the first cow_steps of 400 steps (0.1 s a
 * step, a row every step). The tree's PSS grows with the copies.
 */
/* Two forked workers copy 100 MiB each over the first cow_steps steps.
 * Their rows show the copies as a sampler reads them: at once, or (stale_from
 * < stale_to) read last at step stale_from and not again until stale_to,
 * as on a busy machine whose CPU budget had no credit for them. */
static int64_t cow_run_read(struct store *st, int cow_steps, int nsteps, int stale_from, int stale_to)
{
	int64_t id = begin(st);
	double seen = 0;
	for (int i = 1; i <= nsteps; i++) {
		double t = i * 0.1;
		double copied = 100 * MiB * (i < cow_steps ? (double)i / cow_steps : 1.0);
		if (i <= stale_from || i >= stale_to)
			seen = copied;
		step(st, id, i, t, 400 * MiB + 2 * copied);
		kind(st, id, t, 100, 1, 400 * MiB, 0, 0, 50 * MiB);
		kind(st, id, t, 101, 100, 400 * MiB, seen, 400 * MiB, 5 * MiB);
		kind(st, id, t, 102, 100, 400 * MiB, seen, 400 * MiB, 5 * MiB);
	}
	end(st, id, nsteps * 0.1, nsteps);
	return id;
}

static int64_t cow_run(struct store *st, int cow_steps, int nsteps)
{
	return cow_run_read(st, cow_steps, nsteps, nsteps, 0);
}

static int load(struct store *st, int64_t id, struct run_summary *s)
{
	int rc = run_summary_load(st, id, -1, s);
	CHECK_EQ_INT(rc, 0);
	CHECK(s->kinds != NULL);
	return rc;
}

static struct store *open_store(void)
{
	struct store *st = store_open(store_path);
	if (!st)
		exit(1);
	return st;
}

static void test_cow_stopped_is_not_a_leak(void)
{
	struct store *st = open_store();
	int64_t id = cow_run(st, 150, 400);    /* copies during the first 150 steps */
	store_flush(st);
	struct run_summary s;
	if (load(st, id, &s))
		return;
	const struct run_kinds *k = s.kinds;
	CHECK(k->has_diagnosis);
	CHECK_EQ_INT(k->diagnosis_kind, KIND_COW);
	CHECK_EQ_INT(k->cow_workers, 2);
	CHECK(!k->cow_rising);
	CHECK(fabs(k->cow_bytes - 200 * MiB) < MiB);
	CHECK(fabs(k->cow_bound_bytes - 800 * MiB) < MiB);
	CHECK(k->cow_flat_since_x > 100 && k->cow_flat_since_x <= 150);
	CHECK(s.a.verdict != VERDICT_LEAK);
	CHECK(strstr(k->diagnosis, "2 forked workers privately copied") != NULL);
	CHECK(strstr(k->diagnosis, "flat since step") != NULL);
	/* roles */
	int workers = 0;
	for (size_t i = 0; i < k->n; i++)
		if (k->k[i].kind == KIND_COW)
			workers += !strncmp(k->k[i].role, "worker ", 7);
	CHECK_EQ_INT(workers, 2);
	run_summary_release(&s);
	store_close(st);
}

static void test_cow_rising_is_projected_to_its_bound(void)
{
	struct store *st = open_store();
	int64_t id = cow_run(st, 1000, 300);    /* still copying at the end */
	store_flush(st);
	struct run_summary s;
	if (load(st, id, &s))
		return;
	const struct run_kinds *k = s.kinds;
	CHECK(k->has_diagnosis);
	CHECK_EQ_INT(k->diagnosis_kind, KIND_COW);
	CHECK(k->cow_rising);
	CHECK(strstr(k->diagnosis, "still rising") != NULL);
	CHECK(k->cow_level_bytes > s.a.last_bytes);
	CHECK(s.a.projected_to_limit < 0);       /* the bound is under the limit */
	run_summary_release(&s);
	store_close(st);
}

/* A late read's one jump is copying done since the read before, not
 * copying that goes on: the copies are flat, since that read. */
static void test_cow_read_late_is_not_still_rising(void)
{
	struct store *st = open_store();
	int64_t id = cow_run_read(st, 150, 400, 60, 300);
	store_flush(st);
	struct run_summary s;
	if (load(st, id, &s))
		return;
	const struct run_kinds *k = s.kinds;
	CHECK(k->has_diagnosis);
	CHECK_EQ_INT(k->diagnosis_kind, KIND_COW);
	CHECK(!k->cow_rising);
	CHECK(fabs(k->cow_bytes - 200 * MiB) < MiB);
	CHECK(k->cow_flat_since_x >= 300 && k->cow_flat_since_x <= 301);
	CHECK(strstr(k->diagnosis, "flat since step") != NULL);
	run_summary_release(&s);
	store_close(st);
}

static void test_worker_leak_parent_flat(void)
{
	struct store *st = open_store();
	int64_t id = begin(st);
	for (int i = 1; i <= 300; i++) {
		double t = i * 0.1;
		step(st, id, i, t, 500 * MiB + i * 256 * 1024.0);
		kind(st, id, t, 200, 1, 300 * MiB, 0, 0, 50 * MiB);
		kind(st, id, t, 201, 200, 100 * MiB + i * 256 * 1024.0, 2 * MiB, 100 * MiB, 5 * MiB);
		kind(st, id, t, 202, 200, 100 * MiB, 2 * MiB, 100 * MiB, 5 * MiB);
	}
	end(st, id, 30, 300);
	store_flush(st);
	struct run_summary s;
	if (load(st, id, &s))
		return;
	const struct run_kinds *k = s.kinds;
	CHECK_EQ_INT(s.a.verdict, VERDICT_LEAK);
	CHECK(k->has_diagnosis);
	CHECK_EQ_INT(k->diagnosis_kind, KIND_ANONYMOUS);
	CHECK(strstr(k->diagnosis, "pid 201 (worker 1) grows 256 KiB per step; the parent is flat") != NULL);
	CHECK(k->n > 0 && k->k[0].pid == 201 && k->k[0].kind == KIND_ANONYMOUS);
	run_summary_release(&s);
	store_close(st);
}

static void test_page_cache_is_not_a_leak(void)
{
	struct store *st = open_store();
	int64_t id = begin(st);
	for (int i = 1; i <= 300; i++) {
		double t = i * 0.1;
		/* judged by PSS, which grows with a memory-mapped file */
		step(st, id, i, t, 100 * MiB + i * MiB);
		kind(st, id, t, 300, 1, 80 * MiB, 0, 0, 20 * MiB + i * MiB);
		kind(st, id, t, 0, 0, 80 * MiB, 0, 0, 20 * MiB + i * MiB);
	}
	end(st, id, 30, 300);
	store_flush(st);
	struct run_summary s;
	if (load(st, id, &s))
		return;
	CHECK_EQ_INT(s.verdict_judged, VERDICT_LEAK);
	CHECK_EQ_INT(s.a.verdict, VERDICT_NO_LEAK);
	CHECK(s.kinds->overrides_verdict);
	CHECK_EQ_INT(s.kinds->diagnosis_kind, KIND_FILE);
	CHECK(strstr(s.kinds->diagnosis, "mapped by pid 300 (main)") != NULL);
	run_summary_release(&s);
	store_close(st);
}

static void test_flight_recorder(void)
{
	struct store *st = open_store();
	int64_t id = begin(st);
	for (int i = 1; i <= 100; i++) {
		double t = i * 0.1;
		step(st, id, i, t, 100 * MiB + i * 2 * MiB);
		kind(st, id, t, 400, 1, 50 * MiB, 0, 0, 10 * MiB);
		kind(st, id, t, 401, 400, 50 * MiB + i * 2 * MiB, MiB, 50 * MiB, MiB);
	}
	struct segment_end se = { .ended_at = 1700000000.0 + 10.05, .exit_code = -1, .exit_signal = 9,
	                          .cause = CAUSE_OOM_KILL, .evidence = "oom_kill count rose by 1",
	                          .has_step = true, .step = 100, .memory_bytes = 300 << 20 };
	store_segment_end(st, id, 0, &se);
	/* a census every second: the worker's job keeps 10 arrays more each */
	for (int c = 1; c <= 10; c++) {
		struct census_row r = { .t = c, .step = c * 10, .seq = c, .type = "numpy.ndarray/float64",
		                        .count = c * 10, .bytes = c * 10 * (int64_t)MiB,
		                        .holder = (char *)"list kept in job.py (module __main__)", .cost_us = -1 };
		store_add_census(st, id, &r);
		struct census_row d = { .t = c, .step = c * 10, .seq = c, .type = "dict", .count = 5000 + c % 3,
		                        .bytes = -1, .cost_us = -1 };
		store_add_census(st, id, &d);
		struct census_row hostile = { .t = c, .step = c * 10, .seq = c, .type = "torch.Tensor/cpu/float32/grad_fn",
		                              .count = c * 20, .bytes = c * 80,
		                              .holder = (char *)"list <script>alert(1)</script>|\"h\" in `x`.py", .cost_us = -1 };
		store_add_census(st, id, &hostile);
		struct census_row all = { .t = c, .step = c * 10, .seq = c, .type = "*", .count = 20000,
		                          .bytes = -1, .cost_us = 1000 };
		store_add_census(st, id, &all);
	}
	struct run_end re = { .ended_at = 1700000000.0 + 10.1, .exit_code = -1, .exit_signal = 9,
	                      .status = RUN_DONE, .step_source = STEP_SOURCE_CHANNEL, .steps = 100 };
	store_run_end(st, id, &re);
	store_flush(st);
	struct run_summary s;
	if (load(st, id, &s))
		return;
	const struct run_kinds *k = s.kinds;
	CHECK(k->oom);
	CHECK(k->oom_cause == CAUSE_OOM_KILL);
	CHECK_EQ_INT(k->end_step, 100);
	CHECK(strstr(k->flight, "OOM killer") != NULL);
	CHECK(strstr(k->flight, "anonymous memory of pid 401 (worker 1, python3)") != NULL);
	fprintf(stderr, "# %s\n", k->flight);
	CHECK(strstr(k->flight, "per step") != NULL);
	CHECK_EQ_INT(k->nfp, 2);
	/* the census: what Python objects grew in the window, and who holds them */
	CHECK(strstr(k->flight, "Python objects between the censuses at 1.0 s and 10.0 s: +180 Tensor (cpu, "
	                        "float32) with grad_fn (+720 B) to 200, held by list <script>") != NULL);
	CHECK(strstr(k->flight, "; +90 numpy.ndarray (float64) (+90.0 MiB) to 100, held by list kept in job.py "
	                        "(module __main__).") != NULL);
	CHECK(strstr(k->flight, "dict") == NULL);      /* it went up and down */
	CHECK(s.census && s.census->has_window && s.census->nrecent == 2);
	struct strbuf sb = STRBUF_INIT;
	report_render(&s, REPORT_JSON, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "\"census\": {\"from_t\": 1, \"to_t\": 10, \"grew\": [") != NULL);
	strbuf_reset(&sb);
	report_render(&s, REPORT_MD, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "**The last seconds before the end:** The job was ended") != NULL);
	CHECK(strstr(strbuf_str(&sb), "| 401 | worker 1 |") != NULL);
	CHECK(strstr(strbuf_str(&sb), "<script") == NULL);     /* escaped, in the census too */
	CHECK(strstr(strbuf_str(&sb), "| list &lt;script>alert(1)&lt;/script>\\|\"h\" in `x`.py |") != NULL);
	strbuf_reset(&sb);
	report_render(&s, REPORT_JUNIT, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "<property name=\"leakproof.end\" value=\"oom-kill\"/>") != NULL);
	CHECK(strstr(strbuf_str(&sb), "The last seconds before the end: The job was ended") != NULL);
	CHECK(strstr(strbuf_str(&sb), "<script") == NULL);
	CHECK(strstr(strbuf_str(&sb), "census: list &lt;script&gt;alert(1)&lt;/script&gt;|&quot;h&quot;") != NULL);
	strbuf_reset(&sb);
	report_render(&s, REPORT_HTML, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "<section id=\"flight\">") != NULL);
	CHECK(strstr(strbuf_str(&sb), "<section id=\"census\">") != NULL);
	CHECK(strstr(strbuf_str(&sb), "<script>alert") == NULL);
	CHECK(strstr(strbuf_str(&sb), "<td>list &lt;script&gt;alert(1)&lt;/script&gt;|&quot;h&quot; in `x`.py</td>") != NULL);
	strbuf_release(&sb);
	run_summary_release(&s);
	store_close(st);
}

/* The kinds in every format, and the job's totals behind the chart and
 * the CSV's columns. */
static void test_kinds_in_every_format(void)
{
	struct store *st = open_store();
	int64_t id = cow_run(st, 150, 400);
	store_flush(st);
	struct run_summary s;
	if (load(st, id, &s))
		return;
	double t[2] = { 5.0, 30.0 }, a[2], c[2], f[2];
	double *out[KIND_COUNT] = { a, c, f, NULL, NULL };
	unsigned mask = run_kinds_totals(s.kinds, t, 2, out);
	CHECK(mask == ((1u << KIND_ANONYMOUS) | (1u << KIND_COW) | (1u << KIND_FILE)));
	CHECK(fabs(a[0] - 1200 * MiB) < 1);                  /* three processes' anonymous */
	CHECK(fabs(c[0] - 2 * 100 * MiB * 50 / 150) < 1);    /* step 50 of 150 */
	CHECK(fabs(c[1] - 200 * MiB) < 1);
	CHECK(fabs(f[1] - 60 * MiB) < 1);                    /* no cgroup rows: the processes' */

	struct strbuf sb = STRBUF_INIT;
	report_render(&s, REPORT_MD, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "| Diagnosis | copy-on-write") != NULL);
	CHECK(strstr(strbuf_str(&sb), "| Kind | Process | Role | Growth/step | Now | Bound |") != NULL);
	CHECK(strstr(strbuf_str(&sb), "| copy-on-write | 101 | worker 1 |") != NULL);
	CHECK(strstr(strbuf_str(&sb), "| 400 MiB |\n") != NULL);   /* the bound */
	strbuf_reset(&sb);
	report_render(&s, REPORT_CSV, NULL, &sb);
	static const char head[] = "step,epoch,t,rss,pss,uss,swap,cgroup,gpu,anonymous,copy_on_write,"
	                           "file_cache,shared_memory\n";
	CHECK(!strncmp(strbuf_str(&sb), head, strlen(head)));
	CHECK(strstr(strbuf_str(&sb), ",1258291200,209715200,62914560,0\n") != NULL);   /* step 400 */
	strbuf_reset(&sb);
	report_render(&s, REPORT_HTML, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "<section id=\"memory-kinds\">") != NULL);
	CHECK(strstr(strbuf_str(&sb), "data-series=\"kind-copy-on-write\"") != NULL);
	CHECK(strstr(strbuf_str(&sb), "<tr class=\"lp-kind\" data-kind=\"copy-on-write\">") != NULL);
	CHECK(strstr(strbuf_str(&sb), "id=\"census\"") == NULL);   /* no census */
	strbuf_reset(&sb);
	report_render(&s, REPORT_SVG, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "data-series=\"pss\"") != NULL);
	CHECK(strstr(strbuf_str(&sb), "data-series=\"kind-anonymous\"") != NULL);
	strbuf_reset(&sb);
	report_render(&s, REPORT_JUNIT, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "<property name=\"leakproof.diagnosis_kind\" value=\"copy-on-write\"/>") != NULL);
	CHECK(strstr(strbuf_str(&sb), "<property name=\"leakproof.verdict_judged\" value=\"") != NULL);
	CHECK(strstr(strbuf_str(&sb), "failures=\"0\"") != NULL);   /* not a leak */
	CHECK(strstr(strbuf_str(&sb), "\ndiagnosis: copy-on-write") != NULL);
	strbuf_release(&sb);
	run_summary_release(&s);
	store_close(st);
}

/* A kind row of pid (0: the cgroup, named name) with shared memory. */
static void kind_shm(struct store *st, int64_t id, double t, int pid, int ppid, const char *name, double anon,
                     double shmem)
{
	struct kind_row k = { .t = t, .pid = pid, .ppid = ppid, .anon = (uint64_t)anon, .shmem = (uint64_t)shmem };
	snprintf(k.name, sizeof(k.name), "%s", name);
	store_add_kind_sample(st, id, &k);
}

static void sample(struct store *st, int64_t id, double t, int nprocs, double pss)
{
	struct mem_sample m = { .t = t, .nprocs = nprocs, .pss_exact = true };
	m.rss = m.pss = m.uss = (uint64_t)pss;
	store_add_sample(st, id, &m);
}

/*
 * Files left in /dev/shm: the job's PSS is flat (nobody maps them), the
 * cgroup's shmem (or, without a cgroup, the machine's /dev/shm) grows 1 MiB
 * a step. The headline judges PSS plus that shmem ("pss+shm") and says
 * leak, as the diagnosis does; the same growth mapped by the process is in
 * its PSS already and is not added twice.
 */
static void shm_run(const char *whole, bool mapped, struct run_summary *s, struct store *st)
{
	int64_t id = begin(st);
	for (int i = 1; i <= 200; i++) {
		double t = i * 0.05, shm = i * MiB;
		step(st, id, i, t, 50 * MiB + (mapped ? shm : 0));
		sample(st, id, t, 1, 50 * MiB + (mapped ? shm : 0));
		kind_shm(st, id, t, 100, 1, "python3", 40 * MiB, mapped ? shm : 0);
		kind_shm(st, id, t, 0, 0, whole, 40 * MiB, shm);
	}
	end(st, id, 10, 200);
	store_flush(st);
	load(st, id, s);
}

static void test_unmapped_shm_is_in_the_headline(void)
{
	/* the job's cgroup's shmem: the job's own, in the verdict */
	struct store *st = open_store();
	struct run_summary s;
	shm_run("cgroup", false, &s, st);
	const struct run_kinds *k = s.kinds;
	CHECK(s.measure_shm);
	CHECK_STR(run_summary_measure_label(&s), "pss+shm");
	CHECK_EQ_INT(s.a.verdict, VERDICT_LEAK);
	CHECK(fabs(s.a.slope - MiB) < 0.05 * MiB);
	CHECK(k->has_diagnosis && k->diagnosis_leak);
	CHECK_EQ_INT(k->diagnosis_kind, KIND_SHMEM);
	CHECK(strstr(k->diagnosis, "the job's cgroup") != NULL);
	CHECK(strstr(k->diagnosis, "the parent is flat") == NULL);
	struct strbuf sb = STRBUF_INIT;
	report_render(&s, REPORT_TEXT, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "verdict   leak") != NULL);
	CHECK(strstr(strbuf_str(&sb), "measure pss+shm") != NULL);
	strbuf_reset(&sb);
	report_render(&s, REPORT_JSON, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "\"measure_judged\": \"pss+shm\"") != NULL);
	strbuf_release(&sb);
	run_summary_release(&s);
	store_close(st);

	/* the machine's /dev/shm (no cgroup of the job's own): every process
	 * writes there, so it is shown, never judged as the job's nor blamed
	 * on it, and the verdict's reason says it grew */
	st = open_store();
	shm_run("/dev/shm", false, &s, st);
	k = s.kinds;
	CHECK(!s.measure_shm);
	CHECK_STR(run_summary_measure_label(&s), "pss");
	CHECK(s.a.verdict != VERDICT_LEAK);
	CHECK(!k->diagnosis_leak);
	CHECK(run_kinds_machine_shm_growth(k) != NULL);
	CHECK(strstr(s.reason, "the machine's /dev/shm grew") != NULL);
	CHECK(strstr(s.reason, "not counted") != NULL);
	run_summary_release(&s);
	store_close(st);

	/* mapped: in PSS already */
	st = open_store();
	shm_run("cgroup", true, &s, st);
	CHECK(!s.measure_shm);
	CHECK_STR(run_summary_measure_label(&s), "pss");
	CHECK_EQ_INT(s.a.verdict, VERDICT_LEAK);
	CHECK(fabs(s.a.slope - MiB) < 0.05 * MiB);
	run_summary_release(&s);
	store_close(st);
}

/* A headline whose measure does not count what the diagnosis finds says
 * so: here a cgroup usage that stays flat while its shmem grows (the
 * measure is the user's choice; only pss, rss and uss get "+shm"). */
static void test_headline_says_when_it_cannot_see_the_leak(void)
{
	struct store *st = open_store();
	int64_t id = begin(st);
	for (int i = 1; i <= 200; i++) {
		double t = i * 0.05;
		struct step_rec r = { .step = i, .epoch = -1 };
		r.mem.t = t;
		r.mem.nprocs = 1;
		r.mem.rss = r.mem.pss = r.mem.uss = r.mem.cgroup = (uint64_t)(50 * MiB);
		r.mem.has_cgroup = true;
		store_add_step(st, id, &r);
		kind_shm(st, id, t, 100, 1, "python3", 40 * MiB, 0);
		kind_shm(st, id, t, 0, 0, "cgroup", 40 * MiB, i * MiB);
	}
	end(st, id, 10, 200);
	store_flush(st);
	struct run_summary s;
	CHECK_EQ_INT(run_summary_load(st, id, MEASURE_CGROUP, &s), 0);
	CHECK(!s.measure_shm);
	CHECK(s.kinds->diagnosis_leak);
	CHECK(s.a.verdict != VERDICT_LEAK);
	CHECK(strstr(s.reason, "the diagnosis below, which judges each kind of memory on its own, finds a leak (measure cgroup)") != NULL);
	run_summary_release(&s);
	store_close(st);
}

/*
 * A helper process started every 10 steps, never ended, each holding
 * 12 MiB; main flat. The diagnosis and the table name the processes, not
 * main.
 */
static void test_processes_that_pile_up(void)
{
	struct store *st = open_store();
	int64_t id = begin(st);
	for (int i = 1; i <= 300; i++) {
		double t = i * 0.05;
		int helpers = i / 10;
		step(st, id, i, t, 30 * MiB + helpers * 12 * MiB);
		sample(st, id, t, 1 + helpers, 30 * MiB + helpers * 12 * MiB);
		kind(st, id, t, 100, 1, 30 * MiB, 0, 0, 0);
		for (int h = 1; h <= helpers; h++)
			kind(st, id, t, 1000 + h, 100, 12 * MiB, 0, 0, 0);
	}
	end(st, id, 15, 300);
	store_flush(st);
	struct run_summary s;
	if (load(st, id, &s))
		return;
	const struct run_kinds *k = s.kinds;
	CHECK_EQ_INT(s.a.verdict, VERDICT_LEAK);
	CHECK(k->procs_piling);
	CHECK(k->has_diagnosis && k->diagnosis_leak);
	CHECK_EQ_INT(k->diagnosis_kind, KIND_PROCESSES);
	CHECK(fabs(k->procs_per_x - 0.1) < 0.01);
	CHECK(fabs(k->procs_each_bytes - 12 * MiB) < MiB);
	CHECK(k->procs_last == 31);
	CHECK(strstr(k->diagnosis, "+1 every 10 steps, 31 alive") != NULL);
	CHECK(strstr(k->diagnosis, "the main process is flat") != NULL);
	CHECK(k->n && k->k[0].kind == KIND_PROCESSES);
	for (size_t i = 0; i < k->n; i++)
		CHECK(!(k->k[i].a.verdict == VERDICT_LEAK && !strcmp(k->k[i].role, "main")));
	struct strbuf sb = STRBUF_INIT;
	report_render(&s, REPORT_TEXT, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "by kind   processes     +1 every 10 steps, 31 alive, ~12.0 MiB each") != NULL);
	strbuf_reset(&sb);
	report_render(&s, REPORT_JSON, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "\"kind\": \"processes\", \"process\": null") != NULL);
	strbuf_reset(&sb);
	report_render(&s, REPORT_MD, NULL, &sb);
	CHECK(strstr(strbuf_str(&sb), "| processes | tree |") != NULL);
	strbuf_release(&sb);
	run_summary_release(&s);
	store_close(st);
}

/* Four workers started one after the other in a short while mid-run
 * (a tenth of the run), then flat: a start-up, not a pile. */
static void test_workers_started_together_do_not_pile_up(void)
{
	struct store *st = open_store();
	int64_t id = begin(st);
	for (int i = 1; i <= 300; i++) {
		double t = i * 0.05;
		int workers = i >= 200 ? 4 : i >= 150 ? (i - 150) / 10 : 0;
		step(st, id, i, t, 30 * MiB + workers * 12 * MiB);
		sample(st, id, t, 1 + workers, 30 * MiB + workers * 12 * MiB);
		kind(st, id, t, 100, 1, 30 * MiB, 0, 0, 0);
		for (int h = 1; h <= workers; h++)
			kind(st, id, t, 1000 + h, 100, 12 * MiB, 0, 0, 0);
	}
	end(st, id, 15, 300);
	store_flush(st);
	struct run_summary s;
	if (load(st, id, &s))
		return;
	CHECK(!s.kinds->procs_piling);
	CHECK(!(s.kinds->has_diagnosis && s.kinds->diagnosis_kind == KIND_PROCESSES));
	run_summary_release(&s);
	store_close(st);
}

/*
 * 300 steps in 0.3 s, 1 MiB each: with kinds read twice in that time the
 * growth's kind is unknown, and the verdict says so (inconclusive), not
 * leak; read every 10 ms, the same growth is named (anonymous, a leak).
 */
static void test_fast_growth_unread_is_not_called_a_leak(void)
{
	for (int every = 0; every < 2; every++) {
		struct store *st = open_store();
		int64_t id = begin(st);
		for (int i = 1; i <= 300; i++) {
			double t = 1 + i * 0.001;
			step(st, id, i, t, 50 * MiB + i * MiB);
			if (every ? i % 10 == 0 : i == 1 || i == 200)
				kind(st, id, t, 100, 1, 40 * MiB + i * MiB, 0, 0, 0);
		}
		end(st, id, 2, 300);
		store_flush(st);
		struct run_summary s;
		if (load(st, id, &s))
			return;
		if (!every) {
			CHECK_EQ_INT(s.a.verdict, VERDICT_INCONCLUSIVE);
			CHECK(s.kinds_unread);
			CHECK(strstr(s.reason, "too fast for its kinds to be read (2 readings)") != NULL);
		} else {
			CHECK_EQ_INT(s.a.verdict, VERDICT_LEAK);
			CHECK(!s.kinds_unread);
			CHECK_EQ_INT(s.kinds->diagnosis_kind, KIND_ANONYMOUS);
		}
		run_summary_release(&s);
		store_close(st);
	}
}

static void cleanup(void)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
}

__attribute__((constructor)) static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/lp-test-kinds-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(cleanup);
	snprintf(store_path, sizeof(store_path), "%s/lp.db", tmpdir);
}

TEST_MAIN("kinds",
	TEST(test_cow_stopped_is_not_a_leak),
	TEST(test_cow_rising_is_projected_to_its_bound),
	TEST(test_cow_read_late_is_not_still_rising),
	TEST(test_worker_leak_parent_flat),
	TEST(test_page_cache_is_not_a_leak),
	TEST(test_flight_recorder),
	TEST(test_kinds_in_every_format),
	TEST(test_unmapped_shm_is_in_the_headline),
	TEST(test_headline_says_when_it_cannot_see_the_leak),
	TEST(test_processes_that_pile_up),
	TEST(test_workers_started_together_do_not_pile_up),
	TEST(test_fast_growth_unread_is_not_called_a_leak))
