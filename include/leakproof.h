/*
 * leakproof.h — the C and C++ client of the leakproof supervisor, header
 * only: include it, no library to link.
 *
 *     #include <leakproof.h>
 *
 *     for (long i = 0; i < steps; i++) {
 *             train_step();
 *             lp_step(i);
 *             lp_metric("loss", loss);
 *     }
 *     lp_result("accuracy", acc);
 *
 * Under `leakproof run`, each call writes one protocol line (at most 4096
 * bytes with its newline, so a pipe takes it atomically) with one write(2)
 * to the descriptor named by LEAKPROOF_FD; see docs/internals/clients.md.
 * Without leakproof (LEAKPROOF_FD unset, or not a pipe of this run) every
 * call does nothing. The functions never exit, never print, never allocate,
 * and a closed channel (EPIPE, EBADF) silently turns them off; SIGPIPE is
 * held off during the write when the program has not ignored it.
 *
 * Thread-safe: a line goes out in one write(2), so lines from threads and
 * from forked children never interleave; children that inherit the
 * descriptor report like the parent (their steps count too).
 *
 * Needs POSIX declarations (write, fstat, sigaction): gcc's and clang's
 * default modes have them; with -std=c99/-std=c11, include this header
 * first or define _POSIX_C_SOURCE to 200809L.
 */
#ifndef LEAKPROOF_H
#define LEAKPROOF_H

#if !defined(__cplusplus) && !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && \
	!defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LP_MAX_LINE_BYTES 4096   /* a whole line, newline included */

#define LP__NAME_MAX_BYTES 63     /* longer metric names are cut */

/* Casts that C++'s -Wold-style-cast accepts. */
#ifdef __cplusplus
#define LP__CAST(type, x) static_cast<type>(x)
#else
#define LP__CAST(type, x) ((type)(x))
#endif

/* The descriptor; -2 before the first look, -1 when off. One per
 * translation unit (each has its own copy of these static functions). */
static inline int *lp__fd_slot(void)
{
	static int fd = -2;
	return &fd;
}

static inline int lp__load(const int *p)
{
#if defined(__GNUC__)
	return __atomic_load_n(p, __ATOMIC_RELAXED);
#else
	return *p;
#endif
}

static inline void lp__store(int *p, int v)
{
#if defined(__GNUC__)
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
#else
	*p = v;
#endif
}

/* LEAKPROOF_FD, when it names a pipe (or socket) open for writing that is
 * the one the run's first process pinned in LEAKPROOF_FD_INODE (set by the
 * Python client), else -1. */
static inline int lp__open(void)
{
	const char *s = getenv("LEAKPROOF_FD");
	const char *run = getenv("LEAKPROOF_RUN");
	const char *pin = getenv("LEAKPROOF_FD_INODE");
	char *end;
	long v;
	struct stat st;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > 1000000)
		return -1;
	if (fstat(LP__CAST(int, v), &st) || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		return -1;
	if (pin) {
		char key[256], ident[64];
		size_t klen;
		const char *eq = strrchr(pin, '=');

		snprintf(key, sizeof(key), "%s:%s", run ? run : "", s);
		snprintf(ident, sizeof(ident), "%llu:%llu", LP__CAST(unsigned long long, st.st_dev),
			 LP__CAST(unsigned long long, st.st_ino));
		klen = strlen(key);
		if (eq && LP__CAST(size_t, eq - pin) == klen && !strncmp(pin, key, klen) && strcmp(eq + 1, ident))
			return -1;   /* that number is some other pipe here */
	}
	return LP__CAST(int, v);
}

/* 1 when running under leakproof with a usable channel, else 0. */
static inline int lp_enabled(void)
{
	int *slot = lp__fd_slot();
	int fd = lp__load(slot);

	if (fd == -2) {
		fd = lp__open();
		lp__store(slot, fd);
	}
	return fd >= 0;
}

/* The run id (LEAKPROOF_RUN), or NULL outside leakproof. */
static inline const char *lp_run_id(void)
{
	const char *s = getenv("LEAKPROOF_RUN");
	return s && *s ? s : NULL;
}

/* Restarts so far (LEAKPROOF_RESTART): 0 on the first start and outside. */
static inline int lp_restart(void)
{
	const char *s = getenv("LEAKPROOF_RESTART");
	long v = s ? strtol(s, NULL, 10) : 0;
	return v > 0 && v < 1000000000L ? LP__CAST(int, v) : 0;
}

/* Write len bytes whole; 0 when the channel is gone for good. */
static inline int lp__write_all(int fd, const char *buf, size_t len)
{
	int started = 0;

	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			struct pollfd pfd;

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return 0;       /* EPIPE, EBADF, EIO, ... */
			if (!started)
				return 1;       /* a full non-blocking pipe: drop the line */
			/* Half a line is out (a socket): finish it, or the
			 * next line would be glued to it. */
			pfd.fd = fd;
			pfd.events = POLLOUT;
			pfd.revents = 0;
			n = poll(&pfd, 1, 1000);
			if (n == 0 || (n < 0 && errno != EINTR))
				return 0;
			continue;
		}
		started = 1;
		buf += n;
		len -= LP__CAST(size_t, n);
	}
	return 1;
}

/* Send one line, newline included. */
static inline void lp__send(const char *buf, size_t len)
{
	struct sigaction sa;
	sigset_t block, old;
	int *slot = lp__fd_slot();
	int saved_errno = errno;
	int fd, ok;

	if (!lp_enabled() || len == 0 || len > LP_MAX_LINE_BYTES)
		return;
	fd = lp__load(slot);
	if (fd < 0)
		return;
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) {
		ok = lp__write_all(fd, buf, len);
	} else {
		/* Block SIGPIPE in this thread (sigprocmask is per thread on
		 * Linux), and swallow the one a closed reader raises. */
		sigemptyset(&block);
		sigaddset(&block, SIGPIPE);
		sigprocmask(SIG_BLOCK, &block, &old);
		ok = lp__write_all(fd, buf, len);
		if (!ok && errno == EPIPE) {
			struct timespec zero = { 0, 0 };
			sigtimedwait(&block, NULL, &zero);
		}
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	if (!ok)
		lp__store(slot, -1);
	errno = saved_errno;
}

static inline void lp__counter(const char *kind, long n)
{
	char buf[64];
	int len = n >= 0 ? snprintf(buf, sizeof(buf), "%s %ld\n", kind, n)
			 : snprintf(buf, sizeof(buf), "%s\n", kind);
	if (len > 0 && LP__CAST(size_t, len) < sizeof(buf))
		lp__send(buf, LP__CAST(size_t, len));
}

/* The end of training step n (n < 0: let the supervisor number it). */
static inline void lp_step(long n) { lp__counter("step", n); }
/* The end of a training step, numbered by the supervisor. */
static inline void lp_step_auto(void) { lp__counter("step", -1); }
/* The end of epoch n (n < 0: let the supervisor number it). */
static inline void lp_epoch(long n) { lp__counter("epoch", n); }
static inline void lp_epoch_auto(void) { lp__counter("epoch", -1); }

/* Without -Wfloat-equal warnings in programs that enable them. */
static inline int lp__isnan(double v)
{
#if defined(__GNUC__)
	return __builtin_isnan(v);
#else
	return v != v;
#endif
}

/* " NAME=VALUE" into buf. NAME outside [A-Za-z_][A-Za-z0-9_.:/-]* has other
 * characters replaced by '_', and is cut to 63 bytes; VALUE is the shortest
 * of %.15g, %.16g, %.17g that reads back as v, or nan, inf, -inf. Returns
 * the length, or -1 if it does not fit. */
static inline int lp__pair(char *buf, size_t cap, const char *name, double v)
{
	size_t len = 0;
	int n;

	if (cap < 2)
		return -1;
	buf[len++] = ' ';
	if (!name || !*name)
		name = "_";
	for (const char *p = name; *p && p - name < LP__NAME_MAX_BYTES; p++) {
		char c = *p;
		int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
			 (p != name && ((c >= '0' && c <= '9') || c == '.' || c == ':' ||
					c == '/' || c == '-'));
		if (len + 1 >= cap)
			return -1;
		buf[len++] = ok ? c : '_';
	}
	if (lp__isnan(v))
		n = snprintf(buf + len, cap - len, "=nan");
	else if (v > 1.7976931348623157e308)
		n = snprintf(buf + len, cap - len, "=inf");
	else if (v < -1.7976931348623157e308)
		n = snprintf(buf + len, cap - len, "=-inf");
	else {
		/* The shortest of 15, 16, 17 digits that reads back as v. */
		for (int digits = 15; digits <= 17; digits++) {
			n = snprintf(buf + len, cap - len, "=%.*g", digits, v);
			double back;
			if (n < 0 || LP__CAST(size_t, n) >= cap - len)
				break;
			back = strtod(buf + len + 1, NULL);
			if (!memcmp(&back, &v, sizeof(v)))
				break;
		}
	}
	if (n < 0 || LP__CAST(size_t, n) >= cap - len)
		return -1;
	return LP__CAST(int, len + LP__CAST(size_t, n));
}

static inline void lp__pairs(const char *kind, const char *name, double v)
{
	char buf[LP_MAX_LINE_BYTES];
	size_t len = strlen(kind);
	int n;

	memcpy(buf, kind, len);
	n = lp__pair(buf + len, sizeof(buf) - len - 1, name, v);
	if (n < 0)
		return;
	len += LP__CAST(size_t, n);
	buf[len++] = '\n';
	lp__send(buf, len);
}

/* A number to plot beside memory: lp_metric("loss", 0.31). */
static inline void lp_metric(const char *name, double v) { lp__pairs("metric", name, v); }
/* A trial's outcome, for sweeps: lp_result("accuracy", 0.93). */
static inline void lp_result(const char *name, double v) { lp__pairs("result", name, v); }

/* The framework allocator's own view, in bytes. */
static inline void lp_gpu(unsigned long long allocated, unsigned long long reserved)
{
	char buf[96];
	int len = snprintf(buf, sizeof(buf), "gpu allocated=%llu reserved=%llu\n", allocated, reserved);
	if (len > 0 && LP__CAST(size_t, len) < sizeof(buf))
		lp__send(buf, LP__CAST(size_t, len));
}

/* A named event on the timeline. Newlines become spaces; the line is cut to
 * 4096 bytes, at a UTF-8 character boundary. */
static inline void lp_mark(const char *text)
{
	char buf[LP_MAX_LINE_BYTES];
	size_t len = 5, max = sizeof(buf) - 1;

	if (!lp_enabled())
		return;
	memcpy(buf, "mark ", 5);
	for (const char *p = text ? text : ""; *p && len < max; p++)
		buf[len++] = *p == '\n' || *p == '\r' ? ' ' : *p;
	if (len == max && text && text[len - 5]) {
		/* Cut: do not leave half a UTF-8 character. */
		size_t end = len;
		while (end > 5 && (LP__CAST(unsigned char, buf[end - 1]) & 0xC0) == 0x80)
			end--;
		if (end > 5 && LP__CAST(unsigned char, buf[end - 1]) >= 0xC0) {
			unsigned char lead = LP__CAST(unsigned char, buf[end - 1]);
			size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
			if (len - (end - 1) < need)
				len = end - 1;
		}
	}
	buf[len++] = '\n';
	lp__send(buf, len);
}

#ifdef __cplusplus
}
#endif

#endif
