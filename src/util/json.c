/*
 * json.c — the JSON reader of json.h: recursive descent over a C string,
 * at most JSON_MAX_DEPTH levels deep; and json_add_number(), the writer
 * of numbers.
 */
#include "util/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

struct jparser {
	const char *start, *p;
	const char *err;        /* static text of the first error */
	size_t err_at;
	int depth;
};

#define JSON_MAX_DEPTH 32

void jval_release(struct jval *v)
{
	for (size_t i = 0; i < v->n; i++) {
		jval_release(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->s);
	memset(v, 0, sizeof(*v));
}

static int jfail(struct jparser *jp, const char *msg)
{
	if (!jp->err) {
		jp->err = msg;
		jp->err_at = (size_t)(jp->p - jp->start);
	}
	return -1;
}

static void jspace(struct jparser *jp)
{
	while (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r')
		jp->p++;
}

static void add_utf8(struct strbuf *sb, unsigned cp)
{
	if (cp < 0x80) {
		strbuf_addch(sb, (int)cp);
	} else if (cp < 0x800) {
		strbuf_addch(sb, (int)(0xc0 | cp >> 6));
		strbuf_addch(sb, (int)(0x80 | (cp & 0x3f)));
	} else if (cp < 0x10000) {
		strbuf_addch(sb, (int)(0xe0 | cp >> 12));
		strbuf_addch(sb, (int)(0x80 | ((cp >> 6) & 0x3f)));
		strbuf_addch(sb, (int)(0x80 | (cp & 0x3f)));
	} else {
		strbuf_addch(sb, (int)(0xf0 | cp >> 18));
		strbuf_addch(sb, (int)(0x80 | ((cp >> 12) & 0x3f)));
		strbuf_addch(sb, (int)(0x80 | ((cp >> 6) & 0x3f)));
		strbuf_addch(sb, (int)(0x80 | (cp & 0x3f)));
	}
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* A string at jp->p (the opening quote); the caller frees *out. */
static int jstring(struct jparser *jp, char **out)
{
	struct strbuf sb = STRBUF_INIT;
	jp->p++;
	for (;;) {
		unsigned char c = (unsigned char)*jp->p;
		if (c == '"') {
			jp->p++;
			*out = strbuf_detach(&sb, NULL);
			return 0;
		}
		if (c == '\0' || c < 0x20) {
			strbuf_release(&sb);
			return jfail(jp, c ? "control character in a string" : "unterminated string");
		}
		if (c != '\\') {
			strbuf_addch(&sb, c);
			jp->p++;
			continue;
		}
		char e = jp->p[1];
		jp->p += 2;
		switch (e) {
		case '"': strbuf_addch(&sb, '"'); break;
		case '\\': strbuf_addch(&sb, '\\'); break;
		case '/': strbuf_addch(&sb, '/'); break;
		case 'b': strbuf_addch(&sb, '\b'); break;
		case 'f': strbuf_addch(&sb, '\f'); break;
		case 'n': strbuf_addch(&sb, '\n'); break;
		case 'r': strbuf_addch(&sb, '\r'); break;
		case 't': strbuf_addch(&sb, '\t'); break;
		case 'u': {
			unsigned cp, lo;
			if (hex4(jp->p, &cp)) {
				strbuf_release(&sb);
				return jfail(jp, "bad \\u escape");
			}
			jp->p += 4;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (jp->p[0] != '\\' || jp->p[1] != 'u' || hex4(jp->p + 2, &lo) ||
				    lo < 0xdc00 || lo > 0xdfff) {
					strbuf_release(&sb);
					return jfail(jp, "unpaired surrogate in a \\u escape");
				}
				jp->p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				strbuf_release(&sb);
				return jfail(jp, "unpaired surrogate in a \\u escape");
			} else if (cp == 0) {
				strbuf_release(&sb);
				return jfail(jp, "\\u0000 in a string");
			}
			add_utf8(&sb, cp);
			break;
		}
		default:
			jp->p -= 2;
			strbuf_release(&sb);
			return jfail(jp, "bad escape in a string");
		}
	}
}

const char *json_number_end(const char *p, bool *is_int)
{
	bool integer = true;
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	if (*p == '.') {
		integer = false;
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		integer = false;
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (is_int)
		*is_int = integer;
	return p;
}

static int jnumber(struct jparser *jp, struct jval *v)
{
	const char *s = jp->p, *p = s;
	static const struct { const char *word; double val; } special[] = {
		{ "NaN", NAN }, { "Infinity", INFINITY }, { "-Infinity", -INFINITY },
	};
	for (size_t i = 0; i < 3; i++) {
		size_t len = strlen(special[i].word);
		if (!strncmp(p, special[i].word, len)) {
			v->type = J_NUM;
			v->num = special[i].val;
			v->s = xstrdup(special[i].word);
			jp->p += len;
			return 0;
		}
	}
	bool is_int;
	p = json_number_end(s, &is_int);
	if (!p)
		return jfail(jp, "bad number");
	v->type = J_NUM;
	v->is_int = is_int;
	v->s = xmalloc((size_t)(p - s) + 1);
	memcpy(v->s, s, (size_t)(p - s));
	v->s[p - s] = '\0';
	v->num = strtod(v->s, NULL);
	jp->p = p;
	return 0;
}

static int jvalue(struct jparser *jp, struct jval *v);

/* An array or object at jp->p ('[' or '{'). */
static int jcompound(struct jparser *jp, struct jval *v, bool object)
{
	size_t alloc = 0;
	char close = object ? '}' : ']';
	v->type = object ? J_OBJ : J_ARR;
	if (++jp->depth > JSON_MAX_DEPTH)
		return jfail(jp, "nested too deeply");
	jp->p++;
	jspace(jp);
	if (*jp->p == close) {
		jp->p++;
		jp->depth--;
		return 0;
	}
	for (;;) {
		if (v->n == alloc) {
			alloc = alloc ? 2 * alloc : 4;
			v->items = xrealloc(v->items, alloc * sizeof(*v->items));
			if (object)
				v->keys = xrealloc(v->keys, alloc * sizeof(*v->keys));
		}
		struct jval *item = &v->items[v->n];
		memset(item, 0, sizeof(*item));
		if (object) {
			jspace(jp);
			if (*jp->p != '"')
				return jfail(jp, "expected a key");
			char *key;
			if (jstring(jp, &key))
				return -1;
			v->keys[v->n] = key;
			jspace(jp);
			if (*jp->p != ':') {
				v->n++;     /* the key is owned: freed with v */
				return jfail(jp, "expected ':'");
			}
			jp->p++;
		}
		v->n++;
		if (jvalue(jp, item))
			return -1;
		jspace(jp);
		if (*jp->p == ',') {
			jp->p++;
			continue;
		}
		if (*jp->p == close) {
			jp->p++;
			jp->depth--;
			return 0;
		}
		return jfail(jp, object ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int jvalue(struct jparser *jp, struct jval *v)
{
	jspace(jp);
	switch (*jp->p) {
	case '{': return jcompound(jp, v, true);
	case '[': return jcompound(jp, v, false);
	case '"':
		v->type = J_STR;
		return jstring(jp, &v->s);
	case 't':
	case 'f':
	case 'n':
		if (!strncmp(jp->p, "true", 4) || !strncmp(jp->p, "false", 5)) {
			v->type = J_BOOL;
			v->b = *jp->p == 't';
			jp->p += v->b ? 4 : 5;
			return 0;
		}
		if (!strncmp(jp->p, "null", 4)) {
			v->type = J_NULL;
			jp->p += 4;
			return 0;
		}
		return jfail(jp, "unexpected word");
	case '\0':
		return jfail(jp, "unexpected end");
	default:
		if (*jp->p == '-' || (*jp->p >= '0' && *jp->p <= '9') || *jp->p == 'N' ||
		    *jp->p == 'I')
			return jnumber(jp, v);
		return jfail(jp, "unexpected text");
	}
}

int jval_parse(const char *text, struct jval *v, const char **err, size_t *err_at)
{
	struct jparser jp = { text, text, NULL, 0, 0 };
	memset(v, 0, sizeof(*v));
	if (jvalue(&jp, v) == 0) {
		jspace(&jp);
		if (*jp.p == '\0')
			return 0;
		jfail(&jp, "text after the value");
	}
	jval_release(v);
	*err = jp.err;
	*err_at = jp.err_at;
	return -1;
}

const struct jval *jval_get(const struct jval *obj, const char *key)
{
	for (size_t i = 0; obj->type == J_OBJ && i < obj->n; i++)
		if (!strcmp(obj->keys[i], key))
			return &obj->items[i];
	return NULL;
}

void json_add_number(struct strbuf *sb, double v)
{
	if (!isfinite(v)) {
		strbuf_addstr(sb, "null");
		return;
	}
	if (v == floor(v) && fabs(v) < 1e15) {
		strbuf_addf(sb, "%.0f", v == 0 ? 0.0 : v);   /* no "-0" */
		return;
	}
	char buf[40];
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	strbuf_addstr(sb, buf);
}
