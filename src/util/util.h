/*
 * util.h — small helpers shared by every layer: errors, time, sizes, a
 * growable string buffer.
 *
 * Error convention (see docs/internals/design.md): library functions return
 * -1 and report through error(), which prints "leakproof: MESSAGE" on stderr
 * and returns -1, so callers can write `return error("cannot ...")`. Only
 * main() and src/cmd/ decide to exit.
 *
 * Units: time in nanoseconds (int64_t, CLOCK_MONOTONIC) or seconds
 * (double) as the name says; sizes in bytes.
 */
#ifndef LP_UTIL_H
#define LP_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>

/* Exit statuses of the tool itself (documented in man/leakproof.1). */
enum {
	LP_EXIT_USAGE = 124,      /* bad options or arguments */
	LP_EXIT_FAILURE = 125,    /* leakproof itself failed */
	LP_EXIT_CANNOT_EXEC = 126,/* the command exists but cannot run */
	LP_EXIT_NOT_FOUND = 127,  /* the command was not found */
};

/* Print "leakproof: MESSAGE\n" on stderr; always returns -1. */
int error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Same with ": strerror(errno)" appended. */
int error_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "leakproof: warning: MESSAGE". */
void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Allocation that cannot fail: on out-of-memory, prints and exits 125. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Frees the n strings of v, then v (NULL: nothing). */
void free_strings(char **v, size_t n);

int64_t mono_ns(void);          /* CLOCK_MONOTONIC, nanoseconds */
double wall_seconds(void);      /* CLOCK_REALTIME, seconds since the epoch */

/*
 * Scan a plain decimal number at s: digits with an optional fraction
 * ("12", "1.5", ".5", "3."); no sign, space, exponent, hexadecimal, "inf"
 * or "nan". Returns the end of the number, or NULL when s does not start
 * with one. *out gets its value.
 */
const char *scan_decimal(const char *s, double *out);

/*
 * Parse a size: "512M", "12G", "1.5GiB", "4096" (bytes), "80%" (of
 * percent_of_bytes; an error when that is 0). Binary units (K = 1024).
 * The number is plain decimal (scan_decimal): "0x10G" and "1e3M" are
 * refused. Returns 0, or -1 after printing an error that names the value.
 */
int parse_size(const char *s, uint64_t percent_of_bytes, uint64_t *out_bytes);

/* The smallest memory budget (--max-mem, --soft-limit, --max-gpu, a sweep's
 * memory.max) accepted: 1 MiB. Below it no process can even start, so a
 * smaller one is a mistake ("--max-mem 1" meant 1G), refused up front. */
#define SIZE_BUDGET_MIN (UINT64_C(1) << 20)

/* Parse a duration: "100ms", "1ms", "0.5s", "2m", "250us", a bare number
 * is seconds. Returns 0, or -1 after printing an error naming the value. */
int parse_duration_ns(const char *s, int64_t *out_ns);

/* Human size: "1.9 MiB", "512 B", "-3.0 KiB". Writes into buf, returns buf. */
char *fmt_bytes(char *buf, size_t bufsz, double bytes);
/* Human duration: "42.1 s", "12 min 5 s", "3 h 2 min", "2.5 days"; "?" for
 * a negative or infinite one. Writes into buf, returns buf. */
char *fmt_duration(char *buf, size_t bufsz, double seconds);

/* Read a whole small file (at most cap bytes) into buf, NUL-terminated.
 * Returns the length, or -1 with errno set. */
ssize_t read_file_buf(const char *path, char *buf, size_t cap);
/* pread() from offset 0 into buf (NUL-terminated); -1 with errno on error. */
ssize_t pread_buf(int fd, char *buf, size_t cap);

/*
 * strbuf — a growable NUL-terminated string. Zero-initialised
 * (STRBUF_INIT) is a valid empty buffer. strbuf_release() frees the storage;
 * strbuf_detach() hands it to the caller, who frees it with free().
 */
struct strbuf {
	char *buf;
	size_t len;
	size_t alloc;
};
#define STRBUF_INIT { NULL, 0, 0 }
void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_addstr(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, int c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Append s as a JSON string literal, quotes included; invalid UTF-8 is
 * replaced by U+FFFD, so the result is always valid JSON. */
void strbuf_add_json_str(struct strbuf *sb, const char *s);
/* Length (1-4) of the valid UTF-8 sequence at p (NUL-terminated), or 0
 * when it is not one: overlong, surrogate, above U+10FFFF, truncated. */
size_t utf8_len(const unsigned char *p);
/* Cut any of the bytes of chars off the end of sb ("\n " for trailing
 * newlines and spaces). */
void strbuf_trim_end(struct strbuf *sb, const char *chars);
void strbuf_reset(struct strbuf *sb);
void strbuf_release(struct strbuf *sb);
char *strbuf_detach(struct strbuf *sb, size_t *len);
/* The contents ("" when empty); valid until the next modification. */
const char *strbuf_str(const struct strbuf *sb);

#endif
