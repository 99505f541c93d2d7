/*
 * test_sites.c — the judgment of a traced run's allocation sites
 * (judge/sites.c): on series too short to judge on their own, a site that
 * carries the run's growth is growing when the run leaks, one that cannot
 * be told is undecided (never flat), and short-lived sites do not grow.
 * Deterministic: synthetic series and a synthetic store, no timing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "judge/sites.h"
#include "store/trace.h"
#include "tap.h"

#define KIB 1024.0
#define MEAN (256 * 1024)           /* sampling mean, bytes */

static char tmpdir[64];

/* A run that leaks slope bytes a step from step 0 on. */
static void leaking_run(struct analysis *a, double slope)
{
	memset(a, 0, sizeof(*a));
	a->verdict = VERDICT_LEAK;
	a->points = 200;
	a->slope = slope;
	a->warmup_end_x = 0;
}

/* 8 records over 200 steps: fewer than a site's own judgment needs. */
static size_t few(double *x, double *y, double per_step)
{
	size_t n = 8;
	for (size_t i = 0; i < n; i++) {
		x[i] = 25.0 * (double)(i + 1);
		y[i] = per_step * x[i];
	}
	return n;
}

static void test_few_records_carry_the_run(void)
{
	double x[8], y[8];
	size_t n = few(x, y, 500 * KIB);
	struct analysis run;
	leaking_run(&run, 849 * KIB);
	struct site_judgment j;
	trace_judge_series(x, y, n, MEAN, "step", &run, &j);
	CHECK_EQ_INT(j.state, SITE_GROWING);
	CHECK_NEAR(j.growth, 500 * KIB, 1);
	CHECK(strstr(j.reason, "of the run's") != NULL);
	/* on its own it cannot tell: undecided, with the reason, never flat */
	trace_judge_series(x, y, n, MEAN, "step", NULL, &j);
	CHECK_EQ_INT(j.state, SITE_UNDECIDED);
	CHECK(strstr(j.reason, "only 8 steps") != NULL);
	CHECK_STR(site_state_name(j.state), "undecided");
	/* nor when it grows but carries little of the run's growth */
	n = few(x, y, 40 * KIB);
	trace_judge_series(x, y, n, MEAN, "step", &run, &j);
	CHECK_EQ_INT(j.state, SITE_UNDECIDED);
}

static void test_short_lived_and_flat_stay_not_growing(void)
{
	struct analysis run;
	leaking_run(&run, 849 * KIB);
	struct site_judgment j;
	double x[8], y[8];
	size_t n = few(x, y, 0);
	/* held for one record in the middle, and at the very end */
	y[3] = 4 * 1024 * KIB;
	trace_judge_series(x, y, n, MEAN, "step", &run, &j);
	CHECK(j.state != SITE_GROWING);
	y[3] = 0;
	y[7] = 4 * 1024 * KIB;
	trace_judge_series(x, y, n, MEAN, "step", &run, &j);
	CHECK(j.state != SITE_GROWING);
	/* large and flat, few records: flat */
	for (size_t i = 0; i < n; i++)
		y[i] = 10 * 1024 * KIB;
	trace_judge_series(x, y, n, MEAN, "step", &run, &j);
	CHECK_EQ_INT(j.state, SITE_FLAT);
	/* many records, flat with a little noise, the run leaking: flat */
	double xl[100], yl[100];
	for (size_t i = 0; i < 100; i++) {
		xl[i] = (double)i;
		yl[i] = 10 * 1024 * KIB + (double)(i % 3) * MEAN;
	}
	trace_judge_series(xl, yl, 100, MEAN, "step", &run, &j);
	CHECK_EQ_INT(j.state, SITE_FLAT);
	/* many records, growing: growing on its own, with or without the run */
	for (size_t i = 0; i < 100; i++)
		yl[i] = 1024 * KIB * (double)i;
	trace_judge_series(xl, yl, 100, MEAN, "step", NULL, &j);
	CHECK_EQ_INT(j.state, SITE_GROWING);
}

/* ---- through the store -------------------------------------------------- */

struct fake_site {
	char frames[64];
	char symbols[64];
	double per_step;           /* growth */
	int64_t level;             /* constant part */
	int only_at;               /* >0: holds `level` at this record only */
};

/* The short h5py job of the report: 200 steps in 0.4 s, 8 records, the
 * run leaking 849 KiB a step; libhdf5's two sites carry it. */
static int64_t write_run(struct store *st, struct fake_site *fs, size_t nf)
{
	struct run_begin rb;
	memset(&rb, 0, sizeof(rb));
	rb.started_at = 1700000000;
	rb.command_json = "[\"python3\", \"stage.py\"]";
	rb.cwd = "/tmp";
	rb.hostname = "box";
	rb.measure = MEASURE_USS;
	rb.interval_ns = 100000000;
	rb.cgroup_mode = "none";
	int64_t run = store_run_begin(st, &rb);
	CHECK(run > 0);
	CHECK_EQ_INT(store_trace_begin(st, run, MEAN), 0);
	struct trace_site sites[8], *ptr[8];
	for (size_t s = 0; s < nf; s++) {
		memset(&sites[s], 0, sizeof(sites[s]));
		sites[s].id = (int64_t)s + 1;
		sites[s].kind = 'm';
		sites[s].frames = fs[s].frames;
		ptr[s] = &sites[s];
	}
	for (int k = 1; k <= 8; k++) {
		int64_t step = 25 * k;
		for (size_t s = 0; s < nf; s++) {
			if (fs[s].only_at)
				sites[s].live = k == fs[s].only_at ? fs[s].level : 0;
			else
				sites[s].live = fs[s].level + (int64_t)(fs[s].per_step * (double)step);
		}
		CHECK_EQ_INT(store_trace_write(st, run, 0.05 * k, true, step, ptr, nf), 0);
	}
	int64_t ids[8];
	char *syms[8];
	for (size_t s = 0; s < nf; s++) {
		ids[s] = (int64_t)s + 1;
		syms[s] = fs[s].symbols;
	}
	CHECK_EQ_INT(store_trace_set_symbols(st, run, ids, syms, nf), 0);
	return run;
}

static const struct trace_site_report *find(const struct trace_report *r, const char *fn)
{
	for (size_t i = 0; i < r->nsites; i++)
		if (r->sites[i].nframes && !strcmp(r->sites[i].frames[r->sites[i].blame].function, fn))
			return &r->sites[i];
	return NULL;
}

static void test_short_run_in_the_store(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/sites.db", tmpdir);
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct fake_site fs[] = {
		{ "/lib/libhdf5.so.310\t0x10\tH5FL_reg_malloc\n", "H5FL_reg_malloc\tH5FL.c:10\n", 502 * KIB, 0, 0 },
		{ "/lib/libhdf5.so.310\t0x20\tH5C_load_entry\n", "H5C_load_entry\tH5C.c:20\n", 300 * KIB, 0, 0 },
		{ "/lib/libscratch.so\t0x30\tscratch\n", "scratch\tscratch.c:30\n", 0, 8 << 20, 4 },
		{ "/lib/libflat.so\t0x40\tbig_table\n", "big_table\tflat.c:40\n", 0, 16 << 20, 0 },
	};
	int64_t id = write_run(st, fs, 4);
	struct analysis run;
	leaking_run(&run, 849 * KIB);
	struct trace_report r;
	CHECK_EQ_INT(trace_report_load(st, id, true, 0, &run, &r), 0);
	CHECK_EQ_INT(r.ngrowing, 2);
	const struct trace_site_report *a = find(&r, "H5FL_reg_malloc"), *b = find(&r, "H5C_load_entry"),
	                               *c = find(&r, "scratch"), *d = find(&r, "big_table");
	CHECK(a && b && c && d);
	if (a && b && c && d) {
		CHECK(a->growing && a->state == SITE_GROWING);
		CHECK(b->growing && b->state == SITE_GROWING);
		CHECK(!c->growing);
		CHECK(!d->growing && d->state == SITE_FLAT);
	}
	CHECK(r.nlibs >= 1 && !strcmp(r.libs[0].library, "libhdf5.so.310") && r.libs[0].growing);
	trace_report_release(&r);

	/* without the run's judgment the same records cannot be told */
	CHECK_EQ_INT(trace_report_load(st, id, true, 0, NULL, &r), 0);
	CHECK_EQ_INT(r.ngrowing, 0);
	CHECK(r.nundecided >= 2);
	a = find(&r, "H5FL_reg_malloc");
	CHECK(a && a->state == SITE_UNDECIDED && strstr(a->reason, "only") != NULL);
	CHECK(r.nlibs >= 1 && r.libs[0].state == SITE_UNDECIDED);
	trace_report_release(&r);
	store_close(st);
}

/* A store is outside input: site ids that are not 1..n (a crafted or
 * damaged store; fuzz/corpus/store/site-*) are sites like any other, not
 * indices. Before, id 0 read before the grid and id 2^40 asked for
 * terabytes. */
static void test_site_ids_from_a_crafted_store(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/crafted.db", tmpdir);
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_begin rb;
	memset(&rb, 0, sizeof(rb));
	rb.started_at = 1700000000;
	rb.command_json = "[\"python3\"]";
	rb.cwd = "/tmp";
	rb.hostname = "box";
	rb.measure = MEASURE_USS;
	rb.interval_ns = 100000000;
	rb.cgroup_mode = "none";
	int64_t run = store_run_begin(st, &rb);
	CHECK(run > 0);
	CHECK_EQ_INT(store_trace_begin(st, run, MEAN), 0);
	static const int64_t ids[] = { 0, INT64_C(1) << 40, -3 };
	static char *frames[] = { "/lib/a.so\t0x1\tzero\n", "/lib/b.so\t0x2\thuge\n", "/lib/c.so\t0x3\tnegative\n" };
	struct trace_site sites[3], *ptr[3];
	for (size_t s = 0; s < 3; s++) {
		memset(&sites[s], 0, sizeof(sites[s]));
		sites[s].id = ids[s];
		sites[s].kind = 'm';
		sites[s].frames = frames[s];
		sites[s].live = 1 << 20;
		ptr[s] = &sites[s];
	}
	for (int k = 1; k <= 50; k++) {
		sites[1].live = (int64_t)k << 20;     /* "huge" grows 1 MiB a step */
		CHECK_EQ_INT(store_trace_write(st, run, 0.1 * k, true, k, ptr, 3), 0);
	}
	struct trace_report r;
	CHECK_EQ_INT(trace_report_load(st, run, true, 0, NULL, &r), 0);
	CHECK_EQ_INT(r.nsites, 3);
	const struct trace_site_report *zero = find(&r, "zero"), *huge = find(&r, "huge"), *neg = find(&r, "negative");
	CHECK(zero && huge && neg);
	if (zero && huge && neg) {
		CHECK(huge->growing && huge->site == (INT64_C(1) << 40));
		CHECK(!zero->growing && zero->live == (double)(1 << 20));
		CHECK(!neg->growing && neg->live == (double)(1 << 20));
	}
	trace_report_release(&r);
	store_close(st);
}

/* A store names the files its frames are in; `report --trace` opens
 * those not yet named. A FIFO there waited for a writer forever: only
 * regular files are opened (the alarm fails the test instead of hanging). */
static void test_frames_in_a_fifo(void)
{
	char path[128], fifo[128], frames[256];
	snprintf(path, sizeof(path), "%s/fifo.db", tmpdir);
	snprintf(fifo, sizeof(fifo), "%s/lib.so", tmpdir);
	CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
	snprintf(frames, sizeof(frames), "%s\t0x10\tf\n", fifo);
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	struct run_begin rb;
	memset(&rb, 0, sizeof(rb));
	rb.started_at = 1700000000;
	rb.command_json = "[\"python3\"]";
	rb.cwd = "/tmp";
	rb.hostname = "box";
	rb.measure = MEASURE_USS;
	rb.interval_ns = 100000000;
	rb.cgroup_mode = "none";
	int64_t run = store_run_begin(st, &rb);
	CHECK_EQ_INT(store_trace_begin(st, run, MEAN), 0);
	struct trace_site site = { .id = 1, .kind = 'm', .frames = frames, .live = 1 << 20 }, *ptr = &site;
	CHECK_EQ_INT(store_trace_write(st, run, 0.1, true, 1, &ptr, 1), 0);
	alarm(60);
	struct trace_report r;
	CHECK_EQ_INT(trace_report_load(st, run, true, 0, NULL, &r), 0);
	alarm(0);
	CHECK_EQ_INT(r.nsites, 1);
	trace_report_release(&r);
	store_close(st);
}

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
}

/* Runs before main(): a scratch directory, removed at exit. */
__attribute__((constructor)) static void setup(void)
{
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/lp-test-sites-XXXXXX", base && *base && strlen(base) < 40 ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(cleanup);
}

TEST_MAIN("sites",
	TEST(test_few_records_carry_the_run),
	TEST(test_short_lived_and_flat_stay_not_growing),
	TEST(test_short_run_in_the_store),
	TEST(test_site_ids_from_a_crafted_store),
	TEST(test_frames_in_a_fifo))
