/*
 * alloc_loop.c — the allocation-heavy job of bench/trace_cost: OPS mixed
 * malloc/free (and some calloc/realloc) over a working set of SLOTS live
 * blocks per thread, sizes mostly 16 B - 1 KiB with a tail to 64 KiB, and a
 * slow leak of one block in 1000 kept to the end, as a training job's would.
 * Deterministic (xorshift per thread), so every configuration does the same
 * work.
 *
 *     alloc_loop [OPS [THREADS]]       (default 20000000 1; OPS in all)
 *
 * Prints "ops N threads N loop_s S ns_per_op X" on stdout: the loop's own
 * wall time, start-up and exit left out.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 4096
#define THREADS_MAX 64

static long ops_per_thread;

static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void *work(void *arg)
{
	uint64_t x = 0x9E3779B97F4A7C15ull * ((uint64_t)(uintptr_t)arg + 1);
	void **slot = calloc(SLOTS, sizeof(void *));
	void *leak = NULL;
	if (!slot)
		return NULL;
	for (long i = 0; i < ops_per_thread; i++) {
		uint64_t r = next(&x);
		size_t k = r % SLOTS;
		size_t n = (r >> 20) % 64 == 0 ? 1024 + (r >> 32) % 65536 : 16 + (r >> 32) % 1024;
		unsigned op = (unsigned)(r >> 56);
		if (op < 8) {                   /* 3 %: realloc in place */
			void *p = realloc(slot[k], n);
			if (p)
				slot[k] = p;
			continue;
		}
		free(slot[k]);
		slot[k] = op < 16 ? calloc(1, n) : malloc(n);
		if (slot[k])
			*(char *)slot[k] = (char)i;
		if (op == 255 && (r & 15) == 0) {   /* ~1 in 1000: kept */
			void **p = malloc(n < sizeof(void *) ? sizeof(void *) : n);
			if (p) {
				*p = leak;
				leak = p;
			}
		}
	}
	for (size_t k = 0; k < SLOTS; k++)
		free(slot[k]);
	free(slot);
	return leak;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long ops = argc > 1 ? atol(argv[1]) : 20000000;
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t th[THREADS_MAX];

	if (threads < 1 || threads > THREADS_MAX || ops < 1) {
		fprintf(stderr, "usage: alloc_loop [OPS [THREADS]]\n");
		return 2;
	}
	ops_per_thread = ops / threads;
	double t0 = now_s();
	if (threads == 1) {
		work(NULL);
	} else {
		for (int t = 0; t < threads; t++)
			if (pthread_create(&th[t], NULL, work, (void *)(uintptr_t)t))
				return 1;
		for (int t = 0; t < threads; t++)
			pthread_join(th[t], NULL);
	}
	double dt = now_s() - t0;
	printf("ops %ld threads %d loop_s %.4f ns_per_op %.2f\n", ops_per_thread * threads, threads, dt,
	       dt * 1e9 / (double)(ops_per_thread * threads));
	return 0;
}
