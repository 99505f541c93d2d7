/*
 * test_watch.c — the model behind `leakproof top` (judge/watch.h), without
 * a terminal, on real SQLite stores written here and clocks set by the
 * test: the state of a running run, an ended one, one whose supervisor died
 * (interrupted) and one lost with its job; the judgment's cadence (when
 * first seen, every 5 s, or 20 times its cost; an ended run once more, then
 * never), the judging budget for runs first seen ended, time to the limit,
 * and a store file made again at its path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "judge/watch.h"
#include "store/store.h"
#include "util/util.h"
#include "tap.h"

#define MIB (1024.0 * 1024.0)
#define SEC 1000000000LL
#define T0 1700000000.0          /* the runs' start, Unix time */

static char tmpdir[64];
static char host[256];

static const char *tmp_path(const char *name)
{
	static char buf[256];
	snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
	return buf;
}

/* ---- clocks the test sets ------------------------------------------------ */

static double fake_wall;         /* Unix time */
static int64_t fake_mono;        /* ns; never 0: 0 is "never judged" */
static int64_t fake_tick_ns;     /* added at each read of the monotonic clock */

static double wall_now(void)
{
	return fake_wall;
}

static int64_t mono_now(void)
{
	int64_t t = fake_mono;
	fake_mono += fake_tick_ns;
	return t;
}

static bool open_watch(struct watch *w, const char *path, bool judge_all)
{
	if (watch_init(w, path, judge_all) < 0)
		return false;
	w->wall_seconds = wall_now;
	w->mono_ns = mono_now;
	return true;
}

/* ---- runs written here ---------------------------------------------------- */

/* A pid that no process has: a child, reaped. */
static pid_t gone_pid(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

/* A run started at T0 on hostname, its job's pid job_pid, supervised by
 * supervisor_pid (0: unknown). Measure USS, limit 8 GiB. */
static int64_t begin_run(struct store *st, const char *hostname, int job_pid, int supervisor_pid)
{
	struct run_begin rb;
	memset(&rb, 0, sizeof(rb));
	rb.started_at = T0;
	rb.command_json = "[\"/usr/bin/python3\", \"/home/user/proj/train.py\", \"--lr\", \"0.1\"]";
	rb.cwd = "/home/user/proj";
	rb.hostname = hostname;
	rb.measure = MEASURE_USS;
	rb.interval_ns = 100000000;
	rb.limit_bytes = 8ULL << 30;
	rb.limit_source = "max-mem";
	rb.mem_total_bytes = 32ULL << 30;
	rb.cgroup_mode = "none";
	rb.pid = job_pid;
	rb.supervisor_pid = supervisor_pid;
	rb.supervisor_start = supervisor_pid ? 12345 : 0;
	int64_t id = store_run_begin(st, &rb);
	CHECK(id > 0);
	return id;
}

/* Steps first..last, 10 a second, each 1 MiB more than the one before
 * (from 100 MiB), each with a sample at its end. */
static void write_steps(struct store *st, int64_t id, int first, int last)
{
	for (int k = first; k <= last; k++) {
		struct mem_sample s = { .t = 0.1 * k, .nprocs = 1, .pss_exact = true };
		s.uss = (uint64_t)((100 + k) * MIB);
		s.pss = s.uss + 1000;
		s.rss = s.uss + 2000;
		struct step_rec rec = { .step = k, .epoch = -1, .mem = s };
		CHECK_EQ_INT(store_add_sample(st, id, &s), 0);
		CHECK_EQ_INT(store_add_step(st, id, &rec), 0);
	}
	CHECK_EQ_INT(store_flush(st), 0);
}

static void end_run(struct store *st, int64_t id, double ended_at)
{
	struct run_end re = {
		.ended_at = ended_at, .exit_code = 0, .status = RUN_DONE, .step_source = STEP_SOURCE_CHANNEL,
	};
	CHECK_EQ_INT(store_run_end(st, id, &re), 0);
	struct segment_end se = { .ended_at = ended_at, .exit_code = 0, .cause = CAUSE_EXIT };
	CHECK_EQ_INT(store_segment_end(st, id, 0, &se), 0);
	CHECK_EQ_INT(store_flush(st), 0);
}

/* ---- tests ----------------------------------------------------------------- */

/* Time to the limit from hand-made judgments: per step times steps per
 * second, or per second; none when anything it needs is missing. */
static void test_seconds_to_limit(void)
{
	struct watched_run r;
	memset(&r, 0, sizeof(r));
	r.run.measure = MEASURE_USS;
	r.has_last = true;
	r.last.uss = (uint64_t)(50 * MIB);
	r.j.valid = true;
	r.j.x_unit = "step";
	r.j.growth_bytes_per_x = 1 * MIB;
	r.j.steps_per_second = 2;
	r.j.projected_seconds = 1000;
	r.j.limit_bytes = 100 * MIB;
	CHECK_NEAR(watched_run_memory_bytes(&r), 50 * MIB, 0.5);
	CHECK_NEAR(watched_run_seconds_to_limit(&r), 25, 1e-9);       /* 50 MiB at 2 MiB/s */
	r.j.x_unit = "s";
	CHECK_NEAR(watched_run_seconds_to_limit(&r), 50, 1e-9);       /* 50 MiB at 1 MiB/s */
	r.last.uss = (uint64_t)(120 * MIB);
	CHECK_NEAR(watched_run_seconds_to_limit(&r), 0, 0);           /* over it already */
	r.last.uss = (uint64_t)(50 * MIB);

	struct watched_run none = r;
	none.run.ended_at = T0 + 10;
	CHECK(watched_run_seconds_to_limit(&none) < 0);               /* ended */
	none = r;
	none.j.valid = false;
	CHECK(watched_run_seconds_to_limit(&none) < 0);               /* not judged yet */
	none = r;
	none.j.projected_seconds = -1;
	CHECK(watched_run_seconds_to_limit(&none) < 0);               /* growth not significant */
	none = r;
	none.j.growth_bytes_per_x = 0;
	CHECK(watched_run_seconds_to_limit(&none) < 0);
	none = r;
	none.j.growth_bytes_per_x = NAN;
	CHECK(watched_run_seconds_to_limit(&none) < 0);
	none = r;
	none.j.x_unit = "step";
	none.j.steps_per_second = 0;
	CHECK(watched_run_seconds_to_limit(&none) < 0);               /* steps, but no rate */
	none = r;
	none.j.limit_bytes = 0;
	CHECK(watched_run_seconds_to_limit(&none) < 0);               /* no limit known */
	none = r;
	none.has_last = false;
	CHECK(watched_run_seconds_to_limit(&none) < 0);               /* no sample */
	CHECK(watched_run_memory_bytes(&none) < 0);

	/* the peak: judged, or a recent point above it */
	r.j.peak_bytes = 70 * MIB;
	r.nrecent = 2;
	r.recent_bytes[0] = 60 * MIB;
	r.recent_bytes[1] = 80 * MIB;
	CHECK_NEAR(watched_run_peak_bytes(&r), 80 * MIB, 0);
	r.recent_bytes[1] = 65 * MIB;
	CHECK_NEAR(watched_run_peak_bytes(&r), 70 * MIB, 0);
	r.j.valid = false;
	CHECK_NEAR(watched_run_peak_bytes(&r), 65 * MIB, 0);
}

/* A running run, judged when first seen, then every 5 s, or 20 times what
 * its judgment took if that is longer; its new samples read at each
 * refresh; then its end, read on for 30 s and judged once more. */
static void test_running_then_ended(void)
{
	const char *path = tmp_path("running.db");
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	int64_t id = begin_run(st, host, getpid(), 0);
	write_steps(st, id, 1, 200);

	struct watch w;
	fake_wall = T0 + 20.5;
	fake_mono = 1000 * SEC;
	fake_tick_ns = 0;
	CHECK(open_watch(&w, path, false));
	CHECK_EQ_INT(watch_refresh(&w), 0);
	CHECK_EQ_INT(w.nruns, 1);
	struct watched_run *r = watch_find(&w, id);
	CHECK(r != NULL);
	if (!r)
		goto out;
	CHECK_STR(watched_state_name(r->state), "running");
	CHECK_EQ_INT(r->argc, 4);
	CHECK_STR(r->argv[1], "/home/user/proj/train.py");
	CHECK(r->has_last);
	CHECK_NEAR(r->last.t, 20.0, 1e-9);
	CHECK_NEAR(watched_run_memory_bytes(r), 300 * MIB, 1);
	/* one point per 5 s: t 0.1-4.9, 5-9.9, 10-14.9, 15-19.9, 20 */
	CHECK_EQ_INT(r->nrecent, 5);
	CHECK_NEAR(r->recent_bytes[0], 149 * MIB, 1);   /* the last sample of its slot */
	CHECK_NEAR(r->recent_bytes[4], 300 * MIB, 1);
	CHECK_EQ_INT(r->restarts, 0);
	CHECK_STR(r->last_cause, "");
	CHECK(r->j.valid);
	CHECK_STR(r->j.verdict, "leak");
	CHECK_STR(r->j.x_unit, "step");
	CHECK_NEAR(r->j.growth_bytes_per_x, MIB, 0.01 * MIB);
	CHECK_NEAR(r->j.steps_per_second, 10, 0.1);
	CHECK_EQ_INT(r->j.steps, 200);
	CHECK_EQ_INT(r->judged_mono_ns, 1000 * SEC);
	/* 8 GiB - 300 MiB at 1 MiB a step, 10 steps a second: about 789 s */
	CHECK(r->seconds_to_limit > 0);
	CHECK_NEAR(r->seconds_to_limit, (8192 - 300) / 10.0, 2);
	CHECK_NEAR(r->seconds_to_limit, watched_run_seconds_to_limit(r), 0);

	/* a second on: new samples read, not judged again */
	write_steps(st, id, 201, 210);
	fake_wall += 1;
	fake_mono += 1 * SEC;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	r = watch_find(&w, id);
	CHECK(r && r->last.t > 20.9 && r->last.t < 21.1);
	CHECK(r && r->judged_mono_ns == 1000 * SEC && r->j.steps == 200);

	/* 5 s after the judgment: judged again, with the new steps */
	fake_mono = 1005 * SEC;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	r = watch_find(&w, id);
	CHECK(r && r->judged_mono_ns == 1005 * SEC && r->j.steps == 210);

	/* a judgment that took 1 s is made again 20 s later, not 5 */
	if (r)
		r->judge_cost_ns = 1 * SEC;
	fake_mono = 1015 * SEC;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	r = watch_find(&w, id);
	CHECK(r && r->judged_mono_ns == 1005 * SEC);
	fake_mono = 1025 * SEC;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	r = watch_find(&w, id);
	CHECK(r && r->judged_mono_ns == 1025 * SEC);

	/* it ends: ended, no time to the limit, its judgment kept until due;
	 * read on while its end is fresh */
	end_run(st, id, T0 + 22);
	fake_wall = T0 + 23;
	fake_mono = 1026 * SEC;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	r = watch_find(&w, id);
	if (!r) {
		CHECK(r != NULL);
		goto out;
	}
	CHECK_STR(watched_state_name(r->state), "ended");
	CHECK_STR(r->last_cause, "exit");
	CHECK(r->seconds_to_limit < 0);
	CHECK(!r->read_final);
	CHECK_EQ_INT(r->judged_mono_ns, 1025 * SEC);   /* not due: 1 s since */

	/* 30 s after its end: read whole, judged once more with all it wrote,
	 * then never read or judged again */
	fake_wall = T0 + 60;
	fake_mono = 1060 * SEC;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	r = watch_find(&w, id);
	CHECK(r && r->read_final && r->judged_final && r->judged_mono_ns == 1060 * SEC);
	fake_mono = 2000 * SEC;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	r = watch_find(&w, id);
	CHECK(r && r->judged_mono_ns == 1060 * SEC);

	/* ten minutes after its end it leaves the list */
	fake_wall = T0 + 22 + WATCH_RECENT_SECONDS + 1;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	CHECK_EQ_INT(w.nruns, 0);
out:
	watch_release(&w);
	store_close(st);
}

/* A run whose supervisor died: a reader sees it interrupted (ended at its
 * last sample, its segment open), judged once and not again, read on. A run
 * whose supervisor is not known and whose job is gone, with no sample for
 * 15 s: lost, until ten minutes after its last sample. One of another host
 * cannot be told lost. */
static void test_supervisor_died_or_interrupted(void)
{
	const char *path = tmp_path("died.db");
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	pid_t gone = gone_pid();
	int64_t died = begin_run(st, host, gone, gone);
	write_steps(st, died, 1, 100);
	int64_t lost = begin_run(st, host, gone, 0);
	write_steps(st, lost, 1, 100);
	int64_t there = begin_run(st, "another-host-of-the-test", gone, 0);
	write_steps(st, there, 1, 100);
	int64_t alive = begin_run(st, host, getpid(), 0);
	write_steps(st, alive, 1, 100);

	struct watch w;
	fake_wall = T0 + 100;     /* 90 s after their last samples */
	fake_mono = 1000 * SEC;
	fake_tick_ns = 0;
	CHECK(open_watch(&w, path, false));
	CHECK_EQ_INT(watch_refresh(&w), 0);
	CHECK_EQ_INT(w.nruns, 4);
	CHECK(w.nruns == 4 && w.runs[0]->id == alive && w.runs[3]->id == died);   /* newest first */
	struct watched_run *r = watch_find(&w, died);
	CHECK(r && r->state == WATCHED_ENDED);
	CHECK(r && r->run.ended_at > 0 && r->segment_open && !r->read_final);
	CHECK(r && r->judged_final && r->judged_mono_ns == 1000 * SEC);
	CHECK(r && r->seconds_to_limit < 0);
	r = watch_find(&w, lost);
	CHECK(r && r->state == WATCHED_INTERRUPTED);
	r = watch_find(&w, there);
	CHECK(r && r->state == WATCHED_RUNNING);
	r = watch_find(&w, alive);
	CHECK(r && r->state == WATCHED_RUNNING);
	CHECK(r && r->seconds_to_limit > 0);

	fake_wall = T0 + 400;
	fake_mono = 2000 * SEC;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	r = watch_find(&w, died);
	CHECK(r && r->judged_mono_ns == 1000 * SEC);   /* judged with all it will write */
	CHECK(watch_find(&w, lost) != NULL);

	fake_wall = T0 + 10 + WATCH_RECENT_SECONDS + 1;
	CHECK_EQ_INT(watch_refresh(&w), 0);
	CHECK(watch_find(&w, lost) == NULL);           /* lost long ago */
	CHECK(watch_find(&w, alive) != NULL);
	CHECK(watch_find(&w, there) != NULL);
	watch_release(&w);
	store_close(st);
}

/* Runs first seen ended are judged for 0.2 s a refresh at most (so the
 * first screen comes at once), the rest at the next refreshes; a snapshot
 * (judge_all) judges them all. */
static void test_judging_budget(void)
{
	const char *path = tmp_path("budget.db");
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	int64_t ids[3];
	for (int i = 0; i < 3; i++) {
		ids[i] = begin_run(st, host, getpid(), 0);
		write_steps(st, ids[i], 1, 50);
		end_run(st, ids[i], T0 + 6);
	}

	struct watch w;
	fake_wall = T0 + 10;
	fake_mono = 1000 * SEC;
	fake_tick_ns = SEC / 20;  /* each look at the clock: 50 ms on */
	CHECK(open_watch(&w, path, false));
	CHECK_EQ_INT(watch_refresh(&w), 0);
	CHECK_EQ_INT(w.nruns, 3);
	size_t judged = 0;
	for (size_t i = 0; i < w.nruns; i++)
		judged += w.runs[i]->j.valid;
	CHECK(judged >= 1 && judged < 3);
	CHECK(w.nruns == 3 && w.runs[0]->j.valid);    /* newest first */
	for (int k = 0; k < 3; k++)
		CHECK_EQ_INT(watch_refresh(&w), 0);
	judged = 0;
	for (size_t i = 0; i < w.nruns; i++)
		judged += w.runs[i]->j.valid;
	CHECK_EQ_INT(judged, 3);
	watch_release(&w);

	CHECK(open_watch(&w, path, true));
	CHECK_EQ_INT(watch_refresh(&w), 0);
	judged = 0;
	for (size_t i = 0; i < w.nruns; i++)
		judged += w.runs[i]->j.valid;
	CHECK_EQ_INT(judged, 3);
	watch_release(&w);
	fake_tick_ns = 0;
	store_close(st);
}

/* A store file deleted and made again at its path: the old one's runs are
 * forgotten, none listed while nothing is there, the new one's read. */
static void test_store_made_again(void)
{
	const char *path = tmp_path("again.db");
	struct store *st = store_open(path);
	CHECK(st != NULL);
	if (!st)
		return;
	int64_t old = begin_run(st, host, getpid(), 0);
	write_steps(st, old, 1, 20);

	struct watch w;
	fake_wall = T0 + 3;
	fake_mono = 1000 * SEC;
	fake_tick_ns = 0;
	CHECK(open_watch(&w, path, true));
	CHECK_EQ_INT(watch_refresh(&w), 0);
	CHECK_EQ_INT(w.nruns, 1);
	store_close(st);

	char side[300];
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
	CHECK_EQ_INT(watch_refresh(&w), 0);
	CHECK_EQ_INT(w.nruns, 0);
	CHECK(w.st == NULL);
	struct proc_row *procs;
	size_t nprocs;
	CHECK_EQ_INT(watch_processes(&w, old, &procs, &nprocs), 0);
	CHECK_EQ_INT(nprocs, 0);

	st = store_open(path);
	CHECK(st != NULL);
	if (!st) {
		watch_release(&w);
		return;
	}
	int64_t first = begin_run(st, host, getpid(), 0);
	int64_t second = begin_run(st, host, getpid(), 0);
	write_steps(st, second, 1, 20);
	CHECK_EQ_INT(store_add_proc_sample(st, second, 2.0, 4242, 1, "python3", 5, 4, 3, 2, 1), 0);
	CHECK_EQ_INT(store_flush(st), 0);
	CHECK_EQ_INT(watch_refresh(&w), 0);
	CHECK(w.st != NULL);
	CHECK_EQ_INT(w.nruns, 2);
	CHECK(watch_find(&w, first) && !watch_find(&w, first)->has_last);   /* no sample yet */
	CHECK(watch_find(&w, second) && watch_find(&w, second)->has_last);
	CHECK_EQ_INT(watch_processes(&w, second, &procs, &nprocs), 0);
	CHECK(nprocs == 1 && procs[0].pid == 4242);
	free(procs);
	watch_release(&w);
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
	snprintf(tmpdir, sizeof(tmpdir), "%s/lp-test-watch-XXXXXX", base && *base && strlen(base) < 40 ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(cleanup);
	if (gethostname(host, sizeof(host) - 1) < 0)
		host[0] = '\0';
}

TEST_MAIN("watch",
	TEST(test_seconds_to_limit),
	TEST(test_running_then_ended),
	TEST(test_supervisor_died_or_interrupted),
	TEST(test_judging_budget),
	TEST(test_store_made_again))
