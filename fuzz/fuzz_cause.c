/*
 * fuzz_cause.c — libFuzzer target for the out-of-memory message scanner
 * (core/cause.c), which reads every line of a job's output.
 *
 * Input: the job's output, any bytes. Checked beyond the sanitizers:
 * cause_scan_skip() finds the first key end exactly where a byte-by-byte
 * search finds it, at every alignment the supervisor's blocks may give it;
 * a line in which it finds none changes nothing in the scan; a kept line
 * is NUL-terminated printable ASCII of at most CAUSE_LINE_MAX bytes.
 */
#include <stdbool.h>

#include "core/cause.h"
#include "fuzz.h"

/* The first key end ("ory", "loc", "aus", any case) the slow way. */
static size_t first_key_end(const char *s, size_t n)
{
	for (size_t i = 0; i + 3 <= n; i++) {
		char a = (char)(s[i] | 0x20), b = (char)(s[i + 1] | 0x20), c = (char)(s[i + 2] | 0x20);
		if ((a == 'o' && b == 'r' && c == 'y') || (a == 'l' && b == 'o' && c == 'c') ||
		    (a == 'a' && b == 'u' && c == 's'))
			return i;
	}
	return n;
}

static void check_kept(const struct cause_scan *cs)
{
	for (int k = 0; k < CAUSE_CLASS_COUNT; k++) {
		const char *t = cs->seen[k].text;
		size_t len = strnlen(t, sizeof(cs->seen[k].text));
		fuzz_check(len <= CAUSE_LINE_MAX);
		for (size_t i = 0; i < len; i++)
			fuzz_check(t[i] >= 0x20 && t[i] < 0x7f);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	for (size_t off = 0; off < 33 && off <= size; off++)
		fuzz_check(cause_scan_skip(s + off, size - off) == first_key_end(s + off, size - off));

	struct cause_scan cs;
	cause_scan_init(&cs);
	for (size_t i = 0; i <= size;) {
		const char *nl = memchr(s + i, '\n', size - i);
		size_t e = nl ? (size_t)(nl - s) : size;
		struct cause_scan before = cs;
		cause_scan_line(&cs, s + i, e - i);
		if (cause_scan_skip(s + i, e - i) == e - i)   /* no key: nothing found */
			for (int k = 0; k < CAUSE_CLASS_COUNT; k++)
				fuzz_check(cs.seen[k].line_no == before.seen[k].line_no);
		check_kept(&cs);
		i = e + 1;
	}
	return 0;
}
