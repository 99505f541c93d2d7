/*
 * tap.h — the unit tests' harness: CHECK() records a failure with its line
 * and goes on; TEST_MAIN() runs the listed tests and ends with the line
 * "N passed, N failed" that CI reads. Exit status 1 when anything failed.
 */
#ifndef LP_TAP_H
#define LP_TAP_H
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static int tap_failures, tap_checks;
static const char *tap_current;

#define CHECK(cond) do { tap_checks++; if (!(cond)) { tap_failures++; \
	fprintf(stderr, "  FAIL %s:%d in %s: %s\n", __FILE__, __LINE__, tap_current, #cond); } } while (0)
#define CHECK_EQ_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); tap_checks++; \
	if (_a != _b) { tap_failures++; fprintf(stderr, "  FAIL %s:%d in %s: %s == %s (%lld != %lld)\n", \
	__FILE__, __LINE__, tap_current, #a, #b, _a, _b); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double _a = (a), _b = (b); tap_checks++; \
	if (!(fabs(_a - _b) <= (tol))) { tap_failures++; fprintf(stderr, "  FAIL %s:%d in %s: %s ~ %s (%g vs %g, tol %g)\n", \
	__FILE__, __LINE__, tap_current, #a, #b, _a, _b, (double)(tol)); } } while (0)
#define CHECK_STR(a, b) do { const char *_a = (a), *_b = (b); tap_checks++; \
	if (!_a || !_b || strcmp(_a, _b)) { tap_failures++; fprintf(stderr, "  FAIL %s:%d in %s: %s == \"%s\" (got \"%s\")\n", \
	__FILE__, __LINE__, tap_current, #a, _b ? _b : "(null)", _a ? _a : "(null)"); } } while (0)

/*
 * tap_map_touched(): a private anonymous mapping of len bytes with one byte
 * written in each page, so that the kernel backs every page, and nothing
 * else; NULL when the mapping fails. For tests that measure the memory they
 * touched: under AddressSanitizer, mmap() and memset() are intercepted and an
 * instrumented store reads the shadow of its address, and a kernel may then
 * back the shadow's pages in the test's process too (an eighth more: 72 MiB
 * measured for 64 touched on one machine, 64 on another). Mapped by the
 * system call and written by code built without the sanitizer, the measured
 * growth is what the test made, whatever the build and the kernel.
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TAP_NO_ASAN __attribute__((no_sanitize("address")))
#endif
#endif
#if !defined(TAP_NO_ASAN) && defined(__SANITIZE_ADDRESS__)
#define TAP_NO_ASAN __attribute__((no_sanitize_address))
#endif
#ifndef TAP_NO_ASAN
#define TAP_NO_ASAN
#endif
static inline TAP_NO_ASAN void *tap_map_touched(size_t len)
{
	void *p = (void *)syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
	                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	volatile char *c = p;
	for (size_t i = 0; i < len; i += 4096)
		c[i] = 1;
	return p;
}

struct tap_test { const char *name; void (*fn)(void); };
#define TEST(name) { #name, name }

static inline int tap_run(const char *suite, const struct tap_test *tests, int n)
{
	int passed = 0, failed = 0;
	for (int i = 0; i < n; i++) {
		int before = tap_failures;
		tap_current = tests[i].name;
		tests[i].fn();
		if (tap_failures == before) {
			passed++;
			printf("ok %d - %s: %s\n", i + 1, suite, tests[i].name);
		} else {
			failed++;
			printf("not ok %d - %s: %s\n", i + 1, suite, tests[i].name);
		}
	}
	printf("%s: %d passed, %d failed\n", suite, passed, failed);
	return failed ? 1 : 0;
}
/* What one call writes on stderr: capture_begin(), the call, then
 * capture_end() returns it (a static buffer, cut at 16 KiB). */
static FILE *tap_capture_file;
static int tap_saved_stderr = -1;

static inline void capture_begin(void)
{
	fflush(stderr);
	tap_capture_file = tmpfile();
	tap_saved_stderr = dup(STDERR_FILENO);
	dup2(fileno(tap_capture_file), STDERR_FILENO);
}

static inline const char *capture_end(void)
{
	static char buf[16384];
	fflush(stderr);
	dup2(tap_saved_stderr, STDERR_FILENO);
	close(tap_saved_stderr);
	rewind(tap_capture_file);
	size_t n = fread(buf, 1, sizeof(buf) - 1, tap_capture_file);
	buf[n] = '\0';
	fclose(tap_capture_file);
	return buf;
}

#define TEST_MAIN(suite, ...) int main(void) { static const struct tap_test t[] = { __VA_ARGS__ }; \
	return tap_run(suite, t, (int)(sizeof(t) / sizeof(t[0]))); }
#endif
