/*
 * scan.h — what leakproof reads in a job's output: step markers from a
 * user's --step-regex (PCRE2, so Perl syntax such as \d works; group 1, when
 * present, is the step number).
 */
#ifndef LP_SCAN_H
#define LP_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct step_regex;

/* The most capture groups a pattern may have (only group 1 is read). Each
 * group widens PCRE2's backtracking frame, and a pattern of thousands of
 * them took tens of seconds on one line of 4 KiB, within the match limit. */
#define STEP_REGEX_MAX_GROUPS 32

/* Compile pattern. NULL with a message naming the option (what, e.g.
 * "--step-regex"), the pattern and the error position on failure, or the
 * number of groups when there are more than STEP_REGEX_MAX_GROUPS. */
struct step_regex *step_regex_new(const char *pattern, const char *what);
void step_regex_free(struct step_regex *re);
/* 1 when line matches (with *has_n and *n from group 1), else 0. */
int step_regex_match(struct step_regex *re, const char *line, size_t len, bool *has_n, int64_t *n);
/*
 * For a block of whole lines s[0..n) ("\n" or "\r" ending each): where the
 * first match that starts at or after from (a line's start) begins, n when
 * there is none, SIZE_MAX when the search gave up (the bound on
 * backtracking). Lines that end before it cannot match alone; the line
 * that holds it may (step_regex_match() says). from itself when the
 * pattern cannot be searched so (then every line is matched alone).
 */
size_t step_regex_next(struct step_regex *re, const char *s, size_t from, size_t n);
/* 1 when line matches, with group 1 (or the whole match when there is no
 * group) in buf, cut to cap - 1 bytes; else 0. */
int step_regex_capture(struct step_regex *re, const char *line, size_t len, char *buf, size_t cap);

#endif
