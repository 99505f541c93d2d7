/*
 * encode.c — the tracer's wire lines (see trace.h and docs/internals/tracer.md):
 *
 *   hello <pid> <ppid> <mean_bytes> <exe path>
 *   map <pid> <map_id> <object path>
 *   site <pid> <site_id> <kind> <map_id>:<hex vaddr>[:<symbol>] ...
 *   py <pid> <site_id> <line>:<function>:<file>\t...
 *   live <pid> <seq> <t_ns> <site_id>:<live_bytes>:<allocs>:<frees> ...
 *   end <pid> <seq> <total_live_bytes> <dropped_lines>
 *
 * Every line, newline included, fits TRACE_LINE_MAX bytes, so one write(2)
 * to a pipe is atomic. Formatted by hand into the caller's buffer: no stdio,
 * no malloc.
 */
#include "trace/trace.h"

#include <string.h>

void trace_line_init(struct trace_line *l, char *buf, size_t cap)
{
	l->buf = buf;
	l->len = 0;
	l->cap = cap;
	l->overflow = false;
}

void trace_line_mem(struct trace_line *l, const char *s, size_t n)
{
	if (l->overflow || l->len + n + 1 > l->cap) {  /* keep a byte for '\n' */
		l->overflow = true;
		return;
	}
	memcpy(l->buf + l->len, s, n);
	l->len += n;
}

void trace_line_str(struct trace_line *l, const char *s)
{
	trace_line_mem(l, s, strlen(s));
}

void trace_line_ch(struct trace_line *l, char c)
{
	trace_line_mem(l, &c, 1);
}

void trace_line_u64(struct trace_line *l, uint64_t v)
{
	char tmp[24];
	size_t i = sizeof(tmp);
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	trace_line_mem(l, tmp + i, sizeof(tmp) - i);
}

void trace_line_i64(struct trace_line *l, int64_t v)
{
	if (v < 0) {
		char tmp[24];
		size_t i = sizeof(tmp);
		uint64_t u = (uint64_t)0 - (uint64_t)v;
		do {
			tmp[--i] = (char)('0' + u % 10);
			u /= 10;
		} while (u);
		tmp[--i] = '-';
		trace_line_mem(l, tmp + i, sizeof(tmp) - i);
		return;
	}
	trace_line_u64(l, (uint64_t)v);
}

void trace_line_hex(struct trace_line *l, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[16];
	size_t i = sizeof(tmp);
	do {
		tmp[--i] = digits[v & 15];
		v >>= 4;
	} while (v);
	trace_line_mem(l, tmp + i, sizeof(tmp) - i);
}

size_t trace_line_end(struct trace_line *l)
{
	l->buf[l->len++] = '\n';
	return l->len;
}

/* Free text at the end of a line: as much as fits, newlines and other
 * control bytes but tab made '?'. */
static void rest_of_line(struct trace_line *l, const char *s)
{
	for (; *s && l->len + 2 <= l->cap; s++) {
		unsigned char c = (unsigned char)*s;
		l->buf[l->len++] = (c < 0x20 && c != '\t') || c == 0x7f ? '?' : (char)c;
	}
}

/* A number after the fields before it: " <v>". */
static void field_u64(struct trace_line *l, uint64_t v)
{
	trace_line_ch(l, ' ');
	trace_line_u64(l, v);
}

static void field_i64(struct trace_line *l, int64_t v)
{
	trace_line_ch(l, ' ');
	trace_line_i64(l, v);
}

static void head(struct trace_line *l, char *buf, const char *word, long pid)
{
	trace_line_init(l, buf, TRACE_LINE_MAX);
	trace_line_str(l, word);
	field_i64(l, pid);
}

size_t trace_enc_hello(char *buf, long pid, long ppid, uint64_t mean_bytes, const char *exe)
{
	struct trace_line l;
	head(&l, buf, "hello", pid);
	field_i64(&l, ppid);
	field_u64(&l, mean_bytes);
	trace_line_ch(&l, ' ');
	rest_of_line(&l, exe ? exe : "");
	return trace_line_end(&l);
}

size_t trace_enc_map(char *buf, long pid, uint32_t map_id, const char *path)
{
	struct trace_line l;
	head(&l, buf, "map", pid);
	field_u64(&l, map_id);
	trace_line_ch(&l, ' ');
	rest_of_line(&l, path ? path : "");
	return trace_line_end(&l);
}

static bool symbol_ok(const char *s)
{
	size_t n = 0;
	if (!s || !*s)
		return false;
	for (; s[n]; n++) {
		unsigned char c = (unsigned char)s[n];
		if (c <= 0x20 || c == 0x7f || n >= TRACE_SYM_MAX)
			return false;
	}
	return true;
}

size_t trace_enc_site(char *buf, long pid, const struct tracer_site *site, int *nframes_out)
{
	struct trace_line l;
	int n = 0;
	head(&l, buf, "site", pid);
	field_u64(&l, site->id);
	trace_line_ch(&l, ' ');
	trace_line_ch(&l, site->kind);
	for (; n < site->nframes && n < TRACE_FRAMES_MAX; n++) {
		const struct trace_frame *f = &site->frames[n];
		size_t mark = l.len;
		field_u64(&l, f->map);
		trace_line_ch(&l, ':');
		trace_line_hex(&l, f->vaddr);
		if (symbol_ok(f->sym)) {
			trace_line_ch(&l, ':');
			trace_line_str(&l, f->sym);
		}
		if (l.overflow) {       /* this frame and the outer ones are dropped */
			l.len = mark;
			l.overflow = false;
			break;
		}
	}
	if (nframes_out)
		*nframes_out = n;
	return trace_line_end(&l);
}

size_t trace_enc_py(char *buf, long pid, const struct tracer_site *site)
{
	struct trace_line l;
	head(&l, buf, "py", pid);
	field_u64(&l, site->id);
	trace_line_ch(&l, ' ');
	size_t n = site->py_len;
	if (l.len + n + 1 > l.cap) {
		/* cannot happen with TRACE_PY_TEXT_MAX, but cut at a frame anyway */
		n = l.cap - 1 - l.len;
		while (n && site->py[n] != '\t')
			n--;
	}
	trace_line_mem(&l, site->py, n);
	return trace_line_end(&l);
}

void trace_enc_live_begin(struct trace_line *l, long pid, uint64_t seq, uint64_t t_ns)
{
	trace_line_str(l, "live ");
	trace_line_i64(l, pid);
	field_u64(l, seq);
	field_u64(l, t_ns);
}

bool trace_enc_live_add(struct trace_line *l, const struct tracer_site *site)
{
	size_t mark = l->len;
	field_u64(l, site->id);
	trace_line_ch(l, ':');
	trace_line_i64(l, site->live_bytes);
	trace_line_ch(l, ':');
	trace_line_u64(l, site->allocs);
	trace_line_ch(l, ':');
	trace_line_u64(l, site->frees);
	if (l->overflow) {
		l->len = mark;
		l->overflow = false;
		return false;
	}
	return true;
}

size_t trace_enc_end(char *buf, long pid, uint64_t seq, int64_t total_live_bytes, uint64_t dropped)
{
	struct trace_line l;
	head(&l, buf, "end", pid);
	field_u64(&l, seq);
	field_i64(&l, total_live_bytes);
	field_u64(&l, dropped);
	return trace_line_end(&l);
}

/* ---- Python text ------------------------------------------------------- */

void trace_py_text_init(struct trace_py_text *t)
{
	t->len = 0;
	t->nframes = 0;
	t->full = false;
}

static void put_name(struct trace_line *l, const char *s)
{
	for (s = s ? s : "?"; *s && !l->overflow; s++) {
		unsigned char c = (unsigned char)*s;
		trace_line_ch(l, c < 0x20 || c == 0x7f ? '?' : (char)c);
	}
}

bool trace_py_text_add(struct trace_py_text *t, long line, const char *func, const char *file)
{
	struct trace_line l;
	if (t->full || t->nframes >= TRACE_PY_FRAMES_MAX) {
		t->full = true;
		return false;
	}
	/* +1: trace_line keeps a byte for the newline, which this text never has */
	trace_line_init(&l, t->buf, sizeof(t->buf) + 1);
	l.len = t->len;
	if (t->nframes)
		trace_line_ch(&l, '\t');
	trace_line_i64(&l, line);
	trace_line_ch(&l, ':');
	put_name(&l, func);
	trace_line_ch(&l, ':');
	if (l.overflow) {       /* even the line and function do not fit */
		t->full = true;
		return false;
	}
	size_t file_at = l.len;
	put_name(&l, file);
	if (l.overflow) {
		if (t->nframes == 0 && file_at < l.cap - 1) {
			/* a first frame too long: keep it, its file name cut */
			l.overflow = false;
			l.len = file_at;
			for (const char *s = file ? file : "?"; *s && l.len < l.cap - 1; s++) {
				unsigned char c = (unsigned char)*s;
				l.buf[l.len++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
			}
			t->len = l.len;
			t->nframes = 1;
		}
		t->full = true;
		return false;
	}
	t->len = l.len;
	t->nframes++;
	return true;
}
