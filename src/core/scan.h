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

/* Compile pattern. NULL with a message naming the pattern and the error
 * position on failure. */
struct step_regex *step_regex_new(const char *pattern);
void step_regex_free(struct step_regex *re);
/* 1 when line matches (with *has_n and *n from group 1), else 0. */
int step_regex_match(struct step_regex *re, const char *line, size_t len, bool *has_n, int64_t *n);

#endif
