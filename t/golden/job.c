/*
 * job.c — the training job of the golden-file tests (t/e2e/test_golden.py):
 * its memory per step does not depend on timing.
 *
 *     job [--leak_mib=N] [--steps=N] [--plateau=N]
 *
 * Each step maps and touches N MiB (default 1; only in the first PLATEAU
 * steps when --plateau is given), then marks the step and a loss through
 * the C client and pauses 60 ms, so the supervisor's sample for the step is
 * taken before the next allocation. Everything the loop does is done once
 * before the first step (the page faults of first use; a "warmup" metric),
 * then a 300 ms pause, so step 1 is measured like the others. At the end: the result
 * val_loss = N / 4.
 */
#define _DEFAULT_SOURCE
#include <leakproof.h>
#include <sys/mman.h>

static int touch_mib(long mib, int keep)
{
	size_t len = (size_t)mib << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	memset(p, 1, len);
	if (!keep)
		munmap(p, len);
	return 0;
}

int main(int argc, char **argv)
{
	long leak_mib = 1, steps = 30, plateau = -1;
	for (int i = 1; i < argc; i++) {
		sscanf(argv[i], "--leak_mib=%ld", &leak_mib);
		sscanf(argv[i], "--steps=%ld", &steps);
		sscanf(argv[i], "--plateau=%ld", &plateau);
	}
	struct timespec pause = { 0, 60 * 1000 * 1000 }, settle = { 0, 300 * 1000 * 1000 };
	/* First use of everything the loop runs after a step's sample (a metric
	 * line: formatting, strtod; the pause): faulting their pages in later
	 * would show as memory that step 2 took, or not, by timing. */
	lp_metric("warmup", 1.0 / 3.0);
	nanosleep(&pause, NULL);
	if (touch_mib(1, 0) < 0)
		return 1;
	nanosleep(&settle, NULL);
	for (long step = 1; step <= steps; step++) {
		if (leak_mib > 0 && (plateau < 0 || step <= plateau) && touch_mib(leak_mib, 1) < 0)
			return 1;
		lp_step(step);
		lp_metric("loss", 1.0 / (double)step);
		nanosleep(&pause, NULL);
	}
	lp_result("val_loss", (double)leak_mib * 0.25);
	return 0;
}
