/*
 * robust.c — the situations a preloaded tracer must survive, one per mode:
 *
 *   robust plain           deterministic allocations and output (compared
 *                          byte for byte with and without the tracer)
 *   robust alloc           keeps 24 MiB; prints "ALLOC <pid> <bytes>"
 *   robust exec            forks a child that execs "robust alloc", then
 *                          execs "robust alloc" itself (same pid, new image)
 *   robust dlopen LIB      dlopens LIB after start and calls its keep_some()
 *                          200000 times; prints "KEPT_BYTES=<bytes>"
 *   robust signal          a profiling timer whose handler mallocs and frees
 *                          (keeping a ring of 16 blocks) while the main thread
 *                          maps and unmaps memory, until the handler ran 200
 *                          times (20 s at most); prints "HANDLER_CALLS=<n>"
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static size_t keep_bytes(size_t total)
{
	void *head = NULL;
	size_t kept = 0;
	for (size_t n = 1000; kept < total; n = 1000 + (n * 7919) % 9000) {
		void **p = malloc(n);
		if (!p)
			break;
		*p = head;
		head = p;
		kept += n;
	}
	return kept;
}

static int plain(void)
{
	unsigned long sum = 0;
	for (int i = 0; i < 200000; i++) {
		unsigned char *p = malloc((size_t)(i % 5000) + 1);
		if (!p)
			return 1;
		p[0] = (unsigned char)i;
		sum += p[0];
		free(p);
	}
	char *s = strdup("plain output");
	printf("%s %lu\n", s, sum);
	free(s);
	for (int i = 0; i < 20; i++)
		printf("line %d\n", i);
	return 0;
}

static volatile sig_atomic_t handler_calls;
static void *ring[16];

static void on_prof(int sig)
{
	(void)sig;
	int k = handler_calls % 16;
	free(ring[k]);
	ring[k] = malloc(1024 + (size_t)(handler_calls % 64) * 1024);
	if (ring[k])
		memset(ring[k], 1, 64);
	handler_calls++;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int with_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	setitimer(ITIMER_PROF, &it, NULL);
	double end = now_s() + 20;
	while (handler_calls < 200 && now_s() < end) {
		for (int i = 0; i < 100; i++) {
			size_t n = 65536 + (size_t)i * 4096;
			char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				return 1;
			m[0] = 1;
			munmap(m, n);
		}
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_PROF, &off, NULL);
	printf("HANDLER_CALLS=%d\n", (int)handler_calls);
	return 0;
}

static int run_alloc(void)
{
	printf("ALLOC %ld %zu\n", (long)getpid(), keep_bytes(24u << 20));
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "plain";
	if (!strcmp(mode, "plain"))
		return plain();
	if (!strcmp(mode, "alloc"))
		return run_alloc();
	if (!strcmp(mode, "exec")) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			execl(argv[0], argv[0], "alloc", (char *)NULL);
			_exit(127);
		}
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			return 1;
		keep_bytes(4u << 20);   /* something of this image's own before it goes */
		execl(argv[0], argv[0], "alloc", (char *)NULL);
		return 127;
	}
	if (!strcmp(mode, "dlopen") && argc > 2) {
		void *h = dlopen(argv[2], RTLD_NOW);
		if (!h)
			return 2;
		size_t (*keep)(size_t) = (size_t (*)(size_t))dlsym(h, "keep_some");
		size_t (*kept)(void) = (size_t (*)(void))dlsym(h, "keep_some_kept_bytes");
		if (!keep || !kept)
			return 3;
		for (int i = 0; i < 200000; i++)
			keep(1024 + (size_t)(i % 7) * 1024);
		printf("KEPT_BYTES=%zu\n", kept());
		return 0;
	}
	if (!strcmp(mode, "signal"))
		return with_signals();
	fprintf(stderr, "robust: unknown mode '%s'\n", mode);
	return 2;
}
