/*
 * channel.c — line splitting with a cap, and the client protocol parser.
 * See channel.h for the protocol. Pure: no I/O.
 */
#include "core/channel.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void linebuf_init(struct linebuf *lb, bool cr_is_eol)
{
	lb->len = 0;
	lb->overflow = false;
	lb->cr_is_eol = cr_is_eol;
	lb->after_cr = false;
}

static void deliver(struct linebuf *lb, line_fn fn, void *ctx, bool truncated)
{
	lb->buf[lb->len] = '\0';
	fn(ctx, lb->buf, lb->len, truncated);
	lb->len = 0;
}

void linebuf_feed(struct linebuf *lb, const char *data, size_t n, line_fn fn, void *ctx)
{
	for (size_t i = 0; i < n; i++) {
		char c = data[i];
		bool after_cr = lb->after_cr;
		lb->after_cr = false;
		if (c == '\n' || (c == '\r' && lb->cr_is_eol)) {
			if (c == '\r')
				lb->after_cr = true;
			if (lb->overflow)
				lb->overflow = false;   /* the cut line was delivered already */
			else if (lb->len == 0 && (c == '\r' || after_cr))
				continue;               /* "\r\n" or repeated "\r": nothing new */
			else
				deliver(lb, fn, ctx, false);
			continue;
		}
		if (lb->overflow)
			continue;
		if (lb->len == CHANNEL_LINE_MAX) {
			deliver(lb, fn, ctx, true);
			lb->overflow = true;
			continue;
		}
		lb->buf[lb->len++] = c;
	}
}

void linebuf_finish(struct linebuf *lb, line_fn fn, void *ctx)
{
	if (lb->len && !lb->overflow)
		deliver(lb, fn, ctx, false);
	lb->len = 0;
	lb->overflow = false;
}

static int fail(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}

static bool name_char(int c, bool first)
{
	if (isalpha(c) || c == '_')
		return true;
	return !first && (isdigit(c) || c == '.' || c == ':' || c == '/' || c == '-');
}

/* Parse "NAME=VALUE NAME=VALUE ..." from p (NUL-terminated). */
static int parse_kvs(char *p, struct chan_msg *out, bool nan_ok, char *err, size_t errsz)
{
	out->nkv = 0;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		char *tok = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if (*p)
			*p++ = '\0';
		char *eq = strchr(tok, '=');
		if (!eq || eq == tok)
			return fail(err, errsz, "expected NAME=VALUE, got '%.64s'", tok);
		*eq = '\0';
		for (char *c = tok; *c; c++)
			if (!name_char((unsigned char)*c, c == tok))
				return fail(err, errsz, "bad name '%.64s'", tok);
		if (strlen(tok) >= sizeof(out->kv[0].name))
			return fail(err, errsz, "name too long '%.64s'", tok);
		char *end;
		errno = 0;
		double v = strtod(eq + 1, &end);
		if (end == eq + 1 || *end)
			return fail(err, errsz, "bad number '%.64s'", eq + 1);
		if (isinf(v) || (isnan(v) && !nan_ok))
			return fail(err, errsz, "%s=%.64s: not a finite number", tok, eq + 1);
		if (out->nkv == CHANNEL_KV_MAX)
			return fail(err, errsz, "more than %d values on one line", CHANNEL_KV_MAX);
		strcpy(out->kv[out->nkv].name, tok);
		out->kv[out->nkv].value = v;
		out->nkv++;
	}
	if (!out->nkv)
		return fail(err, errsz, "no NAME=VALUE given");
	return 0;
}

static int parse_number(const char *p, struct chan_msg *out, char *err, size_t errsz)
{
	while (*p == ' ' || *p == '\t')
		p++;
	out->has_n = false;
	if (!*p)
		return 0;
	char *end;
	errno = 0;
	long long v = strtoll(p, &end, 10);
	while (*end == ' ' || *end == '\t')
		end++;
	if (end == p || *end || errno || v < 0)
		return fail(err, errsz, "expected a non-negative step number, got '%.64s'", p);
	if (v > CHANNEL_NUMBER_MAX)
		return fail(err, errsz, "number %.64s is above the largest accepted, 2^53", p);
	out->has_n = true;
	out->n = v;
	return 0;
}

/* The next space-separated word of p: its start, *p past it (and its one
 * separator), *wlen its length; NULL at the end of the line. */
static char *next_word(char **p, size_t *wlen)
{
	char *s = *p;
	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s)
		return NULL;
	char *w = s;
	while (*s && *s != ' ' && *s != '\t')
		s++;
	*wlen = (size_t)(s - w);
	if (*s)
		*s++ = '\0';
	*p = s;
	return w;
}

/* A whole non-negative decimal integer, at most CHANNEL_NUMBER_MAX. */
static bool whole_number(const char *w, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(w, &end, 10);
	if (end == w || *end || errno || v < 0 || v > CHANNEL_NUMBER_MAX || !isdigit((unsigned char)*w))
		return false;
	*out = v;
	return true;
}

/* "SEQ TYPE COUNT BYTES [HOLDER]" or "SEQ * NAME=VALUE ..." from p, a
 * pointer into buf (the copy of line). */
static int parse_census(char *p, const char *line, size_t len, const char *buf, struct chan_msg *out,
                        char *err, size_t errsz)
{
	size_t wlen;
	char *w = next_word(&p, &wlen);
	if (!w || !whole_number(w, &out->n))
		return fail(err, errsz, "census: expected a census number, got '%.64s'", w ? w : "");
	out->has_n = true;
	if (!(w = next_word(&p, &wlen)))
		return fail(err, errsz, "census: no type");
	if (wlen > CHANNEL_TYPE_MAX)
		return fail(err, errsz, "census: type longer than %d bytes", CHANNEL_TYPE_MAX);
	memcpy(out->census_type, w, wlen + 1);
	out->bytes = -1;
	if (!strcmp(out->census_type, "*"))
		return parse_kvs(p, out, false, err, errsz);
	if (!(w = next_word(&p, &wlen)) || !whole_number(w, &out->count))
		return fail(err, errsz, "census: expected a count of objects, got '%.64s'", w ? w : "");
	if (!(w = next_word(&p, &wlen)) || (strcmp(w, "-") && !whole_number(w, &out->bytes)))
		return fail(err, errsz, "census: expected bytes or '-', got '%.64s'", w ? w : "");
	while (*p == ' ' || *p == '\t')
		p++;
	out->text = line + (p - buf);    /* the holder, in the caller's line */
	out->text_len = len - (size_t)(p - buf);
	return 0;
}

int channel_parse(const char *line, size_t len, struct chan_msg *out, char *err, size_t errsz)
{
	char buf[CHANNEL_LINE_MAX + 1];

	if (len && line[len - 1] == '\r')
		len--;
	if (len > CHANNEL_LINE_MAX)
		return fail(err, errsz, "line too long");
	if (memchr(line, '\0', len))
		return fail(err, errsz, "NUL byte in line");
	memcpy(buf, line, len);
	buf[len] = '\0';

	char *p = buf;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return 0;
	char *verb = p;
	while (*p && *p != ' ' && *p != '\t')
		p++;
	size_t vlen = (size_t)(p - verb);
	memset(out, 0, sizeof(*out));

#define VERB(s) (vlen == sizeof(s) - 1 && !memcmp(verb, s, vlen))
	if (VERB("step") || VERB("epoch")) {
		out->type = VERB("step") ? CHAN_STEP : CHAN_EPOCH;
		return parse_number(p, out, err, errsz) ? -1 : 1;
	}
	if (VERB("metric") || VERB("result") || VERB("gpu")) {
		out->type = VERB("metric") ? CHAN_METRIC : VERB("result") ? CHAN_RESULT : CHAN_GPU;
		return parse_kvs(p, out, out->type == CHAN_RESULT, err, errsz) ? -1 : 1;
	}
	if (VERB("census")) {
		out->type = CHAN_CENSUS;
		return parse_census(p, line, len, buf, out, err, errsz) ? -1 : 1;
	}
	if (VERB("mark")) {
		out->type = CHAN_MARK;
		while (*p == ' ' || *p == '\t')
			p++;
		/* Point into the caller's line, not our copy. */
		out->text = line + (p - buf);
		out->text_len = len - (size_t)(p - buf);
		return 1;
	}
#undef VERB
	verb[vlen > 32 ? 32 : vlen] = '\0';
	return fail(err, errsz, "unknown message '%s'", verb);
}
