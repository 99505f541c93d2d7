/*
 * test_store.c — the SQLite store: every table round-trips through a file,
 * the schema is created from an empty file and refused when newer, paths
 * that cannot be opened give a message instead of a crash, a full disk is
 * reported once and survived, and the writer's memory stays flat over
 * 1,000,000 samples.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/proc.h"
#include "store/store.h"
#include "store/sweeps.h"
#include "store/trace.h"

#define CURRENT_SCHEMA 15   /* the schema version this leakproof writes (store/schema.c) */
#include "util/util.h"
#include "tap.h"

static char tmpdir[64];

static const char *tmp_path(const char *name)
{
	static char buf[256];
	snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
	return buf;
}

static int count_substr(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* ---- fixtures ------------------------------------------------------------ */

static void fill_begin(struct run_begin *rb)
{
	memset(rb, 0, sizeof(*rb));
	rb->started_at = 1700000000.25;
	rb->command_json = "[\"python3\", \"train.py\", \"--epochs\", \"3\"]";
	rb->cwd = "/home/user/proj";
	rb->hostname = "box";
	rb->measure = MEASURE_USS;
	rb->interval_ns = 100000000;
	rb->limit_bytes = 8ULL << 30;
	rb->limit_source = "max-mem";
	rb->mem_total_bytes = 32ULL << 30;
	rb->cgroup_mode = "v2";
	rb->step_regex = "step (\\d+)";
	rb->pid = 4242;
}

static struct mem_sample mk_sample(double t, uint64_t base)
{
	struct mem_sample s = {
		.t = t, .nprocs = 3, .rss = base + 1000, .pss = base + 500, .uss = base,
		.swap = 7, .pss_exact = true,
	};
	return s;
}

/* ---- tests --------------------------------------------------------------- */

static void test_default_path(void)
{
	unsetenv("LEAKPROOF_STORE");
	CHECK_STR(store_default_path(NULL), ".leakproof/leakproof.db");
	CHECK_STR(store_default_path(""), "");   /* said, and refused when opened */
	setenv("LEAKPROOF_STORE", "", 1);         /* an empty variable is unset */
	CHECK_STR(store_default_path(NULL), ".leakproof/leakproof.db");
	setenv("LEAKPROOF_STORE", "/x/env.db", 1);
	CHECK_STR(store_default_path(NULL), "/x/env.db");
	CHECK_STR(store_default_path("opt.db"), "opt.db");
	unsetenv("LEAKPROOF_STORE");
}

static void test_round_trip(void)
{
	const char *path = tmp_path("a/b/c/rt.db");   /* directories are created */
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;

	struct run_begin rb;
	fill_begin(&rb);
	int64_t id = store_run_begin(st, &rb);
	CHECK(id > 0);

	struct mem_sample s1 = mk_sample(0.5, 100 << 20);
	struct mem_sample s2 = mk_sample(1.5, 200 << 20);
	s2.has_cgroup = true;
	s2.cgroup = 300 << 20;
	s2.has_gpu = true;
	s2.gpu = 0;            /* zero is a value, not "absent" */
	s2.pss_exact = false;
	CHECK_EQ_INT(store_add_sample(st, id, &s2), 0);   /* out of order: loaded by t */
	CHECK_EQ_INT(store_add_sample(st, id, &s1), 0);
	CHECK_EQ_INT(store_add_proc_sample(st, id, 1.0, 11, 10, "python3", 5, 4, 3, 2, 1), 0);
	CHECK_EQ_INT(store_add_proc_sample(st, id, 2.0, 11, 10, "python3", 50, 40, 30, 20, 10), 0);
	CHECK_EQ_INT(store_add_proc_sample(st, id, 2.0, 12, 11, "worker", 9, 9, 9, 0, 0), 0);

	struct step_rec r1 = { .step = 1, .epoch = -1, .mem = s1 };
	struct step_rec r2 = { .step = 2, .epoch = 3, .mem = s2 };
	CHECK_EQ_INT(store_add_step(st, id, &r1), 0);
	CHECK_EQ_INT(store_add_step(st, id, &r2), 0);
	CHECK_EQ_INT(store_add_metric(st, id, 2, 1.5, "loss", 0.25), 0);
	CHECK_EQ_INT(store_add_event(st, id, 0.1, "mark", "eval start"), 0);
	CHECK_EQ_INT(store_add_event(st, id, 0.2, "warning", NULL), 0);
	CHECK_EQ_INT(store_add_result(st, id, "acc", 0.5), 0);
	CHECK_EQ_INT(store_add_result(st, id, "acc", 0.75), 0);   /* replaced */
	CHECK_EQ_INT(store_add_result(st, id, "loss", 0.125), 0);

	int64_t seq = store_segment_begin(st, id, 1700000001.0, 0);
	CHECK_EQ_INT(seq, 1);
	CHECK_EQ_INT(store_segment_set_pid(st, id, seq, 5151, 0, NULL), 0);
	struct segment_end se = { .ended_at = 1700000002.0, .exit_code = -1, .exit_signal = 9,
	                          .cause = CAUSE_OOM_KILL, .evidence = "memory.events oom_kill 1" };
	CHECK_EQ_INT(store_segment_end(st, id, 0, &se), 0);

	struct run_end re = {
		.ended_at = 1700000042.5, .exit_code = 0, .exit_signal = 0, .status = RUN_DONE,
		.step_source = STEP_SOURCE_CHANNEL, .steps = 2, .bad_lines = 4, .long_lines = 1,
		.peak_bytes = 200 << 20, .verdict = "leak", .growth_bytes_per_step = 1.5e6,
	};
	CHECK_EQ_INT(store_run_end(st, id, &re), 0);
	CHECK_EQ_INT(store_flush(st), 0);
	store_close(st);

	st = store_open_readonly(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_row r;
	CHECK_EQ_INT(store_get_run(st, 0, &r), 0);
	CHECK_EQ_INT(r.id, id);
	CHECK_NEAR(r.started_at, 1700000000.25, 1e-6);
	CHECK_NEAR(r.ended_at, 1700000042.5, 1e-6);
	CHECK_STR(r.command_json, rb.command_json);
	CHECK_STR(r.cwd, "/home/user/proj");
	CHECK_STR(r.hostname, "box");
	CHECK_STR(run_status_name(r.status), "done");
	CHECK_STR(r.verdict, "leak");
	CHECK_STR(r.step_regex, "step (\\d+)");
	CHECK_STR(r.cgroup_mode, "v2");
	CHECK_STR(r.limit_source, "max-mem");
	CHECK_EQ_INT(r.measure, MEASURE_USS);
	CHECK_EQ_INT(r.step_source, STEP_SOURCE_CHANNEL);
	CHECK_EQ_INT(r.interval_ns, 100000000);
	CHECK_EQ_INT(r.steps, 2);
	CHECK_EQ_INT(r.bad_lines, 4);
	CHECK_EQ_INT(r.long_lines, 1);
	CHECK(r.limit_bytes == 8ULL << 30);
	CHECK(r.mem_total_bytes == 32ULL << 30);
	CHECK(r.peak_bytes == 200 << 20);
	CHECK_EQ_INT(r.exit_code, 0);
	CHECK_EQ_INT(r.exit_signal, 0);
	CHECK_NEAR(r.growth_bytes_per_step, 1.5e6, 1e-3);
	run_row_release(&r);
	CHECK_EQ_INT(store_get_run(st, id, &r), 0);
	run_row_release(&r);
	CHECK_EQ_INT(store_get_run(st, id + 100, &r), 1);

	struct mem_sample *sm;
	size_t n;
	CHECK_EQ_INT(store_load_samples(st, id, &sm, &n), 0);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_NEAR(sm[0].t, 0.5, 1e-9);
		CHECK(sm[0].uss == 100 << 20 && sm[0].pss == (100 << 20) + 500 && sm[0].rss == (100 << 20) + 1000);
		CHECK(!sm[0].has_cgroup && !sm[0].has_gpu && sm[0].pss_exact);
		CHECK_EQ_INT(sm[0].swap, 7);
		CHECK_EQ_INT(sm[0].nprocs, 3);
		CHECK(sm[1].has_cgroup && sm[1].cgroup == 300 << 20);
		CHECK(sm[1].has_gpu && sm[1].gpu == 0);
		CHECK(!sm[1].pss_exact);
	}
	free(sm);

	struct step_rec *sr;
	CHECK_EQ_INT(store_load_steps(st, id, &sr, &n), 0);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_EQ_INT(sr[0].step, 1);
		CHECK_EQ_INT(sr[0].epoch, -1);
		CHECK_EQ_INT(sr[1].step, 2);
		CHECK_EQ_INT(sr[1].epoch, 3);
		CHECK_NEAR(sr[1].mem.t, 1.5, 1e-9);
		CHECK(sr[1].mem.has_cgroup && sr[1].mem.cgroup == 300 << 20);
	}
	free(sr);

	struct metric_row *mr;
	CHECK_EQ_INT(store_load_metrics(st, id, &mr, &n), 0);
	CHECK_EQ_INT(n, 1);
	if (n == 1) {
		CHECK_STR(mr[0].name, "loss");
		CHECK_NEAR(mr[0].value, 0.25, 1e-12);
		CHECK_EQ_INT(mr[0].step, 2);
	}
	free(mr);

	struct event_row *ev;
	CHECK_EQ_INT(store_load_events(st, id, &ev, &n), 0);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_STR(ev[0].kind, "mark");
		CHECK_STR(ev[0].detail, "eval start");
		CHECK_STR(ev[1].kind, "warning");
		CHECK_STR(ev[1].detail, "");
	}
	event_rows_free(ev, n);

	struct result_row *rr;
	CHECK_EQ_INT(store_load_results(st, id, &rr, &n), 0);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_STR(rr[0].name, "acc");
		CHECK_NEAR(rr[0].value, 0.75, 1e-12);
		CHECK_STR(rr[1].name, "loss");
	}
	free(rr);

	struct proc_row *pr;
	CHECK_EQ_INT(store_top_procs(st, id, &pr, &n, 5), 0);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_EQ_INT(pr[0].pid, 11);
		CHECK_EQ_INT(pr[0].pss, 40);       /* the row of its maximum */
		CHECK_EQ_INT(pr[0].rss, 50);
		CHECK_STR(pr[0].name, "python3");
		CHECK_EQ_INT(pr[1].pid, 12);
	}
	free(pr);

	struct segment_row *sg;
	CHECK_EQ_INT(store_load_segments(st, id, &sg, &n), 0);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_EQ_INT(sg[0].seq, 0);
		CHECK_EQ_INT(sg[0].pid, 4242);
		CHECK_EQ_INT(sg[0].exit_signal, 9);
		CHECK_STR(cause_name(sg[0].cause), "oom-kill");
		CHECK_STR(sg[0].evidence, "memory.events oom_kill 1");
		CHECK_EQ_INT(sg[1].seq, 1);
		CHECK_EQ_INT(sg[1].pid, 5151);
		CHECK_NEAR(sg[1].ended_at, 1700000042.5, 1e-6);   /* closed by run_end */
		CHECK_STR(cause_name(sg[1].cause), "exit");
		CHECK_EQ_INT(sg[1].exit_code, 0);
	}
	segment_rows_free(sg, n);

	/* Writing through a read-only store fails cleanly. */
	capture_begin();
	int rc = store_add_sample(st, id, &s1);
	const char *msg = capture_end();
	CHECK_EQ_INT(rc, -1);
	CHECK(strstr(msg, "read-only") != NULL);
	store_close(st);
}

/* A run whose supervisor is gone is marked interrupted by the next writer,
 * which is told what its job's last start recorded (to end what is left);
 * a reader marks nothing, and a run of another host is left alone. */
static void test_stale_runs(void)
{
	const char *path = tmp_path("stale.db");
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	pid_t gone = fork();   /* a pid no process has once reaped */
	if (gone == 0)
		_exit(0);
	CHECK_EQ_INT(waitpid(gone, NULL, 0), gone);

	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_begin rb;
	fill_begin(&rb);
	rb.hostname = host;
	rb.supervisor_pid = gone;
	rb.supervisor_start = 12345;
	int64_t here = store_run_begin(st, &rb);
	CHECK_EQ_INT(store_segment_set_pid(st, here, 0, 4242, 777, "/sys/fs/cgroup/x/leakproof-1-0"), 0);
	int64_t seq = store_segment_begin(st, here, 1700000001.0, 0);   /* a restart: the last start counts */
	CHECK_EQ_INT(store_segment_set_pid(st, here, seq, 4343, 888, NULL), 0);
	CHECK_EQ_INT(store_segment_set_also(st, here, seq, "4444:999 4545:1000"), 0);
	rb.hostname = "another-host";
	int64_t there = store_run_begin(st, &rb);
	CHECK(here > 0 && there > here);
	uint64_t pidns = 0;   /* this host, another PID namespace: not ours to judge */
	CHECK_EQ_INT(proc_self_pidns(&pidns), 0);
	rb.hostname = host;
	rb.supervisor_pidns = pidns + 1;
	int64_t inside = store_run_begin(st, &rb);
	CHECK(inside > there);
	CHECK_EQ_INT(store_flush(st), 0);
	const struct stale_run *stale;
	CHECK_EQ_INT(store_stale_runs(st, &stale), 0);   /* both were running when it opened */
	store_close(st);

	st = store_open_readonly(path);
	CHECK(st && store_stale_runs(st, &stale) == 0);
	store_close(st);

	st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	CHECK_EQ_INT(store_stale_runs(st, &stale), 1);
	CHECK_EQ_INT(stale[0].run_id, here);
	CHECK_EQ_INT(stale[0].supervisor_pid, gone);
	CHECK_EQ_INT(stale[0].job_pid, 4343);
	CHECK_EQ_INT(stale[0].job_start, 888);
	CHECK(stale[0].cgroup == NULL);
	CHECK_STR(stale[0].also, "4444:999 4545:1000");
	struct run_row *rows = NULL;
	size_t n = 0;
	CHECK_EQ_INT(store_list_runs(st, &rows, &n), 0);
	for (size_t i = 0; i < n; i++)
		CHECK_STR(run_status_name(rows[i].status), rows[i].id == here ? "interrupted" : "running");
	CHECK_EQ_INT(n, 3);
	run_rows_free(rows, n);
	store_close(st);

	/* its clean-up stays pending for the next writer until one says done */
	st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	CHECK_EQ_INT(store_stale_runs(st, &stale), 1);
	CHECK_EQ_INT(stale[0].run_id, here);
	CHECK_EQ_INT(stale[0].supervisor_start, 12345);
	CHECK_EQ_INT(store_stale_run_cleaned(st, here), 0);
	store_close(st);
	st = store_open(path);
	CHECK(st && store_stale_runs(st, &stale) == 0);
	store_close(st);
}

static void test_list_runs(void)
{
	const char *path = tmp_path("list.db");
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_begin rb;
	fill_begin(&rb);
	int64_t a = store_run_begin(st, &rb);
	int64_t b = store_run_begin(st, &rb);
	CHECK(b > a);
	struct run_row *rows;
	size_t n;
	CHECK_EQ_INT(store_list_runs(st, &rows, &n), 0);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK_EQ_INT(rows[0].id, b);       /* newest first */
		CHECK_EQ_INT(rows[1].id, a);
		CHECK_STR(run_status_name(rows[0].status), "running");
		CHECK_NEAR(rows[0].ended_at, 0, 0);
		CHECK_EQ_INT(rows[0].exit_code, -1);
		CHECK_STR(rows[0].verdict, "");
	}
	run_rows_free(rows, n);
	store_close(st);
}

/* Rows are visible to another reader only after store_flush(). */
static void test_batching(void)
{
	const char *path = tmp_path("batch.db");
	struct store *w = store_open(path);
	CHECK(w != NULL);
	if (!w)
		return;
	struct run_begin rb;
	fill_begin(&rb);
	int64_t id = store_run_begin(w, &rb);
	CHECK_EQ_INT(store_flush(w), 0);
	struct mem_sample s = mk_sample(1, 1 << 20);
	CHECK_EQ_INT(store_add_sample(w, id, &s), 0);

	struct store *r = store_open_readonly(path);   /* WAL: reads while w writes */
	CHECK(r != NULL);
	if (r) {
		struct mem_sample *sm;
		size_t n = 99;
		CHECK_EQ_INT(store_load_samples(r, id, &sm, &n), 0);
		CHECK_EQ_INT(n, 0);
		free(sm);
		CHECK_EQ_INT(store_flush(w), 0);
		CHECK_EQ_INT(store_load_samples(r, id, &sm, &n), 0);
		CHECK_EQ_INT(n, 1);
		free(sm);
		store_close(r);
	}
	/* A second writer is not held up by rows the first has staged. */
	CHECK_EQ_INT(store_add_sample(w, id, &s), 0);
	struct store *w2 = store_open(path);
	CHECK(w2 != NULL);
	if (w2) {
		int64_t t0 = mono_ns();
		CHECK_EQ_INT(store_add_sample(w2, id, &s), 0);
		CHECK_EQ_INT(store_flush(w2), 0);
		CHECK(mono_ns() - t0 < 1000000000LL);   /* no wait on a lock */
		store_close(w2);
	}
	CHECK_EQ_INT(store_add_sample(w, id, &s), 0);
	store_close(w);   /* commits */
	r = store_open_readonly(path);
	if (r) {
		struct mem_sample *sm;
		size_t n = 0;
		CHECK_EQ_INT(store_load_samples(r, id, &sm, &n), 0);
		CHECK_EQ_INT(n, 4);
		free(sm);
		store_close(r);
	}
}

static void test_migrate_empty_file(void)
{
	const char *path = tmp_path("empty.db");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	close(fd);

	/* Read-only open of an empty file brings it to the schema, too. */
	struct store *st = store_open_readonly(path);
	CHECK(st != NULL);
	if (st) {
		struct run_row r;
		CHECK_EQ_INT(store_get_run(st, 0, &r), 1);   /* no runs, no error */
		store_close(st);
	}
	st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_begin rb;
	fill_begin(&rb);
	CHECK(store_run_begin(st, &rb) > 0);
	store_close(st);
	/* Reopening does not migrate again (nor fail, nor lose data). */
	st = store_open(path);
	CHECK(st != NULL);
	if (st) {
		struct run_row r;
		CHECK_EQ_INT(store_get_run(st, 0, &r), 0);
		run_row_release(&r);
		store_close(st);
	}

	/* A store from a newer leakproof is refused, not damaged: patch the
	 * header's user_version (big-endian at offset 60) to 99. */
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	unsigned char v[4] = { 0, 0, 0, 99 }, old[4];
	CHECK_EQ_INT(pread(fd, old, 4, 60), 4);
	CHECK_EQ_INT(old[3], CURRENT_SCHEMA);   /* the current schema version was written */
	CHECK_EQ_INT(pwrite(fd, v, 4, 60), 4);
	close(fd);
	capture_begin();
	st = store_open(path);
	const char *msg = capture_end();
	CHECK(st == NULL);
	CHECK(strstr(msg, "cannot open store '") != NULL);
	CHECK(strstr(msg, "newer leakproof") != NULL);
	store_close(st);
}

static void expect_open_error(const char *path, bool readonly, const char *reason)
{
	capture_begin();
	struct store *st = readonly ? store_open_readonly(path) : store_open(path);
	const char *msg = capture_end();
	CHECK(st == NULL);
	char want[512];
	snprintf(want, sizeof(want), "leakproof: cannot open store '%s': ", path);
	CHECK(strstr(msg, want) != NULL);
	CHECK(strstr(msg, reason) != NULL);
	if (!strstr(msg, reason))
		fprintf(stderr, "  got: %s", msg);
	store_close(st);
}

static void test_unopenable(void)
{
	char p[300];

	/* A file where a directory should be. */
	const char *file = tmp_path("plainfile");
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ_INT(write(fd, "hello\n", 6), 6);
	close(fd);
	snprintf(p, sizeof(p), "%s/sub/x.db", file);
	expect_open_error(p, false, "is not a directory");

	/* A directory where the file should be. */
	expect_open_error(tmpdir, false, "is a directory");

	/* A file that is not a database. */
	const char *junk = tmp_path("junk.db");
	fd = open(junk, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char buf[4096];
	memset(buf, 'x', sizeof(buf));
	CHECK_EQ_INT(write(fd, buf, sizeof(buf)), (long long)sizeof(buf));
	close(fd);
	expect_open_error(junk, false, "not a database");
	expect_open_error(junk, true, "not a database");

	/* Nothing there, read-only. */
	expect_open_error(tmp_path("missing.db"), true, "No such file");

	/* A directory that cannot be created even by root. */
	expect_open_error("/proc/leakproof-test/x.db", false, "cannot create directory");
}

/* Write a schema version into an SQLite file's header (user_version, 4
 * bytes big-endian at offset 60); the version that was there. */
static long patch_version(const char *path, uint32_t v)
{
	unsigned char want[4] = { v >> 24, v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff }, old[4] = { 0 };
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ_INT(pread(fd, old, 4, 60), 4);
	CHECK_EQ_INT(pwrite(fd, want, 4, 60), 4);
	close(fd);
	return (long)(int32_t)((uint32_t)old[0] << 24 | (uint32_t)old[1] << 16 | (uint32_t)old[2] << 8 | old[3]);
}

/* A crafted store with a negative or huge schema version is refused with a
 * message, by writers and readers alike, and left as it was: no migration
 * is looked up out of bounds, nothing rewrites the version. */
static void test_crafted_version(void)
{
	const char *path = tmp_path("crafted.db");
	struct store *st = store_open(path);
	CHECK(st != NULL);
	store_close(st);
	static const struct { uint32_t v; const char *reason; } cases[] = {
		{ 0xfffffffbu, "not a valid leakproof store (schema version -5)" },
		{ 0xffffffffu, "not a valid leakproof store (schema version -1)" },
		{ 0x80000000u, "not a valid leakproof store (schema version -2147483648)" },
		{ 0x7fffffffu, "newer leakproof (schema version 2147483647" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long current = patch_version(path, cases[i].v);
		CHECK(current == CURRENT_SCHEMA || i > 0);
		expect_open_error(path, true, cases[i].reason);
		expect_open_error(path, false, cases[i].reason);
		expect_open_error(path, true, cases[i].reason);
		CHECK_EQ_INT(patch_version(path, cases[i].v), (int32_t)cases[i].v);   /* untouched */
	}
	patch_version(path, (uint32_t)CURRENT_SCHEMA);
	st = store_open_readonly(path);
	CHECK(st != NULL);
	store_close(st);
}

/* Store strings that would keep the run in memory are refused, with the
 * reason; a file, also as a URI, is taken. */
static void test_in_memory_refused(void)
{
	static const char *const refused[] = {
		":memory:", "file::memory:", "file::memory:?cache=shared", "file:%3Amemory%3A",
		"file:x.db?mode=memory", "file:x.db?cache=shared&mode=memory", "file:x.db?vfs=memdb",
		"file:", "file:?mode=rwc", "file://localhost?x=1",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		capture_begin();
		int rc = store_check_target(refused[i]);
		struct store *st = store_open(refused[i]);
		const char *err = capture_end();
		CHECK_EQ_INT(rc, -1);
		CHECK(st == NULL);
		store_close(st);
		CHECK(strstr(err, "cannot use store '") && strstr(err, "give the path of a file"));
	}
	char uri[300];
	snprintf(uri, sizeof(uri), "file:%s?mode=rwc", tmp_path("uri.db"));
	CHECK_EQ_INT(store_check_target(tmp_path("plain.db")), 0);
	CHECK_EQ_INT(store_check_target(uri), 0);
	CHECK_EQ_INT(store_check_target("file:memory.db"), 0);
}

/* Eight writers opening a new store at once all get it: the schema version
 * is read again under the write lock before migrating. */
static void test_concurrent_create(void)
{
	enum { WRITERS = 8, ROUNDS = 4 };
	for (int round = 0; round < ROUNDS; round++) {
		char name[32];
		snprintf(name, sizeof(name), "race%d/store.db", round);
		char path[256];
		snprintf(path, sizeof(path), "%s", tmp_path(name));
		int go[2];
		CHECK_EQ_INT(pipe(go), 0);
		pid_t pids[WRITERS];
		for (int i = 0; i < WRITERS; i++) {
			pids[i] = fork();
			if (pids[i] == 0) {
				char c;
				close(go[1]);
				if (read(go[0], &c, 1) < 0)
					_exit(2);
				struct store *w = store_open(path);
				struct run_begin rb;
				fill_begin(&rb);
				int ok = w && store_run_begin(w, &rb) > 0;
				store_close(w);
				_exit(ok ? 0 : 1);
			}
		}
		close(go[0]);
		close(go[1]);   /* all start at once */
		int failed = 0;
		for (int i = 0; i < WRITERS; i++) {
			int status = 0;
			waitpid(pids[i], &status, 0);
			failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
		}
		CHECK_EQ_INT(failed, 0);
		struct store *st = store_open_readonly(path);
		struct run_row *rows = NULL;
		size_t n = 0;
		CHECK(st && store_list_runs(st, &rows, &n) == 0);
		CHECK_EQ_INT(n, WRITERS);
		run_rows_free(rows, n);
		store_close(st);
	}
}

/* Claims (schema 7): pending trials are claimed in order, each once, by
 * several processes at once; a lease renewed stays; one that runs out makes
 * the attempt interrupted and the next pending, claimed by another. */
static void test_claims(void)
{
	enum { TRIALS = 40, CLAIMERS = 4 };
	const char *path = tmp_path("claims.db");
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct sweep_begin b = { .started_at = 1, .file = "s.yaml", .text = "", .method = "grid", .executor = "slurm" };
	int64_t sweep = store_sweep_begin(st, &b);
	CHECK(sweep > 0);
	struct trial_row rows[TRIALS];
	memset(rows, 0, sizeof(rows));
	for (int i = 0; i < TRIALS; i++) {
		rows[i] = (struct trial_row){ .sweep_id = sweep, .idx = i, .status = TRIAL_PENDING, .optuna_number = -1,
		                              .vals = "v" };
	}
	CHECK_EQ_INT(store_trials_put_many(st, rows, TRIALS), 0);
	struct trial_claimer me = { .worker = "here:1", .slurm_job = 77, .slurm_task = 3 };
	struct trial_row t;
	CHECK_EQ_INT(store_trial_claim(st, sweep, &me, 1000, 60, &t), 0);
	CHECK_EQ_INT(t.idx, 0);
	CHECK_STR(trial_status_name(t.status), "running");
	CHECK_STR(t.worker, "here:1");
	CHECK_EQ_INT(t.slurm_job, 77);
	CHECK_EQ_INT(t.slurm_task, 3);
	CHECK_NEAR(t.lease_until, 1060, 1e-6);
	trial_row_release(&t);
	CHECK_EQ_INT(store_trial_renew(st, sweep, 0, 0, "here:1", 1100), 0);
	CHECK_EQ_INT(store_trial_renew(st, sweep, 0, 0, "there:2", 1100), 1);   /* not theirs */
	store_close(st);

	/* the other 39, by four processes at once: each exactly once */
	int go[2];
	CHECK_EQ_INT(pipe(go), 0);
	pid_t pids[CLAIMERS];
	for (int k = 0; k < CLAIMERS; k++) {
		pids[k] = fork();
		if (pids[k] == 0) {
			char c, name[32], out[300];
			close(go[1]);
			if (read(go[0], &c, 1) < 0)
				_exit(2);
			snprintf(name, sizeof(name), "w:%d", k);
			snprintf(out, sizeof(out), "%s.%d", path, k);
			FILE *f = fopen(out, "w");
			struct store *w = store_open(path);
			struct trial_claimer who = { .worker = name, .slurm_task = -1 };
			struct trial_row r;
			int rc = -1;
			while (f && w && (rc = store_trial_claim(w, sweep, &who, 1000, 60, &r)) == 0) {
				fprintf(f, "%lld\n", (long long)r.idx);
				trial_row_release(&r);
			}
			store_close(w);
			_exit(f && fclose(f) == 0 && rc == 1 ? 0 : 1);
		}
	}
	close(go[0]);
	close(go[1]);
	int seen[TRIALS] = { 0 }, failed = 0;
	for (int k = 0; k < CLAIMERS; k++) {
		int status = 0;
		waitpid(pids[k], &status, 0);
		failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
		char out[300];
		snprintf(out, sizeof(out), "%s.%d", path, k);
		FILE *f = fopen(out, "r");
		long long idx;
		while (f && fscanf(f, "%lld", &idx) == 1)
			if (idx >= 0 && idx < TRIALS)
				seen[idx]++;
		if (f)
			fclose(f);
	}
	CHECK_EQ_INT(failed, 0);
	int once = 0;
	for (int i = 1; i < TRIALS; i++)
		once += seen[i] == 1;
	CHECK_EQ_INT(once, TRIALS - 1);
	CHECK_EQ_INT(seen[0], 0);

	/* every trial running: at 1200 the lease of trial 0 (renewed to 1100)
	 * and those of the others (1060) have run out */
	st = store_open(path);
	struct trial_counts c;
	CHECK_EQ_INT(store_trial_counts(st, sweep, &c), 0);
	CHECK_EQ_INT(c.running, TRIALS);
	CHECK_EQ_INT(c.pending, 0);
	CHECK_EQ_INT(store_trial_claim(st, sweep, &me, 1050, 60, &t), 1);   /* none yet */
	CHECK_EQ_INT(store_trial_claim(st, sweep, &me, 1200, 60, &t), 0);
	CHECK_EQ_INT(t.idx, 0);
	CHECK_EQ_INT(t.attempt, 1);
	CHECK(strstr(t.note, "lost its worker") != NULL);
	trial_row_release(&t);
	struct trial_row *all = NULL;
	size_t n = 0;
	CHECK_EQ_INT(store_load_trials(st, sweep, &all, &n), 0);
	CHECK_EQ_INT(n, 2 * TRIALS);
	CHECK_STR(trial_status_name(all[0].status), "interrupted");
	CHECK(strstr(all[0].note, "lease expired: worker here:1") != NULL);
	trial_rows_free(all, n);
	CHECK_EQ_INT(store_trial_renew(st, sweep, 0, 0, "here:1", 1300), 1);   /* taken over */
	CHECK_EQ_INT(store_trials_expire(st, sweep, 1200), 0);                  /* once only */
	store_close(st);
}

/* Claims by size class (schema 15): a worker claims only what needs at
 * most its memory, the largest need first; a requeue keeps the need. */
static void test_claims_by_need(void)
{
	const char *path = tmp_path("needs.db");
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct sweep_begin b = { .started_at = 1, .file = "s.yaml", .text = "", .method = "grid", .executor = "slurm" };
	int64_t sweep = store_sweep_begin(st, &b);
	static const uint64_t need[] = { 0, 2000, 0, 1000, 5000 };
	struct trial_row rows[5];
	memset(rows, 0, sizeof(rows));
	for (int i = 0; i < 5; i++)
		rows[i] = (struct trial_row){ .sweep_id = sweep, .idx = i, .status = TRIAL_PENDING, .optuna_number = -1,
		                              .vals = "v", .need_bytes = need[i] };
	CHECK_EQ_INT(store_trials_put_many(st, rows, 5), 0);
	uint64_t n_need[8];
	int64_t n_count[8];
	CHECK_EQ_INT(store_trial_pending_needs(st, sweep, n_need, n_count, 8), 4);
	CHECK(n_need[0] == 5000 && n_count[0] == 1 && n_need[3] == 0 && n_count[3] == 2);
	struct trial_claimer small = { .worker = "s:1", .slurm_task = -1, .class_bytes = 1000 };
	struct trial_claimer big = { .worker = "b:1", .slurm_task = -1, .class_bytes = 2500 };
	struct trial_row t;
	int64_t order[4];
	CHECK_EQ_INT(store_trial_claim(st, sweep, &big, 1000, 60, &t), 0);
	order[0] = t.idx;
	CHECK(t.need_bytes == 2000);
	trial_row_release(&t);
	for (int k = 1; k < 4; k++) {
		CHECK_EQ_INT(store_trial_claim(st, sweep, &small, 1000, 60, &t), 0);
		order[k] = t.idx;
		trial_row_release(&t);
	}
	CHECK(order[0] == 1 && order[1] == 3 && order[2] == 0 && order[3] == 2);
	CHECK_EQ_INT(store_trial_claim(st, sweep, &big, 1000, 60, &t), 1);   /* 5000: no worker of ours fits */
	/* a lease that ran out: the next attempt needs what this one did */
	CHECK_EQ_INT(store_trials_expire(st, sweep, 2000), 4);
	CHECK_EQ_INT(store_trial_claim(st, sweep, &small, 2000, 60, &t), 0);
	CHECK(t.idx == 3 && t.attempt == 1 && t.need_bytes == 1000);
	trial_row_release(&t);
	store_close(st);
}

/* The store remembers which sites of a run it wrote: each run gets its own
 * sites (ids start at 1 again), a site is written once however often it
 * comes back, and the caller's sites are left as they were. */
static void test_trace_sites(void)
{
	struct store *st = store_open(tmp_path("trace.db"));
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_begin rb;
	fill_begin(&rb);
	int64_t runs[2] = { store_run_begin(st, &rb), store_run_begin(st, &rb) };
	char frames[2][32] = { "/lib/a.so\t0x10\tf\n", "/lib/b.so\t0x20\tg\n" };
	struct trace_site a = { .id = 1, .kind = 'm', .frames = frames[0], .live = 100 };
	struct trace_site b = { .id = 2, .kind = 'a', .frames = frames[1], .python = "3:main:x.py", .live = 50 };
	for (int r = 0; r < 2; r++) {
		struct trace_site *both[2] = { &a, &b }, *one[1] = { &b };
		CHECK_EQ_INT(store_trace_write(st, runs[r], 1.0, false, 0, both, 2), 0);
		b.live = 70;
		CHECK_EQ_INT(store_trace_write(st, runs[r], 2.0, true, 5, one, 1), 0);
		b.live = 50;
	}
	CHECK(!a.dirty && !b.dirty && a.live == 100);
	for (int r = 0; r < 2; r++) {
		struct trace_site_row *rows;
		struct trace_live_row *live;
		size_t n = 0, nlive = 0;
		CHECK_EQ_INT(store_trace_load_sites(st, runs[r], &rows, &n), 0);
		CHECK_EQ_INT(n, 2);
		if (n == 2) {
			CHECK(rows[0].site == 1 && rows[0].kind == 'm' && !strcmp(rows[0].frames, frames[0]));
			CHECK(rows[0].python == NULL);
			CHECK(rows[1].site == 2 && rows[1].kind == 'a' && !strcmp(rows[1].python, "3:main:x.py"));
		}
		trace_site_rows_free(rows, n);
		CHECK_EQ_INT(store_trace_load_live(st, runs[r], &live, &nlive), 0);
		CHECK_EQ_INT(nlive, 3);
		if (nlive == 3)
			CHECK(live[2].site == 2 && live[2].live == 70 && live[2].has_step && live[2].step == 5);
		free(live);
	}
	store_close(st);
}

/* A PostgreSQL URI selects the PostgreSQL backend: a server that is not
 * there is refused with the reason and the password hidden, and nothing is
 * created on disk under that name. */
static void test_backend_by_uri(void)
{
	const char *uris[] = { "postgresql://leakproof@127.0.0.1:1/leakproof", "postgres://127.0.0.1:1/lp",
	                       "POSTGRESQL://u@127.0.0.1:1/y" };
	/* Meant to be refused: no wait for the server to come (30 s each
	 * by default, 7 opens: most of the suite's longest test). */
	setenv("LEAKPROOF_PG_CONNECT_WAIT", "0", 1);
	for (size_t i = 0; i < sizeof(uris) / sizeof(uris[0]); i++) {
		expect_open_error(uris[i], false, "Connection refused");
		expect_open_error(uris[i], true, "Connection refused");
	}
	capture_begin();
	CHECK(store_open("postgresql://leakproof:hunter2@127.0.0.1:1/leakproof") == NULL);
	const char *msg = capture_end();
	CHECK(strstr(msg, "leakproof:***@127.0.0.1:1") != NULL && strstr(msg, "hunter2") == NULL);
	struct stat sb;
	CHECK(stat("postgresql:", &sb) < 0 && stat("postgres:", &sb) < 0);
	unsetenv("LEAKPROOF_PG_CONNECT_WAIT");
}

static void test_disk_full(void)
{
	const char *path = tmp_path("full.db");
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_begin rb;
	fill_begin(&rb);
	int64_t id = store_run_begin(st, &rb);
	struct mem_sample s = mk_sample(0, 1 << 20);
	for (int i = 0; i < 100; i++) {
		s.t = i;
		store_add_sample(st, id, &s);
	}
	CHECK_EQ_INT(store_flush(st), 0);
	CHECK_EQ_INT(store_set_size_limit(st, 256 * 1024), 0);

	capture_begin();
	int failures = 0, flush_failures = 0;
	for (int i = 100; i < 100000; i++) {
		s.t = i;
		if (store_add_sample(st, id, &s) < 0)
			failures++;
		if (i % 1000 == 0 && store_flush(st) < 0)
			flush_failures++;
	}
	store_flush(st);
	const char *msg = capture_end();
	CHECK(failures + flush_failures > 0);
	CHECK(strstr(msg, "disk is full") != NULL);
	/* Said once, however many writes failed. */
	CHECK(count_substr(msg, "leakproof: cannot write") >= 1);
	CHECK(count_substr(msg, "leakproof: cannot write") <= 2);
	printf("# disk full: %d inserts and %d flushes failed; %d message(s)\n", failures,
	       flush_failures, count_substr(msg, "leakproof: cannot write"));

	/* Still usable: room again, writes succeed. */
	CHECK_EQ_INT(store_set_size_limit(st, 1ULL << 40), 0);
	s.t = 1e6;
	CHECK_EQ_INT(store_add_sample(st, id, &s), 0);
	CHECK_EQ_INT(store_flush(st), 0);
	store_close(st);

	st = store_open_readonly(path);
	CHECK(st != NULL);
	if (st) {
		struct mem_sample *sm;
		size_t n = 0;
		CHECK_EQ_INT(store_load_samples(st, id, &sm, &n), 0);
		CHECK(n >= 101);                     /* what was committed stays */
		CHECK(n > 0 && sm[n - 1].t == 1e6);
		free(sm);
		store_close(st);
	}
}

/* The descriptor of a file in dir that has no name (the writer's reserve),
 * and its allocated bytes; -1 when there is none. */
static int reserve_fd(const char *dir, long long *allocated)
{
	char link[64], target[512];
	size_t n = strlen(dir);
	for (int fd = 3; fd < 1024; fd++) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t len = readlink(link, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = '\0';
		struct stat sb;
		if (!strncmp(target, dir, n) && target[n] == '/' && strstr(target, " (deleted)") && fstat(fd, &sb) == 0) {
			*allocated = (long long)sb.st_blocks * 512;
			return fd;
		}
	}
	return -1;
}

/* A writer holds room on the store's file system for the end of its run:
 * a file without a name beside the store, allocated, never seen in the
 * directory, gone when the store is closed. */
static void test_reserve(void)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", tmp_path("reserve"));
	char path[300];
	snprintf(path, sizeof(path), "%s/lp.db", dir);
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	long long allocated = 0;
	int fd = reserve_fd(dir, &allocated);
	CHECK(fd >= 0);
	CHECK(allocated >= 256 * 1024);
	CHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC));   /* not the job's */
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -v '^lp\\.db\\(-wal\\|-shm\\)\\{0,1\\}$'", dir);
	CHECK(system(cmd) != 0);   /* nothing but the store's own files */
	/* a run ends as usual */
	struct run_begin rb;
	fill_begin(&rb);
	int64_t id = store_run_begin(st, &rb);
	struct run_end re = { .ended_at = rb.started_at + 2, .status = RUN_DONE, .steps = 0 };
	CHECK_EQ_INT(store_run_end(st, id, &re), 0);
	store_close(st);
	CHECK(reserve_fd(dir, &allocated) < 0);
}

static long rss_kib(void)
{
	char buf[256];
	if (read_file_buf("/proc/self/statm", buf, sizeof(buf)) < 0)
		return -1;
	long pages_total, pages_rss;
	if (sscanf(buf, "%ld %ld", &pages_total, &pages_rss) != 2)
		return -1;
	return pages_rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Under AddressSanitizer or valgrind, RSS measures the tool (its
 * quarantine of freed blocks grows by design), not us. */
static bool rss_is_meaningful(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	return false;
#endif
#endif
	static char maps[1 << 16];
	if (read_file_buf("/proc/self/maps", maps, sizeof(maps)) >= 0 && strstr(maps, "vgpreload"))
		return false;
	return true;
}

/* The writer's memory must not grow with the rows it has written. */
static void test_memory_flat(void)
{
	const char *path = tmp_path("big.db");
	/* Under valgrind a million rows take minutes, and RSS is not judged
	 * there: fewer rows still show whether SQLite's heap grows. */
	const long total = rss_is_meaningful() ? 1000000 : 300000, first = 100000;
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_begin rb;
	fill_begin(&rb);
	int64_t id = store_run_begin(st, &rb);
	long rss_first = 0, sql_first = 0;
	int64_t t0 = mono_ns();
	for (long i = 0; i < total; i++) {
		struct mem_sample s = mk_sample((double)i / 1000.0, (uint64_t)(i * 4096));
		s.has_cgroup = i % 2;
		s.cgroup = (uint64_t)i;
		if (store_add_sample(st, id, &s) < 0) {
			CHECK(!"insert failed");
			break;
		}
		if (i % 1000 == 999 && store_flush(st) < 0) {   /* the supervisor: ~1/s at 1 kHz */
			CHECK(!"flush failed");
			break;
		}
		if (i + 1 == first) {
			rss_first = rss_kib();
			sql_first = (long)store_memory_used();
		}
	}
	double secs = (double)(mono_ns() - t0) / 1e9;
	long rss_last = rss_kib(), sql_last = (long)store_memory_used();
	printf("# %ld samples: %.2f s (%.2f us/sample, flush included); RSS %ld KiB after %ld, %ld KiB"
	       " after %ld; SQLite heap %ld -> %ld bytes\n", total, secs, secs * 1e6 / (double)total,
	       rss_first, first, rss_last, total, sql_first, sql_last);
	CHECK(rss_first > 0);
	if (rss_is_meaningful())
		CHECK(rss_last - rss_first < 4 * 1024);  /* < 4 MiB */
	else
		printf("# RSS not judged under a sanitizer or valgrind\n");
	CHECK(sql_last - sql_first < 1024 * 1024);       /* SQLite's own heap: < 1 MiB */
	store_close(st);
	unlink(path);
}

static void cleanup(void);

/* Runs before main(): a scratch directory, removed at exit. */
__attribute__((constructor)) static void setup(void)
{
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/lp-test-store-XXXXXX", base && *base && strlen(base) < 40 ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(cleanup);
}

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
}

/* Every status the store writes reads back as itself; a name a newer
 * leakproof may write reads as unknown, not as another status. */
static void test_status_names(void)
{
	for (int i = RUN_DONE; i < RUN_STATUS_UNKNOWN; i++)
		CHECK_EQ_INT(run_status_parse(run_status_name((enum run_status)i)), i);
	for (int i = SWEEP_RUNNING; i < SWEEP_STATUS_UNKNOWN; i++)
		CHECK_EQ_INT(sweep_status_parse(sweep_status_name((enum sweep_status)i)), i);
	for (int i = TRIAL_PENDING; i < TRIAL_STATUS_UNKNOWN; i++)
		CHECK_EQ_INT(trial_status_parse(trial_status_name((enum trial_status)i)), i);
	CHECK_EQ_INT(run_status_parse("paused"), RUN_STATUS_UNKNOWN);
	CHECK_EQ_INT(run_status_parse(NULL), RUN_STATUS_UNKNOWN);
	CHECK_EQ_INT(trial_status_parse("unknown"), TRIAL_STATUS_UNKNOWN);
	CHECK_STR(trial_status_name((enum trial_status)99), "unknown");
	CHECK_STR(run_status_name(RUN_FAILED_TO_START), "failed-to-start");
	CHECK(trial_status_final(TRIAL_SKIPPED) && !trial_status_final(TRIAL_INTERRUPTED));
}

TEST_MAIN("store",
	TEST(test_status_names),
	TEST(test_default_path),
	TEST(test_round_trip),
	TEST(test_stale_runs),
	TEST(test_list_runs),
	TEST(test_batching),
	TEST(test_migrate_empty_file),
	TEST(test_unopenable),
	TEST(test_concurrent_create),
	TEST(test_claims),
	TEST(test_claims_by_need),
	TEST(test_crafted_version),
	TEST(test_trace_sites),
	TEST(test_backend_by_uri),
	TEST(test_disk_full),
	TEST(test_reserve),
	TEST(test_in_memory_refused),
	TEST(test_memory_flat))
