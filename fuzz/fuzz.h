/*
 * fuzz.h — what every fuzz target in fuzz/ shares: libFuzzer's entry points
 * (declared here so -Wmissing-prototypes holds) and a NUL-terminated copy of
 * the input, since the parsers under test read C strings.
 *
 * Each fuzz/fuzz_NAME.c is one libFuzzer target built by `make fuzz` into
 * build-fuzz/fuzz/fuzz_NAME (clang, -fsanitize=fuzzer,address,undefined);
 * its seeds are in fuzz/corpus/NAME/ and its dictionary, where it has one,
 * in fuzz/NAME.dict. docs/internals/fuzzing.md says how to run them.
 */
#ifndef LP_FUZZ_H
#define LP_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A property the target checks beyond the sanitizers: false is a finding
 * (abort() makes libFuzzer keep the input as a crash). */
static inline void fuzz_check(bool ok)
{
	if (!ok)
		abort();
}

/* data[0..size) with a NUL after it (embedded NULs stay); the caller frees
 * it with free(). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

#endif
