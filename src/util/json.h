/*
 * json.h — a small strict JSON reader: RFC 8259, plus the NaN, Infinity and
 * -Infinity that Python's json.dumps writes for non-finite floats (which
 * is why it is not a library's; see docs/internals/dependencies.md).
 * Strings are decoded to UTF-8; a \u0000 or an unpaired surrogate is an
 * error. Writing: json_add_number() here, strbuf_add_json_str() in util.h,
 * and the writer that keeps commas and nesting in jsonw.h.
 */
#ifndef LP_JSON_H
#define LP_JSON_H

#include <stdbool.h>
#include <stddef.h>

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jval {
	enum jtype type;
	bool b;                 /* J_BOOL */
	double num;             /* J_NUM */
	bool is_int;            /* J_NUM written without fraction or exponent */
	char *s;                /* J_STR: decoded (UTF-8); J_NUM: the text */
	size_t n;               /* J_ARR, J_OBJ: the number of items */
	struct jval *items;     /* J_ARR, J_OBJ: the values */
	char **keys;            /* J_OBJ: the keys, decoded */
};

/* Parse the whole of text (one value, white space around it allowed) into
 * *v. Returns 0, or -1 with *v empty and, in *err and *err_at, a static
 * description of the first error and its byte offset. */
int jval_parse(const char *text, struct jval *v, const char **err, size_t *err_at);

/* The end of the JSON number (RFC 8259: -?(0|[1-9]digits)(.digits)?
 * ([eE][+-]?digits)?) that p starts with, or NULL when p does not start with
 * one; *is_int (unless NULL) tells whether it had neither fraction nor
 * exponent. */
const char *json_number_end(const char *p, bool *is_int);

/* The value of key in an object; NULL when v is not an object or lacks it. */
const struct jval *jval_get(const struct jval *obj, const char *key);

/* Free what v holds and empty it. */
void jval_release(struct jval *v);

struct strbuf;
/* Append v as a JSON number that reads back as the same double: integers
 * below 1e15 without fraction (and -0 as 0), others in the shortest of
 * %.15g, %.16g and %.17g that round-trips; null when v is not finite. */
void json_add_number(struct strbuf *sb, double v);

#endif
