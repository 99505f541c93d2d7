/*
 * step_writer.c — a job that only reports steps, for bench/report_speed: it
 * makes a stored run with many steps quickly. Each step leaks LEAK_BYTES
 * (allocated and touched, never freed), reports a "loss" metric and the
 * step through the C client (include/leakproof.h), and ends an epoch every
 * 1000 steps; there is no pause between steps, so the supervisor sees them
 * as fast as it can read its channel.
 *
 *     step_writer STEPS [LEAK_BYTES]      (LEAK_BYTES default 1024)
 *
 * Exit status 0; 2 for a usage error.
 */
#include <leakproof.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: step_writer STEPS [LEAK_BYTES]\n");
		return 2;
	}
	long steps = strtol(argv[1], NULL, 10);
	long leak_bytes = argc > 2 ? strtol(argv[2], NULL, 10) : 1024;
	if (steps < 1 || leak_bytes < 0) {
		fprintf(stderr, "usage: step_writer STEPS [LEAK_BYTES]\n");
		return 2;
	}
	for (long i = 1; i <= steps; i++) {
		if (leak_bytes > 0) {
			char *p = malloc((size_t)leak_bytes);
			if (p)
				memset(p, (int)(i & 0xff), (size_t)leak_bytes);  /* kept: the leak */
		}
		lp_metric("loss", 1.0 / (double)i);
		lp_step(i);
		if (i % 1000 == 0)
			lp_epoch(i / 1000);
	}
	return 0;
}
