/*
 * fuzz_options.c — libFuzzer target for the option values a user types:
 * sizes (parse_size), durations (parse_duration_ns) and every other value
 * `leakproof run` reads (the stop signal, --restart, --trial, the regexes),
 * through cmd_run_check_options() — the seam a sweep's run_options are
 * checked with, which runs run's own option parser and checks without
 * starting anything.
 *
 * Input: words, one a line. Each word is also parsed alone as a size (with
 * and without a total for percentages) and as a duration. Checked beyond
 * the sanitizers: a size given as a percentage is at most its total; a
 * duration is not negative; a refusal says why and names an option inside
 * the list.
 */
#include <stdbool.h>
#include <stdio.h>

#include "cmd/cmd.h"
#include "util/util.h"
#include "fuzz.h"

#define MAX_WORDS 64

static void one_word(const char *w)
{
	uint64_t bytes = 0;
	const uint64_t total = UINT64_C(17) << 30;
	if (parse_size(w, total, &bytes) == 0 && strchr(w, '%'))
		fuzz_check(bytes <= total);
	if (parse_size(w, 0, &bytes) == 0)
		fuzz_check(!strchr(w, '%'));
	int64_t ns = -1;
	if (parse_duration_ns(w, &ns) == 0)
		fuzz_check(ns >= 0);
	char buf[64];
	fmt_bytes(buf, sizeof(buf), (double)bytes);
	fmt_duration(buf, sizeof(buf), (double)ns / 1e9);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	char *words[MAX_WORDS];
	size_t n = 0;
	for (char *p = text, *save = NULL; n < MAX_WORDS && (p = strtok_r(p, "\n", &save)); p = NULL)
		words[n++] = p;
	for (size_t i = 0; i < n; i++)
		one_word(words[i]);
	size_t bad = SIZE_MAX;
	char why[256];
	why[0] = '\0';
	/* the first word says from which word on they come from a sweep file */
	size_t first = n ? (unsigned char)words[0][0] % (n + 1) : 0;
	if (cmd_run_check_options(words, n, first, &bad, why, sizeof(why)) != 0)
		fuzz_check(why[0] != '\0' && bad <= n);
	free(text);
	return 0;
}
