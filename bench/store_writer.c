/*
 * store_writer.c — one simulated run written to a store through the
 * store's own API (src/store/store.h), as the supervisor writes it at the
 * default interval: per second of run, 10 memory samples (100 ms), one set
 * of per-process rows (PROCS processes), STEPS steps each with a "loss"
 * metric, then store_flush(); a run begins and ends around them. Built and
 * linked against the build's objects by bench/store_cost (not by make).
 *
 *   store_writer STORE SECONDS [--steps N] [--procs N] [--paced] [--runs N]
 *
 * Without --paced the seconds are simulated back to back (the cost of the
 * writes alone); with it each flush waits for its second of wall time (a
 * real run's rhythm, for many writers at once). Prints one JSON object:
 * runs, flushes, rows, CPU and wall seconds of the whole, and the flush
 * wall times' median, p99 and max in ms. Units as named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_self(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: store_writer STORE SECONDS [--steps N] [--procs N] [--paced] [--runs N]\n");
		return 2;
	}
	const char *path = argv[1];
	int seconds = atoi(argv[2]), steps_per_s = 10, procs = 4, runs = 1;
	int paced = 0;
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps_per_s = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--procs") && i + 1 < argc)
			procs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--paced"))
			paced = 1;
	}
	double t0 = mono(), c0 = cpu_self();
	struct store *st = store_open(path);
	if (!st)
		return 1;
	double open_s = mono() - t0;
	size_t nflush = (size_t)seconds * (size_t)runs, k = 0;
	double *flush_ms = calloc(nflush + 1, sizeof(double));
	long long rows = 0;
	int64_t step = 0;
	for (int r = 0; r < runs; r++) {
		struct run_begin rb = { .started_at = (double)time(NULL), .command_json = "[\"python3\",\"train.py\"]",
		                        .cwd = "/", .hostname = "bench", .measure = MEASURE_PSS,
		                        .interval_ns = 100000000, .limit_bytes = 1ULL << 34, .limit_source = "cgroup",
		                        .mem_total_bytes = 1ULL << 36, .cgroup_mode = "v1" };
		int64_t id = store_run_begin(st, &rb);
		if (id < 0)
			return 1;
		double next = mono();
		for (int s = 0; s < seconds; s++) {
			for (int i = 0; i < 10; i++) {
				struct mem_sample m = { .t = s + i / 10.0, .nprocs = procs, .rss = 1ULL << 30,
				                        .pss = (1ULL << 30) + (uint64_t)s * 4096, .uss = 1ULL << 29,
				                        .pss_exact = i == 0 };
				store_add_sample(st, id, &m);
				rows++;
			}
			for (int p = 0; p < procs; p++) {
				store_add_proc_sample(st, id, s, 1000 + p, p ? 1000 : 1, "python3", 1 << 28, 1 << 28,
				                      1 << 27, 0, 0);
				rows++;
			}
			for (int i = 0; i < steps_per_s; i++) {
				struct step_rec sr = { .step = ++step, .epoch = -1,
				                       .mem = { .t = s + (double)i / steps_per_s, .nprocs = procs,
				                                .rss = 1ULL << 30, .pss = 1ULL << 30, .uss = 1ULL << 29 } };
				store_add_step(st, id, &sr);
				store_add_metric(st, id, step, sr.mem.t, "loss", 1.0 / (double)step);
				rows += 2;
			}
			double f0 = mono();
			store_flush(st);
			flush_ms[k++] = (mono() - f0) * 1e3;
			if (paced) {
				next += 1.0;
				double left = next - mono();
				if (left > 0)
					usleep((useconds_t)(left * 1e6));
			}
		}
		struct run_end re = { .ended_at = (double)time(NULL), .status = "done", .step_source = STEP_SOURCE_CHANNEL,
		                      .steps = step, .verdict = "no-leak" };
		store_run_end(st, id, &re);
	}
	store_close(st);
	double wall = mono() - t0, cpu = cpu_self() - c0;
	qsort(flush_ms, k, sizeof(double), cmp);
	printf("{\"runs\": %d, \"seconds\": %d, \"flushes\": %zu, \"rows\": %lld, \"open_s\": %.6f, \"wall_s\": %.6f,"
	       " \"cpu_s\": %.6f, \"flush_ms_median\": %.4f, \"flush_ms_p99\": %.4f, \"flush_ms_max\": %.4f}\n",
	       runs, seconds, k, rows, open_s, wall, cpu, k ? flush_ms[k / 2] : 0, k ? flush_ms[k * 99 / 100] : 0,
	       k ? flush_ms[k - 1] : 0);
	free(flush_ms);
	return 0;
}
