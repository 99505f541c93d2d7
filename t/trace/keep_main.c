/*
 * keep_main.c — millions of short-lived allocations from two sites of this
 * program (short_a, short_b) around calls to keep_some() of libtracekeep.so,
 * which keeps one block in 50. Prints KEPT_BYTES=<what keep_some kept>.
 * With STEPS, the iterations are split into that many steps, each ended by a
 * line "step N" and a pause of 100 ms (for `leakproof run --step-regex`).
 *
 * usage: keep_main [ITERATIONS [STEPS]]      (default 2000000, no steps)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

size_t keep_some(size_t size);
size_t keep_some_kept_bytes(void);
void *short_a(size_t n);
void *short_b(size_t n);

/* Exported (the program is linked -rdynamic) so dladdr names them. */
__attribute__((noinline)) void *short_a(size_t n)
{
	char *p = malloc(n);
	if (p)
		p[0] = 1;
	return p;
}

__attribute__((noinline)) void *short_b(size_t n)
{
	char *p = calloc(1, n);
	if (p)
		p[n - 1] = 1;
	return p;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 2000000;
	long steps = argc > 2 ? atol(argv[2]) : 0;
	long per_step = steps > 0 ? iters / steps : 0;
	void *ring[64] = { 0 };
	uint64_t x = 88172645463325252ull;

	for (long i = 0; i < iters; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int k = (int)(i & 63);
		free(ring[k]);
		ring[k] = (i & 1) ? short_a(16 + x % 4096) : short_b(16 + x % 4096);
		keep_some(512 + (x >> 20) % 3072);
		if (per_step && (i + 1) % per_step == 0) {
			printf("step %ld\n", (i + 1) / per_step);
			fflush(stdout);
			nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
		}
	}
	for (int k = 0; k < 64; k++)
		free(ring[k]);
	printf("KEPT_BYTES=%zu\n", keep_some_kept_bytes());
	return 0;
}
