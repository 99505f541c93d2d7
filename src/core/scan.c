/*
 * scan.c — step markers in a job's output, matched with PCRE2. One match
 * data block is allocated with the pattern and reused, so matching a line
 * allocates nothing. Patterns are JIT-compiled where PCRE2 can, and every
 * match is bounded (MATCH_LIMIT backtracking steps): a pattern such as
 * ^(a+)+$ takes exponential time on lines like "aaa...ab", and the output
 * of the job, its sampling and its signals must not wait for it. A line
 * that reaches the bound does not match; the first one is said once.
 * Patterns with more than STEP_REGEX_MAX_GROUPS groups are refused: the
 * bound counts steps, and each step copies a frame as wide as the groups.
 *
 * A block of output many lines long is searched once with a twin of the
 * pattern compiled multi-line (^ and $ at every line's ends), so that the
 * lines before the first possible match are passed over without a call
 * each; the line where it starts is then matched alone, as every line was
 * before, so what matches does not change (step_regex_next()). Patterns
 * whose meaning could differ across a line's ends (lookaround, \A, \z,
 * \Z, \G, verbs) have no twin: each line is matched alone.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/scan.h"
#include "core/channel.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* Backtracking steps one line may take: about a millisecond of a catastrophic
 * pattern (the default, 10 million, is about 0.1 s a line), thousands of
 * times what a step pattern needs on a line of 4 KiB. */
#define MATCH_LIMIT 100000
#define DEPTH_LIMIT 10000
/* The interpreter's backtracking frames (when PCRE2 cannot JIT a pattern,
 * or it says (*NO_JIT)): ample for DEPTH_LIMIT frames of STEP_REGEX_MAX_GROUPS
 * groups; PCRE2's own default is 20 GB. */
#define HEAP_LIMIT_KIB (16 * 1024)

struct step_regex {
	pcre2_code *code;
	pcre2_code *block;           /* the multi-line twin; NULL: none */
	pcre2_match_data *block_md;
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	bool has_group;
	const char *what;            /* the option, for the one warning */
	bool warned;
};

/* pcre2_match() bounded; a line that reaches the bound is a non-match,
 * said once per pattern. */
static int match(struct step_regex *re, const char *line, size_t len)
{
	int rc = pcre2_match(re->code, (PCRE2_SPTR)line, len, 0, 0, re->md, re->mctx);
	if ((rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT) &&
	    !re->warned) {
		re->warned = true;
		warning("%s gave up on a line of output after %d backtracking steps: the pattern "
		        "takes too long on it (nested repeats such as (a+)+?); such lines are not matched",
		        re->what, MATCH_LIMIT);
	}
	return rc;
}

/* Could the pattern mean something else in a block of lines than in one
 * line alone? Anything that looks past a line's ends or at the subject's. */
static bool block_unsafe(const char *pattern)
{
	static const char *const risky[] = { "(?=", "(?!", "(?<", "(*", "\\A", "\\z", "\\Z", "\\G", "(?m", "(?-m" };
	for (size_t i = 0; i < sizeof(risky) / sizeof(risky[0]); i++)
		if (strstr(pattern, risky[i]))
			return true;
	return false;
}

/* The multi-line twin of pattern (see above), or NULL. */
static void compile_block(struct step_regex *re, const char *pattern)
{
	if (block_unsafe(pattern))
		return;
	pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
	if (!cc)
		return;
	pcre2_set_newline(cc, PCRE2_NEWLINE_ANYCRLF);   /* "\r" ends a line too */
	int errcode;
	PCRE2_SIZE erroff;
	re->block = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
	                          PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_MULTILINE, &errcode, &erroff, cc);
	pcre2_compile_context_free(cc);
	if (!re->block)
		return;
	re->block_md = pcre2_match_data_create(1, NULL);
	if (!re->block_md) {
		pcre2_code_free(re->block);
		re->block = NULL;
		return;
	}
	(void)pcre2_jit_compile(re->block, PCRE2_JIT_COMPLETE);
}

size_t step_regex_next(struct step_regex *re, const char *s, size_t from, size_t n)
{
	if (!re->block)
		return from;
	int rc = pcre2_match(re->block, (PCRE2_SPTR)s, n, from, 0, re->block_md, re->mctx);
	if (rc == PCRE2_ERROR_NOMATCH)
		return n;
	if (rc < 0)
		return SIZE_MAX;
	return pcre2_get_ovector_pointer(re->block_md)[0];
}

struct step_regex *step_regex_new(const char *pattern, const char *what)
{
	int errcode;
	PCRE2_SIZE erroff;
	pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_MATCH_INVALID_UTF,
	                                 &errcode, &erroff, NULL);
	if (!code) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(errcode, msg, sizeof(msg));
		error("invalid %s '%s' at offset %zu: %s", what, pattern, (size_t)erroff, (char *)msg);
		return NULL;
	}
	uint32_t groups = 0;
	pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &groups);
	if (groups > STEP_REGEX_MAX_GROUPS) {
		pcre2_code_free(code);
		error("invalid %s '%.80s': %u capture groups, at most %d (group 1 is the step or result)", what,
		      pattern, (unsigned)groups, STEP_REGEX_MAX_GROUPS);
		return NULL;
	}
	struct step_regex *re = xcalloc(1, sizeof(*re));
	re->code = code;
	re->md = pcre2_match_data_create_from_pattern(code, NULL);
	if (!re->md) {
		pcre2_code_free(code);
		free(re);
		error("out of memory compiling %s", what);
		return NULL;
	}
	re->mctx = pcre2_match_context_create(NULL);
	if (!re->mctx) {
		step_regex_free(re);
		error("out of memory compiling %s", what);
		return NULL;
	}
	pcre2_set_match_limit(re->mctx, MATCH_LIMIT);
	pcre2_set_depth_limit(re->mctx, DEPTH_LIMIT);
	pcre2_set_heap_limit(re->mctx, HEAP_LIMIT_KIB);
	(void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);   /* interpreted when JIT is not there */
	compile_block(re, pattern);
	re->has_group = groups >= 1;
	re->what = what;
	return re;
}

void step_regex_free(struct step_regex *re)
{
	if (!re)
		return;
	pcre2_match_context_free(re->mctx);
	pcre2_match_data_free(re->md);
	pcre2_code_free(re->code);
	pcre2_match_data_free(re->block_md);
	pcre2_code_free(re->block);
	free(re);
}

int step_regex_match(struct step_regex *re, const char *line, size_t len, bool *has_n, int64_t *n)
{
	*has_n = false;
	int rc = match(re, line, len);
	if (rc < 0)
		return 0;
	if (re->has_group && rc >= 2) {
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(re->md);
		if (ov[2] != PCRE2_UNSET && ov[3] > ov[2] && ov[3] - ov[2] < 20) {
			char num[24];
			size_t k = ov[3] - ov[2];
			memcpy(num, line + ov[2], k);
			num[k] = '\0';
			char *end;
			long long v = strtoll(num, &end, 10);
			if (end != num && !*end && v >= 0 && v <= CHANNEL_NUMBER_MAX) {
				*has_n = true;
				*n = v;
			}
		}
	}
	return 1;
}

int step_regex_capture(struct step_regex *re, const char *line, size_t len, char *buf, size_t cap)
{
	int rc = match(re, line, len);
	if (rc < 0 || !cap)
		return 0;
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(re->md);
	int g = re->has_group && rc >= 2 && ov[2] != PCRE2_UNSET ? 1 : 0;
	size_t k = ov[2 * g + 1] - ov[2 * g];
	if (k >= cap)
		k = cap - 1;
	memcpy(buf, line + ov[2 * g], k);
	buf[k] = '\0';
	return 1;
}
