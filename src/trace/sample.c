/*
 * sample.c — the tracer's byte sampling (see trace.h): Poisson sampling over
 * the stream of allocated bytes, as in jemalloc and tcmalloc. Each thread
 * counts down an exponentially distributed number of bytes; the allocation
 * that crosses zero is sampled. An allocation of s bytes is then sampled
 * with probability 1 - e^(-s/mean), whatever came before it, so counting
 * it as s / (1 - e^(-s/mean)) bytes gives unbiased totals.
 *
 * Also the page allocator (raw mmap: the tracer never calls malloc) and the
 * site hash. Units: bytes.
 */
#include "trace/trace.h"

#include <math.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

void *trace_pages_alloc(size_t bytes)
{
	long p = syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == -1)
		return NULL;
	return (void *)p;
}

void trace_pages_free(void *p, size_t bytes)
{
	if (p)
		syscall(SYS_munmap, p, bytes);
}

void trace_rng_seed(struct trace_rng *r, uint64_t seed)
{
	/* splitmix64 of the seed, so nearby seeds give unrelated streams */
	uint64_t z = seed + 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	r->s = z ? z : 0x2545F4914F6CDD1Dull;
}

uint64_t trace_rng_next(struct trace_rng *r)
{
	uint64_t x = r->s ? r->s : 0x2545F4914F6CDD1Dull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

int64_t trace_next_countdown(struct trace_rng *r, uint64_t mean_bytes)
{
	/* u in (0, 1]: 53 random bits, never 0 so log(u) is finite */
	double u = (double)((trace_rng_next(r) >> 11) + 1) * (1.0 / 9007199254740992.0);
	double n = -log(u) * (double)mean_bytes;
	if (n < 1.0)
		return 1;
	if (n > 9.0e18)
		return INT64_MAX;
	return (int64_t)n;
}

uint64_t trace_weight(uint64_t size, uint64_t mean_bytes)
{
	if (size == 0)
		return 0;
	if (mean_bytes == 0)
		return size;
	double x = (double)size / (double)mean_bytes;
	double p = -expm1(-x);     /* 1 - e^-x without cancellation for small x */
	if (!(p > 0.0))
		return size;
	double w = (double)size / p;
	if (w > 1.8e19)
		return UINT64_MAX;
	return (uint64_t)(w + 0.5);
}

static inline uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
	return h * 0xBF58476D1CE4E5B9ull;
}

uint64_t trace_site_hash(char kind, const uintptr_t *frames, int nframes,
			 const char *py, size_t py_len)
{
	uint64_t h = mix(0xCBF29CE484222325ull, (unsigned char)kind);
	for (int i = 0; i < nframes; i++)
		h = mix(h, frames[i]);
	for (size_t i = 0; i < py_len; i++)
		h = (h ^ (unsigned char)py[i]) * 0x100000001B3ull;
	h ^= h >> 31;
	h *= 0x94D049BB133111EBull;
	h ^= h >> 29;
	return h;
}
