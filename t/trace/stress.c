/*
 * stress.c — several threads allocating and freeing with every entry point
 * the tracer interposes (malloc, calloc, realloc, free, posix_memalign,
 * aligned_alloc, memalign, valloc, reallocarray, mmap/munmap), mixed sizes,
 * keeping about one allocation in 50 (some of the kept ones grown later by
 * realloc). Prints KEPT_BYTES=<bytes of the kept blocks at the end>, which
 * stay allocated when the program exits.
 *
 * usage: stress [THREADS [OPS_PER_THREAD]]     (default 4 300000)
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define THREADS_MAX 16
#define KEEP_MAX 20000
#define RING 256

struct block { void *p; size_t n; };

static struct block kept[THREADS_MAX][KEEP_MAX];
static size_t nkept[THREADS_MAX];
static long ops = 300000;

static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static size_t pick_size(uint64_t *x)
{
	uint64_t r = next(x);
	if (r % 100 == 0)
		return 65536 + r % (1 << 20);     /* 1 %: 64 KiB - 1 MiB */
	return 16 + (r >> 8) % 1024;
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	struct block ring[RING];
	uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
	memset(ring, 0, sizeof(ring));

	for (long i = 0; i < ops; i++) {
		struct block *b = &ring[next(&x) % RING];
		size_t n = pick_size(&x);
		int op = (int)(next(&x) % 100);
		void *p = NULL;

		if (op < 2 && nkept[t] < KEEP_MAX) {          /* keep one */
			p = op ? calloc(1, n) : malloc(n);
			if (p) {
				memset(p, 1, 8);
				kept[t][nkept[t]++] = (struct block){ p, n };
			}
			continue;
		}
		if (op < 3 && nkept[t]) {                     /* grow a kept one */
			struct block *k = &kept[t][next(&x) % nkept[t]];
			size_t m = k->n + pick_size(&x);
			p = realloc(k->p, m);
			if (p)
				*k = (struct block){ p, m };
			continue;
		}
		if (op < 40) {
			if (b->p && (next(&x) & 1)) {        /* realloc in place of free */
				p = realloc(b->p, n);
				if (p)
					*b = (struct block){ p, n };
				continue;
			}
			free(b->p);
			b->p = NULL;
		} else {
			free(b->p);
			b->p = NULL;
		}
		switch (op % 9) {
		case 0: p = malloc(n); break;
		case 1: p = calloc(n / 8 + 1, 8); break;
		case 2: if (posix_memalign(&p, 64, n)) p = NULL; break;
		case 3: p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095); break;
		case 4: p = memalign(256, n); break;
		case 5: p = valloc(n); break;
		case 6: p = reallocarray(NULL, n / 16 + 1, 16); break;
		case 7: {
			void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m != MAP_FAILED) {
				memset(m, 2, 8);
				munmap(m, n);
			}
			p = malloc(n);
			break;
		}
		default: p = malloc(n); break;
		}
		if (p) {
			memset(p, 3, 8);
			*b = (struct block){ p, n };
		}
	}
	for (int i = 0; i < RING; i++)
		free(ring[i].p);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 4;
	pthread_t th[THREADS_MAX];
	size_t total = 0;

	if (threads < 1 || threads > THREADS_MAX)
		threads = 4;
	if (argc > 2)
		ops = atol(argv[2]);
	for (int t = 0; t < threads; t++)
		if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t)) {
			fprintf(stderr, "stress: pthread_create failed\n");
			return 1;
		}
	for (int t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < threads; t++)
		for (size_t i = 0; i < nkept[t]; i++)
			total += kept[t][i].n;
	printf("KEPT_BYTES=%zu\n", total);
	return 0;
}
