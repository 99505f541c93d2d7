/*
 * jsonw.h — a JSON writer that keeps the commas and the nesting, so that a
 * command says only what it writes: jw_object_begin(), then members
 * (jw_object_string(jw, "key", v), jw_object_double(), ...), then jw_end().
 * In the spirit of git's json-writer.h.
 *
 * Layout, for output people read as well as scripts: a container opened
 * with lines set puts each item on a line of its own, indented two spaces
 * a level, and its close on a line of its own (an empty one stays "[]" or
 * "{}"); any other puts its items on one line after ", ", except where
 * jw_break() or jw_newline() asks for a new line. Strings are escaped as
 * strbuf_add_json_str() does (util.h: bytes that are not UTF-8 become
 * U+FFFD); numbers are written as json_add_number() does (json.h: what is
 * not finite is null).
 *
 * The writer appends to a strbuf that stays the caller's. A misuse (a
 * member outside an object, jw_end() with nothing open, nesting deeper
 * than JW_MAX_DEPTH) is a bug of the caller: it aborts.
 */
#ifndef LP_JSONW_H
#define LP_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct strbuf;

#define JW_MAX_DEPTH 32

struct jw_level {
	char close;             /* '}' or ']' */
	bool lines;             /* one item a line */
	bool first;             /* no item written yet */
	size_t first_at;        /* where its first item starts in the strbuf */
};

enum jw_brk { JW_NONE, JW_BREAK, JW_NEWLINE };

struct json_writer {
	struct strbuf *sb;      /* the caller's */
	struct jw_level level[JW_MAX_DEPTH];
	int depth;              /* containers open */
	enum jw_brk brk;        /* how the next item starts */
	bool tight;             /* "," and ":" with no space after */
};

/* Write into sb (appended to; not owned). */
void jw_init(struct json_writer *jw, struct strbuf *sb);
/* The same with no space after "," and ":", for data read only by
 * programs (the html report's chart data); use no lines and no breaks. */
void jw_init_tight(struct json_writer *jw, struct strbuf *sb);

/* A value that is not a member: the whole document, or an item of an
 * array. */
void jw_object_begin(struct json_writer *jw, bool lines);
void jw_array_begin(struct json_writer *jw, bool lines);

/* Members of the object open now. A NULL string is written null. */
void jw_object_string(struct json_writer *jw, const char *key, const char *v);
void jw_object_intmax(struct json_writer *jw, const char *key, intmax_t v);
void jw_object_double(struct json_writer *jw, const char *key, double v);
void jw_object_bool(struct json_writer *jw, const char *key, bool v);
void jw_object_null(struct json_writer *jw, const char *key);
void jw_object_object(struct json_writer *jw, const char *key, bool lines);
void jw_object_array(struct json_writer *jw, const char *key, bool lines);
/* Write "key": and leave the value to the caller, who appends exactly one
 * JSON value to jw->sb (for writers of their own). */
void jw_object_key(struct json_writer *jw, const char *key);

/* Items of the array open now. */
/* Start an item and leave the value to the caller, who appends exactly
 * one JSON value to jw->sb (as jw_object_key() does for a member). */
void jw_array_item(struct json_writer *jw);
void jw_array_string(struct json_writer *jw, const char *v);
void jw_array_intmax(struct json_writer *jw, intmax_t v);
void jw_array_double(struct json_writer *jw, double v);
void jw_array_null(struct json_writer *jw);
void jw_array_object(struct json_writer *jw, bool lines);
void jw_array_array(struct json_writer *jw, bool lines);

/* The next item of a one-line container starts a new line: jw_break()
 * under the container's first item (or, for the first, as jw_newline()),
 * jw_newline() indented two spaces a level. */
void jw_break(struct json_writer *jw);
void jw_newline(struct json_writer *jw);

/* Close the innermost container open. */
void jw_end(struct json_writer *jw);

/* The strings of v (NULL-terminated) as a one-line JSON array, appended
 * to sb: a command line as the store keeps it. */
void jw_string_array(struct strbuf *sb, char *const *v);

#endif
