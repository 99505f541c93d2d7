/*
 * util.c — errors, allocation, time, size/duration parsing, strbuf.
 * See util.h for the conventions.
 */
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static void vreport(const char *prefix, const char *fmt, va_list ap, const char *suffix)
	__attribute__((format(printf, 2, 0)));
static void vreport(const char *prefix, const char *fmt, va_list ap, const char *suffix)
{
	char msg[4096];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "leakproof: %s%s%s%s\n", prefix, msg, suffix ? ": " : "", suffix ? suffix : "");
}

int error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap, NULL);
	va_end(ap);
	return -1;
}

int error_errno(const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap, strerror(e));
	va_end(ap);
	errno = e;
	return -1;
}

void warning(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("warning: ", fmt, ap, NULL);
	va_end(ap);
}

static void *oom_check(void *p)
{
	if (!p) {
		fputs("leakproof: out of memory\n", stderr);
		_exit(LP_EXIT_FAILURE);
	}
	return p;
}

void *xmalloc(size_t n) { return oom_check(malloc(n ? n : 1)); }
void *xcalloc(size_t n, size_t size) { return oom_check(calloc(n ? n : 1, size ? size : 1)); }
void *xrealloc(void *p, size_t n) { return oom_check(realloc(p, n ? n : 1)); }
char *xstrdup(const char *s) { return oom_check(strdup(s)); }

void free_strings(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double wall_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

const char *scan_decimal(const char *s, double *out)
{
	const char *p = s;
	size_t digits = 0;
	while (*p >= '0' && *p <= '9')
		p++, digits++;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			digits++;
	if (!digits)
		return NULL;
	/* Only digits and one point were taken: strtod reads them the same way
	 * in every locale that uses '.', which is the only one we run in. */
	char buf[64];
	size_t n = (size_t)(p - s);
	if (n >= sizeof(buf))
		return NULL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	*out = strtod(buf, NULL);
	return isfinite(*out) ? p : NULL;
}

/* The number that starts s, a size or a duration (what), into *v: the rest
 * of s after it. NULL after error() when s starts with none (expected: what
 * the message says was expected), or when strtod would have read on, a
 * hexadecimal number ("0x10") or an exponent ("1e3"), which we refuse
 * (plain: the message's examples). */
static const char *leading_number(const char *s, const char *what, const char *expected, const char *plain,
                                  double *v)
{
	const char *end = s && *s ? scan_decimal(s, v) : NULL;
	if (!end) {
		error("invalid %s '%s': expected %s", what, s ? s : "", expected);
		return NULL;
	}
	if (*end == 'x' || *end == 'X' || ((*end == 'e' || *end == 'E') && end[1] && strchr("0123456789+-", end[1]))) {
		error("invalid %s '%s': write a plain decimal number, such as %s (no hexadecimal or exponent)", what, s,
		      plain);
		return NULL;
	}
	return end;
}

int parse_size(const char *s, uint64_t percent_of_bytes, uint64_t *out_bytes)
{
	double v;
	const char *end = leading_number(s, "size", "a number with an optional unit, such as 512M, 12G or 80%",
	                                 "512M or 1.5G", &v);
	if (!end)
		return -1;
	while (*end == ' ')
		end++;
	if (*end == '%') {
		if (end[1])
			return error("invalid size '%s': nothing may follow '%%'", s);
		if (v <= 0 || v > 100)
			return error("invalid size '%s': a percentage must be in (0, 100]", s);
		if (!percent_of_bytes)
			return error("invalid size '%s': no total is known to take a percentage of", s);
		*out_bytes = (uint64_t)(v / 100.0 * (double)percent_of_bytes);
		return 0;
	}
	double mult = 1;
	if (*end) {
		static const struct { const char *u; double m; } units[] = {
			{ "", 1 }, { "b", 1 },
			{ "k", 1024.0 }, { "kb", 1024.0 }, { "kib", 1024.0 },
			{ "m", 1048576.0 }, { "mb", 1048576.0 }, { "mib", 1048576.0 },
			{ "g", 1073741824.0 }, { "gb", 1073741824.0 }, { "gib", 1073741824.0 },
			{ "t", 1099511627776.0 }, { "tb", 1099511627776.0 }, { "tib", 1099511627776.0 },
		};
		size_t i;
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcasecmp(end, units[i].u))
				break;
		if (i == sizeof(units) / sizeof(units[0]))
			return error("invalid size '%s': unknown unit '%s' (use K, M, G, T or %%)", s, end);
		mult = units[i].m;
	}
	v *= mult;
	if (v >= 18446744073709551615.0)
		return error("invalid size '%s': too large", s);
	*out_bytes = (uint64_t)v;
	return 0;
}

int parse_duration_ns(const char *s, int64_t *out_ns)
{
	double v, mult = 1e9;
	const char *end = leading_number(s, "duration", "a number with a unit, such as 100ms or 2s", "100ms or 1.5s", &v);
	if (!end)
		return -1;
	if (!*end || !strcmp(end, "s"))
		mult = 1e9;
	else if (!strcmp(end, "ms"))
		mult = 1e6;
	else if (!strcmp(end, "us"))
		mult = 1e3;
	else if (!strcmp(end, "ns"))
		mult = 1;
	else if (!strcmp(end, "m") || !strcmp(end, "min"))
		mult = 60e9;
	else if (!strcmp(end, "h"))
		mult = 3600e9;
	else
		return error("invalid duration '%s': unknown unit '%s' (use us, ms, s, m or h)", s, end);
	if (v * mult > 9e18)
		return error("invalid duration '%s': too large", s);
	*out_ns = (int64_t)llround(v * mult);
	return 0;
}

char *fmt_bytes(char *buf, size_t bufsz, double bytes)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double a = fabs(bytes);
	int u = 0;
	while (a >= 1024.0 && u < 4) {
		a /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, bufsz, "%s%.0f B", bytes < 0 ? "-" : "", a);
	else
		snprintf(buf, bufsz, "%s%.*f %s", bytes < 0 ? "-" : "", a < 10 ? 2 : a < 100 ? 1 : 0, a, units[u]);
	return buf;
}

char *fmt_duration(char *buf, size_t bufsz, double s)
{
	if (!isfinite(s) || s < 0)
		snprintf(buf, bufsz, "?");
	else if (s < 60)
		snprintf(buf, bufsz, "%.1f s", s);
	else if (s < 3600)
		snprintf(buf, bufsz, "%d min %d s", (int)(s / 60), (int)fmod(s, 60));
	else if (s < 2 * 86400)
		snprintf(buf, bufsz, "%d h %d min", (int)(s / 3600), (int)fmod(s / 60, 60));
	else
		snprintf(buf, bufsz, "%.1f days", s / 86400);
	return buf;
}

ssize_t read_file_buf(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	return (ssize_t)len;
}

ssize_t pread_buf(int fd, char *buf, size_t cap)
{
	ssize_t n;
	do
		n = pread(fd, buf, cap - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

static void strbuf_grow(struct strbuf *sb, size_t extra)
{
	if (sb->len + extra + 1 <= sb->alloc)
		return;
	size_t want = sb->alloc ? sb->alloc : 64;
	while (want < sb->len + extra + 1)
		want *= 2;
	sb->buf = xrealloc(sb->buf, want);
	sb->alloc = want;
}

void strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
	strbuf_grow(sb, len);
	memcpy(sb->buf + sb->len, data, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
}

void strbuf_addstr(struct strbuf *sb, const char *s) { strbuf_add(sb, s, strlen(s)); }

void strbuf_addch(struct strbuf *sb, int c)
{
	char ch = (char)c;
	strbuf_add(sb, &ch, 1);
}

void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	/* Format once into the room there is, as git's strbuf does; only what
	 * does not fit is formatted again, after growing. */
	va_list cp;
	strbuf_grow(sb, 64);
	va_copy(cp, ap);
	int n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, cp);
	va_end(cp);
	if (n < 0) {
		sb->buf[sb->len] = '\0';
		return;
	}
	if ((size_t)n >= sb->alloc - sb->len) {
		strbuf_grow(sb, (size_t)n);
		vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	}
	sb->len += (size_t)n;
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

size_t utf8_len(const unsigned char *p)
{
	if (p[0] < 0x80)
		return 1;
	size_t n = (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (!n || (n == 2 && p[0] < 0xc2) || (n == 4 && p[0] > 0xf4))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
		return 0;   /* overlong, or a surrogate */
	if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)))
		return 0;   /* overlong, or above U+10FFFF */
	return n;
}

void strbuf_add_json_str(struct strbuf *sb, const char *s)
{
	strbuf_addch(sb, '"');
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; ) {
		size_t n = utf8_len(p);
		if (n == 0) {
			strbuf_addstr(sb, "\\ufffd");
			p++;
			continue;
		}
		if (n > 1) {
			strbuf_add(sb, p, n);
			p += n;
			continue;
		}
		switch (*p) {
		case '"': strbuf_addstr(sb, "\\\""); break;
		case '\\': strbuf_addstr(sb, "\\\\"); break;
		case '\n': strbuf_addstr(sb, "\\n"); break;
		case '\r': strbuf_addstr(sb, "\\r"); break;
		case '\t': strbuf_addstr(sb, "\\t"); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				strbuf_addf(sb, "\\u%04x", *p);
			else
				strbuf_addch(sb, *p);
		}
		p++;
	}
	strbuf_addch(sb, '"');
}

void strbuf_trim_end(struct strbuf *sb, const char *chars)
{
	while (sb->len && sb->buf[sb->len - 1] && strchr(chars, sb->buf[sb->len - 1]))
		sb->buf[--sb->len] = '\0';
}

void strbuf_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = '\0';
}

void strbuf_release(struct strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->alloc = 0;
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
	char *r = sb->buf ? sb->buf : xstrdup("");
	if (len)
		*len = sb->len;
	sb->buf = NULL;
	sb->len = sb->alloc = 0;
	return r;
}

const char *strbuf_str(const struct strbuf *sb) { return sb->buf ? sb->buf : ""; }
