/*
 * line_writer.c — a job for bench/passthrough: writes BYTES of text lines
 * to stdout as fast as a pipe takes them, in 64 KiB writes, and exits 0.
 * The lines are made once (1 MiB of them) and written again and again, so
 * the job itself costs next to nothing: what is measured is the path the
 * bytes take. Every line is LEN bytes with its newline ("iter N loss=..."
 * padded with dots); one in EVERY is "Epoch N" instead, for a
 * --step-regex to match. Sizes are bytes. With PIPE set, a stdout that
 * is a pipe is first enlarged to PIPE bytes (F_SETPIPE_SZ), as leakproof
 * enlarges the pipes it passes output through: the bare pipe at its best.
 *
 *   [PIPE=BYTES] line_writer BYTES [LEN [EVERY]]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATTERN (1 << 20)
#define CHUNK 65536

static char pattern[PATTERN];

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: line_writer BYTES [LEN [EVERY]]\n");
		return 2;
	}
	long long total = atoll(argv[1]);
	int len = argc > 2 ? atoi(argv[2]) : 80;
	long every = argc > 3 ? atol(argv[3]) : 1000;
	if (total < 0 || len < 16 || len > 4000 || every < 1)
		return 2;
	const char *pipe_sz = getenv("PIPE");
	if (pipe_sz && fcntl(1, F_SETPIPE_SZ, atoi(pipe_sz)) < 0) {
		perror("line_writer: F_SETPIPE_SZ");
		return 1;
	}

	/* whole lines only, so the pattern repeats on a line boundary */
	size_t used = PATTERN / (size_t)len * (size_t)len;
	for (size_t off = 0, line = 0; off < used; off += (size_t)len, line++) {
		char *l = pattern + off;
		char tmp[64];
		int n = line % (size_t)every == 0 ? snprintf(tmp, sizeof(tmp), "Epoch %zu", line / (size_t)every)
		                                  : snprintf(tmp, sizeof(tmp), "iter %zu loss=%.4f ", line, 1.0 / (double)(line + 1));
		if (n > len - 1)
			n = len - 1;
		memcpy(l, tmp, (size_t)n);
		memset(l + n, '.', (size_t)(len - 1 - n));
		l[len - 1] = '\n';
	}

	long long left = total;
	size_t at = 0;
	while (left > 0) {
		size_t n = CHUNK;
		if (n > used - at)
			n = used - at;
		if ((long long)n > left)
			n = (size_t)left;
		ssize_t w = write(1, pattern + at, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return 1;
		at = (at + (size_t)w) % used;
		left -= w;
	}
	return 0;
}
