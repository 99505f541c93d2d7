/*
 * fuzz_regex.c — libFuzzer target for the step and result regexes
 * (core/scan.c): a user's --step-regex / --result-regex / a sweep's
 * result_regex, matched against every line of a job's output.
 *
 * Input: the pattern, a NUL, then the job's output; the output is cut into
 * lines as the supervisor cuts it (a linebuf, "\r" ending a line), and each
 * line goes through step_regex_match() and step_regex_capture() with the
 * supervisor's 64-byte result buffer. With the match limit in force no
 * pattern may stall: the campaign's -timeout fails an input that takes
 * seconds (a catastrophic pattern on a long line took ~0.1 s a line before
 * the limit). Checked beyond the sanitizers: a step number is in
 * [0, 2^53], a capture fits its buffer.
 */
#include <stdbool.h>

#include "core/channel.h"
#include "core/scan.h"
#include "fuzz.h"

static void on_line(void *ctx, const char *line, size_t len, bool truncated)
{
	struct step_regex *re = ctx;
	(void)truncated;
	bool has_n = false;
	int64_t n = -1;
	if (step_regex_match(re, line, len, &has_n, &n))
		fuzz_check(!has_n || (n >= 0 && n <= CHANNEL_NUMBER_MAX));
	char value[64];
	memset(value, 'x', sizeof(value));
	if (step_regex_capture(re, line, len, value, sizeof(value)))
		fuzz_check(memchr(value, '\0', sizeof(value)) != NULL);
	char tiny[1];
	if (step_regex_capture(re, line, len, tiny, sizeof(tiny)))
		fuzz_check(tiny[0] == '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t plen = nul ? (size_t)(nul - data) : size;
	char *pattern = fuzz_cstr(data, plen);
	struct step_regex *re = step_regex_new(pattern, "--step-regex");
	if (re) {
		struct linebuf *lb = malloc(sizeof(*lb));
		if (!lb)
			abort();
		linebuf_init(lb, true);
		if (nul)
			linebuf_feed(lb, (const char *)nul + 1, size - plen - 1, on_line, re);
		else
			linebuf_feed(lb, "1\nstep 12\n", 10, on_line, re);
		linebuf_finish(lb, on_line, re);
		free(lb);
		step_regex_free(re);
	}
	free(pattern);
	return 0;
}
