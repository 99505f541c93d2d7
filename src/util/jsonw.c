/*
 * jsonw.c — the JSON writer of jsonw.h: a stack of the containers open,
 * each knowing whether it has an item yet and how it lays them out.
 */
#include "util/jsonw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "util/util.h"

static void jw_bug(const char *what)
{
	fprintf(stderr, "leakproof: bug: JSON writer: %s\n", what);
	abort();
}

void jw_init(struct json_writer *jw, struct strbuf *sb)
{
	memset(jw, 0, sizeof(*jw));
	jw->sb = sb;
}

void jw_init_tight(struct json_writer *jw, struct strbuf *sb)
{
	jw_init(jw, sb);
	jw->tight = true;
}

static void indent(struct strbuf *sb, int n)
{
	for (int i = 0; i < n; i++)
		strbuf_addch(sb, ' ');
}

/* The column of byte at of sb: how far it is from the start of its line. */
static int column_of(const struct strbuf *sb, size_t at)
{
	size_t i = at;
	while (i > 0 && sb->buf[i - 1] != '\n')
		i--;
	return (int)(at - i);
}

/* Start an item of the container open now: its separator, after checking
 * that it is an object (member) or an array (item). */
static void item(struct json_writer *jw, bool member)
{
	if (jw->depth == 0) {
		if (member)
			jw_bug("a member with no object open");
		return;
	}
	struct jw_level *l = &jw->level[jw->depth - 1];
	if (member != (l->close == '}'))
		jw_bug(member ? "a member in an array" : "an array item in an object");
	if (!l->first)
		strbuf_addch(jw->sb, ',');
	if (l->lines || jw->brk == JW_NEWLINE || (jw->brk == JW_BREAK && l->first)) {
		strbuf_addch(jw->sb, '\n');
		indent(jw->sb, 2 * jw->depth);
	} else if (jw->brk == JW_BREAK) {
		int col = column_of(jw->sb, l->first_at);
		strbuf_addch(jw->sb, '\n');
		indent(jw->sb, col);
	} else if (!l->first && !jw->tight) {
		strbuf_addch(jw->sb, ' ');
	}
	if (l->first)
		l->first_at = jw->sb->len;
	l->first = false;
	jw->brk = JW_NONE;
}

static void member(struct json_writer *jw, const char *key)
{
	item(jw, true);
	strbuf_add_json_str(jw->sb, key);
	strbuf_addstr(jw->sb, jw->tight ? ":" : ": ");
}

static void open_level(struct json_writer *jw, char open_ch, bool lines)
{
	if (jw->depth == JW_MAX_DEPTH)
		jw_bug("nested too deeply");
	strbuf_addch(jw->sb, open_ch);
	struct jw_level *l = &jw->level[jw->depth++];
	l->close = open_ch == '{' ? '}' : ']';
	l->lines = lines;
	l->first = true;
	l->first_at = 0;
}

static void string_or_null(struct strbuf *sb, const char *v)
{
	if (v)
		strbuf_add_json_str(sb, v);
	else
		strbuf_addstr(sb, "null");
}

void jw_object_begin(struct json_writer *jw, bool lines)
{
	item(jw, false);
	open_level(jw, '{', lines);
}

void jw_array_begin(struct json_writer *jw, bool lines)
{
	item(jw, false);
	open_level(jw, '[', lines);
}

void jw_object_string(struct json_writer *jw, const char *key, const char *v)
{
	member(jw, key);
	string_or_null(jw->sb, v);
}

void jw_object_intmax(struct json_writer *jw, const char *key, intmax_t v)
{
	member(jw, key);
	strbuf_addf(jw->sb, "%jd", v);
}

void jw_object_double(struct json_writer *jw, const char *key, double v)
{
	member(jw, key);
	json_add_number(jw->sb, v);
}

void jw_object_bool(struct json_writer *jw, const char *key, bool v)
{
	member(jw, key);
	strbuf_addstr(jw->sb, v ? "true" : "false");
}

void jw_object_null(struct json_writer *jw, const char *key)
{
	member(jw, key);
	strbuf_addstr(jw->sb, "null");
}

void jw_object_object(struct json_writer *jw, const char *key, bool lines)
{
	member(jw, key);
	open_level(jw, '{', lines);
}

void jw_object_array(struct json_writer *jw, const char *key, bool lines)
{
	member(jw, key);
	open_level(jw, '[', lines);
}

void jw_object_key(struct json_writer *jw, const char *key)
{
	member(jw, key);
}

void jw_array_item(struct json_writer *jw)
{
	item(jw, false);
}

void jw_array_string(struct json_writer *jw, const char *v)
{
	item(jw, false);
	string_or_null(jw->sb, v);
}

void jw_array_intmax(struct json_writer *jw, intmax_t v)
{
	item(jw, false);
	strbuf_addf(jw->sb, "%jd", v);
}

void jw_array_double(struct json_writer *jw, double v)
{
	item(jw, false);
	json_add_number(jw->sb, v);
}

void jw_array_null(struct json_writer *jw)
{
	item(jw, false);
	strbuf_addstr(jw->sb, "null");
}

void jw_array_object(struct json_writer *jw, bool lines)
{
	jw_object_begin(jw, lines);
}

void jw_array_array(struct json_writer *jw, bool lines)
{
	jw_array_begin(jw, lines);
}

void jw_break(struct json_writer *jw)
{
	jw->brk = JW_BREAK;
}

void jw_newline(struct json_writer *jw)
{
	jw->brk = JW_NEWLINE;
}

void jw_end(struct json_writer *jw)
{
	if (jw->depth == 0)
		jw_bug("jw_end() with nothing open");
	struct jw_level *l = &jw->level[--jw->depth];
	if (l->lines && !l->first) {
		strbuf_addch(jw->sb, '\n');
		indent(jw->sb, 2 * jw->depth);
	}
	strbuf_addch(jw->sb, l->close);
	jw->brk = JW_NONE;
}

void jw_string_array(struct strbuf *sb, char *const *v)
{
	struct json_writer jw;
	jw_init(&jw, sb);
	jw_array_begin(&jw, false);
	for (size_t i = 0; v[i]; i++)
		jw_array_string(&jw, v[i]);
	jw_end(&jw);
}
